//! Visible: the deferred tool catalog, the `tool_search` tool and the deferred-tool filter
//! (deerflow-runtime semantics §4–5).
//!
//! Deferrable tools (MCP tools by default, see [`ToolSpec::deferrable`]) stay executable but are
//! hidden from the model until `tool_search` promotes them. A promotion is bound to the
//! [`catalog_hash`] of the build that made it: after the catalog changes, old promotions count
//! for nothing.
//!
//! - [`DeferredSetup::build`]: the catalog of one agent build (candidate order kept) and its hash;
//!   [`MakeDeferredSetup`]: what an agent builds it with (an application may supply its own).
//! - [`DeferredSetup::search`]: the catalog search behind `tool_search` (at most
//!   [`MAX_RESULTS`] results, except for `select:`).
//! - [`DeferredSetup::tool_search`]: the tool, writing `promoted` and one tool message.
//! - [`DeferredSetup::prompt_section`]: the `<available-deferred-tools>` system-prompt section.
//! - [`DeferredToolFilter`]: the policy hiding (and refusing calls to) deferred tools not
//!   promoted under this build's hash. A promotion takes effect on the next model call; calls
//!   in the same AI message as the `tool_search` that promotes a tool see the pre-step state and
//!   are refused.
//!
//! Deviation from DeerFlow: the catalog hash is blake3 (first 16 hex chars), not SHA-256.

use std::collections::HashSet;
use std::sync::Arc;

use futures::future::BoxFuture;
use regex::{Regex, RegexBuilder};
use stategraph::reducers::{MessagesUpdate, Promoted};
use stategraph::Command;

use crate::message::{Message, ToolMessage};
use crate::middleware::{Denial, ToolPolicy};
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput, ToolSource, ToolSpec};
use crate::{RunContext, ThreadState, ToolCall};

/// The name of the tool-search tool.
pub const TOOL_SEARCH: &str = "tool_search";

/// The most results a keyword (`+term`) or regex search returns; `select:` is not capped.
pub const MAX_RESULTS: usize = 5;

/// The hash of a deferred catalog: blake3 over a canonical JSON of the list of
/// `{"name", "schema"}` of `specs`, sorted by name, where `schema` is the tool's OpenAI-function
/// schema ([`ToolSchema::to_openai`](crate::ToolSchema::to_openai)). Object keys are sorted and
/// non-ASCII is kept as is. The result is the first 16 hex chars of the digest.
///
/// It does not depend on the order of `specs`, and changes when a tool is added or removed or
/// any name, description or parameter schema changes.
///
/// ```
/// use stategraph_nodes::deferred::catalog_hash;
/// use stategraph_nodes::{ToolSource, ToolSpec};
///
/// let a = ToolSpec::new("a", "first", ToolSource::Mcp);
/// let b = ToolSpec::new("b", "second", ToolSource::Mcp);
/// let h = catalog_hash(&[a.clone(), b.clone()]);
/// assert_eq!(h.len(), 16);
/// assert_eq!(h, catalog_hash(&[b, a.clone()]));
/// assert_ne!(h, catalog_hash(&[a]));
/// ```
pub fn catalog_hash(specs: &[ToolSpec]) -> String {
    let mut sorted: Vec<&ToolSpec> = specs.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let list = serde_json::Value::Array(
        sorted
            .into_iter()
            .map(|s| serde_json::json!({"name": s.name, "schema": s.schema().to_openai()}))
            .collect(),
    );
    let mut canonical = String::new();
    write_canonical(&list, &mut canonical);
    let hex = blake3::hash(canonical.as_bytes()).to_hex();
    hex.as_str().chars().take(16).collect()
}

/// Write `value` as compact JSON with object keys sorted (whatever map order serde_json uses).
fn write_canonical(value: &serde_json::Value, out: &mut String) {
    match value {
        serde_json::Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        serde_json::Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::Value::String(key.clone()).to_string());
                out.push(':');
                if let Some(v) = map.get(key) {
                    write_canonical(v, out);
                }
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Escape `&`, `<`, `>`, `"` and `'` for HTML.
pub(crate) fn html_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#x27;"),
            c => out.push(c),
        }
    }
    out
}

