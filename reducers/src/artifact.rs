//! [`Artifacts`]: the names of the files a thread has produced.

use std::collections::HashSet;

use crate::{
    decode_list, encode_list, extend_list, Change, ReduceCtx, ReduceError, Reducer, Stored,
    StoredRef,
};

/// An order-preserving union of names with dedup: `[a, b] + [b, c] = [a, b, c]`.
///
/// Names only accumulate; there is no removal. Unlike DeerFlow's `merge_artifacts`, this reducer
/// also deduplicates the first write (DeerFlow's `merge(null, ["a", "a"])` returns
/// `["a", "a"]`, an accident we do not reproduce), and it drops duplicates that a value stored by
/// other means may hold, so the field never holds the same name twice.
///
/// The change is [`Change::Appended`] when new names were added (a checkpoint then stores only
/// them), [`Change::Replaced`] if the stored value itself had to be deduplicated, and
/// [`Change::Unchanged`] otherwise.
///
/// ```
/// use stategraph_reducers::{Artifacts, Change, ReduceCtx, Reducer};
///
/// let mut files = vec!["a".to_owned(), "b".to_owned()];
/// let writes = vec![vec!["b".to_owned(), "c".to_owned()], vec!["c".to_owned()]];
/// let change = Artifacts::reduce(&mut files, writes, &mut ReduceCtx::new(1))?;
/// assert_eq!(files, ["a", "b", "c"]);
/// assert_eq!(change, Change::Appended { from: 2 });
/// # Ok::<(), stategraph_reducers::ReduceError>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Artifacts;

impl Reducer for Artifacts {
    type Value = Vec<String>;
    type Update = Vec<String>;

    /// Add every name not already present, in order.
    ///
    /// # Errors
    /// Never fails.
    fn reduce(
        value: &mut Vec<String>,
        writes: Vec<Vec<String>>,
        _ctx: &mut ReduceCtx,
    ) -> Result<Change, ReduceError> {
        let old_len = value.len();
        let mut seen: HashSet<String> = HashSet::with_capacity(old_len);
        value.retain(|name| seen.insert(name.clone()));
        let deduplicated = value.len() != old_len;
        let from = value.len();
        for name in writes.into_iter().flatten() {
            if !seen.contains(&name) {
                seen.insert(name.clone());
                value.push(name);
            }
        }
        Ok(if deduplicated {
            Change::Replaced
        } else if value.len() > from {
            Change::Appended { from }
        } else {
            Change::Unchanged
        })
    }

    fn encode(value: &Vec<String>, change: Change) -> Result<Stored, serde_json::Error> {
        encode_list(value, change)
    }

    fn decode(parts: &[StoredRef<'_>]) -> Result<Vec<String>, serde_json::Error> {
        decode_list(parts)
    }

    fn extend(value: &mut Vec<String>, tails: &[StoredRef<'_>]) -> Result<(), serde_json::Error> {
        extend_list(value, tails)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn artifacts_union_keeps_first_occurrence_order() -> Result<(), ReduceError> {
        let mut v = names(&["a", "b"]);
        let change = Artifacts::reduce(&mut v, vec![names(&["b", "c"])], &mut ReduceCtx::new(1))?;
        assert_eq!(v, ["a", "b", "c"]);
        assert_eq!(change, Change::Appended { from: 2 });
        Ok(())
    }

    #[test]
    fn artifacts_first_write_is_deduplicated() -> Result<(), ReduceError> {
        let mut v = Vec::new();
        let change = Artifacts::reduce(
            &mut v,
            vec![names(&["a", "a", "b", "a"])],
            &mut ReduceCtx::new(1),
        )?;
        assert_eq!(v, ["a", "b"]);
        assert_eq!(change, Change::Appended { from: 0 });
        Ok(())
    }

    #[test]
    fn artifacts_readding_known_names_is_unchanged() -> Result<(), ReduceError> {
        let mut v = names(&["a", "b"]);
        let change =
            Artifacts::reduce(&mut v, vec![names(&["b"]), vec![]], &mut ReduceCtx::new(1))?;
        assert_eq!(v, ["a", "b"]);
        assert_eq!(change, Change::Unchanged);
        Ok(())
    }

    #[test]
    fn artifacts_duplicates_in_stored_value_are_dropped() -> Result<(), ReduceError> {
        let mut v = names(&["a", "b", "a"]);
        let change = Artifacts::reduce(&mut v, vec![names(&["c"])], &mut ReduceCtx::new(1))?;
        assert_eq!(v, ["a", "b", "c"]);
        assert_eq!(change, Change::Replaced);
        Ok(())
    }
}
