//! Items: a JSON object under a namespace and a key, with its times.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Namespace;

/// Milliseconds since the Unix epoch, UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// The time now, by the system clock.
    pub fn now() -> Self {
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        Self(ms)
    }

    /// Milliseconds since the epoch.
    pub fn millis(self) -> i64 {
        self.0
    }

    /// This time plus `d`, saturating.
    pub fn plus(self, d: Duration) -> Self {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        Self(self.0.saturating_add(ms))
    }
}

/// A stored item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Item {
    /// Where it lives.
    pub namespace: Namespace,
    /// Its key within the namespace.
    pub key: String,
    /// Its value, a JSON object.
    pub value: Map<String, Value>,
    /// When it was first put.
    pub created_at: Timestamp,
    /// When it was last put.
    pub updated_at: Timestamp,
}

/// An item a search found, with its score when the search ranked by a query: cosine
/// similarity for a vector index, the text rank for full-text search (higher is better).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchItem {
    /// The item.
    #[serde(flatten)]
    pub item: Item,
    /// Its score, when the search had a query.
    pub score: Option<f64>,
}
