//! `present_files` path normalisation: every presented path becomes
//! `/mnt/user-data/outputs/<rel>`, or the whole call is refused.
//!
//! Normalisation is lexical and reads no file: a path that does not exist yet is fine. Choices
//! where the reference behaviour is an accident: a `..` segment is refused rather than
//! resolved (resolving it lexically is unsound under symlinks), `~` is not expanded (a model
//! never knows the host's home), empty and `.` segments and a trailing `/` are dropped, so the
//! outputs root itself presents as `/mnt/user-data/outputs`.

use std::fmt;
use std::path::{Component, Path};

use crate::sandbox::OUTPUTS;

/// How every `present_files` error text starts.
pub const PRESENT_ERROR_PREFIX: &str =
    "Error: Only files in /mnt/user-data/outputs can be presented";

/// Why a presented path was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PresentRule {
    /// The path is not inside the thread's outputs (virtual or host).
    OutsideOutputs,
    /// The path has a `..` segment.
    DotDot,
    /// The path holds a NUL byte.
    Nul,
}

impl fmt::Display for PresentRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PresentRule::OutsideOutputs => "outside the outputs",
            PresentRule::DotDot => "a `..` segment",
            PresentRule::Nul => "a NUL byte",
        })
    }
}

/// A presented path that is not in the thread's outputs. Its text is the tool message the
/// model gets, and it starts with [`PRESENT_ERROR_PREFIX`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{PRESENT_ERROR_PREFIX}: {path} ({rule})")]
pub struct PresentError {
    /// The path as given.
    pub path: String,
    /// The rule it broke.
    pub rule: PresentRule,
}

/// The segments of a virtual path under `/mnt/user-data` (leading slashes ignored, on segment
/// boundaries), or `None` for any other path.
fn virtual_segments(path: &str) -> Option<Vec<&str>> {
    let rest = path.trim_start_matches('/').strip_prefix("mnt/user-data")?;
    if !(rest.is_empty() || rest.starts_with('/')) {
        return None;
    }
    Some(
        path.split('/')
            .filter(|s| !s.is_empty() && *s != ".")
            .collect(),
    )
}

fn normalize_one(path: &str, outputs_host: &Path) -> Result<String, PresentError> {
    let refuse = |rule| PresentError {
        path: path.to_owned(),
        rule,
    };
    if path.contains('\0') {
        return Err(refuse(PresentRule::Nul));
    }
    let rest: Vec<&str> = if let Some(segments) = virtual_segments(path) {
        if segments.contains(&"..") {
            return Err(refuse(PresentRule::DotDot));
        }
        match segments.as_slice() {
            ["mnt", "user-data", "outputs", rest @ ..] => rest.to_vec(),
            _ => return Err(refuse(PresentRule::OutsideOutputs)),
        }
    } else {
        let host = Path::new(path);
        if host.components().any(|c| c == Component::ParentDir) {
            return Err(refuse(PresentRule::DotDot));
        }
        let inside = host
            .is_absolute()
            .then(|| host.strip_prefix(outputs_host).ok())
            .flatten()
            .ok_or_else(|| refuse(PresentRule::OutsideOutputs))?;
        inside
            .components()
            .map(|c| c.as_os_str().to_str())
            .collect::<Option<Vec<&str>>>()
            .ok_or_else(|| refuse(PresentRule::OutsideOutputs))?
    };
    let mut out = OUTPUTS.to_owned();
    for segment in rest {
        out.push('/');
        out.push_str(segment);
    }
    Ok(out)
}

/// Normalises every path of a `present_files` call to `/mnt/user-data/outputs/<rel>`, in
/// input order. A virtual path must lie under `/mnt/user-data/outputs`; any other path is a
/// host path and must lie inside `outputs_host`, the thread's outputs directory. All or
/// nothing: the first refused path fails the call. No file is read.
///
/// # Errors
/// A [`PresentError`] naming the first refused path.
pub fn normalize_presented<S: AsRef<str>>(
    paths: &[S],
    outputs_host: &Path,
) -> Result<Vec<String>, PresentError> {
    paths
        .iter()
        .map(|p| normalize_one(p.as_ref(), outputs_host))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: &str = "/srv/threads/t1/user-data/outputs";

    fn one(path: &str) -> Result<String, PresentError> {
        normalize_one(path, Path::new(HOST))
    }

    #[test]
    fn virtual_and_host_paths_inside_outputs_normalise() -> Result<(), PresentError> {
        assert_eq!(
            one("/mnt/user-data/outputs/r.md")?,
            "/mnt/user-data/outputs/r.md"
        );
        assert_eq!(
            one("//mnt/user-data//outputs/./a/b.csv")?,
            "/mnt/user-data/outputs/a/b.csv"
        );
        assert_eq!(one("mnt/user-data/outputs/x")?, "/mnt/user-data/outputs/x");
        assert_eq!(
            one(&format!("{HOST}/charts/"))?,
            "/mnt/user-data/outputs/charts"
        );
        assert_eq!(one(HOST)?, OUTPUTS);
        assert_eq!(one("/mnt/user-data/outputs/")?, OUTPUTS);
        Ok(())
    }

    #[test]
    fn paths_outside_outputs_name_their_rule() {
        let cases = [
            ("/mnt/user-data/workspace/r.md", PresentRule::OutsideOutputs),
            (
                "/mnt/user-data/outputs/../workspace/r.md",
                PresentRule::DotDot,
            ),
            ("/mnt/user-dataX/outputs/r.md", PresentRule::OutsideOutputs),
            (
                "/srv/threads/t1/user-data/outputsX/r.md",
                PresentRule::OutsideOutputs,
            ),
            (
                "/srv/threads/t1/user-data/outputs/../x",
                PresentRule::DotDot,
            ),
            ("/etc/passwd", PresentRule::OutsideOutputs),
            ("r.md", PresentRule::OutsideOutputs),
            ("~/r.md", PresentRule::OutsideOutputs),
            ("/mnt/user-data/outputs/a\0", PresentRule::Nul),
        ];
        for (path, rule) in cases {
            let err = one(path).err();
            assert_eq!(err.as_ref().map(|e| e.rule), Some(rule), "{path:?}");
            assert!(err.is_some_and(|e| e.to_string().starts_with(PRESENT_ERROR_PREFIX)));
        }
    }
}
