//! `read_file`, `write_file`, `str_replace` and `ls`: one file operation each, over virtual
//! paths.

use schemars::JsonSchema;
use serde::Deserialize;

use super::fs_tool;
use crate::sandbox::{EntryType, LineWindow};
use crate::tool::FnTool;

/// `read_file`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadFileArgs {
    /// The file's virtual path (under `/mnt/user-data` or `/mnt/skills`).
    pub path: String,
    /// Lines to skip from the start.
    #[serde(default)]
    pub offset: Option<usize>,
    /// At most this many lines.
    #[serde(default)]
    pub limit: Option<usize>,
}

/// `write_file`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteFileArgs {
    /// The file's virtual path (under `/mnt/user-data`; `/mnt/skills` is read-only).
    pub path: String,
    /// The file's new text.
    pub content: String,
}

/// `str_replace`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct StrReplaceArgs {
    /// The file's virtual path.
    pub path: String,
    /// The text to replace; it must occur exactly once.
    pub old_str: String,
    /// The replacement.
    pub new_str: String,
}

/// `ls`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct LsArgs {
    /// The directory's virtual path.
    pub path: String,
}

/// `read_file`: the text of a file, optionally a window of its lines. Read-only.
pub fn read_file() -> FnTool {
    fs_tool(
        "read_file",
        "Read a text file by its virtual path (/mnt/user-data/..., /mnt/skills/...), \
         optionally `limit` lines after skipping `offset`.",
        true,
        |a: ReadFileArgs, fs| {
            let window = LineWindow {
                offset: a.offset.unwrap_or(0),
                limit: a.limit,
            };
            fs.read(&a.path, window)
        },
    )
}

/// `write_file`: creates or replaces a file (and its parent directories).
pub fn write_file() -> FnTool {
    fs_tool(
        "write_file",
        "Write a text file at a virtual path under /mnt/user-data (workspace, outputs), \
         creating parent directories.",
        false,
        |a: WriteFileArgs, fs| {
            fs.write(&a.path, &a.content)?;
            Ok(format!("Wrote {} bytes to {}", a.content.len(), a.path))
        },
    )
}

/// `str_replace`: replaces the one occurrence of a text in a file.
pub fn str_replace() -> FnTool {
    fs_tool(
        "str_replace",
        "Replace the one occurrence of `old_str` with `new_str` in a file at a virtual path.",
        false,
        |a: StrReplaceArgs, fs| {
            fs.str_replace(&a.path, &a.old_str, &a.new_str)?;
            Ok(format!("Edited {}", a.path))
        },
    )
}

/// `ls`: a directory's entries, one a line (directories end with `/`). Read-only.
pub fn ls() -> FnTool {
    fs_tool(
        "ls",
        "List a directory at a virtual path (directories end with /).",
        true,
        |a: LsArgs, fs| {
            let entries = fs.ls(&a.path)?;
            let lines: Vec<String> = entries
                .into_iter()
                .map(|e| match e.entry_type {
                    EntryType::Dir => format!("{}/", e.path),
                    _ => e.path,
                })
                .collect();
            Ok(if lines.is_empty() {
                "(empty)".to_owned()
            } else {
                lines.join("\n")
            })
        },
    )
}