/// `pattern` as a case-insensitive regex, or as a case-insensitive literal when it does not
/// compile.
fn search_regex(pattern: &str) -> Option<Regex> {
    RegexBuilder::new(pattern)
        .case_insensitive(true)
        .build()
        .or_else(|_| {
            RegexBuilder::new(&regex::escape(pattern))
                .case_insensitive(true)
                .build()
        })
        .ok()
}

/// Makes the deferred catalog of one agent assembly: given the specs of the tools that passed
/// authorization (in catalog order), the setup they are deferred under, or `None` for none.
///
/// The default is [`DeferredSetup::build`] (every deferrable candidate, in order). An
/// application supplies its own with [`AgentBuilder::deferred_setup`] — a closure of that
/// shape is one. Whatever it returns, assembly fails closed: a deferrable candidate missing
/// from the setup is [`AgentError::DeferredSetup`] (its schema is never bound), and a setup
/// naming a tool that is not a candidate is [`AgentError::DeferredNotCandidates`].
///
/// ```
/// use stategraph_nodes::deferred::{DeferredSetup, MakeDeferredSetup};
/// use stategraph_nodes::{ToolSource, ToolSpec};
///
/// let make = |candidates: &[ToolSpec]| DeferredSetup::build(candidates);
/// let specs = [ToolSpec::new("mcp_weather", "Weather", ToolSource::Mcp)];
/// let setup = make.make(&specs).expect("one deferrable tool");
/// assert_eq!(setup.names(), ["mcp_weather"]);
/// ```
///
/// [`AgentBuilder::deferred_setup`]: crate::AgentBuilder::deferred_setup
/// [`AgentError::DeferredSetup`]: crate::AgentError::DeferredSetup
/// [`AgentError::DeferredNotCandidates`]: crate::AgentError::DeferredNotCandidates
pub trait MakeDeferredSetup: Send + Sync + 'static {
    /// The setup for `candidates`, or `None` when nothing is deferred.
    fn make(&self, candidates: &[ToolSpec]) -> Option<DeferredSetup>;
}

impl<F> MakeDeferredSetup for F
where
    F: Fn(&[ToolSpec]) -> Option<DeferredSetup> + Send + Sync + 'static,
{
    fn make(&self, candidates: &[ToolSpec]) -> Option<DeferredSetup> {
        self(candidates)
    }
}

/// The deferred catalog of one agent build.
///
/// Invariant: a setup exists only with at least one deferred tool, so the `tool_search` tool,
/// the deferred names and the hash are present together or (no setup) absent together.
#[derive(Clone, Debug)]
pub struct DeferredSetup {
    catalog: Vec<ToolSpec>,
    hash: String,
}

impl DeferredSetup {
    /// The setup for `candidates`, or `None` when none is deferrable. The catalog keeps the
    /// candidates' order.
    pub fn build(candidates: &[ToolSpec]) -> Option<DeferredSetup> {
        let catalog: Vec<ToolSpec> = candidates
            .iter()
            .filter(|s| s.deferrable)
            .cloned()
            .collect();
        if catalog.is_empty() {
            return None;
        }
        let hash = catalog_hash(&catalog);
        Some(DeferredSetup { catalog, hash })
    }

    /// The catalog hash (16 hex chars, see [`catalog_hash`]).
    pub fn catalog_hash(&self) -> &str {
        &self.hash
    }

    /// The deferred tools, in catalog order.
    pub fn catalog(&self) -> &[ToolSpec] {
        &self.catalog
    }

    /// The deferred names, in catalog order.
    pub fn names(&self) -> Vec<String> {
        self.catalog.iter().map(|s| s.name.clone()).collect()
    }

    /// The system-prompt section listing the deferred names: sorted, one per line,
    /// HTML-escaped (so a hostile name cannot close the tag), inside
    /// `<available-deferred-tools>`. Empty when there are no names.
    pub fn prompt_section(&self) -> String {
        let mut names: Vec<&str> = self.catalog.iter().map(|s| s.name.as_str()).collect();
        if names.is_empty() {
            return String::new();
        }
        names.sort_unstable();
        let mut out = String::from("<available-deferred-tools>\n");
        for name in names {
            out.push_str(&html_escape(name));
            out.push('\n');
        }
        out.push_str("</available-deferred-tools>");
        out
    }

