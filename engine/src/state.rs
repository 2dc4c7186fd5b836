//! Typed thread state: the [`State`] trait and its field ids.
//!
//! `#[derive(State)]` implements these for a struct; they stay implementable by hand.
//!
//! # Deriving
//!
//! ```
//! use stategraph::reducers::{Change, ReduceCtx};
//! use stategraph::state::{Field, State};
//!
//! fn keep_longest(current: &mut String, update: String) {
//!     if update.len() > current.len() {
//!         *current = update;
//!     }
//! }
//!
//! #[derive(stategraph::State, Clone, Default, Debug)]
//! pub struct Chat {
//!     /// Every message, in order.
//!     #[reduce(append)]
//!     pub messages: Vec<String>,
//!     /// Written by one node per step.
//!     pub counter: i64,
//!     /// The longest title proposed so far.
//!     #[reduce(with = keep_longest)]
//!     pub title: String,
//! }
//!
//! // Generated: `ChatUpdate` (+ setters), `Chat::update()`, `ChatField`, `impl State for Chat`.
//! let writes = vec![
//!     Chat::update().messages(vec!["hi".to_string()]).counter(1),
//!     Chat::update().messages(vec!["there".to_string()]).title("A title".into()),
//! ];
//! let mut chat = Chat::default();
//! let changes = chat.apply(writes, &mut ReduceCtx::new(0)).map_err(|(field, err)| {
//!     format!("{}: {err}", field.name())
//! })?;
//! assert_eq!(chat.messages, ["hi", "there"]);
//! assert_eq!(
//!     changes,
//!     [
//!         (ChatField::Messages, Change::Appended { from: 0 }),
//!         (ChatField::Counter, Change::Replaced),
//!         (ChatField::Title, Change::Replaced),
//!     ]
//! );
//! assert_eq!(ChatField::Title.name(), "title");
//! assert_eq!(
//!     stategraph::serde_json::to_string(&Chat::update().counter(3))?,
//!     r#"{"counter":3}"#
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt::Debug;
use std::hash::Hash;

use serde::{de::DeserializeOwned, Serialize};

pub use stategraph_reducers::{Change, ReduceCtx, ReduceError, Stored, StoredRef};

/// The typed id of one field of a [`State`]: an enum with one variant per field.
///
/// Field ids key versions, stored blobs, diffs and errors; their names are the stable,
/// on-disk identity of a field.
pub trait Field: Copy + Eq + Ord + Hash + Debug + Send + Sync + 'static {
    /// Every field, in declaration order (`ALL[f.index()] == f`).
    const ALL: &'static [Self];

    /// The field's name, as declared in the struct.
    fn name(self) -> &'static str;

    /// The field's position in declaration order.
    fn index(self) -> usize;

    /// The field with this name, if any.
    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|f| f.name() == name)
    }
}

