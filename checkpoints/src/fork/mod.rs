//! Forking a thread at a checkpoint, optionally with changed field values,
//! written with the rules the engine uses for a fork: the changed fields get one new version
//! (one more than the newest channel version, as a step's writes do), and the fork checkpoint
//! is the anchor of its stretch of the branch ([`fork_checkpoint`], [`bump_versions`]).
//! [`ForkPlan`] makes the fork, into a new branch of the same thread or into a new thread
//! (which gets a copy of the forked branch), with edits given as JSON pointers.
//!
//! ```
//! use serde_json::json;
//! use stategraph_checkpoints::fork::{FieldEdit, FieldPath, ForkPlan};
//! use stategraph_checkpoints::{
//!     Checkpoint, CheckpointId, Control, FieldPart, LoadedCheckpoint, Source, ThreadId,
//! };
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let base = CheckpointId::generate();
//! let mut control = Control::default();
//! control.versions.insert("count".into(), 4);
//! let loaded = LoadedCheckpoint {
//!     checkpoint: Checkpoint {
//!         id: base,
//!         parent: None,
//!         step: 2,
//!         source: Source::Loop,
//!         created_at_ms: base.created_at_ms(),
//!         control,
//!         metadata: Default::default(),
//!     },
//!     fields: [("count".to_string(), vec![FieldPart::Whole(b"1".to_vec())])].into(),
//!     pending: Vec::new(),
//! };
//! let mut plan = ForkPlan::new(&ThreadId::new("a")?, loaded, &ThreadId::new("b")?)?;
//! plan.edit(&FieldEdit { path: FieldPath::parse("/count")?, value: json!(2) })?;
//! let put = plan.to_put()?; // `plan.write(&saver)` copies the thread and stores it
//! let fork = &put.checkpoint;
//! assert_eq!((fork.parent, fork.step, fork.source), (Some(base), 2, Source::Fork));
//! assert_eq!(fork.control.versions["count"], 5);
//! assert_eq!(fork.control.anchor, Some(fork.id));
//! # Ok(())
//! # }
//! ```

mod edit;

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::diff::fields_to_json;
use crate::{
    Checkpoint, CheckpointError, CheckpointId, Control, FieldPart, FieldWrite, LoadedCheckpoint,
    Namespace, PutCheckpoint, Saver, Source, ThreadId,
};

use edit::edited_value;
pub use edit::{EditError, FieldEdit, FieldPath, FieldPathError, JsonType, PointerError, Retyped};

/// Why a fork was not made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ForkError {
    /// A stored value of the forked checkpoint is not readable JSON.
    #[error("checkpoint {checkpoint}: a stored value is not readable: {detail}")]
    Unreadable {
        /// The forked checkpoint.
        checkpoint: CheckpointId,
        /// What is wrong with it.
        detail: String,
    },
    /// A changed value cannot be encoded.
    #[error("cannot encode field {field}: {source}")]
    Encode {
        /// The field.
        field: String,
        /// The encoder's error.
        source: serde_json::Error,
    },
    /// Copying the forked branch into the new thread failed.
    #[error(transparent)]
    Copy(CheckpointError),
    /// Storing the fork checkpoint failed (the new thread was deleted again).
    #[error("fork failed: {0}")]
    Put(CheckpointError),
}

/// A fork being prepared: a checkpoint of one thread, the new thread, and the edits made so
/// far. Nothing is stored until [`ForkPlan::write`].
#[derive(Debug)]
pub struct ForkPlan {
    from: ThreadId,
    to: ThreadId,
    base: LoadedCheckpoint,
    state: Value,
    changed: BTreeMap<String, Value>,
    paths: Vec<String>,
}

impl ForkPlan {
    /// Start planning the fork of `base` (a root-namespace checkpoint of thread `from`) into
    /// the new thread `to`, or into a new branch of `from` when `to` is `from`.
    ///
    /// # Errors
    /// [`ForkError::Unreadable`] when a stored value of `base` is not JSON.
    pub fn new(from: &ThreadId, base: LoadedCheckpoint, to: &ThreadId) -> Result<Self, ForkError> {
        let state = fields_to_json(&base.fields).map_err(|detail| ForkError::Unreadable {
            checkpoint: base.checkpoint.id,
            detail,
        })?;
        Ok(ForkPlan {
            from: from.clone(),
            to: to.clone(),
            base,
            state,
            changed: BTreeMap::new(),
            paths: Vec::new(),
        })
    }

