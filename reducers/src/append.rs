//! [`Append`]: a list that every write extends.

use std::marker::PhantomData;

use serde::{de::DeserializeOwned, Serialize};

use crate::{decode_list, encode_list, Change, ReduceCtx, ReduceError, Reducer, Stored, StoredRef};

/// A list field whose writes are appended, each write's items in order, the writes in task
/// order.
///
/// The type parameter is the field's value type, `Vec<T>`. A checkpoint stores only the items a
/// step appended.
///
/// ```
/// use stategraph_reducers::{Append, Change, ReduceCtx, Reducer};
///
/// let mut log = vec![1];
/// let change = Append::<Vec<u8>>::reduce(&mut log, vec![vec![2], vec![], vec![3]], &mut ReduceCtx::new(1))?;
/// assert_eq!(log, [1, 2, 3]);
/// assert_eq!(change, Change::Appended { from: 1 });
/// # Ok::<(), stategraph_reducers::ReduceError>(())
/// ```
pub struct Append<V>(PhantomData<fn() -> V>);

impl<T> Reducer for Append<Vec<T>>
where
    T: Serialize + DeserializeOwned + Clone + Send + Sync + 'static,
{
    type Value = Vec<T>;
    type Update = Vec<T>;

    /// Append every write's items.
    ///
    /// # Errors
    /// Never fails.
    fn reduce(
        value: &mut Vec<T>,
        writes: Vec<Vec<T>>,
        _ctx: &mut ReduceCtx,
    ) -> Result<Change, ReduceError> {
        let from = value.len();
        for write in writes {
            value.extend(write);
        }
        Ok(if value.len() > from {
            Change::Appended { from }
        } else {
            Change::Unchanged
        })
    }

    fn encode(value: &Vec<T>, change: Change) -> Result<Stored, serde_json::Error> {
        encode_list(value, change)
    }

    fn decode(parts: &[StoredRef<'_>]) -> Result<Vec<T>, serde_json::Error> {
        decode_list(parts)
    }

    fn extend(value: &mut Vec<T>, tails: &[StoredRef<'_>]) -> Result<(), serde_json::Error> {
        crate::extend_list(value, tails)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type A = Append<Vec<i32>>;

    #[test]
    fn append_writes_extend_in_task_order() -> Result<(), ReduceError> {
        let mut v = vec![1];
        let change = A::reduce(&mut v, vec![vec![2, 3], vec![4]], &mut ReduceCtx::new(1))?;
        assert_eq!(v, [1, 2, 3, 4]);
        assert_eq!(change, Change::Appended { from: 1 });
        Ok(())
    }

    #[test]
    fn append_empty_writes_are_unchanged() -> Result<(), ReduceError> {
        let mut v = vec![1];
        let change = A::reduce(&mut v, vec![vec![], vec![]], &mut ReduceCtx::new(1))?;
        assert_eq!((v, change), (vec![1], Change::Unchanged));
        Ok(())
    }

    #[test]
    fn append_checkpoint_stores_only_the_tail() -> Result<(), Box<dyn std::error::Error>> {
        let mut v = vec![1, 2];
        let change = A::reduce(&mut v, vec![vec![3]], &mut ReduceCtx::new(1))?;
        let tail = A::encode(&v, change)?;
        assert_eq!(tail, Stored::Tail(b"[3]".to_vec()));
        let whole = Stored::Whole(b"[1,2]".to_vec());
        assert_eq!(A::decode(&[whole.as_ref(), tail.as_ref()])?, [1, 2, 3]);
        Ok(())
    }
}
