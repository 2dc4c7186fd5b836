//! What the writer remembers: between transactions, each thread's head and the row of each
//! value it stored ([`WriterMemory`]); within one group, the records it made
//! ([`GroupRecords`]), published to the shared cache when the group commits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rusqlite::Connection;

use super::super::cache::RecordCache;
use super::super::record::StateRecord;
use super::super::schema::SqliteOptions;
use super::super::wal::WalRoom;
use crate::sync::Unpoisoned;
use crate::CheckpointId;

/// A thread's head as the writer's own commits left it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KnownHead {
    /// The head checkpoint.
    pub(crate) id: CheckpointId,
    /// Its row.
    pub(crate) seq: i64,
    /// How many delta records lie between it and the nearest whole one.
    pub(crate) depth: i64,
}

/// What the writer connection remembers between transactions: each thread's head and the
/// row of each value it stored, as its own commits left them. Forgotten whenever another
/// connection commits (`PRAGMA data_version` moves) or an operation of ours is rolled back or
/// deletes. And the room it keeps in the WAL.
pub(crate) struct WriterMemory {
    data_version: Option<i64>,
    /// `(thread, ns)` → its head.
    pub(crate) heads: HashMap<(String, String), KnownHead>,
    /// Value hash → its `sg_blobs` row.
    pub(crate) blobs: HashMap<[u8; 32], i64>,
    /// Each thread's recorded field shapes, as far as this writer knows them.
    pub(crate) shapes: super::super::shapes::KnownShapes,
    /// `(thread, ns)` → the checkpoint against which this writer recorded task outputs of a
    /// step still running: the step's checkpoint drops them (see `Saver::put`).
    pub(crate) recorded_outputs: HashMap<(String, String), CheckpointId>,
    /// `(thread, ns)` → a checkpoint and the last `ord` this writer gave a pending write of
    /// it (a higher one than the file holds is harmless: `ord` only orders).
    pub(crate) write_ords: HashMap<(String, String), (CheckpointId, i64)>,
    /// Each thread's graph key as this writer last recorded it.
    pub(crate) graphs: HashMap<String, String>,
    /// Extends the WAL before a transaction writes (see [`WalRoom`]).
    pub(crate) room: WalRoom,
    /// Whether whole values of up to [`INLINE_MAX`](super::super::record::INLINE_MAX) bytes
    /// are kept in the record: in a format-2 file; never in a format-1 file (even an empty
    /// value), which this build keeps readable by older builds.
    pub(crate) inline: bool,
    /// Whether the file keeps the holder index (`sg_holders`, format 3): each put notes the
    /// value rows and logs its thread starts holding, and deletes and prunes collect through
    /// it.
    pub(crate) holders: bool,
}

/// Most value rows the writer remembers (then it starts over).
const BLOB_MEMORY: usize = 1 << 16;

impl WriterMemory {
    pub(crate) fn new(conn: &Connection, options: &SqliteOptions, format: u32) -> WriterMemory {
        WriterMemory {
            data_version: None,
            heads: HashMap::new(),
            blobs: HashMap::new(),
            shapes: HashMap::new(),
            recorded_outputs: HashMap::new(),
            write_ords: HashMap::new(),
            graphs: HashMap::new(),
            room: WalRoom::new(conn, options),
            inline: format >= 2,
            holders: format >= 3,
        }
    }

    /// Give the WAL its room in a transaction of its own (the writer does this when it
    /// starts, so that the first commits do not wait for it). Best effort: if another
    /// connection holds the write lock, it does not wait (the first group's transaction makes
    /// the room instead).
    pub(crate) fn make_room(&mut self, conn: &Connection, options: &SqliteOptions) {
        if !self.room.wanted() || conn.busy_timeout(std::time::Duration::ZERO).is_err() {
            return;
        }
        if conn.execute_batch("BEGIN IMMEDIATE").is_ok() {
            self.room.ensure();
            let _ = conn.execute_batch("COMMIT");
        }
        let _ = conn.busy_timeout(options.busy_timeout);
    }

    /// Hand the WAL's room back to the disk (see [`WalRoom::give_back`]), holding the write
    /// lock in a transaction of its own; not done if another connection holds the lock.
    pub(crate) fn give_back_room(&mut self, conn: &Connection) {
        if conn.busy_timeout(std::time::Duration::ZERO).is_err() {
            return;
        }
        if conn.execute_batch("BEGIN IMMEDIATE").is_ok() {
            self.room.give_back();
            let _ = conn.execute_batch("ROLLBACK");
        }
    }

    /// Note the file's data version at the start of a transaction: if another connection
    /// committed since our last one, what we remember may be stale and is forgotten.
    pub(crate) fn note_data_version(&mut self, version: i64) {
        if self.data_version != Some(version) {
            self.forget();
            self.data_version = Some(version);
        }
    }

    /// Remember that value `hash` is row `row`.
    pub(crate) fn remember_blob(&mut self, hash: [u8; 32], row: i64) {
        if self.blobs.len() >= BLOB_MEMORY {
            self.blobs.clear();
        }
        self.blobs.insert(hash, row);
    }

    /// Forget every head, value row and shape.
    pub(crate) fn forget(&mut self) {
        self.heads.clear();
        self.blobs.clear();
        self.shapes.clear();
        self.recorded_outputs.clear();
        self.write_ords.clear();
        self.graphs.clear();
    }
}

/// Whole records computed inside the current group, published to the shared cache on
/// commit; and the writer's memory, which the group's operations update.
pub(crate) struct GroupRecords<'a> {
    shared: &'a Mutex<RecordCache>,
    added: Vec<(i64, Arc<StateRecord>)>,
    pub(crate) memory: &'a mut WriterMemory,
}

impl<'a> GroupRecords<'a> {
    pub(crate) fn new(shared: &'a Mutex<RecordCache>, memory: &'a mut WriterMemory) -> Self {
        GroupRecords {
            shared,
            added: Vec::new(),
            memory,
        }
    }

    /// The record of row `seq`: made in this group, or in the shared cache.
    pub(crate) fn lookup(&self, seq: i64) -> Option<Arc<StateRecord>> {
        self.added
            .iter()
            .rev()
            .find(|(s, _)| *s == seq)
            .map(|(_, f)| f.clone())
            .or_else(|| self.shared.lock().unpoisoned().get(seq))
    }

    /// Keep the record of the new row `seq`.
    pub(crate) fn add(&mut self, seq: i64, record: Arc<StateRecord>) {
        self.added.push((seq, record));
    }

    /// A mark to [`undo_since`](Self::undo_since).
    pub(crate) fn mark(&self) -> usize {
        self.added.len()
    }

    /// Drop the records added since `mark` (their operation was rolled back).
    pub(crate) fn undo_since(&mut self, mark: usize) {
        self.added.truncate(mark);
    }

    /// Empty the shared cache (rows were deleted).
    pub(crate) fn clear_shared(&mut self) {
        self.shared.lock().unpoisoned().clear();
    }

    /// Empty the shared cache and forget this group's records (rows were rewritten).
    pub(crate) fn clear_all(&mut self) {
        self.clear_shared();
        self.added.clear();
    }

    /// The group committed: its records go to the shared cache.
    pub(crate) fn publish(self) {
        let mut shared = self.shared.lock().unpoisoned();
        for (seq, record) in self.added {
            shared.insert(seq, record);
        }
    }
}
