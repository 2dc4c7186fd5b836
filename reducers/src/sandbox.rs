//! [`SandboxReducer`]: a thread's sandbox id, set once.

use serde::{Deserialize, Serialize};

use crate::{Change, ReduceCtx, ReduceError, Reducer};

/// A thread's sandbox record (DeerFlow's `{sandbox_id?: string | null}`).
///
/// A missing `sandbox_id` key deserializes as `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SandboxState {
    /// The sandbox's id, if one was acquired.
    pub sandbox_id: Option<String>,
}

impl SandboxState {
    /// A record holding `id`.
    pub fn with_id(id: impl Into<String>) -> Self {
        SandboxState {
            sandbox_id: Some(id.into()),
        }
    }
}

/// Merges sandbox records (DeerFlow's `merge_sandbox`): the id may be set once, and a different
/// id afterwards is an error, never silently resolved, because two ids in one thread mean a
/// lifecycle or isolation bug.
///
/// - An absent value (`None`) takes the update.
/// - Otherwise the ids are compared (`None` counts as null): equal ids leave the value
///   unchanged, so repeating a write is harmless; different ids are a
///   [`ReduceError::SandboxConflict`]. That includes a stored empty record
///   (`Some(SandboxState { sandbox_id: None })`) meeting an update with an id: only a fully
///   absent value accepts a first id, so "no sandbox yet" must be represented as `None`.
///
/// Several writes in one step are folded in task order.
///
/// ```
/// use stategraph_reducers::{Change, ReduceCtx, ReduceError, Reducer, SandboxReducer, SandboxState};
///
/// let mut sandbox = None;
/// let change = SandboxReducer::reduce(&mut sandbox, vec![SandboxState::with_id("sb-1")], &mut ReduceCtx::new(1))?;
/// assert_eq!((sandbox.clone(), change), (Some(SandboxState::with_id("sb-1")), Change::Replaced));
///
/// let conflict = SandboxReducer::reduce(&mut sandbox, vec![SandboxState::with_id("sb-2")], &mut ReduceCtx::new(2));
/// assert!(matches!(conflict, Err(ReduceError::SandboxConflict { .. })));
/// # Ok::<(), ReduceError>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SandboxReducer;

impl Reducer for SandboxReducer {
    type Value = Option<SandboxState>;
    type Update = SandboxState;

    /// Fold the writes into the stored record.
    ///
    /// # Errors
    /// [`ReduceError::SandboxConflict`] when a write's id differs from the stored record's id.
    fn reduce(
        value: &mut Option<SandboxState>,
        writes: Vec<SandboxState>,
        _ctx: &mut ReduceCtx,
    ) -> Result<Change, ReduceError> {
        let mut change = Change::Unchanged;
        for write in writes {
            match value {
                None => {
                    *value = Some(write);
                    change = Change::Replaced;
                }
                Some(stored) if stored.sandbox_id == write.sandbox_id => {}
                Some(stored) => {
                    return Err(ReduceError::SandboxConflict {
                        stored: stored.sandbox_id.clone(),
                        incoming: write.sandbox_id,
                    })
                }
            }
        }
        Ok(change)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reduce(
        value: &mut Option<SandboxState>,
        writes: Vec<SandboxState>,
    ) -> Result<Change, ReduceError> {
        SandboxReducer::reduce(value, writes, &mut ReduceCtx::new(1))
    }

    #[test]
    fn sandbox_absent_takes_first_id() -> Result<(), ReduceError> {
        let mut v = None;
        assert_eq!(
            reduce(&mut v, vec![SandboxState::with_id("x")])?,
            Change::Replaced
        );
        assert_eq!(v, Some(SandboxState::with_id("x")));
        Ok(())
    }

    #[test]
    fn sandbox_same_id_is_unchanged() -> Result<(), ReduceError> {
        let mut v = Some(SandboxState::with_id("x"));
        assert_eq!(
            reduce(&mut v, vec![SandboxState::with_id("x")])?,
            Change::Unchanged
        );
        assert_eq!(v, Some(SandboxState::with_id("x")));
        Ok(())
    }

    #[test]
    fn sandbox_empty_records_merge_fine() -> Result<(), ReduceError> {
        let mut v = Some(SandboxState::default());
        assert_eq!(
            reduce(&mut v, vec![SandboxState::default()])?,
            Change::Unchanged
        );
        assert_eq!(v, Some(SandboxState::default()));
        Ok(())
    }

    #[test]
    fn sandbox_different_id_conflicts() {
        let mut v = Some(SandboxState::with_id("a"));
        let result = reduce(&mut v, vec![SandboxState::with_id("b")]);
        assert!(matches!(
            result,
            Err(ReduceError::SandboxConflict { stored: Some(s), incoming: Some(i) }) if s == "a" && i == "b"
        ));
    }

    #[test]
    fn sandbox_empty_record_then_id_conflicts() {
        let mut v = Some(SandboxState::default());
        let result = reduce(&mut v, vec![SandboxState::with_id("x")]);
        assert!(matches!(
            result,
            Err(ReduceError::SandboxConflict { stored: None, incoming: Some(i) }) if i == "x"
        ));
    }

    #[test]
    fn sandbox_id_then_empty_record_conflicts() {
        let mut v = Some(SandboxState::with_id("x"));
        let result = reduce(&mut v, vec![SandboxState::default()]);
        assert!(matches!(result, Err(ReduceError::SandboxConflict { .. })));
    }

    #[test]
    fn sandbox_writes_in_one_step_fold_in_order() -> Result<(), ReduceError> {
        let mut v = None;
        let change = reduce(
            &mut v,
            vec![SandboxState::with_id("x"), SandboxState::with_id("x")],
        )?;
        assert_eq!(
            (v.clone(), change),
            (Some(SandboxState::with_id("x")), Change::Replaced)
        );
        let mut v = None;
        let result = reduce(
            &mut v,
            vec![SandboxState::with_id("x"), SandboxState::with_id("y")],
        );
        assert!(matches!(result, Err(ReduceError::SandboxConflict { .. })));
        Ok(())
    }

    #[test]
    fn sandbox_state_missing_key_reads_as_none() -> Result<(), serde_json::Error> {
        let state: SandboxState = serde_json::from_str("{}")?;
        assert_eq!(state, SandboxState::default());
        Ok(())
    }
}
