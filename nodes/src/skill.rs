//! Visible and Executed: skills and the skill tool policy (deerflow-runtime semantics §6).
//!
//! A skill is a `SKILL.md` whose frontmatter may declare `allowed-tools`
//! ([`parse_skill_md`]). Enabling a skill only makes it discoverable; its policy is **active**
//! when the user slash-activates it for the run ([`RunContext::slash_skill`]) or when the model
//! has read it (it is then in [`ThreadState::skill_context`]). [`SkillToolPolicy`] resolves the
//! active policy for every model request and again for every tool call:
//!
//! 1. **slash**: the run's slash skill, alone; it dominates, `skill_context` is ignored, so
//!    reading a second skill cannot widen the slash skill's authority;
//! 2. else **skill_context**: the paths of the read skills, in state order (an entry with an
//!    empty path still counts: it resolves to no skill, so on its own it fails closed);
//! 3. else **passive**: no filtering at all, and the skill store is not read.
//!
//! For an active policy every skill is loaded from the [`SkillStore`]; an active path is
//! skipped if no skill has it, the skill is disabled, outside the agent's available skills, or
//! has the name of a skill already kept. A store error or no surviving skill fails closed to the
//! [`FRAMEWORK_TOOLS`]; when no surviving skill declares `allowed-tools` (all legacy) every tool
//! is allowed; otherwise the union of the declarations plus the framework tools.
//!
//! **Deliberate change from DeerFlow:** there is no owner token and no stored policy decision.
//! DeerFlow writes the slash activation and the model-call decision into a mutable run context,
//! so it must check a per-chain token to ignore forged entries and validate the stored decision
//! at call time. Our [`RunContext`] is immutable and set by the application before the run, so
//! neither a tool nor the model can forge a slash activation, and the call-time check always
//! recomputes the policy from the current state: there is no stale decision to validate.

use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::sync::Arc;

use stategraph::reducers::{MessageOp, MessagesUpdate};

use crate::deferred::TOOL_SEARCH;
use crate::message::{Message, ToolMessage};
use crate::middleware::{Denial, ToolPolicy};
use crate::tool::{ToolOutput, ToolSpec};
use crate::{BoxError, RunContext, ThreadState, ToolCall};

/// Tools no skill policy removes.
pub const FRAMEWORK_TOOLS: [&str; 4] = [
    "describe_skill",
    "read_file",
    "review_skill_package",
    "tool_search",
];

/// The content of the tool message replacing a `tool_search` result the policy cannot check.
pub const UNVALIDATED_SEARCH: &str =
    "tool_search returned a result that could not be validated against the active skill policy.";

/// The content of a `tool_search` result whose every match the policy removed.
pub const NO_PERMITTED_MATCH: &str = "No tools found matching the active skill policy.";

/// A skill: a SKILL.md with frontmatter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skill {
    /// Its name.
    pub name: String,
    /// Its container path (`/mnt/skills/<category>/<name>/SKILL.md`).
    pub path: String,
    /// Its description.
    pub description: String,
    /// The tools it allows (`None`: it declares nothing, a legacy skill).
    pub allowed_tools: Option<Vec<String>>,
    /// Whether it is enabled.
    pub enabled: bool,
}

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
    /// A frontmatter line is neither `key: value`, a list item, an indented continuation, a
    /// comment nor blank.
    #[error("line {line}: cannot read {text:?}")]
    BadLine {
        /// The line number in the file (1-based).
        line: usize,
        /// The line.
        text: String,
    },
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

/// One top-level frontmatter entry: the key's line, its inline value and the lines under it.
struct Entry<'a> {
    key: &'a str,
    value: &'a str,
    /// Indented continuation lines and `- item` lines, with their line numbers.
    body: Vec<(usize, &'a str)>,
}

