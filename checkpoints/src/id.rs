//! Typed identities: threads, namespaces, checkpoints, tasks.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::CheckpointError;

/// Longest accepted thread id, in bytes.
pub const MAX_THREAD_ID_LEN: usize = 256;

/// A thread's id: non-empty, at most [`MAX_THREAD_ID_LEN`] bytes, no control characters.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ThreadId(Arc<str>);

impl ThreadId {
    /// Validate and wrap a thread id.
    ///
    /// # Errors
    /// [`CheckpointError::InvalidThreadId`] if empty, too long or holding control characters.
    pub fn new(id: impl Into<String>) -> Result<Self, CheckpointError> {
        let id: String = id.into();
        match text_id_problem(&id) {
            Some(reason) => Err(CheckpointError::InvalidThreadId {
                id: id.chars().take(64).collect(),
                reason,
            }),
            None => Ok(ThreadId(id.into())),
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Why `id` cannot be a thread or run id (empty, too long, a control character), or `None`.
pub(crate) fn text_id_problem(id: &str) -> Option<&'static str> {
    if id.is_empty() {
        Some("empty")
    } else if id.len() > MAX_THREAD_ID_LEN {
        Some("longer than 256 bytes")
    } else if id.chars().any(char::is_control) {
        Some("contains a control character")
    } else {
        None
    }
}

/// What every validated text id (`ThreadId`, `RunId`: a newtype over `Arc<str>` with a
/// checking `new`) shares: serde through `String`, `Display` as the text, `Debug` quoted.
macro_rules! text_id_impls {
    ($id:ident) => {
        impl TryFrom<String> for $id {
            type Error = $crate::CheckpointError;
            fn try_from(value: String) -> Result<Self, Self::Error> {
                $id::new(value)
            }
        }

        impl From<$id> for String {
            fn from(value: $id) -> Self {
                value.0.to_string()
            }
        }

        impl std::fmt::Display for $id {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::fmt::Debug for $id {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{:?}", &*self.0)
            }
        }
    };
}
pub(crate) use text_id_impls;

text_id_impls!(ThreadId);

/// A checkpoint namespace: `""` for the root graph; each subgraph level adds `node:task`
/// (or `node` for a subgraph that keeps its own history), levels joined by `|`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct Namespace(Arc<str>);

impl Namespace {
    /// The root namespace.
    pub fn root() -> Self {
        Namespace(Arc::from(""))
    }

    /// Whether this is the root namespace.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The namespace of a child level `segment` below this one.
    pub fn child(&self, segment: &str) -> Self {
        if self.0.is_empty() {
            Namespace(Arc::from(segment))
        } else {
            Namespace(Arc::from(format!("{}|{}", self.0, segment)))
        }
    }

    /// Parse a namespace from its text form.
    pub fn parse(text: &str) -> Self {
        Namespace(Arc::from(text))
    }

    /// The namespace as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The levels, outermost first (empty for the root).
    pub fn levels(&self) -> Vec<&str> {
        if self.0.is_empty() {
            Vec::new()
        } else {
            self.0.split('|').collect()
        }
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", &*self.0)
    }
}

/// A checkpoint's id: 128 bits, time-ordered (milliseconds since the epoch in the high 48
/// bits, then a process-wide counter), shown as 32 hex digits. Within one process ids are
/// strictly increasing, so the newest checkpoint has the greatest id.
///
/// Across machines the process clock is a hybrid one: it never falls behind an id the
/// process has seen ([`CheckpointId::observe`], which savers call for every id they load),
/// so a child made after loading its parent has a greater id than the parent even when
/// this machine's clock is behind the one that wrote the parent.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CheckpointId(u128);

static LAST_ID: AtomicU64 = AtomicU64::new(0);

impl CheckpointId {
    /// A new id, greater than every id this process made or observed before.
    pub fn generate() -> Self {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        Self::generate_at(now_ms)
    }

    /// A new id for a child of `parent`: greater than `parent` (and than every id this
    /// process made or observed before), whatever this machine's clock says.
    ///
    /// ```
    /// use stategraph_checkpoints::CheckpointId;
    /// // A parent written by a machine whose clock is an hour ahead of ours.
    /// let ahead = CheckpointId::generate().as_u128() + ((3_600_000u128 << 16) << 64);
    /// let parent = CheckpointId::from_u128(ahead);
    /// assert!(CheckpointId::generate_after(Some(parent)) > parent);
    /// ```
    pub fn generate_after(parent: Option<CheckpointId>) -> Self {
        if let Some(parent) = parent {
            parent.observe();
        }
        Self::generate()
    }

    /// Raise this process's id clock to at least this id: every id generated afterwards is
    /// greater. Savers call it for each id they load, so that ids keep their order across
    /// machines whose clocks disagree (the hybrid clock described on [`CheckpointId`]).
    pub fn observe(self) {
        LAST_ID.fetch_max((self.0 >> 64) as u64, Ordering::Relaxed);
    }

    /// A new id as [`CheckpointId::generate`] makes it when the clock reads `now_ms`.
    fn generate_at(now_ms: u64) -> Self {
        // High 48 bits of the u64: milliseconds; low 16: counter within the millisecond.
        let candidate = now_ms << 16;
        let mut prev = LAST_ID.load(Ordering::Relaxed);
        loop {
            let next = candidate.max(prev.saturating_add(1));
            match LAST_ID.compare_exchange_weak(prev, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    let random = random_u64();
                    return CheckpointId((u128::from(next) << 64) | u128::from(random));
                }
                Err(actual) => prev = actual,
            }
        }
    }

    /// The raw 128-bit value.
    pub fn as_u128(self) -> u128 {
        self.0
    }

    /// Wrap a raw value.
    pub fn from_u128(v: u128) -> Self {
        CheckpointId(v)
    }

    /// Milliseconds since the Unix epoch when the id was made.
    pub fn created_at_ms(self) -> u64 {
        ((self.0 >> 64) as u64) >> 16
    }
}

fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(LAST_ID.load(Ordering::Relaxed));
    h.finish()
}