    /// Make one edit in the new branch (an edit of a field already edited sees the earlier
    /// edits). Returns how the field's JSON type changed, if it did: the program reading the
    /// branch must accept the new type.
    ///
    /// # Errors
    /// [`EditError`]; the plan is unchanged then.
    pub fn edit(&mut self, edit: &FieldEdit) -> Result<Option<Retyped>, EditError> {
        let value = edited_value(&self.base, &self.state, &self.changed, edit)?;
        let retyped = self.state.get(edit.path.field()).and_then(|old| {
            let (was, now) = (JsonType::of(old), JsonType::of(&value));
            (was != now).then(|| Retyped {
                path: edit.path.clone(),
                was,
                now,
            })
        });
        self.changed.insert(edit.path.field().to_owned(), value);
        self.paths.push(edit.path.as_str().to_owned());
        Ok(retyped)
    }

    /// The value `field` has in the new branch: as edited, else as stored at the base.
    pub fn value(&self, field: &str) -> Option<&Value> {
        self.changed.get(field).or_else(|| self.state.get(field))
    }

    /// The fork checkpoint to store, with a new id: parent `base`, with its step and control
    /// state; the edited fields stored whole at one new version; the fork checkpoint as the
    /// anchor; metadata `forked_from` (and `set`: the edits' paths, if any).
    ///
    /// # Errors
    /// [`ForkError::Encode`].
    pub fn to_put(&self) -> Result<PutCheckpoint, ForkError> {
        let base = &self.base.checkpoint;
        let metadata = fork_metadata(&self.from, base.id, &self.paths);
        Ok(PutCheckpoint {
            thread: self.to.clone(),
            ns: Namespace::root(),
            checkpoint: fork_checkpoint(base, self.changed.keys().map(String::as_str), metadata),
            writes: whole_writes(&self.changed)?,
        })
    }

    /// Store the fork checkpoint ([`ForkPlan::to_put`]). Into another thread, the branch
    /// that ends at the forked checkpoint is copied there first (that branch only: other
    /// branches, subgraph namespaces and runs stay behind), and if storing the fork
    /// checkpoint fails the new thread is deleted again. Into the same thread, the fork
    /// checkpoint starts a new branch beside the others. The forked branch is not changed.
    /// Returns the fork checkpoint's id.
    ///
    /// # Errors
    /// [`ForkError::Encode`]; [`ForkError::Copy`] (with [`CheckpointError::StaleParent`] when
    /// `to` is another thread that already has checkpoints: nothing is written then);
    /// [`ForkError::Put`].
    pub async fn write(self, saver: &dyn Saver) -> Result<CheckpointId, ForkError> {
        let put = self.to_put()?;
        let id = put.checkpoint.id;
        if self.to == self.from {
            saver.put(put).await.map_err(ForkError::Put)?;
            return Ok(id);
        }
        saver
            .copy_branch(&self.from, &self.to, self.base.checkpoint.id)
            .await
            .map_err(ForkError::Copy)?;
        if let Err(e) = saver.put(put).await {
            // Leave nothing half-made behind.
            let _ = saver.delete_thread(&self.to).await;
            return Err(ForkError::Put(e));
        }
        Ok(id)
    }
}

/// Every changed field stored whole.
fn whole_writes(changed: &BTreeMap<String, Value>) -> Result<Vec<FieldWrite>, ForkError> {
    changed
        .iter()
        .map(|(field, value)| {
            let bytes = serde_json::to_vec(value).map_err(|source| ForkError::Encode {
                field: field.clone(),
                source,
            })?;
            Ok(FieldWrite {
                field: field.clone(),
                part: FieldPart::Whole(bytes),
            })
        })
        .collect()
}