/// A graph's thread state: a struct whose fields each merge writes through a reducer.
///
/// The engine never copies a whole state to hand it to a step's tasks: they share one
/// `Arc<S>` snapshot, and the step's writes are applied in place once no task holds it.
///
/// # Implementing by hand
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use stategraph::state::{Change, Field, ReduceCtx, ReduceError, State, Stored, StoredRef};
/// use stategraph::reducers::{Append, Reducer};
///
/// #[derive(Clone, Default, Debug, PartialEq)]
/// struct Log { lines: Vec<String> }
///
/// #[derive(Clone, Default, Debug, Serialize, Deserialize)]
/// struct LogUpdate { lines: Option<Vec<String>> }
///
/// #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
/// enum LogField { Lines }
///
/// impl Field for LogField {
///     const ALL: &'static [Self] = &[LogField::Lines];
///     fn name(self) -> &'static str { "lines" }
///     fn index(self) -> usize { 0 }
/// }
///
/// impl State for Log {
///     type Update = LogUpdate;
///     type Field = LogField;
///
///     fn apply(
///         &mut self,
///         writes: Vec<LogUpdate>,
///         ctx: &mut ReduceCtx,
///     ) -> Result<Vec<(LogField, Change)>, (LogField, ReduceError)> {
///         let lines: Vec<_> = writes.into_iter().filter_map(|u| u.lines).collect();
///         let mut changes = Vec::new();
///         if !lines.is_empty() {
///             let c = Append::<Vec<String>>::reduce(&mut self.lines, lines, ctx)
///                 .map_err(|e| (LogField::Lines, e))?;
///             changes.push((LogField::Lines, c));
///         }
///         Ok(changes)
///     }
///
///     fn written(update: &LogUpdate, f: &mut dyn FnMut(LogField)) {
///         if update.lines.is_some() { f(LogField::Lines) }
///     }
///
///     fn encode_field(&self, _: LogField, change: Change) -> Result<Stored, serde_json::Error> {
///         Append::<Vec<String>>::encode(&self.lines, change)
///     }
///
///     fn decode_field(&mut self, _: LogField, parts: &[StoredRef<'_>]) -> Result<(), serde_json::Error> {
///         self.lines = Append::<Vec<String>>::decode(parts)?;
///         Ok(())
///     }
/// }
///
/// impl From<LogUpdate> for stategraph::Command<Log> {
///     fn from(u: LogUpdate) -> Self { stategraph::Command::new().update(u) }
/// }
///
/// let mut log = Log::default();
/// let changes = log.apply(vec![LogUpdate { lines: Some(vec!["hi".into()]) }], &mut ReduceCtx::new(0));
/// assert_eq!(changes.unwrap(), vec![(LogField::Lines, Change::Appended { from: 0 })]);
/// ```
pub trait State: Clone + Default + Send + Sync + 'static {
    /// A partial write: every field optional. Nodes return it (or a [`Command`](crate::Command)
    /// carrying it).
    type Update: Clone + Default + Serialize + DeserializeOwned + Send + Sync + 'static;
    /// The field-id enum.
    type Field: Field;

    /// Merge the writes of one step, given in the step's deterministic task order, field by
    /// field through each field's reducer. Returns the fields that changed and how.
    ///
    /// # Errors
    /// The first field whose reducer failed, with the reducer's error. The state may then be
    /// partly updated; the engine discards it.
    #[allow(clippy::type_complexity)]
    fn apply(
        &mut self,
        writes: Vec<Self::Update>,
        ctx: &mut ReduceCtx,
    ) -> Result<Vec<(Self::Field, Change)>, (Self::Field, ReduceError)>;

    /// Call `f` for every field `update` writes.
    fn written(update: &Self::Update, f: &mut dyn FnMut(Self::Field));

    /// The stored form of `field` after `change` (see [`Reducer::encode`](crate::reducers::Reducer::encode)).
    ///
    /// # Errors
    /// Fails if the field's value cannot be serialized.
    fn encode_field(&self, field: Self::Field, change: Change)
        -> Result<Stored, serde_json::Error>;

    /// Set `field` from its stored parts (see [`Reducer::decode`](crate::reducers::Reducer::decode)).
    ///
    /// # Errors
    /// Fails if the parts do not decode into the field's type.
    fn decode_field(
        &mut self,
        field: Self::Field,
        parts: &[StoredRef<'_>],
    ) -> Result<(), serde_json::Error>;

    /// Append stored tail parts to `field` (see [`Reducer::extend`](crate::reducers::Reducer::extend)).
    /// The default refuses, and readers then decode the field whole.
    ///
    /// # Errors
    /// Fails if the field stores whole values only or a part does not decode.
    fn extend_field(
        &mut self,
        field: Self::Field,
        tails: &[StoredRef<'_>],
    ) -> Result<(), serde_json::Error> {
        let _ = (field, tails);
        Err(serde::de::Error::custom(
            "this state does not extend fields in place",
        ))
    }
}

/// The fields an update writes, in declaration order.
pub fn written_fields<S: State>(update: &S::Update) -> Vec<S::Field> {
    let mut out = Vec::new();
    S::written(update, &mut |f| out.push(f));
    out
}
