//! `glob` and `grep`: searches under a virtual directory.

use schemars::JsonSchema;
use serde::Deserialize;

use super::fs_tool;
use crate::sandbox::{Found, USER_DATA};
use crate::tool::FnTool;

fn default_root() -> String {
    USER_DATA.to_owned()
}

/// `glob`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GlobArgs {
    /// The pattern (`*` in a segment, `**` across segments, `?`, `[...]`).
    pub pattern: String,
    /// The virtual directory searched (default `/mnt/user-data`).
    #[serde(default = "default_root")]
    pub path: String,
}

/// `grep`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GrepArgs {
    /// The regular expression.
    pub pattern: String,
    /// The virtual directory or file searched (default `/mnt/user-data`).
    #[serde(default = "default_root")]
    pub path: String,
}

/// The lines of a search result, with a last line saying when it was cut.
fn listing<T>(found: Found<T>, line: impl Fn(T) -> String) -> String {
    let truncated = found.truncated;
    let mut lines: Vec<String> = found.items.into_iter().map(line).collect();
    if lines.is_empty() {
        lines.push("(no matches)".to_owned());
    }
    if truncated {
        lines.push("(results truncated)".to_owned());
    }
    lines.join("\n")
}

/// `glob`: the virtual paths matching a pattern. Read-only.
pub fn glob() -> FnTool {
    fs_tool(
        "glob",
        "Find files by glob pattern under a virtual directory; prints virtual paths.",
        true,
        |a: GlobArgs, fs| Ok(listing(fs.glob(&a.path, &a.pattern)?, |p| p)),
    )
}

/// `grep`: the lines matching a regular expression, as `path:line: text`. Read-only.
pub fn grep() -> FnTool {
    fs_tool(
        "grep",
        "Search file contents by regular expression under a virtual path; prints \
         path:line: text.",
        true,
        |a: GrepArgs, fs| {
            Ok(listing(fs.grep(&a.path, &a.pattern)?, |m| {
                format!("{}:{}: {}", m.path, m.line, m.text)
            }))
        },
    )
}