/// Strip one pair of matching surrounding quotes; `Some` when the text was quoted.
fn unquote(text: &str) -> (String, bool) {
    let t = text.trim();
    for q in ['"', '\''] {
        if t.len() >= 2 && t.starts_with(q) && t.ends_with(q) {
            let inner = &t[1..t.len() - 1];
            let inner = if q == '\'' {
                inner.replace("''", "'")
            } else {
                inner.replace("\\\"", "\"").replace("\\\\", "\\")
            };
            return (inner, true);
        }
    }
    (t.to_string(), false)
}

/// Whether an unquoted YAML scalar would not be read as a string (a number, bool or null), or
/// is a nested collection or mapping.
fn non_string_scalar(text: &str) -> bool {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    matches!(
        lower.as_str(),
        "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "~"
    ) || looks_numeric(t)
        || t.starts_with('[')
        || t.starts_with('"')
        || t.starts_with('\'')
        || t.starts_with('{')
        || t.starts_with('-')
        || t.contains(": ")
        || t.ends_with(':')
}

/// Whether `t` reads as a YAML number (digits with an optional sign, point and exponent).
fn looks_numeric(t: &str) -> bool {
    t.chars().any(|c| c.is_ascii_digit())
        && t.chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '+' | '-' | '.' | 'e' | 'E' | '_'))
}

/// A scalar value: the inline value, or a folded (`>`) / literal (`|`) block, or plain
/// continuation lines folded with spaces.
fn scalar(entry: &Entry<'_>, key: &'static str) -> Result<String, SkillParseErrorKind> {
    let value = entry.value.trim();
    let block: Vec<&str> = entry.body.iter().map(|(_, l)| l.trim()).collect();
    if value.starts_with('|') || value.starts_with('>') {
        let sep = if value.starts_with('|') { "\n" } else { " " };
        return Ok(block.join(sep).trim().to_string());
    }
    if value.starts_with('[') || value.starts_with('{') {
        return Err(SkillParseErrorKind::NotAString(key));
    }
    if entry
        .body
        .iter()
        .any(|(_, l)| l.trim_start().starts_with("- "))
        && value.is_empty()
    {
        return Err(SkillParseErrorKind::NotAString(key));
    }
    let mut parts = vec![value];
    parts.extend(block);
    let joined = parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    Ok(unquote(&joined).0)
}

/// One `allowed-tools` item, checked.
fn list_item(index: usize, raw: &str) -> Result<String, SkillParseErrorKind> {
    let bad = || SkillParseErrorKind::BadAllowedTool {
        index,
        item: raw.trim().to_string(),
    };
    let (text, quoted) = unquote(raw);
    if !quoted && non_string_scalar(&text) {
        return Err(bad());
    }
    let text = text.trim().to_string();
    if text.is_empty() {
        return Err(bad());
    }
    Ok(text)
}

/// The `allowed-tools` list: `[a, b]` (flow) or `- a` lines (block).
fn allowed_tools(entry: &Entry<'_>) -> Result<Vec<String>, SkillParseErrorKind> {
    let value = entry.value.trim();
    if value.is_empty() {
        if entry.body.is_empty() {
            return Err(SkillParseErrorKind::AllowedToolsNotAList(String::new()));
        }
        let mut items = Vec::new();
        for (index, (_, line)) in entry.body.iter().enumerate() {
            let line = line.trim();
            let item = if line == "-" {
                ""
            } else if let Some(item) = line.strip_prefix("- ") {
                item
            } else {
                return Err(SkillParseErrorKind::AllowedToolsNotAList(line.to_string()));
            };
            items.push(list_item(index, item)?);
        }
        return Ok(items);
    }
    let Some(inner) = value
        .strip_prefix('[')
        .and_then(|v| v.strip_suffix(']'))
        .filter(|_| entry.body.is_empty())
    else {
        return Err(SkillParseErrorKind::AllowedToolsNotAList(value.to_string()));
    };
    if inner.trim().is_empty() {
        return Ok(Vec::new());
    }
    inner
        .split(',')
        .enumerate()
        .map(|(index, item)| list_item(index, item))
        .collect()
}

