//! Finding files in the sandbox: `glob` (by name pattern) and `grep` (by regex over lines),
//! walking a mount through its capability directory without following symlinks.

use std::path::{Path, PathBuf};

use cap_std::fs::Dir;
use regex::Regex;

use super::fs::{list_dir, EntryType, FsError, FsOp, SandboxFs};
use super::path::{Intent, Located, Mount, MountedPath};

/// At most this many entries are visited by one search.
pub const MAX_VISITED: usize = 20_000;
/// At most this many results are returned by one search.
pub const MAX_RESULTS: usize = 500;
/// Files larger than this are not searched by `grep`.
pub const MAX_GREP_FILE: u64 = 4 * 1024 * 1024;
/// A matched line is cut to this many characters.
pub const MAX_LINE_CHARS: usize = 400;

/// What a search found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found<T> {
    /// The results, in walk order (sorted by path).
    pub items: Vec<T>,
    /// Whether the search stopped at [`MAX_RESULTS`] or [`MAX_VISITED`].
    pub truncated: bool,
}

/// One line `grep` matched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineMatch {
    /// The file's virtual path.
    pub path: String,
    /// The line number, from 1.
    pub line: usize,
    /// The line (without its ending, cut to [`MAX_LINE_CHARS`]).
    pub text: String,
}

/// Compiles a glob pattern (`*` within a segment, `**` across segments, `?` one character,
/// `[...]` a class) into a regex over `/`-separated relative paths.
///
/// # Errors
/// [`FsError::Pattern`] if the pattern does not compile.
pub fn glob_regex(pattern: &str) -> Result<Regex, FsError> {
    let mut re = String::from("^");
    let mut chars = pattern.trim_start_matches('/').chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' if chars.peek() == Some(&'*') => {
                chars.next();
                if chars.peek() == Some(&'/') {
                    chars.next();
                    re.push_str("(?:.*/)?");
                } else {
                    re.push_str(".*");
                }
            }
            '*' => re.push_str("[^/]*"),
            '?' => re.push_str("[^/]"),
            '[' => {
                re.push('[');
                if chars.peek() == Some(&'!') {
                    chars.next();
                    re.push('^');
                }
                for c in chars.by_ref() {
                    if c == ']' {
                        break;
                    }
                    if matches!(c, '\\' | '[' | '&' | '~') {
                        re.push('\\');
                    }
                    re.push(c);
                }
                re.push(']');
            }
            c => re.push_str(&regex::escape(c.encode_utf8(&mut [0; 4]))),
        }
    }
    re.push('$');
    Regex::new(&re).map_err(|source| FsError::Pattern {
        pattern: pattern.to_owned(),
        source: Box::new(source),
    })
}

/// What a search does with each regular file: the capability directory, the file's path in
/// it, its virtual path, and the results so far.
type FileVisitor<'v, T> = dyn FnMut(&Dir, &Path, &str, &mut Found<T>) -> Result<(), FsError> + 'v;

/// A walk over one or more mounts: the budget and the results.
struct Walk<T> {
    visited: usize,
    found: Found<T>,
}

impl<T> Walk<T> {
    /// Calls `visit` for every regular file below `path` in `dir` (named `virtual_dir`),
    /// sorted, not descending into symlinks.
    fn files(
        &mut self,
        dir: &Dir,
        path: &Path,
        virtual_dir: &str,
        visit: &mut FileVisitor<'_, T>,
    ) -> Result<(), FsError> {
        let mut entries = list_dir(dir, path, virtual_dir)?;
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        for entry in entries {
            self.visited += 1;
            if self.visited > MAX_VISITED || self.found.items.len() >= MAX_RESULTS {
                self.found.truncated = true;
            }
            if self.found.truncated {
                return Ok(());
            }
            let name = entry.path.rsplit('/').next().unwrap_or_default();
            let child: PathBuf = path.join(name);
            match entry.entry_type {
                EntryType::Dir => self.files(dir, &child, &entry.path, visit)?,
                EntryType::File => visit(dir, &child, &entry.path, &mut self.found)?,
                EntryType::Symlink | EntryType::Other => {}
            }
        }
        Ok(())
    }

    /// Walks one mounted path: a file is visited, a directory walked.
    fn target(
        &mut self,
        target: &MountedPath<'_>,
        visit: &mut FileVisitor<'_, T>,
    ) -> Result<(), FsError> {
        let opened = SandboxFs::open(target)?;
        let here = if opened.path.as_os_str().is_empty() {
            Path::new(".")
        } else {
            &opened.path
        };
        let meta = opened
            .dir
            .symlink_metadata(here)
            .map_err(|e| FsError::io(&target.virtual_path, FsOp::Read, e))?;
        if meta.is_file() {
            visit(
                &opened.dir,
                &opened.path,
                &target.virtual_path,
                &mut self.found,
            )
        } else {
            self.files(&opened.dir, &opened.path, &target.virtual_path, visit)
        }
    }
}

