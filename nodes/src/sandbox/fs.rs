//! The file operations sandbox tools call (read, write, replace, list), over virtual paths and
//! through one capability directory per mount, so no symlink can carry an operation outside it.
//!
//! Every function is blocking; a tool runs it on a blocking thread. What they return names
//! virtual paths only.

use std::io;
use std::path::Path;

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use super::path::{is_escape, Intent, Located, MountTable, MountedPath, PathError, PathRule};

/// `read` refuses files larger than this, in bytes.
pub const MAX_READ_BYTES: u64 = 16 * 1024 * 1024;

/// What a file operation was doing when the file system failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsOp {
    /// Opening a mount's directory.
    OpenRoot,
    /// Reading.
    Read,
    /// Writing.
    Write,
    /// Creating parent directories.
    CreateDirs,
    /// Listing a directory.
    List,
}

impl std::fmt::Display for FsOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FsOp::OpenRoot => "opening the root",
            FsOp::Read => "reading",
            FsOp::Write => "writing",
            FsOp::CreateDirs => "creating directories",
            FsOp::List => "listing",
        })
    }
}

/// A file operation that failed. Paths are virtual.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FsError {
    /// The path was refused.
    #[error(transparent)]
    Path(#[from] PathError),
    /// Nothing is at the path.
    #[error("{path}: no such file or directory")]
    NotFound {
        /// The virtual path.
        path: String,
    },
    /// The path is a directory where a file was needed.
    #[error("{path}: is a directory")]
    IsADirectory {
        /// The virtual path.
        path: String,
    },
    /// The path is a file where a directory was needed.
    #[error("{path}: not a directory")]
    NotADirectory {
        /// The virtual path.
        path: String,
    },
    /// `read`: the path is not a regular file (a FIFO, a device) or is larger than
    /// [`MAX_READ_BYTES`].
    #[error("{path}: not a regular file of at most {MAX_READ_BYTES} bytes ({size} bytes)")]
    NotReadable {
        /// The virtual path.
        path: String,
        /// Its size.
        size: u64,
    },
    /// The file is not UTF-8 text.
    #[error("{path}: not UTF-8 text")]
    NotText {
        /// The virtual path.
        path: String,
    },
    /// `str_replace`: the old text does not occur.
    #[error("{path}: the text to replace was not found")]
    NoMatch {
        /// The virtual path.
        path: String,
    },
    /// `str_replace`: the old text occurs more than once.
    #[error("{path}: the text to replace occurs {count} times; it must occur exactly once")]
    SeveralMatches {
        /// The virtual path.
        path: String,
        /// How often it occurs.
        count: usize,
    },
    /// A glob or regex pattern that does not compile.
    #[error("invalid pattern {pattern:?}: {source}")]
    Pattern {
        /// The pattern.
        pattern: String,
        /// Why.
        source: Box<regex::Error>,
    },
    /// Any other file-system error.
    #[error("{path}: {op} failed: {source}")]
    Io {
        /// The virtual path.
        path: String,
        /// What was being done.
        op: FsOp,
        /// The error (the operating system's, which names no path).
        source: io::Error,
    },
}

impl FsError {
    /// The error for `source` while doing `op` on the virtual `path`.
    pub(crate) fn io(path: &str, op: FsOp, source: io::Error) -> Self {
        let path = path.to_owned();
        if is_escape(&source) {
            return FsError::Path(PathError {
                path,
                rule: PathRule::SymlinkEscape,
            });
        }
        match source.kind() {
            io::ErrorKind::NotFound => FsError::NotFound { path },
            io::ErrorKind::IsADirectory => FsError::IsADirectory { path },
            io::ErrorKind::NotADirectory => FsError::NotADirectory { path },
            _ => FsError::Io { path, op, source },
        }
    }
}

/// Which lines `read` returns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LineWindow {
    /// Lines skipped from the start.
    pub offset: usize,
    /// At most this many lines (all when `None`).
    pub limit: Option<usize>,
}

/// One entry of a directory listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its virtual path.
    pub path: String,
    /// What it is.
    pub entry_type: EntryType,
}

/// What a listed entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryType {
    /// A regular file.
    File,
    /// A directory (or a virtual directory).
    Dir,
    /// A symlink (not followed by listings).
    Symlink,
    /// Anything else (a socket, a device).
    Other,
}