/// Parse a SKILL.md: frontmatter between `---` lines with `name`, `description` and an optional
/// `allowed-tools` list, either `[a, b]` or one `- a` line per item. Other keys are ignored
/// (with whatever is indented under them); `#` comment lines and blank lines are skipped. The
/// parsed skill is enabled.
///
/// The parser is deliberately strict about `allowed-tools`: a value that is not a list, or an
/// item that is not a non-empty string (an unquoted number, bool or null, a nested list or map)
/// is an error, so the skill is missing from the registry and any policy naming it fails closed.
///
/// ```
/// use stategraph_nodes::skill::parse_skill_md;
///
/// let text = "---\nname: calc\ndescription: Arithmetic\nallowed-tools: [calc, read_file]\n---\n# Calc\n";
/// let skill = parse_skill_md("/mnt/skills/public/calc/SKILL.md", text)?;
/// assert_eq!(skill.allowed_tools, Some(vec!["calc".to_string(), "read_file".to_string()]));
/// assert!(parse_skill_md("p", "---\nname: x\ndescription: y\nallowed-tools: calc\n---\n").is_err());
/// # Ok::<(), stategraph_nodes::skill::SkillParseError>(())
/// ```
///
/// # Errors
/// A [`SkillParseError`] naming `path` and what was wrong.
pub fn parse_skill_md(path: &str, text: &str) -> Result<Skill, SkillParseError> {
    parse_frontmatter(text)
        .map_err(|kind| SkillParseError {
            path: path.to_string(),
            kind,
        })
        .map(|(name, description, allowed_tools)| Skill {
            name,
            path: path.to_string(),
            description,
            allowed_tools,
            enabled: true,
        })
}

type Frontmatter = (String, String, Option<Vec<String>>);

fn parse_frontmatter(text: &str) -> Result<Frontmatter, SkillParseErrorKind> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    match lines.next() {
        Some((_, first)) if first.trim_end() == "---" => {}
        _ => return Err(SkillParseErrorKind::NoFrontmatter),
    }
    let mut entries: Vec<Entry<'_>> = Vec::new();
    let mut closed = false;
    for (n, line) in lines {
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let indented = line.starts_with(' ') || line.starts_with('\t');
        if indented || trimmed == "-" || trimmed.starts_with("- ") {
            match entries.last_mut() {
                Some(entry) => entry.body.push((n, line)),
                None => {
                    return Err(SkillParseErrorKind::BadLine {
                        line: n,
                        text: line.to_string(),
                    })
                }
            }
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(SkillParseErrorKind::BadLine {
                line: n,
                text: line.to_string(),
            });
        };
        let key = key.trim();
        if key.is_empty() || (!value.is_empty() && !value.starts_with([' ', '\t'])) {
            return Err(SkillParseErrorKind::BadLine {
                line: n,
                text: line.to_string(),
            });
        }
        if entries.iter().any(|e| e.key == key) {
            return Err(SkillParseErrorKind::DuplicateKey(key.to_string()));
        }
        entries.push(Entry {
            key,
            value,
            body: Vec::new(),
        });
    }
    if !closed {
        return Err(SkillParseErrorKind::Unclosed);
    }
    let find = |key: &str| entries.iter().find(|e| e.key == key);
    let name = match find("name") {
        Some(e) => scalar(e, "name")?,
        None => String::new(),
    };
    if name.is_empty() {
        return Err(SkillParseErrorKind::Missing("name"));
    }
    let description = match find("description") {
        Some(e) => scalar(e, "description")?,
        None => return Err(SkillParseErrorKind::Missing("description")),
    };
    let allowed = find("allowed-tools").map(allowed_tools).transpose()?;
    Ok((name, description, allowed))
}

/// Where skills are loaded from.
pub trait SkillStore: Send + Sync + 'static {
    /// Every skill, enabled or not.
    ///
    /// # Errors
    /// Any failure to read the store; the policy then fails closed.
    fn load_all(&self) -> Result<Vec<Skill>, BoxError>;
}