/// A fork checkpoint branching from `base`, as the engine writes one: a new id, parent
/// `base`, its step and control state with the `changed` fields at one new version
/// ([`bump_versions`]), and the new checkpoint as the anchor its stretch of the branch derives
/// task ids from (`Control::anchor`).
///
/// ```
/// use stategraph_checkpoints::fork::fork_checkpoint;
/// use stategraph_checkpoints::{Checkpoint, CheckpointId, Control, Source};
/// let id = CheckpointId::generate();
/// let base = Checkpoint {
///     id,
///     parent: None,
///     step: 4,
///     source: Source::Loop,
///     created_at_ms: id.created_at_ms(),
///     control: Control::default(),
///     metadata: Default::default(),
/// };
/// let fork = fork_checkpoint(&base, ["count"], Default::default());
/// assert_eq!((fork.parent, fork.step, fork.source), (Some(id), 4, Source::Fork));
/// assert_eq!(fork.control.anchor, Some(fork.id));
/// assert_eq!(fork.control.versions["count"], 1);
/// ```
pub fn fork_checkpoint<'a>(
    base: &Checkpoint,
    changed: impl IntoIterator<Item = &'a str>,
    metadata: BTreeMap<String, Value>,
) -> Checkpoint {
    let id = CheckpointId::generate();
    let mut control = base.control.clone();
    bump_versions(&mut control, changed);
    control.anchor = Some(id);
    Checkpoint {
        id,
        parent: Some(base.id),
        step: base.step,
        source: Source::Fork,
        created_at_ms: id.created_at_ms(),
        control,
        metadata,
    }
}

/// Give the `changed` fields one new version, as a step's writes get: one more than the
/// newest version of any channel in `control`. Nothing changes when no field is named.
pub fn bump_versions<'a>(control: &mut Control, changed: impl IntoIterator<Item = &'a str>) {
    let mut changed = changed.into_iter().peekable();
    if changed.peek().is_none() {
        return;
    }
    let next = control.versions.values().copied().max().unwrap_or(0) + 1;
    for field in changed {
        control.versions.insert(field.into(), next);
    }
}