impl EntryType {
    pub(crate) fn of(file_type: cap_std::fs::FileType) -> Self {
        if file_type.is_symlink() {
            EntryType::Symlink
        } else if file_type.is_dir() {
            EntryType::Dir
        } else if file_type.is_file() {
            EntryType::File
        } else {
            EntryType::Other
        }
    }
}

/// A thread's files as a model may touch them: its [`MountTable`], each operation going through
/// the mount's capability directory, opened for that operation.
#[derive(Clone, Debug)]
pub struct SandboxFs {
    mounts: MountTable,
}

/// The capability directory of a mount and the path inside it.
pub(crate) struct Opened {
    pub(crate) dir: Dir,
    pub(crate) path: std::path::PathBuf,
}

impl SandboxFs {
    /// File operations over `mounts`.
    pub fn new(mounts: MountTable) -> Self {
        SandboxFs { mounts }
    }

    /// The mounts.
    pub fn mounts(&self) -> &MountTable {
        &self.mounts
    }

    /// Opens the capability directory `target` goes through.
    pub(crate) fn open(target: &MountedPath<'_>) -> Result<Opened, FsError> {
        let dir = Dir::open_ambient_dir(&target.mount.capability_dir, ambient_authority())
            .map_err(|e| FsError::io(&target.virtual_path, FsOp::OpenRoot, e))?;
        Ok(Opened {
            dir,
            path: target.in_capability(),
        })
    }

    /// Checks `path` for an operation with `intent` now, symlinks included, and returns its
    /// normalised virtual path. A check is advice: the operation itself checks again, so a
    /// symlink swapped in after this check still cannot carry it outside.
    ///
    /// # Errors
    /// A [`PathError`] (as [`FsError::Path`]) for a refused path or a symlink that leaves its
    /// root; [`FsError::NotFound`] if a parent of the path does not exist.
    pub fn check(&self, path: &str, intent: Intent) -> Result<String, FsError> {
        let target = match self.mounts.locate(path, intent)? {
            Located::Virtual { virtual_path, .. } => return Ok(virtual_path),
            Located::Mounted(target) => target,
        };
        let opened = Self::open(&target)?;
        let probe = match (opened.path.parent(), opened.dir.exists(&opened.path)) {
            (Some(parent), false) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ if opened.path.as_os_str().is_empty() => Path::new(".").to_path_buf(),
            _ => opened.path.clone(),
        };
        opened
            .dir
            .canonicalize(&probe)
            .map_err(|e| FsError::io(path, FsOp::Read, e))?;
        Ok(target.virtual_path)
    }

    /// The text of a file, the lines `window` selects (each with its line ending).
    ///
    /// # Errors
    /// A [`PathError`], [`FsError::NotFound`], [`FsError::IsADirectory`],
    /// [`FsError::NotReadable`], [`FsError::NotText`], or an I/O error.
    pub fn read(&self, path: &str, window: LineWindow) -> Result<String, FsError> {
        let target = match self.mounts.locate(path, Intent::Read)? {
            Located::Mounted(target) => target,
            Located::Virtual { virtual_path, .. } => {
                return Err(FsError::IsADirectory { path: virtual_path })
            }
        };
        let opened = Self::open(&target)?;
        let fail = |e| FsError::io(&target.virtual_path, FsOp::Read, e);
        // Only regular files are read: a FIFO or a device would block or never end.
        let meta = opened.dir.metadata(&opened.path).map_err(fail)?;
        if meta.is_dir() {
            return Err(FsError::IsADirectory {
                path: target.virtual_path,
            });
        }
        if !meta.is_file() || meta.len() > MAX_READ_BYTES {
            return Err(FsError::NotReadable {
                path: target.virtual_path,
                size: meta.len(),
            });
        }
        let bytes = opened.dir.read(&opened.path).map_err(fail)?;
        let text = String::from_utf8(bytes).map_err(|_| FsError::NotText {
            path: target.virtual_path.clone(),
        })?;
        if window == LineWindow::default() {
            return Ok(text);
        }
        let lines = text.split_inclusive('\n').skip(window.offset);
        Ok(lines.take(window.limit.unwrap_or(usize::MAX)).collect())
    }

