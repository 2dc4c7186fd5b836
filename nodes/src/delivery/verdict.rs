//! Whether a run delivered what it produced: the produced outputs, the presented paths, and the
//! receipt that records both (the settlement rules' `run.delivery` content).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::snapshot::{Snapshot, SnapshotEntry};
use crate::sandbox::OUTPUTS;

/// The tool whose artifacts count as presented.
pub const PRESENT_FILES: &str = "present_files";

/// The error a run gets when it produced outputs and presented none of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("Artifact delivery incomplete: no produced output artifact was presented")]
pub struct DeliveryIncomplete;

/// What was presented during a run: each path once, in the order first presented, and by
/// which tool.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryFacts {
    /// How many paths were presented.
    pub presented: usize,
    /// The presented paths.
    pub paths: Vec<String>,
    /// The presented paths of each tool.
    pub by_tool: BTreeMap<String, Vec<String>>,
}

impl DeliveryFacts {
    /// Records artifacts a tool call returned. `tool` is the tool's name when exactly one is
    /// known for the call; without one the paths count as presented by no tool.
    pub fn record<I, S>(&mut self, tool: Option<&str>, paths: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        for path in paths {
            let path = path.into();
            if let Some(tool) = tool {
                let of_tool = self.by_tool.entry(tool.to_owned()).or_default();
                if !of_tool.contains(&path) {
                    of_tool.push(path.clone());
                }
            }
            if !self.paths.contains(&path) {
                self.paths.push(path);
            }
        }
        self.presented = self.paths.len();
    }
}

/// What the verdict checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerificationSource {
    /// Files under the outputs root were created or modified.
    OutputsChanged,
}

/// What the verdict required.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Requirement {
    /// A path presented with `present_files` covers a produced output.
    PresentFilesMatchesProducedOutput,
}

/// Why the delivery was verified, and against what.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verification {
    /// What triggered the check.
    pub source: VerificationSource,
    /// What it required.
    pub requirement: Requirement,
}

/// How far delivery got.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStage {
    /// A presented path covers a produced output.
    Presented,
    /// Paths were presented, none covering a produced output.
    Mismatched,
    /// Nothing was presented with `present_files`.
    NotStarted,
}

/// The verdict on a run that produced outputs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryVerdict {
    /// Why and against what.
    pub verification: Verification,
    /// The produced outputs (virtual paths, sorted).
    pub produced_paths: Vec<String>,
    /// The paths presented with `present_files`.
    pub presented_paths: Vec<String>,
    /// The produced outputs some presented path covers.
    pub matched_paths: Vec<String>,
    /// Whether any produced output is covered.
    pub satisfied: bool,
    /// How far delivery got.
    pub stage: DeliveryStage,
}

/// A run's delivery receipt: the facts, and the verdict when the run produced outputs.
///
/// Stored as the value is shaped: the facts' fields at the top level and the verdict under
/// `verdict` (absent when nothing was produced). A receipt stored before the verdict was
/// nested — its fields beside the facts' — reads back as the same value.
///
/// ```
/// use stategraph_nodes::delivery::DeliveryReceipt;
///
/// let old = serde_json::json!({
///     "presented": 0, "paths": [], "by_tool": {},
///     "verification": {"source": "outputs_changed",
///                      "requirement": "present_files_matches_produced_output"},
///     "produced_paths": ["/mnt/user-data/outputs/r.md"], "presented_paths": [],
///     "matched_paths": [], "satisfied": false, "stage": "not_started"
/// });
/// let receipt: DeliveryReceipt = serde_json::from_value(old)?;
/// let stored = receipt.to_json();
/// assert_eq!(stored["verdict"]["stage"], "not_started");
/// assert!(stored.get("stage").is_none());
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "StoredReceipt")]
pub struct DeliveryReceipt {
    /// What was presented.
    #[serde(flatten)]
    pub facts: DeliveryFacts,
    /// The verdict (absent when nothing was produced: facts only, nothing to verify).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<DeliveryVerdict>,
}

/// A stored receipt as read: the verdict nested, or (written before it was) beside the facts.
#[derive(Deserialize)]
struct StoredReceipt {
    #[serde(flatten)]
    facts: DeliveryFacts,
    #[serde(default)]
    verdict: Option<DeliveryVerdict>,
    /// The verdict's fields at the top level: the layout of receipts stored before the
    /// verdict was nested.
    #[serde(flatten)]
    flat_verdict: Option<DeliveryVerdict>,
}

impl From<StoredReceipt> for DeliveryReceipt {
    fn from(stored: StoredReceipt) -> Self {
        DeliveryReceipt {
            facts: stored.facts,
            verdict: stored.verdict.or(stored.flat_verdict),
        }
    }
}