impl<S: SkillStore + ?Sized> SkillStore for Arc<S> {
    fn load_all(&self) -> Result<Vec<Skill>, BoxError> {
        (**self).load_all()
    }
}

/// An in-memory skill store: skills (enabled or not) and the SKILL.md files that failed to
/// parse (those are missing from [`SkillStore::load_all`]).
///
/// ```
/// use stategraph_nodes::skill::{SkillRegistry, SkillStore};
///
/// let registry = SkillRegistry::from_skill_mds([
///     ("/mnt/skills/public/calc/SKILL.md", "---\nname: calc\ndescription: d\n---\n", true),
///     ("/mnt/skills/public/bad/SKILL.md", "---\nname: bad\ndescription: d\nallowed-tools: 3\n---\n", true),
/// ]);
/// assert_eq!(registry.load_all()?.len(), 1);
/// assert_eq!(registry.failures()[0].path, "/mnt/skills/public/bad/SKILL.md");
/// # Ok::<(), stategraph_nodes::BoxError>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct SkillRegistry {
    skills: Vec<Skill>,
    failures: Vec<SkillParseError>,
}

impl SkillRegistry {
    /// A registry holding `skills`.
    pub fn new(skills: impl IntoIterator<Item = Skill>) -> Self {
        SkillRegistry {
            skills: skills.into_iter().collect(),
            failures: Vec::new(),
        }
    }

    /// A registry parsed from `(path, SKILL.md text, enabled)` triples; files that do not parse
    /// are recorded in [`SkillRegistry::failures`] instead.
    pub fn from_skill_mds<P, T>(files: impl IntoIterator<Item = (P, T, bool)>) -> Self
    where
        P: AsRef<str>,
        T: AsRef<str>,
    {
        let mut registry = SkillRegistry::default();
        for (path, text, enabled) in files {
            match parse_skill_md(path.as_ref(), text.as_ref()) {
                Ok(skill) => registry.skills.push(Skill { enabled, ..skill }),
                Err(e) => {
                    tracing::warn!(error = %e, "skill skipped: its SKILL.md does not parse");
                    registry.failures.push(e);
                }
            }
        }
        registry
    }

    /// Add a skill.
    pub fn with(mut self, skill: Skill) -> Self {
        self.skills.push(skill);
        self
    }

    /// The skills, enabled or not.
    pub fn skills(&self) -> &[Skill] {
        &self.skills
    }

    /// The SKILL.md files that failed to parse.
    pub fn failures(&self) -> &[SkillParseError] {
        &self.failures
    }
}

impl SkillStore for SkillRegistry {
    fn load_all(&self) -> Result<Vec<Skill>, BoxError> {
        Ok(self.skills.clone())
    }
}

/// Normalise a container path: `\` as `/`, repeated `/` collapsed, `.` dropped, `..` resolved
/// (never above the root), no trailing `/`.
pub fn normalize_skill_path(path: &str) -> String {
    let path = path.trim().replace('\\', "/");
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

/// Where the active skill policy comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicySource {
    /// The run's slash-activated skill.
    Slash,
    /// The skills the model has read (`skill_context`).
    SkillContext,
    /// No active skill: no filtering.
    Passive,
}

impl fmt::Display for PolicySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PolicySource::Slash => "slash",
            PolicySource::SkillContext => "skill_context",
            PolicySource::Passive => "passive",
        })
    }
}

/// The policy in force for one request or call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyDecision {
    /// Where it comes from.
    pub source: PolicySource,
    /// The active skill paths, as given (empty when passive).
    pub paths: Vec<String>,
    /// The allowed tool names, sorted; `None`: every tool.
    pub allowed: Option<Vec<String>>,
}

impl PolicyDecision {
    /// Whether `tool` may be used under this decision.
    pub fn allows(&self, tool: &str) -> bool {
        self.allowed
            .as_ref()
            .is_none_or(|names| names.binary_search_by(|n| n.as_str().cmp(tool)).is_ok())
    }

    fn reason(&self) -> String {
        format!(
            "not allowed by the active skill policy (source {}, skills {:?})",
            self.source, self.paths
        )
    }
}