    /// Search the catalog. The query is trimmed; an empty query finds nothing. Three forms:
    ///
    /// 1. `select:A,B` (case-sensitive prefix): the tools named exactly (case-sensitive) `A`,
    ///    `B`, ... (names trimmed, unknown ones ignored), in **catalog order**, not capped.
    /// 2. `+term rest`: the tools whose name contains `term` (case-insensitive), ranked by how
    ///    often `rest` — one case-insensitive regex, or a literal if it does not compile —
    ///    matches `"name description"`, most first, ties in catalog order; tools with no match
    ///    are still included. At most [`MAX_RESULTS`]. A bare `+` finds nothing.
    /// 3. Otherwise the **whole** query is one case-insensitive regex (a literal if it does not
    ///    compile) over `"name description"`; a tool scores 2 if its name matches, 1 if only
    ///    the description does; highest first, ties in catalog order. At most [`MAX_RESULTS`].
    ///
    /// Like DeerFlow, a multi-word query is **not** split into keywords: `notebook jupyter`
    /// matches only text containing that phrase (use a regex such as `notebook|jupyter` or the
    /// `+term rest` form to rank by several words). We mirror the quirk on purpose, so search
    /// results, and therefore promotions, are the same as DeerFlow's for the same catalog.
    pub fn search(&self, query: &str) -> Vec<&ToolSpec> {
        let query = query.trim();
        if query.is_empty() {
            return Vec::new();
        }
        if let Some(list) = query.strip_prefix("select:") {
            let wanted: HashSet<&str> = list
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .collect();
            return self
                .catalog
                .iter()
                .filter(|s| wanted.contains(s.name.as_str()))
                .collect();
        }
        if let Some(body) = query.strip_prefix('+') {
            let body = body.trim_start();
            let (term, rest) = match body.find(char::is_whitespace) {
                Some(i) => (&body[..i], body[i..].trim()),
                None => (body, ""),
            };
            if term.is_empty() {
                return Vec::new();
            }
            let term = term.to_lowercase();
            let candidates = self
                .catalog
                .iter()
                .filter(|s| s.name.to_lowercase().contains(&term));
            let mut ranked: Vec<(usize, &ToolSpec)> =
                match (!rest.is_empty()).then(|| search_regex(rest)).flatten() {
                    Some(re) => candidates
                        .map(|s| {
                            let hay = format!("{} {}", s.name, s.description);
                            (re.find_iter(&hay).count(), s)
                        })
                        .collect(),
                    None => candidates.map(|s| (0, s)).collect(),
                };
            ranked.sort_by_key(|r| std::cmp::Reverse(r.0));
            return ranked
                .into_iter()
                .take(MAX_RESULTS)
                .map(|(_, s)| s)
                .collect();
        }
        let Some(re) = search_regex(query) else {
            return Vec::new();
        };
        let mut scored: Vec<(u8, &ToolSpec)> = self
            .catalog
            .iter()
            .filter_map(|s| {
                if re.is_match(&s.name) {
                    Some((2, s))
                } else if re.is_match(&format!("{} {}", s.name, s.description)) {
                    Some((1, s))
                } else {
                    None
                }
            })
            .collect();
        scored.sort_by_key(|r| std::cmp::Reverse(r.0));
        scored
            .into_iter()
            .take(MAX_RESULTS)
            .map(|(_, s)| s)
            .collect()
    }