impl DeliveryReceipt {
    /// The receipt as JSON, as it is stored (its fields are plain data: this cannot fail).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// Whether the run may keep a success: an unsatisfied verdict is [`DeliveryIncomplete`].
    ///
    /// # Errors
    /// [`DeliveryIncomplete`] when outputs were produced and none was presented.
    pub fn check(&self) -> Result<(), DeliveryIncomplete> {
        match &self.verdict {
            Some(v) if !v.satisfied => Err(DeliveryIncomplete),
            _ => Ok(()),
        }
    }
}

/// The outputs a run produced: the regular (non-symlink) files under the outputs root created
/// or modified between `before` and `after`, as sorted virtual paths. Deletions do not count;
/// the snapshots already leave excluded directories out.
pub fn produced_outputs(before: &Snapshot, after: &Snapshot) -> Vec<String> {
    after
        .entries()
        .iter()
        .filter_map(|(path, entry)| {
            let SnapshotEntry::File(now) = entry else {
                return None;
            };
            let unchanged = matches!(
                before.get(path),
                Some(SnapshotEntry::File(then)) if then.size == now.size && then.hash == now.hash
            );
            (!unchanged).then(|| format!("{OUTPUTS}/{path}"))
        })
        .collect()
}

/// Whether the presented path `presented` covers the produced path `produced`: equal, or a
/// directory above it (its trailing `/` stripped), on segment boundaries.
pub fn covers(presented: &str, produced: &str) -> bool {
    let dir = presented.trim_end_matches('/');
    produced == presented
        || produced == dir
        || produced
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Settles a run's delivery: facts only when nothing was produced, else the verdict.
pub fn settle(facts: DeliveryFacts, produced: Vec<String>) -> DeliveryReceipt {
    if produced.is_empty() {
        return DeliveryReceipt {
            facts,
            verdict: None,
        };
    }
    let presented_paths = facts
        .by_tool
        .get(PRESENT_FILES)
        .cloned()
        .unwrap_or_default();
    let matched_paths: Vec<String> = produced
        .iter()
        .filter(|p| presented_paths.iter().any(|q| covers(q, p)))
        .cloned()
        .collect();
    let satisfied = !matched_paths.is_empty();
    let stage = if satisfied {
        DeliveryStage::Presented
    } else if presented_paths.is_empty() {
        DeliveryStage::NotStarted
    } else {
        DeliveryStage::Mismatched
    };
    DeliveryReceipt {
        facts,
        verdict: Some(DeliveryVerdict {
            verification: Verification {
                source: VerificationSource::OutputsChanged,
                requirement: Requirement::PresentFilesMatchesProducedOutput,
            },
            produced_paths: produced,
            presented_paths,
            matched_paths,
            satisfied,
            stage,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covering_is_equality_or_a_directory_on_segment_boundaries() {
        let file = "/mnt/user-data/outputs/charts/a.png";
        assert!(covers(file, file));
        assert!(covers("/mnt/user-data/outputs/charts", file));
        assert!(covers("/mnt/user-data/outputs/charts/", file));
        assert!(covers("/mnt/user-data/outputs", file));
        assert!(!covers("/mnt/user-data/outputs/chart", file));
        assert!(!covers("/mnt/user-data/outputs/charts/a.pn", file));
    }

    #[test]
    fn facts_dedup_paths_in_first_seen_order() {
        let mut facts = DeliveryFacts::default();
        facts.record(Some(PRESENT_FILES), ["/o/b", "/o/a"]);
        facts.record(Some(PRESENT_FILES), ["/o/a", "/o/c"]);
        facts.record(Some("other"), ["/o/b"]);
        facts.record(None, ["/o/d"]);
        assert_eq!(facts.paths, ["/o/b", "/o/a", "/o/c", "/o/d"]);
        assert_eq!(facts.presented, 4);
        assert_eq!(facts.by_tool[PRESENT_FILES], ["/o/b", "/o/a", "/o/c"]);
        assert_eq!(facts.by_tool["other"], ["/o/b"]);
    }

    #[test]
    fn artifacts_of_other_tools_are_not_presented() {
        let mut facts = DeliveryFacts::default();
        facts.record(Some("write_report"), ["/mnt/user-data/outputs/r.md"]);
        let receipt = settle(facts, vec!["/mnt/user-data/outputs/r.md".into()]);
        let verdict = receipt.verdict.as_ref();
        assert_eq!(verdict.map(|v| v.stage), Some(DeliveryStage::NotStarted));
        assert_eq!(receipt.check(), Err(DeliveryIncomplete));
    }
}
