//! Virtual paths: what a model names (`/mnt/user-data/...`, `/mnt/skills/...`) and the lexical
//! rules that decide which thread directory, if any, a path maps to.
//!
//! Resolution here is lexical and touches no file. Symlinks are the file operations' business:
//! they go through one capability directory per mount ([`cap_std::fs::Dir`]), which refuses,
//! at the moment of each operation, any symlink whose target leaves that directory.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};

use super::provider::ThreadDirs;

/// The virtual root of a thread's user data.
pub const USER_DATA: &str = "/mnt/user-data";
/// The thread's uploads, as a model sees them.
pub const UPLOADS: &str = "/mnt/user-data/uploads";
/// The thread's workspace, as a model sees it.
pub const WORKSPACE: &str = "/mnt/user-data/workspace";
/// The thread's outputs (what can be presented), as a model sees them.
pub const OUTPUTS: &str = "/mnt/user-data/outputs";
/// The read-only projection of the enabled skills.
pub const SKILLS: &str = "/mnt/skills";

/// The longest virtual path accepted, in bytes.
pub const MAX_PATH_LEN: usize = 4096;
/// The longest path segment accepted, in bytes (the usual file-name limit).
pub const MAX_NAME_LEN: usize = 255;

/// The rule a refused path broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PathRule {
    /// The path holds a NUL byte.
    Nul,
    /// The path has a `..` segment (backslashes count as separators).
    DotDot,
    /// The path is longer than [`MAX_PATH_LEN`] bytes.
    TooLong,
    /// A segment is longer than [`MAX_NAME_LEN`] bytes.
    NameTooLong,
    /// The path is not under a virtual root (a host path, a relative path, `/mnt/user-dataX`).
    OutsideRoots,
    /// The path is under `/mnt/skills` but not in an enabled skill.
    SkillNotEnabled,
    /// The operation writes, and the path is read-only (the skills projection, or a virtual
    /// directory such as `/mnt/user-data` itself).
    ReadOnly,
    /// A symlink on the path leads outside its root (checked when the operation ran).
    SymlinkEscape,
}

impl fmt::Display for PathRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PathRule::Nul => "it contains a NUL byte",
            PathRule::DotDot => "it contains a `..` segment",
            PathRule::TooLong => "it is too long",
            PathRule::NameTooLong => "a file name in it is too long",
            PathRule::OutsideRoots => {
                "it is outside /mnt/user-data/{uploads,workspace,outputs} and /mnt/skills"
            }
            PathRule::SkillNotEnabled => "it is not in an enabled skill",
            PathRule::ReadOnly => "it is read-only",
            PathRule::SymlinkEscape => "a symlink on it leads outside the sandbox",
        })
    }
}

/// A refused path: the path as given and the rule it broke. It never names a host path other
/// than one the caller supplied.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("access denied: {path:?}: {rule}")]
pub struct PathError {
    /// The path as given.
    pub path: String,
    /// The rule it broke.
    pub rule: PathRule,
}

impl PathError {
    pub(crate) fn new(path: &str, rule: PathRule) -> Self {
        PathError {
            path: path.to_owned(),
            rule,
        }
    }
}

/// What an operation will do with a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Intent {
    /// Read, list or search.
    Read,
    /// Create, change or replace.
    Write,
}

/// Whether a mount takes writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Reads and writes.
    ReadWrite,
    /// Reads only.
    ReadOnly,
}

/// One virtual directory backed by a host directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// The virtual directory, such as `/mnt/user-data/outputs`.
    pub virtual_dir: String,
    /// The host directory it maps to.
    pub host_dir: PathBuf,
    /// Whether it takes writes.
    pub access: Access,
    /// The directory whose capability every operation goes through: symlinks may not leave it.
    pub(crate) capability_dir: PathBuf,
    /// `host_dir` relative to `capability_dir`.
    pub(crate) within_capability: PathBuf,
}

/// A path that maps into a mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountedPath<'m> {
    /// The mount.
    pub mount: &'m Mount,
    /// The path relative to the mount's directory (empty for the mount itself).
    pub relative: PathBuf,
    /// The virtual path, normalised (no empty or `.` segments, no trailing `/`).
    pub virtual_path: String,
}

impl MountedPath<'_> {
    /// The path relative to the capability directory the operation goes through.
    pub(crate) fn in_capability(&self) -> PathBuf {
        self.mount.within_capability.join(&self.relative)
    }
}