    /// The `tool_search` tool of this build (built-in, read-only, not deferrable; arguments
    /// `{"query": string}`).
    ///
    /// A call always returns a [`ToolOutput::Command`] whose update writes
    /// `promoted = {this build's hash, the matched names in result order}` and one tool message
    /// (named `tool_search`, answering the call) holding the matched tools' OpenAI-function
    /// schemas as a JSON array pretty-printed with 2 spaces, or
    /// `No tools found matching: <query>` (the promotion, with no names, is still written).
    /// A call without a string `query` fails with [`ToolError::InvalidArgs`].
    pub fn tool_search(&self) -> Arc<dyn Tool> {
        let spec = ToolSpec::new(
            TOOL_SEARCH,
            "Search the deferred tools (listed in <available-deferred-tools>) and make the \
             matches callable from the next turn. Query forms: \"select:name1,name2\" for exact \
             names; \"+term words\" for tools whose name contains term, ranked by words; \
             anything else is one case-insensitive regular expression over name and \
             description.",
            ToolSource::BuiltIn,
        )
        .read_only(true)
        .deferrable(false)
        .parameters(serde_json::json!({
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "select:A,B | +term words | a regular expression"
                }
            },
            "required": ["query"]
        }));
        Arc::new(ToolSearch {
            spec,
            setup: self.clone(),
        })
    }

    /// The filter hiding deferred tools that are not promoted under this build's hash.
    pub fn filter(&self) -> DeferredToolFilter {
        DeferredToolFilter {
            setup: self.clone(),
        }
    }

    /// The `tool_search` answer to `call`.
    fn answer(&self, call: &ToolCall) -> Result<Command<ThreadState>, ToolError> {
        let Some(query) = call.args.get("query").and_then(serde_json::Value::as_str) else {
            return Err(ToolError::InvalidArgs {
                tool: TOOL_SEARCH.to_owned(),
                message: "expected {\"query\": string}".to_owned(),
            });
        };
        let found = self.search(query);
        let names: Vec<String> = found.iter().map(|s| s.name.clone()).collect();
        let content = if found.is_empty() {
            format!("No tools found matching: {query}")
        } else {
            let schemas: Vec<serde_json::Value> =
                found.iter().map(|s| s.schema().to_openai()).collect();
            serde_json::to_string_pretty(&schemas).map_err(|e| ToolError::failed(TOOL_SEARCH, e))?
        };
        let message = ToolMessage::new(call.reply_id(), TOOL_SEARCH, content);
        Ok(Command::new().update(
            ThreadState::update()
                .promoted(Promoted::new(self.hash.clone(), names))
                .messages(MessagesUpdate::from(Message::Tool(message))),
        ))
    }
}

/// The `tool_search` tool of one build.
struct ToolSearch {
    spec: ToolSpec,
    setup: DeferredSetup,
}

impl Tool for ToolSearch {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(
        &self,
        call: ToolCall,
        _cx: ToolContext,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        let result = self.setup.answer(&call).map(ToolOutput::Command);
        Box::pin(futures::future::ready(result))
    }
}

/// Hides deferred tools not promoted under the current catalog hash, and refuses calls to them.
///
/// Promoted = `state.promoted.names` only when `state.promoted.catalog_hash` is this build's
/// hash (a stale or foreign hash promotes nothing); hidden = deferred − promoted. Tools that are
/// not deferred are never touched.
#[derive(Clone, Debug)]
pub struct DeferredToolFilter {
    setup: DeferredSetup,
}

impl DeferredToolFilter {
    /// The deferred names hidden in `state`, in catalog order.
    pub fn hidden(&self, state: &ThreadState) -> Vec<String> {
        let promoted: HashSet<String> =
            state.promoted_under(&self.setup.hash).into_iter().collect();
        self.setup
            .catalog
            .iter()
            .filter(|s| !promoted.contains(&s.name))
            .map(|s| s.name.clone())
            .collect()
    }
}

impl ToolPolicy for DeferredToolFilter {
    fn name(&self) -> &str {
        "deferred_tool_filter"
    }

    /// Everything: finding and promoting the deferred tools this filter hides is what
    /// `tool_search` is for.
    fn search_visible(
        &self,
        found: &[&ToolSpec],
        _state: &ThreadState,
        _run: &RunContext,
    ) -> Vec<Option<String>> {
        vec![None; found.len()]
    }

    fn visible(
        &self,
        tools: &[&ToolSpec],
        state: &ThreadState,
        _run: &RunContext,
    ) -> Vec<Option<String>> {
        let hidden: HashSet<String> = self.hidden(state).into_iter().collect();
        tools
            .iter()
            .map(|t| {
                hidden
                    .contains(&t.name)
                    .then(|| format!("deferred, not promoted under catalog {}", self.setup.hash))
            })
            .collect()
    }

    fn check_call(
        &self,
        call: &ToolCall,
        _spec: Option<&ToolSpec>,
        state: &ThreadState,
        _run: &RunContext,
    ) -> Result<(), Denial> {
        if self.hidden(state).contains(&call.name) {
            return Err(Denial::new(
                format!("deferred, not promoted under catalog {}", self.setup.hash),
                format!(
                    "Error: Tool '{}' is deferred and has not been promoted. Call {TOOL_SEARCH} \
                     first to find it (for example {TOOL_SEARCH} with query \"select:{}\"), \
                     then call it in a later turn.",
                    call.name, call.name
                ),
            ));
        }
        Ok(())
    }
}
