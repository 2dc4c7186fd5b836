//! A snapshot of a sandbox root (outputs, workspace) before and after a run: each regular
//! file's size, mtime and blake3 hash, and each symlink as a symlink.
//!
//! Cheap on re-run: given the previous snapshot, a file whose size and mtime are unchanged keeps
//! its previous hash without being read. The trade-off, chosen on purpose: a rewrite that keeps
//! both the size and the mtime (a tool that restores the mtime, or two writes within the file
//! system's timestamp granularity) is not seen as a change.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, DirEntry};
use serde::{Deserialize, Serialize};

/// The directory names a snapshot skips at any depth (tool caches, build products, version
/// control), exactly as the settlement rules list them.
pub const EXCLUDED_DIRS: [&str; 13] = [
    ".git",
    ".hg",
    ".svn",
    ".cache",
    ".mcp",
    ".next",
    ".venv",
    ".browser-frames",
    ".tool-results",
    "__pycache__",
    "build",
    "dist",
    "node_modules",
];

/// Which directory names a snapshot skips: [`EXCLUDED_DIRS`] plus any configured ones (such as
/// the tool-output storage directory).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exclusions {
    names: Vec<String>,
}

impl Default for Exclusions {
    fn default() -> Self {
        Exclusions {
            names: EXCLUDED_DIRS.iter().map(|s| (*s).to_owned()).collect(),
        }
    }
}

impl Exclusions {
    /// [`EXCLUDED_DIRS`] and `name`.
    pub fn with(mut self, name: impl Into<String>) -> Self {
        self.names.push(name.into());
        self
    }

    /// Whether a directory called `name` is skipped.
    pub fn excludes(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
    }
}

/// A file's modification time, as seconds and nanoseconds since the Unix epoch (negative
/// seconds before it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Mtime {
    /// Whole seconds since the epoch.
    pub secs: i64,
    /// Nanoseconds within the second.
    pub nanos: u32,
}

impl From<SystemTime> for Mtime {
    fn from(t: SystemTime) -> Self {
        let signed = |d: Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
        match t.duration_since(UNIX_EPOCH) {
            Ok(d) => Mtime {
                secs: signed(d),
                nanos: d.subsec_nanos(),
            },
            Err(e) => {
                let d = e.duration();
                let (secs, nanos) = match d.subsec_nanos() {
                    0 => (-signed(d), 0),
                    n => (-signed(d) - 1, 1_000_000_000 - n),
                };
                Mtime { secs, nanos }
            }
        }
    }
}

/// What a snapshot records for one regular file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileFacts {
    /// Its size in bytes.
    pub size: u64,
    /// Its modification time.
    pub mtime: Mtime,
    /// The blake3 hash of its contents.
    pub hash: [u8; 32],
}

/// One entry of a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotEntry {
    /// A regular file.
    File(FileFacts),
    /// A symlink (never followed, never counted as produced).
    Symlink,
}

/// The files of one root, by path relative to it (`/`-separated). Two snapshots are equal when
/// their entries are (how many files a capture hashed is not part of what it saw).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Snapshot {
    entries: BTreeMap<String, SnapshotEntry>,
    /// How many files this capture read and hashed (the rest reused a previous hash).
    #[serde(skip)]
    hashed: usize,
}

/// A snapshot that could not be taken.
#[derive(Debug, thiserror::Error)]
#[error("snapshot of {path:?}: {source}")]
pub struct SnapshotError {
    /// The path relative to the root (`""` for the root itself).
    pub path: String,
    /// The file-system error.
    pub source: io::Error,
}

impl PartialEq for Snapshot {
    fn eq(&self, other: &Self) -> bool {
        self.entries == other.entries
    }
}

impl Eq for Snapshot {}

impl Snapshot {
    /// The entries, by relative path.
    pub fn entries(&self) -> &BTreeMap<String, SnapshotEntry> {
        &self.entries
    }

    /// The entry at a relative path.
    pub fn get(&self, path: &str) -> Option<&SnapshotEntry> {
        self.entries.get(path)
    }