/// Where a valid virtual path leads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Located<'m> {
    /// Into a mount.
    Mounted(MountedPath<'m>),
    /// To a virtual directory above mounts (`/mnt`, `/mnt/user-data`, `/mnt/skills/public`):
    /// its normalised path and the names of its children.
    Virtual {
        /// The normalised virtual path.
        virtual_path: String,
        /// The children's names, sorted.
        children: Vec<String>,
    },
}

/// The mounts of one thread: its three user-data roots and its enabled skills.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountTable {
    /// Longest virtual directory first.
    mounts: Vec<Mount>,
    user_data_host: PathBuf,
}

/// Splits a virtual path into its segments, applying the lexical rules.
fn segments(path: &str) -> Result<Vec<&str>, PathError> {
    let refuse = |rule| Err(PathError::new(path, rule));
    if path.contains('\0') {
        return refuse(PathRule::Nul);
    }
    if path.len() > MAX_PATH_LEN {
        return refuse(PathRule::TooLong);
    }
    let mut out = Vec::new();
    for segment in path.split(['/', '\\']) {
        match segment {
            "" | "." => {}
            ".." => return refuse(PathRule::DotDot),
            s if s.len() > MAX_NAME_LEN => return refuse(PathRule::NameTooLong),
            s => out.push(s),
        }
    }
    if !path.starts_with(['/', '\\']) {
        return refuse(PathRule::OutsideRoots);
    }
    Ok(out)
}

fn split_virtual(dir: &str) -> impl Iterator<Item = &str> {
    dir.split('/').filter(|s| !s.is_empty())
}

fn is_under(segments: &[&str], dir: &str) -> bool {
    split_virtual(dir)
        .enumerate()
        .all(|(n, want)| segments.get(n) == Some(&want))
}

impl MountTable {
    /// The mounts of a thread: its user-data roots (read-write) and `skills`, a map from each
    /// enabled skill's virtual directory (`/mnt/skills/<category>/<skill>`) to its host
    /// directory (read-only).
    ///
    /// # Errors
    /// A [`PathError`] naming a skill directory that is not a clean path of at least two
    /// segments under `/mnt/skills`.
    pub fn new(dirs: &ThreadDirs, skills: &BTreeMap<String, PathBuf>) -> Result<Self, PathError> {
        let mut mounts = Vec::with_capacity(3 + skills.len());
        for (virtual_dir, host_dir, name) in [
            (UPLOADS, &dirs.uploads, "uploads"),
            (WORKSPACE, &dirs.workspace, "workspace"),
            (OUTPUTS, &dirs.outputs, "outputs"),
        ] {
            mounts.push(Mount {
                virtual_dir: virtual_dir.to_owned(),
                host_dir: host_dir.clone(),
                access: Access::ReadWrite,
                capability_dir: dirs.user_data.clone(),
                within_capability: PathBuf::from(name),
            });
        }
        for (virtual_dir, host_dir) in skills {
            let parts = segments(virtual_dir)?;
            let normal = format!("/{}", parts.join("/"));
            if !is_under(&parts, SKILLS) || parts.len() < 4 || normal != *virtual_dir {
                return Err(PathError::new(virtual_dir, PathRule::OutsideRoots));
            }
            mounts.push(Mount {
                virtual_dir: normal,
                host_dir: host_dir.clone(),
                access: Access::ReadOnly,
                capability_dir: host_dir.clone(),
                within_capability: PathBuf::new(),
            });
        }
        mounts.sort_by_key(|m| std::cmp::Reverse(m.virtual_dir.len()));
        Ok(MountTable {
            mounts,
            user_data_host: dirs.user_data.clone(),
        })
    }

    /// The mounts, longest virtual directory first.
    pub fn mounts(&self) -> &[Mount] {
        &self.mounts
    }