/// The skill tool policy: hides the tools the active skills do not allow, refuses calls to
/// them, and narrows `tool_search` results to allowed tools (see the module docs).
#[derive(Clone)]
pub struct SkillToolPolicy {
    store: Arc<dyn SkillStore>,
    available: Option<Vec<String>>,
    /// The framework tools that get the exemption (by default all of [`FRAMEWORK_TOOLS`]).
    framework: Vec<String>,
}

impl fmt::Debug for SkillToolPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SkillToolPolicy")
            .field("available", &self.available)
            .finish_non_exhaustive()
    }
}

impl SkillToolPolicy {
    /// A policy over the skills of `store`.
    /// `available` restricts which skills may be active (by name; `None`: all).
    pub fn new(store: Arc<dyn SkillStore>, available: Option<Vec<String>>) -> Self {
        SkillToolPolicy {
            store,
            available,
            framework: FRAMEWORK_TOOLS.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// Grant the framework exemption only to the [`FRAMEWORK_TOOLS`] among `names` — the
    /// agent passes its built-in tools, so a server tool that happens to be called `read_file`
    /// is not exempt.
    pub fn trusted_framework_tools(mut self, names: impl IntoIterator<Item = String>) -> Self {
        let names: BTreeSet<String> = names.into_iter().collect();
        self.framework = FRAMEWORK_TOOLS
            .iter()
            .filter(|f| names.contains(**f))
            .map(|f| f.to_string())
            .collect();
        self
    }

    /// The policy in force for `state` and `run`: slash skill, else `skill_context` paths in
    /// state order, else passive (the store is then not read).
    pub fn decide(&self, state: &ThreadState, run: &RunContext) -> PolicyDecision {
        let (source, paths) = match &run.slash_skill {
            Some(path) => (PolicySource::Slash, vec![path.clone()]),
            None if !state.skill_context.is_empty() => (
                PolicySource::SkillContext,
                state.skill_context.iter().map(|s| s.path.clone()).collect(),
            ),
            None => {
                return PolicyDecision {
                    source: PolicySource::Passive,
                    paths: Vec::new(),
                    allowed: None,
                }
            }
        };
        let allowed = self.allowed_for(&paths);
        PolicyDecision {
            source,
            paths,
            allowed,
        }
    }

    /// The allowed names for the active `paths` (sorted; `None`: every tool).
    fn allowed_for(&self, paths: &[String]) -> Option<Vec<String>> {
        let framework_only = || Some(sorted(self.framework.iter().cloned()));
        let skills = match self.store.load_all() {
            Ok(skills) => skills,
            Err(e) => {
                tracing::warn!(error = %e, "skill store failed: only framework tools allowed");
                return framework_only();
            }
        };
        let mut active: Vec<&Skill> = Vec::new();
        for path in paths {
            let wanted = normalize_skill_path(path);
            let Some(skill) = skills
                .iter()
                .find(|s| normalize_skill_path(&s.path) == wanted)
            else {
                tracing::warn!(path = %path, "active skill skipped: no skill at this path");
                continue;
            };
            if !skill.enabled {
                tracing::warn!(path = %path, "active skill skipped: disabled");
                continue;
            }
            if let Some(available) = &self.available {
                if !available.contains(&skill.name) {
                    tracing::warn!(path = %path, "active skill skipped: not available to this agent");
                    continue;
                }
            }
            if active.iter().any(|s| s.name == skill.name) {
                tracing::warn!(path = %path, "active skill skipped: duplicate name");
                continue;
            }
            active.push(skill);
        }
        if active.is_empty() {
            return framework_only();
        }
        if active.iter().all(|s| s.allowed_tools.is_none()) {
            return None;
        }
        Some(sorted(
            active
                .iter()
                .filter_map(|s| s.allowed_tools.as_ref())
                .flatten()
                .cloned()
                .chain(self.framework.iter().cloned()),
        ))
    }
}

fn sorted(names: impl Iterator<Item = String>) -> Vec<String> {
    names.collect::<BTreeSet<String>>().into_iter().collect()
}

/// The error answer to a `tool_search` call whose result cannot be checked.
fn unvalidated(call: &ToolCall) -> ToolOutput {
    ToolOutput::Message(ToolMessage::error(
        call.reply_id(),
        TOOL_SEARCH,
        UNVALIDATED_SEARCH,
    ))
}

/// The name of one OpenAI-function schema (`name` or `function.name`).
fn schema_name(schema: &serde_json::Value) -> Option<&str> {
    schema
        .get("name")
        .and_then(serde_json::Value::as_str)
        .or_else(|| {
            schema
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(serde_json::Value::as_str)
        })
}

/// Narrow a `tool_search` output to `decision`'s allowed names.
fn narrow_search(call: &ToolCall, output: ToolOutput, decision: &PolicyDecision) -> ToolOutput {
    let ToolOutput::Command(cmd) = output else {
        return unvalidated(call);
    };
    let Some(update) = cmd.update_ref() else {
        return unvalidated(call);
    };
    let (Some(promoted), Some(messages)) = (&update.promoted, &update.messages) else {
        return unvalidated(call);
    };
    let [MessageOp::Upsert(Message::Tool(message))] = messages.ops() else {
        return unvalidated(call);
    };
    let permitted: Vec<String> = promoted
        .names
        .iter()
        .filter(|n| decision.allows(n))
        .cloned()
        .collect();
    let mut message = message.clone();
    if !promoted.names.is_empty() {
        let Ok(schemas) = serde_json::from_str::<Vec<serde_json::Value>>(&message.content) else {
            return unvalidated(call);
        };
        let permitted_set: HashSet<&str> = permitted.iter().map(String::as_str).collect();
        let kept: Vec<serde_json::Value> = schemas
            .into_iter()
            .filter(|s| schema_name(s).is_some_and(|n| permitted_set.contains(n)))
            .collect();
        message.content = if kept.is_empty() {
            NO_PERMITTED_MATCH.to_string()
        } else {
            match serde_json::to_string_pretty(&kept) {
                Ok(text) => text,
                Err(_) => return unvalidated(call),
            }
        };
    }
    let mut narrowed = promoted.clone();
    narrowed.names = permitted;
    let mut update = update.clone();
    update.promoted = Some(narrowed);
    update.messages = Some(MessagesUpdate::from(Message::Tool(message)));
    // Replacing only the update keeps the command's routing, parent command and resume.
    ToolOutput::Command(cmd.update(update))
}

impl ToolPolicy for SkillToolPolicy {
    fn name(&self) -> &str {
        "skill_tool_policy"
    }

    fn visible(
        &self,
        tools: &[&ToolSpec],
        state: &ThreadState,
        run: &RunContext,
    ) -> Vec<Option<String>> {
        let decision = self.decide(state, run);
        if decision.allowed.is_none() {
            return vec![None; tools.len()];
        }
        let reason = decision.reason();
        tools
            .iter()
            .map(|t| (!decision.allows(&t.name)).then(|| reason.clone()))
            .collect()
    }

    fn check_call(
        &self,
        call: &ToolCall,
        state: &ThreadState,
        run: &RunContext,
    ) -> Result<(), Denial> {
        let decision = self.decide(state, run);
        if decision.allows(&call.name) {
            Ok(())
        } else {
            Err(Denial::new(
                decision.reason(),
                format!(
                    "Error: Tool '{}' is not allowed by the active skill policy.",
                    call.name
                ),
            ))
        }
    }

    fn filter_output(
        &self,
        call: &ToolCall,
        output: ToolOutput,
        state: &ThreadState,
        run: &RunContext,
    ) -> ToolOutput {
        if call.name != TOOL_SEARCH {
            return output;
        }
        let decision = self.decide(state, run);
        if decision.allowed.is_none() {
            return output;
        }
        narrow_search(call, output, &decision)
    }
}
