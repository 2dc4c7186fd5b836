//! [`LastValue`]: a field that takes exactly one write per step.

use std::marker::PhantomData;

use serde::{de::DeserializeOwned, Serialize};

use crate::{Change, ReduceCtx, ReduceError, Reducer};

/// The default reducer: one write replaces the value; two writes in one step are a conflict.
///
/// Use it for fields that exactly one node owns in any step (a title, a summary). When several
/// parallel nodes may write the same field, pick a reducer that merges instead.
///
/// ```
/// use stategraph_reducers::{Change, LastValue, ReduceCtx, ReduceError, Reducer};
///
/// let mut title = String::from("draft");
/// let change = LastValue::<String>::reduce(&mut title, vec!["final".into()], &mut ReduceCtx::new(1))?;
/// assert_eq!((title.as_str(), change), ("final", Change::Replaced));
///
/// let err = LastValue::<String>::reduce(&mut title, vec!["a".into(), "b".into()], &mut ReduceCtx::new(2));
/// assert!(matches!(err, Err(ReduceError::ConcurrentUpdate { writes: 2 })));
/// # Ok::<(), ReduceError>(())
/// ```
pub struct LastValue<T>(PhantomData<fn() -> T>);

impl<T> std::fmt::Debug for LastValue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LastValue")
    }
}

impl<T> Reducer for LastValue<T>
where
    T: Serialize + DeserializeOwned + Clone + Default + Send + Sync + 'static,
{
    type Value = T;
    type Update = T;

    /// Replace the value with the single write.
    ///
    /// # Errors
    /// [`ReduceError::ConcurrentUpdate`] if the step carries more than one write.
    fn reduce(
        value: &mut T,
        mut writes: Vec<T>,
        _ctx: &mut ReduceCtx,
    ) -> Result<Change, ReduceError> {
        if writes.len() > 1 {
            return Err(ReduceError::ConcurrentUpdate {
                writes: writes.len(),
            });
        }
        match writes.pop() {
            Some(new) => {
                *value = new;
                Ok(Change::Replaced)
            }
            None => Ok(Change::Unchanged),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_value_one_write_replaces() -> Result<(), ReduceError> {
        let mut v = 1;
        let change = LastValue::<i32>::reduce(&mut v, vec![7], &mut ReduceCtx::new(0))?;
        assert_eq!(v, 7);
        assert_eq!(change, Change::Replaced);
        Ok(())
    }

    #[test]
    fn last_value_two_writes_in_one_step_is_a_conflict() {
        let mut v = 1;
        let result = LastValue::<i32>::reduce(&mut v, vec![2, 3], &mut ReduceCtx::new(0));
        assert!(matches!(
            result,
            Err(ReduceError::ConcurrentUpdate { writes: 2 })
        ));
    }

    #[test]
    fn last_value_no_write_leaves_value_unchanged() -> Result<(), ReduceError> {
        let mut v = 1;
        let change = LastValue::<i32>::reduce(&mut v, vec![], &mut ReduceCtx::new(0))?;
        assert_eq!((v, change), (1, Change::Unchanged));
        Ok(())
    }

    #[test]
    fn last_value_stores_the_whole_value() -> Result<(), serde_json::Error> {
        let stored = LastValue::<Vec<i32>>::encode(&vec![1, 2], Change::Replaced)?;
        assert_eq!(stored, crate::Stored::Whole(b"[1,2]".to_vec()));
        let back = LastValue::<Vec<i32>>::decode(&[stored.as_ref()])?;
        assert_eq!(back, [1, 2]);
        Ok(())
    }
}