    /// How many files this capture read and hashed; the others kept the hash of `previous`
    /// because their size and mtime were unchanged.
    pub fn hashed(&self) -> usize {
        self.hashed
    }

    /// Captures `root` (a missing root is an empty snapshot), skipping `exclusions` and
    /// reusing the hash of every file of `previous` whose size and mtime are unchanged.
    ///
    /// Walks through a capability on the root: no symlink is followed, so the snapshot never
    /// reads a file outside it.
    ///
    /// # Errors
    /// A [`SnapshotError`] naming the relative path that could not be listed or read.
    pub fn capture(
        root: &Path,
        exclusions: &Exclusions,
        previous: Option<&Snapshot>,
    ) -> Result<Snapshot, SnapshotError> {
        let dir = match Dir::open_ambient_dir(root, ambient_authority()) {
            Ok(dir) => dir,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Snapshot::default()),
            Err(source) => {
                return Err(SnapshotError {
                    path: String::new(),
                    source,
                })
            }
        };
        let mut capture = Capture {
            exclusions,
            previous,
            snapshot: Snapshot::default(),
        };
        capture.dir(&dir, "")?;
        Ok(capture.snapshot)
    }
}

struct Capture<'a> {
    exclusions: &'a Exclusions,
    previous: Option<&'a Snapshot>,
    snapshot: Snapshot,
}

impl Capture<'_> {
    fn dir(&mut self, dir: &Dir, prefix: &str) -> Result<(), SnapshotError> {
        let fail = |path: &str| {
            let path = path.to_owned();
            move |source| SnapshotError { path, source }
        };
        for entry in dir.entries().map_err(fail(prefix))? {
            let entry = entry.map_err(fail(prefix))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let path = if prefix.is_empty() {
                name.to_string()
            } else {
                format!("{prefix}/{name}")
            };
            let file_type = entry.file_type().map_err(fail(&path))?;
            if file_type.is_symlink() {
                self.snapshot.entries.insert(path, SnapshotEntry::Symlink);
            } else if file_type.is_dir() {
                if !self.exclusions.excludes(&name) {
                    let sub = entry.open_dir().map_err(fail(&path))?;
                    self.dir(&sub, &path)?;
                }
            } else if file_type.is_file() {
                let facts = self.file(&entry, &path).map_err(fail(&path))?;
                self.snapshot
                    .entries
                    .insert(path, SnapshotEntry::File(facts));
            }
        }
        Ok(())
    }

    fn file(&mut self, entry: &DirEntry, path: &str) -> io::Result<FileFacts> {
        let meta = entry.metadata()?;
        let size = meta.len();
        let mtime = Mtime::from(meta.modified()?.into_std());
        if let Some(SnapshotEntry::File(old)) = self.previous.and_then(|p| p.get(path)) {
            if old.size == size && old.mtime == mtime {
                return Ok(*old);
            }
        }
        let mut hasher = blake3::Hasher::new();
        io::copy(&mut entry.open()?, &mut hasher)?;
        self.snapshot.hashed += 1;
        Ok(FileFacts {
            size,
            mtime,
            hash: *hasher.finalize().as_bytes(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtimes_before_the_epoch_count_down() {
        let before = UNIX_EPOCH - Duration::new(1, 250_000_000);
        assert_eq!(
            Mtime::from(before),
            Mtime {
                secs: -2,
                nanos: 750_000_000
            }
        );
        let after = UNIX_EPOCH + Duration::new(5, 7);
        assert_eq!(Mtime::from(after), Mtime { secs: 5, nanos: 7 });
    }

    #[test]
    fn exclusions_hold_the_listed_names_and_configured_ones() {
        let e = Exclusions::default().with(".outputs-store");
        assert!(e.excludes("node_modules") && e.excludes(".tool-results"));
        assert!(e.excludes(".outputs-store"));
        assert!(!e.excludes("reports") && !e.excludes("Build"));
    }
}