    /// Where `path` leads for an operation with `intent`, by the lexical rules: longest mount
    /// first, on segment boundaries.
    ///
    /// # Errors
    /// A [`PathError`] naming the path and the rule it broke.
    pub fn locate(&self, path: &str, intent: Intent) -> Result<Located<'_>, PathError> {
        let parts = segments(path)?;
        let virtual_path = format!("/{}", parts.join("/"));
        if let Some(mount) = self
            .mounts
            .iter()
            .find(|m| is_under(&parts, &m.virtual_dir))
        {
            if intent == Intent::Write && mount.access == Access::ReadOnly {
                return Err(PathError::new(path, PathRule::ReadOnly));
            }
            let depth = split_virtual(&mount.virtual_dir).count();
            let relative = parts.get(depth..).unwrap_or_default().iter().collect();
            return Ok(Located::Mounted(MountedPath {
                mount,
                relative,
                virtual_path,
            }));
        }
        let always_virtual = matches!(virtual_path.as_str(), "/mnt" | USER_DATA | SKILLS);
        let mut children: Vec<String> = self
            .mounts
            .iter()
            .filter_map(|m| {
                let mut rest = split_virtual(&m.virtual_dir);
                let above = parts.iter().all(|p| rest.next() == Some(p));
                above.then(|| rest.next().map(str::to_owned)).flatten()
            })
            .collect();
        if children.is_empty() && !always_virtual {
            let rule = if is_under(&parts, SKILLS) {
                PathRule::SkillNotEnabled
            } else {
                PathRule::OutsideRoots
            };
            return Err(PathError::new(path, rule));
        }
        if virtual_path == "/mnt" && !children.iter().any(|c| c == "skills") {
            children.push("skills".to_owned());
        }
        if intent == Intent::Write {
            return Err(PathError::new(path, PathRule::ReadOnly));
        }
        children.sort();
        children.dedup();
        Ok(Located::Virtual {
            virtual_path,
            children,
        })
    }

    /// Like [`locate`](Self::locate), for operations that need a mount (not a virtual
    /// directory above mounts).
    ///
    /// # Errors
    /// A [`PathError`]; a virtual directory is [`PathRule::ReadOnly`] for writes and
    /// [`PathRule::OutsideRoots`] otherwise.
    pub fn mounted(&self, path: &str, intent: Intent) -> Result<MountedPath<'_>, PathError> {
        match self.locate(path, intent)? {
            Located::Mounted(m) => Ok(m),
            Located::Virtual { .. } => Err(PathError::new(path, PathRule::OutsideRoots)),
        }
    }

    /// The virtual path of a host path inside one of the mounts (for tool output), or `None`
    /// for any other host path. Purely lexical: a host path with `..` maps to nothing.
    pub fn to_virtual(&self, host: &Path) -> Option<String> {
        if host.components().any(|c| matches!(c, Component::ParentDir)) {
            return None;
        }
        let mut bases: Vec<(&Path, &str)> = self
            .mounts
            .iter()
            .map(|m| (m.host_dir.as_path(), m.virtual_dir.as_str()))
            .collect();
        bases.push((&self.user_data_host, USER_DATA));
        bases.sort_by_key(|(h, _)| std::cmp::Reverse(h.as_os_str().len()));
        bases.into_iter().find_map(|(base, virtual_dir)| {
            let rest = host.strip_prefix(base).ok()?;
            let mut out = virtual_dir.to_owned();
            for part in rest.components() {
                out.push('/');
                out.push_str(part.as_os_str().to_str()?);
            }
            Some(out)
        })
    }

    /// `text` with every host directory of the mounts replaced by its virtual directory
    /// (longest first), so tool output never shows a host path of the sandbox.
    pub fn mask_host_paths(&self, text: &str) -> String {
        let mut bases: Vec<(String, &str)> = self
            .mounts
            .iter()
            .filter_map(|m| Some((m.host_dir.to_str()?.to_owned(), m.virtual_dir.as_str())))
            .collect();
        if let Some(user_data) = self.user_data_host.to_str() {
            bases.push((user_data.to_owned(), USER_DATA));
        }
        bases.sort_by_key(|(h, _)| std::cmp::Reverse(h.len()));
        let mut out = text.to_owned();
        for (host, virtual_dir) in bases.iter().filter(|(h, _)| !h.is_empty()) {
            out = out.replace(host.as_str(), virtual_dir);
        }
        out
    }
}

