//! [`PromotedReducer`]: tool names promoted by tool search, bound to a catalog hash.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::{Change, ReduceCtx, ReduceError, Reducer};

/// Tool names made visible by a tool search, valid for one tool catalog.
///
/// Missing keys deserialize as empty, so a malformed stored record without a hash simply never
/// matches an update's hash.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Promoted {
    /// Hash of the tool catalog the names refer to.
    pub catalog_hash: String,
    /// The promoted tool names, without duplicates, in the order they were first promoted.
    pub names: Vec<String>,
}

impl Promoted {
    /// A record for `catalog_hash` with `names`.
    pub fn new(
        catalog_hash: impl Into<String>,
        names: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Promoted {
            catalog_hash: catalog_hash.into(),
            names: names.into_iter().map(Into::into).collect(),
        }
    }

    /// Whether this is an empty update (no hash and no names), which changes nothing.
    pub fn is_empty(&self) -> bool {
        self.catalog_hash.is_empty() && self.names.is_empty()
    }
}

/// Merges promoted tool names (DeerFlow's `merge_promoted`), so that a persisted bare name can
/// never expose a different tool after the catalog changes.
///
/// For each write, in task order:
///
/// - an empty update (empty hash and no names) leaves the value unchanged;
/// - when the stored value is absent, has an empty hash, or has a different hash, it is replaced
///   wholesale by the update's hash and its deduplicated names (stale names are dropped);
/// - under the same hash, the update's new names are appended (order kept, no duplicates).
///
/// A tool search that finds nothing still writes `{hash, names: []}`: under the same hash that
/// changes nothing, under another hash it resets the promotions to none.
///
/// ```
/// use stategraph_reducers::{Change, Promoted, PromotedReducer, ReduceCtx, Reducer};
///
/// let mut promoted = Some(Promoted::new("h1", ["search"]));
/// PromotedReducer::reduce(&mut promoted, vec![Promoted::new("h1", ["fetch", "search"])], &mut ReduceCtx::new(1))?;
/// assert_eq!(promoted, Some(Promoted::new("h1", ["search", "fetch"])));
///
/// PromotedReducer::reduce(&mut promoted, vec![Promoted::new("h2", ["grep"])], &mut ReduceCtx::new(2))?;
/// assert_eq!(promoted, Some(Promoted::new("h2", ["grep"])));
/// # Ok::<(), stategraph_reducers::ReduceError>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct PromotedReducer;

impl Reducer for PromotedReducer {
    type Value = Option<Promoted>;
    type Update = Promoted;

    /// Fold the writes into the stored record.
    ///
    /// # Errors
    /// Never fails.
    fn reduce(
        value: &mut Option<Promoted>,
        writes: Vec<Promoted>,
        _ctx: &mut ReduceCtx,
    ) -> Result<Change, ReduceError> {
        let mut changed = false;
        for write in writes {
            if write.is_empty() {
                continue;
            }
            match value {
                Some(stored)
                    if !stored.catalog_hash.is_empty()
                        && stored.catalog_hash == write.catalog_hash =>
                {
                    let before = stored.names.len();
                    let mut names = std::mem::take(&mut stored.names);
                    names.extend(write.names);
                    stored.names = dedup(names);
                    // Appending only grows the list; dropping duplicates the stored list had
                    // shrinks it. Either way a different length means a different value, and
                    // the same length means the stored list was already duplicate-free and
                    // nothing new was added.
                    changed |= stored.names.len() != before;
                }
                _ => {
                    let replacement = Some(Promoted {
                        catalog_hash: write.catalog_hash,
                        names: dedup(write.names),
                    });
                    if *value != replacement {
                        *value = replacement;
                        changed = true;
                    }
                }
            }
        }
        Ok(if changed {
            Change::Replaced
        } else {
            Change::Unchanged
        })
    }
}

/// Drop repeated names, keeping first occurrences in order.
fn dedup(mut names: Vec<String>) -> Vec<String> {
    let mut seen = HashSet::with_capacity(names.len());
    names.retain(|name| seen.insert(name.clone()));
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reduce(value: &mut Option<Promoted>, writes: Vec<Promoted>) -> Result<Change, ReduceError> {
        PromotedReducer::reduce(value, writes, &mut ReduceCtx::new(1))
    }

    #[test]
    fn promoted_empty_update_is_unchanged() -> Result<(), ReduceError> {
        let mut v = Some(Promoted::new("h", ["a"]));
        assert_eq!(
            reduce(&mut v, vec![Promoted::default()])?,
            Change::Unchanged
        );
        assert_eq!(v, Some(Promoted::new("h", ["a"])));
        let mut none = None;
        assert_eq!(
            reduce(&mut none, vec![Promoted::default()])?,
            Change::Unchanged
        );
        assert_eq!(none, None);
        Ok(())
    }

    #[test]
    fn promoted_absent_takes_deduplicated_update() -> Result<(), ReduceError> {
        let mut v = None;
        assert_eq!(
            reduce(&mut v, vec![Promoted::new("h", ["a", "b", "a"])])?,
            Change::Replaced
        );
        assert_eq!(v, Some(Promoted::new("h", ["a", "b"])));
        Ok(())
    }

    #[test]
    fn promoted_same_hash_unions_names_in_order() -> Result<(), ReduceError> {
        let mut v = Some(Promoted::new("h", ["a", "b"]));
        assert_eq!(
            reduce(&mut v, vec![Promoted::new("h", ["b", "c", "c"])])?,
            Change::Replaced
        );
        assert_eq!(v, Some(Promoted::new("h", ["a", "b", "c"])));
        Ok(())
    }

    #[test]
    fn promoted_other_hash_replaces() -> Result<(), ReduceError> {
        let mut v = Some(Promoted::new("old", ["a", "b"]));
        assert_eq!(
            reduce(&mut v, vec![Promoted::new("new", ["c"])])?,
            Change::Replaced
        );
        assert_eq!(v, Some(Promoted::new("new", ["c"])));
        Ok(())
    }

    #[test]
    fn promoted_stored_without_hash_is_replaced() -> Result<(), ReduceError> {
        let mut v = Some(Promoted::new("", ["stale"]));
        reduce(&mut v, vec![Promoted::new("", ["fresh"])])?;
        assert_eq!(v, Some(Promoted::new("", ["fresh"])));
        Ok(())
    }

    #[test]
    fn promoted_empty_search_under_same_hash_is_unchanged() -> Result<(), ReduceError> {
        let mut v = Some(Promoted::new("h", ["a"]));
        let empty: [&str; 0] = [];
        assert_eq!(
            reduce(&mut v, vec![Promoted::new("h", empty)])?,
            Change::Unchanged
        );
        assert_eq!(v, Some(Promoted::new("h", ["a"])));
        Ok(())
    }

    #[test]
    fn promoted_empty_search_under_other_hash_resets() -> Result<(), ReduceError> {
        let mut v = Some(Promoted::new("h1", ["a"]));
        let empty: [&str; 0] = [];
        assert_eq!(
            reduce(&mut v, vec![Promoted::new("h2", empty)])?,
            Change::Replaced
        );
        assert_eq!(v, Some(Promoted::new("h2", empty)));
        Ok(())
    }

    #[test]
    fn promoted_missing_keys_read_as_empty() -> Result<(), serde_json::Error> {
        let p: Promoted = serde_json::from_str(r#"{"names":["a"]}"#)?;
        assert_eq!(p, Promoted::new("", ["a"]));
        Ok(())
    }
}
