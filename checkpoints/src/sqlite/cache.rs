//! The records cache: whole state records by checkpoint row, shared by the writer and the
//! readers of one saver, so a load stops at the nearest cached ancestor.

use std::collections::HashMap;
use std::sync::Arc;

use super::record::StateRecord;

/// Whole state records by checkpoint row (`seq` values are never reused, so an entry never
/// goes stale; deleting operations clear it anyway).
#[derive(Default)]
pub(crate) struct RecordCache {
    map: HashMap<i64, Arc<StateRecord>>,
}

/// Most records kept (then the cache starts over).
const CACHE_LIMIT: usize = 4096;

impl RecordCache {
    /// The record of row `seq`, if cached.
    pub(crate) fn get(&self, seq: i64) -> Option<Arc<StateRecord>> {
        self.map.get(&seq).cloned()
    }

    /// Keep the record of row `seq`.
    pub(crate) fn insert(&mut self, seq: i64, record: Arc<StateRecord>) {
        if self.map.len() >= CACHE_LIMIT {
            self.map.clear();
        }
        self.map.insert(seq, record);
    }

    /// Forget every record.
    pub(crate) fn clear(&mut self) {
        self.map.clear();
    }
}
