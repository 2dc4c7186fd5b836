//! [`AddMessages`]: the add-messages reducer for a conversation, with its update type.

mod wire;

use std::collections::HashMap;
use std::marker::PhantomData;

use serde::Serialize;

use crate::{
    decode_list, encode_list, extend_list, Change, ListValue, ReduceCtx, ReduceError, Reducer,
    Stored, StoredRef,
};

/// A list item with an optional id, as [`AddMessages`] needs it.
///
/// ```
/// use stategraph_reducers::Message;
///
/// struct Note { id: Option<String>, text: String }
///
/// impl Message for Note {
///     fn id(&self) -> Option<&str> { self.id.as_deref() }
///     fn set_id(&mut self, id: String) { self.id = Some(id); }
/// }
/// ```
pub trait Message {
    /// The message's id, if it has one yet.
    fn id(&self) -> Option<&str>;
    /// Give the message an id (the reducer does this for messages that arrive without one).
    fn set_id(&mut self, id: String);
}

/// One operation of a [`MessagesUpdate`].
///
/// Its JSON is `{"upsert": message}`, `{"remove": id}` or `"remove_all"`. Read from JSON, a
/// bare message also means an upsert, and LangChain's `{"type": "remove", "id": …}` a
/// removal, as the clients of LangGraph's server send them; an update may also be one
/// operation alone instead of a list. A message that does not read is an error that carries
/// the message type's own error and the message's place in the list.
///
/// ```
/// use serde::Deserialize;
/// use stategraph_reducers::{MessageOp, MessagesUpdate};
///
/// #[derive(Debug, PartialEq, Deserialize)]
/// struct Msg { #[serde(rename = "type")] kind: String, content: String }
///
/// let sent = serde_json::json!([
///     {"type": "human", "content": "hi"},
///     {"upsert": {"type": "ai", "content": "hello"}},
///     {"type": "remove", "id": "m1"},
///     {"remove": "m2"},
///     "remove_all",
/// ]);
/// let update: MessagesUpdate<Msg> = serde_json::from_value(sent).unwrap();
/// let msg = |kind: &str, content: &str| Msg { kind: kind.into(), content: content.into() };
/// assert_eq!(update.ops(), [
///     MessageOp::Upsert(msg("human", "hi")),
///     MessageOp::Upsert(msg("ai", "hello")),
///     MessageOp::Remove("m1".into()),
///     MessageOp::Remove("m2".into()),
///     MessageOp::RemoveAll,
/// ]);
/// let one: MessagesUpdate<Msg> =
///     serde_json::from_value(serde_json::json!({"type": "human", "content": "solo"})).unwrap();
/// assert_eq!(one.ops(), [MessageOp::Upsert(msg("human", "solo"))]);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageOp<M> {
    /// Add the message, or replace in place the message that has its id.
    Upsert(M),
    /// Delete the message with this id.
    Remove(String),
    /// Delete every message, including those added earlier in the same step.
    RemoveAll,
}

impl<M> From<M> for MessageOp<M> {
    fn from(message: M) -> Self {
        MessageOp::Upsert(message)
    }
}

/// What one write to an [`AddMessages`] field carries: operations applied in order.
///
/// Most writes just add messages: `MessagesUpdate::from(vec![msg])` or `MessagesUpdate::from(msg)`.
///
/// ```
/// use stategraph_reducers::{MessageOp, MessagesUpdate};
///
/// let mut update = MessagesUpdate::remove("m1");
/// update.push("hello");
/// assert_eq!(update.ops(), [MessageOp::Remove("m1".into()), MessageOp::Upsert("hello")]);
///
/// let reset = MessagesUpdate::replace_all(["only"]);
/// assert_eq!(reset.ops(), [MessageOp::RemoveAll, MessageOp::Upsert("only")]);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct MessagesUpdate<M> {
    ops: Vec<MessageOp<M>>,
}

/// Written as the list of its operations.
impl<M: Serialize> Serialize for MessagesUpdate<M> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.ops.serialize(serializer)
    }
}

