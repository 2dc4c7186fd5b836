//! [`Append`]: a list that every write extends.

use std::marker::PhantomData;

use crate::{
    decode_list, encode_list, extend_list, Change, ListValue, ReduceCtx, ReduceError, Reducer,
    Stored, StoredRef,
};

/// A list field whose writes are appended, each write's items in order, the writes in task
/// order.
///
/// The type parameter is the field's value type: `Vec<T>`, or [`List<T>`](crate::List) for a
/// long list whose snapshots should share their items. A checkpoint stores only the items a
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

impl<V> std::fmt::Debug for Append<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Append")
    }
}

impl<V: ListValue> Reducer for Append<V> {
    type Value = V;
    type Update = Vec<V::Item>;

    /// Append every write's items.
    ///
    /// # Errors
    /// Never fails.
    fn reduce(
        value: &mut V,
        writes: Vec<Vec<V::Item>>,
        _ctx: &mut ReduceCtx,
    ) -> Result<Change, ReduceError> {
        let from = value.len();
        for write in writes {
            value.append_items(write);
        }
        Ok(if value.len() > from {
            Change::Appended { from }
        } else {
            Change::Unchanged
        })
    }

    fn encode(value: &V, change: Change) -> Result<Stored, serde_json::Error> {
        encode_list(value, change)
    }

    fn decode(parts: &[StoredRef<'_>]) -> Result<V, serde_json::Error> {
        decode_list(parts)
    }

    fn extend(value: &mut V, tails: &[StoredRef<'_>]) -> Result<(), serde_json::Error> {
        extend_list(value, tails)
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