impl SandboxFs {
    /// The files below `path` whose path relative to it matches the glob `pattern`.
    ///
    /// # Errors
    /// A [`PathError`](super::PathError), [`FsError::Pattern`], or an I/O error.
    pub fn glob(&self, path: &str, pattern: &str) -> Result<Found<String>, FsError> {
        let regex = glob_regex(pattern)?;
        let base = self.mounts().locate(path, Intent::Read)?;
        let base_len = match base {
            Located::Mounted(target) => target.virtual_path.len(),
            Located::Virtual { virtual_path, .. } => virtual_path.len(),
        } + 1;
        let found = self.walk(
            path,
            &mut |_, _, virtual_path, found: &mut Found<String>| {
                if regex.is_match(virtual_path.get(base_len..).unwrap_or_default()) {
                    found.items.push(virtual_path.to_owned());
                }
                Ok(())
            },
        )?;
        Ok(found)
    }

    /// The lines matching the regex `pattern` in the UTF-8 files below `path` (or in the file
    /// `path`); binary and larger files are skipped.
    ///
    /// # Errors
    /// A [`PathError`](super::PathError), [`FsError::Pattern`], or an I/O error.
    pub fn grep(&self, path: &str, pattern: &str) -> Result<Found<LineMatch>, FsError> {
        let regex = Regex::new(pattern).map_err(|source| FsError::Pattern {
            pattern: pattern.to_owned(),
            source: Box::new(source),
        })?;
        let found = self.walk(path, &mut |dir, file, virtual_path, found| {
            grep_file(&regex, dir, file, virtual_path, found)
        })?;
        Ok(found)
    }

    /// Walks `path`: a file, a directory in a mount, or a virtual directory (every mount
    /// below it, in order).
    fn walk<T>(&self, path: &str, visit: &mut FileVisitor<'_, T>) -> Result<Found<T>, FsError> {
        let mut walk = Walk {
            visited: 0,
            found: Found {
                items: Vec::new(),
                truncated: false,
            },
        };
        match self.mounts().locate(path, Intent::Read)? {
            Located::Mounted(target) => walk.target(&target, visit)?,
            Located::Virtual { virtual_path, .. } => {
                let below = format!("{}/", virtual_path.trim_end_matches('/'));
                let mut mounts: Vec<&Mount> = self
                    .mounts()
                    .mounts()
                    .iter()
                    .filter(|m| m.virtual_dir.starts_with(&below))
                    .collect();
                mounts.sort_by(|a, b| a.virtual_dir.cmp(&b.virtual_dir));
                for mount in mounts {
                    let target = MountedPath {
                        mount,
                        relative: PathBuf::new(),
                        virtual_path: mount.virtual_dir.clone(),
                    };
                    walk.target(&target, visit)?;
                }
            }
        }
        Ok(walk.found)
    }
}

fn grep_file(
    regex: &Regex,
    dir: &Dir,
    file: &Path,
    virtual_path: &str,
    found: &mut Found<LineMatch>,
) -> Result<(), FsError> {
    let meta = dir
        .symlink_metadata(file)
        .map_err(|e| FsError::io(virtual_path, FsOp::Read, e))?;
    if !meta.is_file() || meta.len() > MAX_GREP_FILE {
        return Ok(());
    }
    let bytes = dir
        .read(file)
        .map_err(|e| FsError::io(virtual_path, FsOp::Read, e))?;
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return Ok(());
    };
    for (n, line) in text.lines().enumerate() {
        if found.items.len() >= MAX_RESULTS {
            found.truncated = true;
            return Ok(());
        }
        if regex.is_match(line) {
            found.items.push(LineMatch {
                path: virtual_path.to_owned(),
                line: n + 1,
                text: line.chars().take(MAX_LINE_CHARS).collect(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_within_and_across_segments() -> Result<(), FsError> {
        let star = glob_regex("*.md")?;
        assert!(star.is_match("a.md"));
        assert!(!star.is_match("d/a.md"));
        let deep = glob_regex("**/*.md")?;
        assert!(deep.is_match("a.md") && deep.is_match("d/e/a.md"));
        assert!(!deep.is_match("a.txt"));
        let class = glob_regex("r[0-9]?.c[!x]v")?;
        assert!(class.is_match("r1a.csv"));
        assert!(!class.is_match("r1a.cxv"));
        assert!(glob_regex("a.b")?.is_match("a.b") && !glob_regex("a.b")?.is_match("axb"));
        Ok(())
    }
}