impl<M> MessagesUpdate<M> {
    /// An update with no operations.
    pub fn new() -> Self {
        MessagesUpdate { ops: Vec::new() }
    }

    /// An update that deletes the message with `id`.
    pub fn remove(id: impl Into<String>) -> Self {
        MessagesUpdate {
            ops: vec![MessageOp::Remove(id.into())],
        }
    }

    /// An update that deletes every message.
    pub fn remove_all() -> Self {
        MessagesUpdate {
            ops: vec![MessageOp::RemoveAll],
        }
    }

    /// An update that replaces the whole list with `messages`.
    pub fn replace_all(messages: impl IntoIterator<Item = M>) -> Self {
        let mut update = Self::remove_all();
        update.extend(messages);
        update
    }

    /// Add an operation: a message (an upsert) or any [`MessageOp`].
    pub fn push(&mut self, op: impl Into<MessageOp<M>>) {
        self.ops.push(op.into());
    }

    /// Builder form of [`MessagesUpdate::push`].
    pub fn with(mut self, op: impl Into<MessageOp<M>>) -> Self {
        self.push(op);
        self
    }

    /// The operations, in order.
    pub fn ops(&self) -> &[MessageOp<M>] {
        &self.ops
    }

    /// Take the operations out.
    pub fn into_ops(self) -> Vec<MessageOp<M>> {
        self.ops
    }

    /// How many operations the update holds.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the update holds no operation.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

impl<M> Default for MessagesUpdate<M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M> From<M> for MessagesUpdate<M> {
    fn from(message: M) -> Self {
        MessagesUpdate {
            ops: vec![MessageOp::Upsert(message)],
        }
    }
}

impl<M> From<Vec<M>> for MessagesUpdate<M> {
    fn from(messages: Vec<M>) -> Self {
        messages.into_iter().collect()
    }
}

impl<M> From<Vec<MessageOp<M>>> for MessagesUpdate<M> {
    fn from(ops: Vec<MessageOp<M>>) -> Self {
        MessagesUpdate { ops }
    }
}

impl<M> FromIterator<M> for MessagesUpdate<M> {
    fn from_iter<I: IntoIterator<Item = M>>(iter: I) -> Self {
        MessagesUpdate {
            ops: iter.into_iter().map(MessageOp::Upsert).collect(),
        }
    }
}

impl<M> Extend<M> for MessagesUpdate<M> {
    fn extend<I: IntoIterator<Item = M>>(&mut self, iter: I) {
        self.ops.extend(iter.into_iter().map(MessageOp::Upsert));
    }
}

impl<M> IntoIterator for MessagesUpdate<M> {
    type Item = MessageOp<M>;
    type IntoIter = std::vec::IntoIter<MessageOp<M>>;