/// `forked_from: {thread, checkpoint}`, and `set`: the paths of the edits, if any.
fn fork_metadata(
    from: &ThreadId,
    checkpoint: CheckpointId,
    paths: &[String],
) -> BTreeMap<String, Value> {
    let mut metadata = BTreeMap::new();
    metadata.insert(
        "forked_from".to_owned(),
        json!({ "thread": from.as_str(), "checkpoint": checkpoint.to_string() }),
    );
    if !paths.is_empty() {
        metadata.insert(
            "set".to_owned(),
            paths.iter().cloned().map(Value::String).collect(),
        );
    }
    metadata
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn loaded(fields: &[(&str, &str)], versions: &[(&str, u64)]) -> LoadedCheckpoint {
        let id = CheckpointId::from_u128(7);
        let mut control = Control::default();
        for (name, v) in versions {
            control.versions.insert((*name).into(), *v);
        }
        LoadedCheckpoint {
            checkpoint: Checkpoint {
                id,
                parent: None,
                step: 3,
                source: Source::Loop,
                created_at_ms: 0,
                control,
                metadata: BTreeMap::new(),
            },
            fields: fields
                .iter()
                .map(|(k, v)| (k.to_string(), vec![FieldPart::Whole(v.as_bytes().to_vec())]))
                .collect(),
            pending: Vec::new(),
        }
    }

    fn edit(path: &str, value: Value) -> Result<FieldEdit, FieldPathError> {
        Ok(FieldEdit {
            path: FieldPath::parse(path)?,
            value,
        })
    }

    fn plan(base: &LoadedCheckpoint) -> Result<ForkPlan, ForkError> {
        let a = ThreadId::new("a").expect("thread id");
        let b = ThreadId::new("b").expect("thread id");
        ForkPlan::new(&a, base.clone(), &b)
    }

    #[test]
    fn edits_bump_changed_fields_to_one_new_version_and_anchor_the_fork() -> TestResult {
        let base = loaded(
            &[("count", "1"), ("log", "[\"a\",\"b\"]")],
            &[("count", 2), ("log", 3), ("branch:to:w", 6)],
        );
        let mut plan = plan(&base)?;
        for e in [
            edit("/count", json!(5))?,
            edit("/log/1", json!("B"))?,
            edit("/log/-", json!("c"))?,
        ] {
            assert_eq!(plan.edit(&e)?, None);
        }
        let put = plan.to_put()?;
        let cp = &put.checkpoint;
        assert_eq!(cp.parent, Some(base.checkpoint.id));
        assert_eq!((cp.step, cp.source), (3, Source::Fork));
        assert_eq!(cp.control.anchor, Some(cp.id));
        assert_eq!(cp.control.versions["count"], 7);
        assert_eq!(cp.control.versions["log"], 7);
        assert_eq!(cp.control.versions["branch:to:w"], 6);
        assert_eq!(cp.metadata["set"], json!(["/count", "/log/1", "/log/-"]));
        assert_eq!(
            cp.metadata["forked_from"],
            json!({ "thread": "a", "checkpoint": base.checkpoint.id.to_string() })
        );
        let writes: Vec<(&str, &FieldPart)> = put
            .writes
            .iter()
            .map(|w| (w.field.as_str(), &w.part))
            .collect();
        assert_eq!(
            writes,
            [
                ("count", &FieldPart::Whole(b"5".to_vec())),
                ("log", &FieldPart::Whole(b"[\"a\",\"B\",\"c\"]".to_vec())),
            ]
        );
        Ok(())
    }

    #[test]
    fn a_plain_fork_keeps_versions_and_writes_nothing() -> TestResult {
        let base = loaded(&[("count", "1")], &[("count", 2)]);
        let put = plan(&base)?.to_put()?;
        assert_eq!(
            put.checkpoint.control.versions,
            base.checkpoint.control.versions
        );
        assert_eq!(put.checkpoint.control.anchor, Some(put.checkpoint.id));
        assert!(put.writes.is_empty());
        assert!(!put.checkpoint.metadata.contains_key("set"));
        Ok(())
    }

    #[test]
    fn bad_edits_are_typed_errors_and_change_nothing() -> TestResult {
        let base = loaded(
            &[("n", "1"), ("log", "[1]")],
            &[("n", 1), ("branch:to:w", 1), ("empty", 1)],
        );
        let mut plan = plan(&base)?;
        let mut fails = |path: &str| -> Result<EditError, Box<dyn std::error::Error>> {
            match plan.edit(&edit(path, json!(0))?) {
                Err(e) => Ok(e),
                Ok(r) => Err(format!("{path}: expected an edit error, got {r:?}").into()),
            }
        };
        assert!(matches!(fails("/nope")?, EditError::UnknownField { .. }));
        assert!(matches!(
            fails("/branch:to:w")?,
            EditError::UnknownField { .. }
        ));
        assert_eq!(
            fails("/empty/0")?,
            EditError::NothingInside {
                field: "empty".into()
            }
        );
        assert_eq!(
            fails("/log/5")?,
            PointerError::PastTheEnd { index: 5, len: 1 }.into()
        );
        assert_eq!(
            fails("/log/x")?,
            PointerError::NotAnIndex("x".into()).into()
        );
        assert_eq!(
            fails("/n/a")?.to_string(),
            "the field is a number, not an object or array"
        );
        assert_eq!(
            fails("/log/0/a/b")?,
            PointerError::Missing("/0/a".into()).into()
        );
        assert_eq!(
            fails("/nope")?.to_string(),
            format!(
                "no field nope at checkpoint {} (stored fields: log, n)",
                base.checkpoint.id
            )
        );
        assert!(plan.to_put()?.writes.is_empty());
        Ok(())
    }

    #[test]
    fn a_changed_json_type_is_reported() -> TestResult {
        let base = loaded(&[("n", "1")], &[("n", 1)]);
        let retyped = plan(&base)?.edit(&edit("/n", json!("one"))?)?;
        assert_eq!(
            retyped,
            Some(Retyped {
                path: FieldPath::parse("/n")?,
                was: JsonType::Number,
                now: JsonType::String
            })
        );
        Ok(())
    }
}