    /// Writes `contents` to a file (created or replaced), creating its parent directories.
    ///
    /// # Errors
    /// A [`PathError`] (a read-only root is [`PathRule::ReadOnly`]), [`FsError::IsADirectory`]
    /// for a mount's own directory, or an I/O error.
    pub fn write(&self, path: &str, contents: &str) -> Result<(), FsError> {
        let target = self.mounts.mounted(path, Intent::Write)?;
        if target.relative.as_os_str().is_empty() {
            return Err(FsError::IsADirectory {
                path: target.virtual_path,
            });
        }
        let opened = Self::open(&target)?;
        if let Some(parent) = opened.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            // An existing entry that is not a directory (a symlink leading out, a file) is left
            // for the write to report: it names the real reason.
            match opened.dir.create_dir_all(parent) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                    return Err(FsError::io(&target.virtual_path, FsOp::CreateDirs, e));
                }
                _ => {}
            }
        }
        opened
            .dir
            .write(&opened.path, contents)
            .map_err(|e| FsError::io(&target.virtual_path, FsOp::Write, e))
    }

    /// Replaces the one occurrence of `old` in a file with `new`.
    ///
    /// # Errors
    /// [`FsError::NoMatch`] if `old` does not occur, [`FsError::SeveralMatches`] if it occurs
    /// more than once (occurrences counted without overlap), and every error of
    /// [`read`](Self::read) and [`write`](Self::write).
    pub fn str_replace(&self, path: &str, old: &str, new: &str) -> Result<(), FsError> {
        let target = self.mounts.mounted(path, Intent::Write)?;
        let text = self.read(path, LineWindow::default())?;
        match text.matches(old).count() {
            0 => Err(FsError::NoMatch {
                path: target.virtual_path,
            }),
            1 => self.write(path, &text.replacen(old, new, 1)),
            count => Err(FsError::SeveralMatches {
                path: target.virtual_path,
                count,
            }),
        }
    }

    /// The entries of a directory (symlinks listed, not followed), sorted by path.
    ///
    /// # Errors
    /// A [`PathError`], [`FsError::NotFound`], [`FsError::NotADirectory`], or an I/O error.
    pub fn ls(&self, path: &str) -> Result<Vec<Entry>, FsError> {
        let target = match self.mounts.locate(path, Intent::Read)? {
            Located::Mounted(target) => target,
            Located::Virtual {
                virtual_path,
                children,
            } => {
                let base = virtual_path.trim_end_matches('/');
                return Ok(children
                    .into_iter()
                    .map(|name| Entry {
                        path: format!("{base}/{name}"),
                        entry_type: EntryType::Dir,
                    })
                    .collect());
            }
        };
        let opened = Self::open(&target)?;
        let mut out = list_dir(&opened.dir, &opened.path, &target.virtual_path)?;
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }
}

/// The entries of `path` inside `dir`, named under `virtual_dir`.
pub(crate) fn list_dir(dir: &Dir, path: &Path, virtual_dir: &str) -> Result<Vec<Entry>, FsError> {
    let fail = |e| FsError::io(virtual_dir, FsOp::List, e);
    let entries = if path.as_os_str().is_empty() {
        dir.entries()
    } else {
        dir.read_dir(path)
    }
    .map_err(fail)?;
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(fail)?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let entry_type = EntryType::of(entry.file_type().map_err(fail)?);
        out.push(Entry {
            path: format!("{virtual_dir}/{name}"),
            entry_type,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capability_refusal_is_a_symlink_escape_and_an_os_error_is_not() {
        let escape = io::Error::new(
            io::ErrorKind::PermissionDenied,
            "a path led outside of the filesystem",
        );
        let err = FsError::io("/mnt/user-data/workspace/l", FsOp::Write, escape);
        assert!(matches!(
            err,
            FsError::Path(PathError { rule: PathRule::SymlinkEscape, ref path })
                if path == "/mnt/user-data/workspace/l"
        ));
        let denied = io::Error::from_raw_os_error(13);
        let err = FsError::io("/mnt/user-data/workspace/f", FsOp::Write, denied);
        assert!(matches!(
            err,
            FsError::Io {
                op: FsOp::Write,
                ..
            }
        ));
        let missing = io::Error::from(io::ErrorKind::NotFound);
        let err = FsError::io("/mnt/user-data/uploads/x", FsOp::Read, missing);
        assert!(matches!(err, FsError::NotFound { .. }));
        assert_eq!(
            err.to_string(),
            "/mnt/user-data/uploads/x: no such file or directory"
        );
    }
}