    fn into_iter(self) -> Self::IntoIter {
        self.ops.into_iter()
    }
}

/// The add-messages reducer: messages are upserted by id, removed by id, or all removed.
///
/// The type parameter is the field's value type, `Vec<M>` or [`List<M>`](crate::List), with
/// `M:` [`Message`]. The
/// operations of a step's writes are applied one after another, in task order:
///
/// - [`MessageOp::Upsert`]: a message without an id gets [`ReduceCtx::new_id`] and is appended;
///   a message whose id is already in the list replaces that message in place; any other
///   message is appended.
/// - [`MessageOp::Remove`]: deletes the message with that id; an id not in the list is
///   [`ReduceError::UnknownMessageId`].
/// - [`MessageOp::RemoveAll`]: empties the list, so the list becomes the messages that follow
///   it.
///
/// Because operations apply strictly in order, reducing several writes in one step gives the
/// same list as reducing them in successive steps. Two deliberate differences from LangGraph's
/// `add_messages` follow from that: a message removed and re-added in one write is appended at
/// the end (LangGraph keeps its old slot), and operations before a `RemoveAll` in the same write
/// still run (so an unknown id there is an error; LangGraph skips them).
///
/// The change is [`Change::Appended`] when the messages that were in the list before the step
/// are all still there, untouched and in place, and [`Change::Replaced`] otherwise. A checkpoint
/// of an appended step stores only the new messages. A step that only adds messages without ids
/// does not look at the existing list at all (minted ids are assumed not to be in it); an upsert
/// with an id scans the list for it from the end, without copying; a removal rebuilds the list
/// (linear in its length).
///
/// ```
/// use stategraph_reducers::{AddMessages, Change, Message, MessagesUpdate, ReduceCtx, Reducer};
/// # use serde::{Deserialize, Serialize};
/// # #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
/// # struct Msg { id: Option<String>, text: String }
/// # impl Message for Msg {
/// #     fn id(&self) -> Option<&str> { self.id.as_deref() }
/// #     fn set_id(&mut self, id: String) { self.id = Some(id); }
/// # }
/// # let msg = |id: Option<&str>, text: &str| Msg { id: id.map(String::from), text: text.into() };
///
/// let mut chat = vec![msg(Some("a"), "hi")];
/// let writes = vec![
///     MessagesUpdate::from(msg(None, "hello")),
///     MessagesUpdate::from(msg(Some("a"), "hi!")),
/// ];
/// let change = AddMessages::<Vec<Msg>>::reduce(&mut chat, writes, &mut ReduceCtx::new(3))?;
/// assert_eq!(chat, [msg(Some("a"), "hi!"), msg(Some("s3-0"), "hello")]);
/// assert_eq!(change, Change::Replaced);
/// # Ok::<(), stategraph_reducers::ReduceError>(())
/// ```
pub struct AddMessages<V>(PhantomData<fn() -> V>);

impl<V> std::fmt::Debug for AddMessages<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AddMessages")
    }
}

