//! Frontmatter: reading a SKILL.md's YAML header (`name`, `description`, `allowed-tools`,
//! `secrets`) into a [`Skill`], with a typed error naming the file when it cannot be read.

use std::borrow::Cow;

use saphyr_parser::{Event, Marker, Parser, ScalarStyle, ScanError, Span, StrInput, Tag};

use super::Skill;

/// What was wrong with a SKILL.md.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SkillParseErrorKind {
    /// The text does not start with a `---` line.
    #[error("no frontmatter (the file must start with a `---` line)")]
    NoFrontmatter,
    /// The frontmatter has no closing `---` line.
    #[error("the frontmatter is not closed by a `---` line")]
    Unclosed,
    /// The frontmatter is not valid YAML (the error's line is the file's line).
    #[error("the frontmatter is not valid YAML: {0}")]
    Syntax(ScanError),
    /// The frontmatter is YAML but not a mapping of keys to values.
    #[error("the frontmatter must be a mapping of `key: value` entries")]
    NotAMapping,
    /// A key appears twice.
    #[error("duplicate key `{0}`")]
    DuplicateKey(String),
    /// A required key is missing or empty.
    #[error("missing or empty `{0}`")]
    Missing(&'static str),
    /// A key that must be a single string is something else.
    #[error("`{0}` must be a string")]
    NotAString(&'static str),
    /// `allowed-tools` is not a list.
    #[error("`allowed-tools` must be a list of tool names, found {0:?}")]
    AllowedToolsNotAList(String),
    /// An `allowed-tools` item is not a non-empty string.
    #[error("`allowed-tools` item {index} is not a non-empty tool name: {item:?}")]
    BadAllowedTool {
        /// The item's position (0-based).
        index: usize,
        /// The item as written.
        item: String,
    },
    /// `secrets` is not a list.
    #[error("`secrets` must be a list of secret names, found {0:?}")]
    SecretsNotAList(String),
    /// A `secrets` item is not an environment variable name (`[A-Za-z_][A-Za-z0-9_]*`).
    #[error("`secrets` item {index} is not a secret name (letters, digits, `_`): {item:?}")]
    BadSecret {
        /// The item's position (0-based).
        index: usize,
        /// The item as written.
        item: String,
    },
}

/// A SKILL.md that could not be parsed: which file, and what was wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("SKILL.md {path:?}: {kind}")]
pub struct SkillParseError {
    /// The file's path.
    pub path: String,
    /// What was wrong.
    pub kind: SkillParseErrorKind,
}

/// Parse a SKILL.md: YAML frontmatter between `---` lines with `name`, `description`, an
/// optional `allowed-tools` list and an optional `secrets` list (the names of the secrets the
/// skill needs; see [`crate::secret`]), each either `[a, b]` or one `- a` line per item. Other keys are
/// ignored (whatever their values); comments and blank lines are skipped. The parsed skill is
/// enabled.
///
/// The parser is deliberately strict about `allowed-tools`: a value that is not a list, or an
/// item that is not a non-empty string (an unquoted number, bool — `yes`/`no`/`on`/`off`
/// included — or null, a nested list or map) is an error, so the skill is missing from the
/// registry and any policy naming it fails closed. `name` and `description` are read as
/// written (`name: 007` is the string `007`). `secrets` is read by the same rules, and each
/// name must also be an environment variable name (`[A-Za-z_][A-Za-z0-9_]*`).
///
/// ```
/// use stategraph_nodes::skill::parse_skill_md;
///
/// let text = "---\nname: calc\ndescription: Arithmetic\nallowed-tools: [calc, read_file]\n---\n# Calc\n";
/// let skill = parse_skill_md("/mnt/skills/public/calc/SKILL.md", text)?;
/// assert_eq!(skill.allowed_tools, Some(vec!["calc".to_string(), "read_file".to_string()]));
/// assert!(parse_skill_md("p", "---\nname: x\ndescription: y\nallowed-tools: calc\n---\n").is_err());
/// let sales = parse_skill_md("p", "---\nname: s\ndescription: d\nsecrets: [SALES_API_TOKEN]\n---\n")?;
/// assert_eq!(sales.secrets, vec!["SALES_API_TOKEN".to_string()]);
/// assert!(parse_skill_md("p", "---\nname: s\ndescription: d\nsecrets: [\"A-B\"]\n---\n").is_err());
/// # Ok::<(), stategraph_nodes::skill::SkillParseError>(())
/// ```
///
/// # Errors
/// A [`SkillParseError`] naming `path` and what was wrong.
pub fn parse_skill_md(path: &str, text: &str) -> Result<Skill, SkillParseError> {
    let header = read_header(text).map_err(|kind| SkillParseError {
        path: path.to_owned(),
        kind,
    })?;
    Ok(Skill {
        name: header.name,
        path: path.to_owned(),
        description: header.description,
        allowed_tools: header.allowed_tools,
        secrets: header.secrets,
        enabled: true,
    })
}

/// The fields of a SKILL.md header.
struct Header {
    name: String,
    description: String,
    allowed_tools: Option<Vec<String>>,
    secrets: Vec<String>,
}

fn read_header(text: &str) -> Result<Header, SkillParseErrorKind> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let yaml = frontmatter(text)?;
    let entries = Entries::read(yaml)?;
    let name = match entries.get("name") {
        Some(value) => string(value, "name")?,
        None => String::new(),
    };
    if name.is_empty() {
        return Err(SkillParseErrorKind::Missing("name"));
    }
    let description = match entries.get("description") {
        Some(value) => string(value, "description")?,
        None => return Err(SkillParseErrorKind::Missing("description")),
    };
    let allowed_tools = entries
        .get("allowed-tools")
        .map(|value| allowed_tools(value, yaml))
        .transpose()?;
    let secrets = entries
        .get("secrets")
        .map(|value| secrets(value, yaml))
        .transpose()?
        .unwrap_or_default();
    Ok(Header {
        name,
        description,
        allowed_tools,
        secrets,
    })
}