impl fmt::Display for CheckpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl fmt::Debug for CheckpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CheckpointId({:032x})", self.0)
    }
}

impl FromStr for CheckpointId {
    type Err = CheckpointError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.len() != 32 {
            return Err(CheckpointError::InvalidCheckpointId {
                text: s.chars().take(64).collect(),
            });
        }
        u128::from_str_radix(s, 16)
            .map(CheckpointId)
            .map_err(|_| CheckpointError::InvalidCheckpointId { text: s.to_owned() })
    }
}

impl TryFrom<String> for CheckpointId {
    type Error = CheckpointError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        value.parse()
    }
}

impl From<CheckpointId> for String {
    fn from(value: CheckpointId) -> Self {
        value.to_string()
    }
}

/// A task's id: the blake3 hash (first 128 bits) of the checkpoint the step started from, the
/// namespace, the step, the node and the task's kind and position. The same task gets the same
/// id on every re-execution, so it serves tools as an idempotency key.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TaskId(u128);

impl TaskId {
    /// Derive a task id from its identity parts.
    pub fn derive(parts: &[&[u8]]) -> Self {
        // Length-prefixed parts, hashed in one call (one compression for the usual sizes).
        let total: usize = parts.iter().map(|p| 8 + p.len()).sum();
        let mut stack = [0u8; 256];
        let mut heap = Vec::new();
        let buf: &mut [u8] = if total <= stack.len() {
            &mut stack[..total]
        } else {
            heap.resize(total, 0);
            &mut heap
        };
        let mut at = 0;
        for p in parts {
            buf[at..at + 8].copy_from_slice(&(p.len() as u64).to_le_bytes());
            buf[at + 8..at + 8 + p.len()].copy_from_slice(p);
            at += 8 + p.len();
        }
        let hash = blake3::hash(buf);
        let mut first = [0u8; 16];
        first.copy_from_slice(&hash.as_bytes()[..16]);
        TaskId(u128::from_be_bytes(first))
    }
}

impl TaskId {
    /// The raw 128-bit value.
    pub fn as_u128(self) -> u128 {
        self.0
    }

    /// Wrap a raw value.
    pub fn from_u128(v: u128) -> Self {
        TaskId(v)
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl fmt::Debug for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TaskId({:032x})", self.0)
    }
}

impl TryFrom<String> for TaskId {
    type Error = CheckpointError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        u128::from_str_radix(&value, 16)
            .map(TaskId)
            .map_err(|_| CheckpointError::InvalidCheckpointId { text: value })
    }
}

impl From<TaskId> for String {
    fn from(value: TaskId) -> Self {
        value.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_made_with_a_clock_behind_its_observed_parent_is_still_greater() {
        let now = CheckpointId::generate().created_at_ms();
        // The parent was written by a machine an hour ahead; our clock reads a day behind.
        let parent = CheckpointId::from_u128(u128::from((now + 3_600_000) << 16) << 64);
        parent.observe();
        let child = CheckpointId::generate_at(now - 86_400_000);
        assert!(child > parent, "{child} <= {parent}");
        let grandchild = CheckpointId::generate_at(now - 86_400_000);
        assert!(grandchild > child, "{grandchild} <= {child}");
    }
}