impl<V> Reducer for AddMessages<V>
where
    V: ListValue,
    V::Item: Message,
{
    type Value = V;
    type Update = MessagesUpdate<V::Item>;

    /// Apply every operation of every write, in order.
    ///
    /// # Errors
    /// [`ReduceError::UnknownMessageId`] if a removal names an id that is not in the list at
    /// that point. The value is then left partly updated (possibly empty).
    fn reduce(
        value: &mut V,
        writes: Vec<MessagesUpdate<V::Item>>,
        ctx: &mut ReduceCtx,
    ) -> Result<Change, ReduceError> {
        let old_len = value.len();
        let mut prefix_intact = true;
        // Upserts work on the list in place: an id is looked up by a scan from the end, or,
        // when the step upserts many messages with ids (a turn's tool results), in a map of
        // the list's ids made once. The first removal switches to an indexed working copy.
        let mut positions = id_positions(value, &writes);
        let mut indexed: Option<Indexed<V::Item>> = None;
        for op in writes.into_iter().flat_map(|w| w.ops) {
            if let Some(work) = indexed.as_mut() {
                work.apply(op, ctx)?;
                continue;
            }
            match op {
                MessageOp::Upsert(mut message) => {
                    let found = match (message.id(), &positions) {
                        (None, _) => {
                            // Minted ids are assumed not to be in the list.
                            message.set_id(ctx.new_id());
                            None
                        }
                        (Some(id), Some(map)) => map.get(id).copied(),
                        (Some(id), None) => value.items().rposition(|m| m.id() == Some(id)),
                    };
                    match found.and_then(|slot| value.item_mut(slot).map(|m| (slot, m))) {
                        Some((slot, place)) => {
                            *place = message;
                            prefix_intact &= slot >= old_len;
                        }
                        None => {
                            if let (Some(map), Some(id)) = (positions.as_mut(), message.id()) {
                                map.insert(id.to_owned(), value.len());
                            }
                            value.push_item(message);
                        }
                    }
                }
                op => {
                    positions = None;
                    let work = Indexed::new(std::mem::take(value).into_items(), old_len);
                    indexed.insert(work).apply(op, ctx)?;
                }
            }
        }
        if let Some(work) = indexed {
            prefix_intact &= work.prefix_intact;
            *value = V::from_items(work.finish());
        }
        Ok(if !prefix_intact {
            Change::Replaced
        } else if value.len() > old_len {
            Change::Appended { from: old_len }
        } else {
            Change::Unchanged
        })
    }

    /// Replace the list with `new`; a message without an id gets [`ReduceCtx::new_id`], as
    /// an upsert would give it, so a later write can still replace or remove it.
    fn overwrite(value: &mut V, mut new: V, ctx: &mut ReduceCtx) -> Result<(), ReduceError> {
        // Only the messages lacking an id are touched (a shared list stays shared).
        let missing: Vec<usize> = (new.items().enumerate())
            .filter(|(_, m)| m.id().is_none())
            .map(|(i, _)| i)
            .collect();
        for i in missing {
            if let Some(message) = new.item_mut(i) {
                message.set_id(ctx.new_id());
            }
        }
        *value = new;
        Ok(())
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

/// Upserts with ids in one step past which their ids are looked up in a map rather than by
/// scanning the list for each.
const SCANNED_UPSERTS: usize = 8;

/// The position of each id in `value`, when `writes` upsert more than [`SCANNED_UPSERTS`]
/// messages with ids (one scan of the list instead of one per message).
fn id_positions<L: ListValue>(
    value: &L,
    writes: &[MessagesUpdate<L::Item>],
) -> Option<HashMap<String, usize>>
where
    L::Item: Message,
{
    let keyed = writes
        .iter()
        .flat_map(|w| w.ops.iter())
        .filter(|op| matches!(op, MessageOp::Upsert(m) if m.id().is_some()))
        .count();
    (keyed > SCANNED_UPSERTS).then(|| {
        value
            .items()
            .enumerate()
            .filter_map(|(i, m)| m.id().map(|id| (id.to_owned(), i)))
            .collect()
    })
}

/// The working copy of a message list while operations that look up ids are applied.
///
/// Removed messages leave a hole, so every operation is O(1); [`Indexed::finish`] compacts.
struct Indexed<M> {
    slots: Vec<Option<M>>,
    /// Id → slot, for the live messages that have an id.
    index: HashMap<String, usize>,
    /// Length of the list before the step.
    old_len: usize,
    /// Whether every message from before the step is still untouched in its slot.
    prefix_intact: bool,
}

impl<M: Message> Indexed<M> {
    fn new(messages: Vec<M>, old_len: usize) -> Self {
        let mut index = HashMap::with_capacity(messages.len());
        for (i, message) in messages.iter().enumerate() {
            if let Some(id) = message.id() {
                index.insert(id.to_owned(), i);
            }
        }
        Indexed {
            slots: messages.into_iter().map(Some).collect(),
            index,
            old_len,
            prefix_intact: true,
        }
    }

    fn apply(&mut self, op: MessageOp<M>, ctx: &mut ReduceCtx) -> Result<(), ReduceError> {
        match op {
            MessageOp::Upsert(mut message) => {
                let id = match message.id() {
                    Some(id) => id.to_owned(),
                    None => {
                        let id = ctx.new_id();
                        message.set_id(id.clone());
                        id
                    }
                };
                match self.index.get(&id) {
                    Some(&slot) => {
                        self.touch(slot);
                        if let Some(place) = self.slots.get_mut(slot) {
                            *place = Some(message);
                        }
                    }
                    None => {
                        self.index.insert(id, self.slots.len());
                        self.slots.push(Some(message));
                    }
                }
            }
            MessageOp::Remove(id) => match self.index.remove(&id) {
                Some(slot) => {
                    self.touch(slot);
                    if let Some(place) = self.slots.get_mut(slot) {
                        *place = None;
                    }
                }
                None => return Err(ReduceError::UnknownMessageId { id }),
            },
            MessageOp::RemoveAll => {
                if self.old_len > 0 {
                    self.prefix_intact = false;
                }
                self.slots.clear();
                self.index.clear();
            }
        }
        Ok(())
    }

    /// Record that `slot` is replaced or removed.
    fn touch(&mut self, slot: usize) {
        if slot < self.old_len {
            self.prefix_intact = false;
        }
    }

    fn finish(self) -> Vec<M> {
        self.slots.into_iter().flatten().collect()
    }
}

#[cfg(test)]
mod tests;