/// The frontmatter as YAML: from the opening `---` line (a YAML document start) up to, not
/// including, the closing `---` line, so the parser's line numbers are the file's.
fn frontmatter(text: &str) -> Result<&str, SkillParseErrorKind> {
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or_default();
    if first.trim_end() != "---" {
        return Err(SkillParseErrorKind::NoFrontmatter);
    }
    let mut end = first.len();
    for line in lines {
        if line.trim_end() == "---" {
            return Ok(&text[..end]);
        }
        end += line.len();
    }
    Err(SkillParseErrorKind::Unclosed)
}

/// A scalar as the YAML parser read it.
struct Scalar<'a> {
    text: Cow<'a, str>,
    style: ScalarStyle,
    /// Tagged `!!str`: a string whatever it looks like.
    tagged_str: bool,
    span: Span,
}

/// An item of a sequence.
enum Item<'a> {
    Scalar(Scalar<'a>),
    /// A nested collection or an alias, by its source text.
    Other(Span),
    /// An empty entry before a flow sequence's closing `]` (`[a, ]`).
    Empty,
}

/// A top-level value, as much of it as a skill needs.
enum Value<'a> {
    Scalar(Scalar<'a>),
    Sequence(Vec<Item<'a>>),
    /// A mapping or an alias, by its source text.
    Other(Span),
}

/// The top-level `key: value` entries, in file order (values of complex keys skipped).
struct Entries<'a>(Vec<(Cow<'a, str>, Value<'a>)>);

impl<'a> Entries<'a> {
    /// Read the frontmatter's first YAML document, which must be a mapping (or empty).
    fn read(yaml: &'a str) -> Result<Self, SkillParseErrorKind> {
        let mut events = Events {
            parser: Parser::new_from_str(yaml),
            source: yaml,
        };
        let mut entries = Vec::new();
        loop {
            match events.next()? {
                (Event::StreamStart | Event::DocumentStart(_), _) => {}
                (Event::MappingStart(..), _) => break,
                (Event::Scalar(text, ScalarStyle::Plain, _, None), _) if text.is_empty() => {
                    return events.finish(Entries(entries));
                }
                (Event::StreamEnd | Event::DocumentEnd, _) => return Ok(Entries(entries)),
                _ => return Err(SkillParseErrorKind::NotAMapping),
            }
        }
        loop {
            let key = match events.next()? {
                (Event::MappingEnd, _) => return events.finish(Entries(entries)),
                (Event::Scalar(key, ..), _) => Some(key),
                first => {
                    events.skip(first)?;
                    None
                }
            };
            if let Some(key) = &key {
                if entries.iter().any(|(k, _)| k == key) {
                    return Err(SkillParseErrorKind::DuplicateKey(key.to_string()));
                }
            }
            let first = events.next()?;
            let value = events.value(first)?;
            if let Some(key) = key {
                entries.push((key, value));
            }
        }
    }

    fn get(&self, key: &str) -> Option<&Value<'a>> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// The parser's events over the frontmatter.
struct Events<'a> {
    parser: Parser<'a, StrInput<'a>>,
    source: &'a str,
}

impl<'a> Events<'a> {
    fn next(&mut self) -> Result<(Event<'a>, Span), SkillParseErrorKind> {
        match self.parser.next_event() {
            Some(Ok(event)) => Ok(event),
            Some(Err(e)) => Err(SkillParseErrorKind::Syntax(e)),
            None => Ok((Event::StreamEnd, Span::default())),
        }
    }

    /// Read the rest of the stream (later documents are ignored but must be valid YAML).
    fn finish<T>(mut self, done: T) -> Result<T, SkillParseErrorKind> {
        while !matches!(self.next()?.0, Event::StreamEnd) {}
        Ok(done)
    }

    /// Skip the node that starts with `first`; its span.
    fn skip(&mut self, first: (Event<'a>, Span)) -> Result<Span, SkillParseErrorKind> {
        let (event, span) = first;
        let mut depth = match event {
            Event::MappingStart(..) | Event::SequenceStart(..) => 1usize,
            _ => return Ok(span),
        };
        loop {
            let (event, end) = self.next()?;
            match event {
                Event::MappingStart(..) | Event::SequenceStart(..) => depth += 1,
                Event::MappingEnd | Event::SequenceEnd => depth -= 1,
                Event::StreamEnd => return Ok(Span::new(span.start, end.end)),
                _ => {}
            }
            if depth == 0 {
                return Ok(Span::new(span.start, end.end));
            }
        }
    }

    /// The value that starts with `first`.
    fn value(&mut self, first: (Event<'a>, Span)) -> Result<Value<'a>, SkillParseErrorKind> {
        match first {
            (Event::Scalar(text, style, _, tag), span) => Ok(Value::Scalar(Scalar {
                text,
                style,
                tagged_str: is_str_tag(tag.as_deref()),
                span,
            })),
            (Event::SequenceStart(..), span) => self.sequence(span).map(Value::Sequence),
            other => self.skip(other).map(Value::Other),
        }
    }

    /// A sequence's items, after its start (at `open`).
    fn sequence(&mut self, open: Span) -> Result<Vec<Item<'a>>, SkillParseErrorKind> {
        let flow = self.text(open.start, open.end).starts_with('[');
        let mut items = Vec::new();
        let mut last_end = open.end;
        loop {
            let (event, span) = self.next()?;
            let item = match event {
                Event::SequenceEnd | Event::StreamEnd => {
                    if flow && self.text(last_end, span.start).contains(',') {
                        items.push(Item::Empty);
                    }
                    return Ok(items);
                }
                Event::Scalar(text, style, _, tag) => Item::Scalar(Scalar {
                    text,
                    style,
                    tagged_str: is_str_tag(tag.as_deref()),
                    span,
                }),
                event => Item::Other(self.skip((event, span))?),
            };
            last_end = match &item {
                Item::Scalar(s) => s.span.end,
                Item::Other(span) => span.end,
                Item::Empty => last_end,
            };
            items.push(item);
        }
    }

    /// The source between two markers (the parser counts characters).
    fn text(&self, start: Marker, end: Marker) -> &'a str {
        source_text(self.source, start, end)
    }
}

/// The source between two markers, by character index.
fn source_text(source: &str, start: Marker, end: Marker) -> &str {
    let byte = |index: usize| {
        source
            .char_indices()
            .nth(index)
            .map_or(source.len(), |(b, _)| b)
    };
    let (start, end) = (byte(start.index()), byte(end.index()));
    source.get(start..end.max(start)).unwrap_or_default()
}

fn is_str_tag(tag: Option<&Tag>) -> bool {
    tag.is_some_and(|t| t.is_yaml_core_schema() && t.suffix == "str")
}

/// A value that must be one string: a scalar as written (a block scalar trimmed).
fn string(value: &Value<'_>, key: &'static str) -> Result<String, SkillParseErrorKind> {
    match value {
        Value::Scalar(s) => Ok(match s.style {
            ScalarStyle::Literal | ScalarStyle::Folded => s.text.trim().to_owned(),
            _ => s.text.to_string(),
        }),
        Value::Sequence(_) | Value::Other(_) => Err(SkillParseErrorKind::NotAString(key)),
    }
}

/// Why a list of names was refused.
enum ListError {
    /// The value is not a list (as written).
    NotAList(String),
    /// An item is not a non-empty string (its position, as written).
    BadItem(usize, String),
}

/// The `allowed-tools` list: every item a non-empty string.
fn allowed_tools(value: &Value<'_>, source: &str) -> Result<Vec<String>, SkillParseErrorKind> {
    names(value, source).map_err(|e| match e {
        ListError::NotAList(found) => SkillParseErrorKind::AllowedToolsNotAList(found),
        ListError::BadItem(index, item) => SkillParseErrorKind::BadAllowedTool { index, item },
    })
}

/// The `secrets` list: every item an environment variable name.
fn secrets(value: &Value<'_>, source: &str) -> Result<Vec<String>, SkillParseErrorKind> {
    let names = names(value, source).map_err(|e| match e {
        ListError::NotAList(found) => SkillParseErrorKind::SecretsNotAList(found),
        ListError::BadItem(index, item) => SkillParseErrorKind::BadSecret { index, item },
    })?;
    match names.iter().position(|n| !is_env_name(n)) {
        Some(index) => Err(SkillParseErrorKind::BadSecret {
            index,
            item: names.get(index).cloned().unwrap_or_default(),
        }),
        None => Ok(names),
    }
}

/// Whether `name` is an environment variable name: `[A-Za-z_][A-Za-z0-9_]*`.
pub(crate) fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A list of names: every item a non-empty string.
fn names(value: &Value<'_>, source: &str) -> Result<Vec<String>, ListError> {
    let items = match value {
        Value::Sequence(items) => items,
        Value::Scalar(s) => return Err(ListError::NotAList(s.text.trim().to_owned())),
        Value::Other(span) => {
            return Err(ListError::NotAList(
                source_text(source, span.start, span.end).trim().to_owned(),
            ))
        }
    };
    items
        .iter()
        .enumerate()
        .map(|(index, item)| list_name(index, item, source))
        .collect()
}

/// One item of a list of names, checked.
fn list_name(index: usize, item: &Item<'_>, source: &str) -> Result<String, ListError> {
    let bad = |item: &str| ListError::BadItem(index, item.trim().to_owned());
    let scalar = match item {
        Item::Scalar(s) => s,
        Item::Other(span) => return Err(bad(source_text(source, span.start, span.end))),
        Item::Empty => return Err(bad("")),
    };
    let quoted = matches!(
        scalar.style,
        ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted
    ) || scalar.tagged_str;
    let name = scalar.text.trim();
    if name.is_empty() || (!quoted && non_string_scalar(name)) {
        return Err(bad(source_text(source, scalar.span.start, scalar.span.end)));
    }
    Ok(name.to_owned())
}

/// Whether an unquoted scalar would not be read as a string by YAML 1.1 readers (a number,
/// bool — `yes`/`no`/`on`/`off` too — or null), or looks like a collection or a mapping.
fn non_string_scalar(text: &str) -> bool {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    matches!(
        lower.as_str(),
        "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "~"
    ) || looks_numeric(t)
        || t.starts_with(['[', '"', '\'', '{', '-'])
        || t.contains(": ")
        || t.ends_with(':')
}

/// Whether `t` reads as a YAML number (digits with an optional sign, point and exponent).
fn looks_numeric(t: &str) -> bool {
    t.chars().any(|c| c.is_ascii_digit())
        && t.chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '+' | '-' | '.' | 'e' | 'E' | '_'))
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn kind(text: &str) -> Option<SkillParseErrorKind> {
        parse_skill_md("/s/SKILL.md", text).err().map(|e| e.kind)
    }

    fn md(extra: &str) -> String {
        format!("---\nname: s\ndescription: d\n{extra}---\nbody\n")
    }

    #[test]
    fn names_and_descriptions_are_read_as_written() -> TestResult {
        let s = parse_skill_md("p", "---\nname: 007\ndescription: true\n---\n")?;
        assert_eq!((s.name.as_str(), s.description.as_str()), ("007", "true"));
        let s = parse_skill_md(
            "p",
            "\u{feff}---\r\nname: a\r\ndescription: |\r\n  one\r\n  two\r\n---\r\n",
        )?;
        assert_eq!((s.name.as_str(), s.description.as_str()), ("a", "one\ntwo"));
        let s = parse_skill_md(
            "p",
            "---\nname: 'it''s'\ndescription: \"q \\\"x\\\"\"\n---\n",
        )?;
        assert_eq!(
            (s.name.as_str(), s.description.as_str()),
            ("it's", "q \"x\"")
        );
        let s = parse_skill_md("p", "---\nname: a\ndescription: one\n  two\n---\n")?;
        assert_eq!(s.description, "one two");
        let s = parse_skill_md("p", "---\nname: a\ndescription:\n---\n")?;
        assert_eq!(s.description, "");
        Ok(())
    }

    #[test]
    fn other_keys_are_ignored_whatever_their_shape() -> TestResult {
        let s = parse_skill_md(
            "p",
            &md("license: MIT\nmetadata:\n  a: 1\n  a: 2\n  list: [1, {x: y}]\n# note\n\n"),
        )?;
        assert_eq!(s.allowed_tools, None);
        Ok(())
    }

    #[test]
    fn yaml_1_1_booleans_and_dashes_are_not_tool_names_unless_quoted() -> TestResult {
        for item in ["yes", "Off", "~", "-x", "1e3"] {
            let got = kind(&md(&format!("allowed-tools: [{item}]\n")));
            assert!(
                matches!(
                    got,
                    Some(SkillParseErrorKind::BadAllowedTool { index: 0, .. })
                ),
                "{item}: {got:?}"
            );
        }
        let s = parse_skill_md("p", &md("allowed-tools: ['yes', !!str 3, \" calc \"]\n"))?;
        assert_eq!(
            s.allowed_tools,
            Some(vec!["yes".into(), "3".into(), "calc".into()])
        );
        Ok(())
    }

    #[test]
    fn a_trailing_empty_flow_item_is_reported_after_non_ascii_names() -> TestResult {
        assert_eq!(
            kind(&md("allowed-tools: [café, ]\n")),
            Some(SkillParseErrorKind::BadAllowedTool {
                index: 1,
                item: String::new()
            })
        );
        assert_eq!(
            kind(&md("allowed-tools: [café, [a]]\n")),
            Some(SkillParseErrorKind::BadAllowedTool {
                index: 1,
                item: "[a]".into()
            })
        );
        assert_eq!(
            kind(&md("allowed-tools: {a: b}\n")),
            Some(SkillParseErrorKind::AllowedToolsNotAList("{a: b}".into()))
        );
        Ok(())
    }

    #[test]
    fn secrets_are_a_list_of_environment_variable_names() -> TestResult {
        let s = parse_skill_md("p", &md("secrets:\n  - SALES_API_TOKEN\n  - _X1\n"))?;
        assert_eq!(
            s.secrets,
            vec!["SALES_API_TOKEN".to_owned(), "_X1".to_owned()]
        );
        assert_eq!(parse_skill_md("p", &md(""))?.secrets, Vec::<String>::new());
        assert_eq!(
            kind(&md("secrets: SALES_API_TOKEN\n")),
            Some(SkillParseErrorKind::SecretsNotAList(
                "SALES_API_TOKEN".into()
            ))
        );
        for (list, index, item) in [
            ("[A, 3]", 1, "3"),
            ("[A, ]", 1, ""),
            ("[\"A-B\"]", 0, "A-B"),
            ("['1A']", 0, "1A"),
            ("['A=B']", 0, "A=B"),
            ("[[A]]", 0, "[A]"),
        ] {
            assert_eq!(
                kind(&md(&format!("secrets: {list}\n"))),
                Some(SkillParseErrorKind::BadSecret {
                    index,
                    item: item.into()
                }),
                "{list}"
            );
        }
        Ok(())
    }

    #[test]
    fn malformed_yaml_is_a_syntax_error_on_the_file_line() -> TestResult {
        let err = parse_skill_md("/s/SKILL.md", "---\nname: x\ndescription: a: b\n---\n")
            .err()
            .ok_or("parsed")?;
        let SkillParseErrorKind::Syntax(scan) = &err.kind else {
            return Err(format!("not a syntax error: {err}").into());
        };
        assert_eq!(scan.marker().line(), 3);
        assert!(
            err.to_string()
                .starts_with("SKILL.md \"/s/SKILL.md\": the frontmatter is not valid YAML"),
            "{err}"
        );
        assert!(matches!(
            kind("---\nname: x\n\tdescription: y\n---\n"),
            Some(SkillParseErrorKind::Syntax(_))
        ));
        assert!(matches!(
            kind("---\nname: x\ndescription: [a\n---\n"),
            Some(SkillParseErrorKind::Syntax(_))
        ));
        Ok(())
    }

    #[test]
    fn a_frontmatter_that_is_not_a_mapping_is_refused() -> TestResult {
        for text in ["---\njust text\n---\n", "---\n- a\n- b\n---\n"] {
            assert_eq!(
                kind(text),
                Some(SkillParseErrorKind::NotAMapping),
                "{text:?}"
            );
        }
        assert_eq!(
            kind("---\n---\n"),
            Some(SkillParseErrorKind::Missing("name"))
        );
        assert_eq!(
            kind("---\nname: x\ndescription:\n  a: b\n---\n"),
            Some(SkillParseErrorKind::NotAString("description"))
        );
        assert_eq!(
            kind("---\nname: x\n\"name\": y\ndescription: z\n---\n"),
            Some(SkillParseErrorKind::DuplicateKey("name".into()))
        );
        Ok(())
    }
}
