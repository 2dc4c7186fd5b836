//! Where skills live: the [`SkillStore`] trait, the in-memory [`SkillRegistry`], and how
//! skill paths compare.

use std::sync::Arc;

use super::frontmatter::{parse_skill_md, SkillParseError};
use super::Skill;
use crate::BoxError;

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