/// Whether `err` is cap-std's refusal of a path that led outside its directory (a symlink
/// escape), as opposed to the operating system's own permission error.
pub(crate) fn is_escape(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::PermissionDenied && err.raw_os_error().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn table() -> Result<MountTable, PathError> {
        let dirs = ThreadDirs {
            user_data: "/h/t/user-data".into(),
            workspace: "/h/t/user-data/workspace".into(),
            uploads: "/h/t/user-data/uploads".into(),
            outputs: "/h/t/user-data/outputs".into(),
        };
        let skills = BTreeMap::from([("/mnt/skills/public/pdf".to_owned(), "/s/pdf".into())]);
        MountTable::new(&dirs, &skills)
    }

    fn rule(t: &MountTable, path: &str, intent: Intent) -> Option<PathRule> {
        t.locate(path, intent).err().map(|e| e.rule)
    }

    #[test]
    fn longest_prefix_on_segment_boundaries() -> TestResult {
        let t = table()?;
        let m = t.mounted("/mnt/user-data/outputs/a/b.md", Intent::Write)?;
        assert_eq!(m.mount.virtual_dir, OUTPUTS);
        assert_eq!(m.relative, Path::new("a/b.md"));
        assert_eq!(m.in_capability(), Path::new("outputs/a/b.md"));
        assert_eq!(
            rule(&t, "/mnt/user-dataX/outputs", Intent::Read),
            Some(PathRule::OutsideRoots)
        );
        assert_eq!(
            rule(&t, "/mnt/user-data/outputsX", Intent::Read),
            Some(PathRule::OutsideRoots)
        );
        Ok(())
    }

    #[test]
    fn lexical_rules_name_the_path() {
        let Ok(t) = table() else { return };
        let cases = [
            ("/mnt/user-data/workspace/../outputs", PathRule::DotDot),
            ("/mnt/user-data/workspace\\..\\..", PathRule::DotDot),
            ("/mnt/user-data/workspace/a\0b", PathRule::Nul),
            ("/etc/passwd", PathRule::OutsideRoots),
            ("mnt/user-data/workspace", PathRule::OutsideRoots),
            ("/mnt/skills/public/other/x", PathRule::SkillNotEnabled),
        ];
        for (path, want) in cases {
            let err = t.locate(path, Intent::Read).err();
            assert_eq!(err.as_ref().map(|e| e.rule), Some(want), "{path:?}");
            assert_eq!(err.map(|e| e.path), Some(path.to_owned()));
        }
    }

    #[test]
    fn skills_are_read_only_and_virtual_dirs_list_children() -> TestResult {
        let t = table()?;
        t.mounted("/mnt/skills/public/pdf/SKILL.md", Intent::Read)?;
        assert_eq!(
            rule(&t, "/mnt/skills/public/pdf/x", Intent::Write),
            Some(PathRule::ReadOnly)
        );
        let Located::Virtual { children, .. } = t.locate("/mnt/user-data/", Intent::Read)? else {
            return Err("not virtual".into());
        };
        assert_eq!(children, ["outputs", "uploads", "workspace"]);
        let Located::Virtual { children, .. } = t.locate("/mnt", Intent::Read)? else {
            return Err("not virtual".into());
        };
        assert_eq!(children, ["skills", "user-data"]);
        assert_eq!(rule(&t, USER_DATA, Intent::Write), Some(PathRule::ReadOnly));
        Ok(())
    }

    #[test]
    fn host_paths_map_back_to_virtual_ones() -> TestResult {
        let t = table()?;
        let host = Path::new("/h/t/user-data/outputs/r.md");
        assert_eq!(
            t.to_virtual(host).as_deref(),
            Some("/mnt/user-data/outputs/r.md")
        );
        assert_eq!(
            t.to_virtual(Path::new("/h/t/user-data")).as_deref(),
            Some(USER_DATA)
        );
        assert_eq!(
            t.to_virtual(Path::new("/h/t/user-data/outputs/../../x")),
            None
        );
        assert_eq!(t.to_virtual(Path::new("/etc")), None);
        let masked = t.mask_host_paths("wrote /h/t/user-data/outputs/r.md and /s/pdf/a");
        assert_eq!(
            masked,
            "wrote /mnt/user-data/outputs/r.md and /mnt/skills/public/pdf/a"
        );
        Ok(())
    }

    #[test]
    fn a_skill_dir_must_be_clean_and_under_the_skills_root() {
        let dirs = ThreadDirs {
            user_data: "/u".into(),
            workspace: "/u/w".into(),
            uploads: "/u/up".into(),
            outputs: "/u/o".into(),
        };
        for bad in [
            "/mnt/skills/pdf",
            "/mnt/other/a/b",
            "/mnt/skills/public/../x",
            "/mnt/skills//public/pdf",
        ] {
            let skills = BTreeMap::from([(bad.to_owned(), PathBuf::from("/s"))]);
            assert!(MountTable::new(&dirs, &skills).is_err(), "{bad}");
        }
    }
}
