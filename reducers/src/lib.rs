//! Reducers for stategraph state fields.
//!
//! A state field's reducer merges every write made to that field in one superstep into the
//! field's current value, in the step's deterministic task order. This crate is a leaf: it knows
//! no graph and no storage, only values and their laws.
//!
//! Every reducer is a zero-sized marker type implementing [`Reducer`], generic over the field's
//! value type where it has one (`Append<Vec<T>>`, `AddMessages<Vec<M>>`, `LastValue<T>`).
//!
//! [`List<T>`] is a list whose clones share their items: the value type for a long
//! append-shaped field, so that snapshots of a thread's history, and a step that writes while
//! someone holds the previous state, cost what was appended instead of the whole list.
//!
//! | reducer | value | one step's writes |
//! |---|---|---|
//! | [`LastValue`] | any `T` | exactly one write replaces; two are a [`ReduceError::ConcurrentUpdate`] |
//! | [`Append`] | `Vec<T>` or [`List<T>`] | each write's items are appended in order |
//! | [`AddMessages`] | `Vec<M: Message>` or [`List<M>`] | upsert by id, remove by id, remove all |
//! | [`Artifacts`] | `Vec<String>` | order-preserving union with dedup |
//! | [`SandboxReducer`] | `Option<SandboxState>` | an id may be set once; a different id is a conflict |
//! | [`PromotedReducer`] | `Option<Promoted>` | names bound to a catalog hash |
//!
//! ```
//! use stategraph_reducers::{Append, Change, ReduceCtx, Reducer};
//!
//! let mut log = vec![1, 2];
//! let change = Append::<Vec<i32>>::reduce(&mut log, vec![vec![3], vec![4, 5]], &mut ReduceCtx::new(1))?;
//! assert_eq!(log, [1, 2, 3, 4, 5]);
//! assert_eq!(change, Change::Appended { from: 2 });
//! # Ok::<(), stategraph_reducers::ReduceError>(())
//! ```

mod append;
mod artifact;
mod error;
mod last_value;
mod list;
mod message;
mod promotion;
mod reducer;
mod sandbox;

pub use append::Append;
pub use artifact::Artifacts;
pub use error::ReduceError;
pub use last_value::LastValue;
pub use list::{Iter, List, ListValue};
pub use message::{AddMessages, Message, MessageOp, MessagesUpdate};
pub use promotion::{Promoted, PromotedReducer};
pub use reducer::{
    decode_list, encode_list, extend_list, Change, ReduceCtx, Reducer, Stored, StoredRef,
};
pub use sandbox::{SandboxReducer, SandboxState};

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    /// A message type that is neither `Send` nor `Sync` does not make the marker types so.
    #[allow(dead_code)]
    struct NotSync(std::rc::Rc<()>);

    #[test]
    fn public_types_are_send_and_sync() {
        assert_send_sync::<LastValue<NotSync>>();
        assert_send_sync::<Append<Vec<NotSync>>>();
        assert_send_sync::<List<String>>();
        assert_send_sync::<AddMessages<Vec<NotSync>>>();
        assert_send_sync::<Artifacts>();
        assert_send_sync::<SandboxReducer>();
        assert_send_sync::<PromotedReducer>();
        assert_send_sync::<SandboxState>();
        assert_send_sync::<Promoted>();
        assert_send_sync::<MessagesUpdate<String>>();
        assert_send_sync::<ReduceCtx>();
        assert_send_sync::<ReduceError>();
        assert_send_sync::<Stored>();
    }
}
