//! Each field's [`Shape`], recorded per thread and namespace in `sg_shapes` as steps store
//! values (see [`crate::shape`], decision 0044): the writer merges the shape of every value a
//! put stores into what it knows, and writes the row only when the shape grew.

use std::collections::{BTreeMap, HashMap};

use rusqlite::{params, Connection, OptionalExtension};

use super::sql::SqlResult;
use super::writer::memory::WriterMemory;
use crate::shape::Shape;
use crate::{CheckpointError, FieldPart, PutCheckpoint, Source, StorageError};

/// The shapes the writer knows, by `(thread, ns)` then field.
pub(crate) type KnownShapes = HashMap<(String, String), HashMap<String, Shape>>;

/// Merge the shapes of `p`'s stored values into the thread's recorded shapes. A fork's
/// values are the user's edits, not the program's, and are left out.
pub(crate) fn note(
    conn: &Connection,
    memory: &mut WriterMemory,
    key: &(String, String),
    p: &PutCheckpoint,
) -> Result<(), CheckpointError> {
    if p.checkpoint.source == Source::Fork || p.writes.is_empty() {
        return Ok(());
    }
    if !memory.shapes.contains_key(key) {
        memory.shapes.insert(key.clone(), HashMap::new());
    }
    let Some(known) = memory.shapes.get_mut(key) else {
        return Ok(());
    };
    for w in &p.writes {
        let (FieldPart::Whole(bytes) | FieldPart::Tail(bytes)) = &w.part;
        let shape = match known.get_mut(&w.field) {
            Some(shape) => shape,
            None => {
                let stored = read_one(conn, key, &w.field)?.unwrap_or_default();
                known.entry(w.field.clone()).or_insert(stored)
            }
        };
        if shape.merge_json(bytes) == Some(true) {
            write_one(conn, key, &w.field, shape)?;
        }
    }
    Ok(())
}

fn read_one(
    conn: &Connection,
    (thread, ns): &(String, String),
    field: &str,
) -> Result<Option<Shape>, CheckpointError> {
    let text: Option<String> = conn
        .prepare_cached("SELECT shape FROM sg_shapes WHERE thread = ?1 AND ns = ?2 AND field = ?3")
        .and_then(|mut st| {
            st.query_row(params![thread, ns, field], |r| r.get(0))
                .optional()
        })
        .during("reading a field's shape")?;
    // A damaged row is replaced by what is seen from now on.
    Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
}

fn write_one(
    conn: &Connection,
    (thread, ns): &(String, String),
    field: &str,
    shape: &Shape,
) -> Result<(), CheckpointError> {
    let text =
        serde_json::to_string(shape).map_err(|e| StorageError::new("encoding a shape", e))?;
    conn.prepare_cached(
        "INSERT INTO sg_shapes (thread, ns, field, shape) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (thread, ns, field) DO UPDATE SET shape = excluded.shape",
    )
    .and_then(|mut st| st.execute(params![thread, ns, field, text]))
    .during("recording a field's shape")?;
    Ok(())
}

/// The recorded shapes of a thread's fields in namespace `ns`, by field. A file without the
/// table (older builds wrote it) has none; an unreadable row is left out.
pub(crate) fn read_all(
    conn: &Connection,
    thread: &str,
    ns: &str,
) -> Result<BTreeMap<String, Shape>, CheckpointError> {
    let has_table: bool = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'sg_shapes'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .during("looking for the shapes table")?
        > 0;
    if !has_table {
        return Ok(BTreeMap::new());
    }
    let mut st = conn
        .prepare("SELECT field, shape FROM sg_shapes WHERE thread = ?1 AND ns = ?2")
        .during("preparing the shapes query")?;
    let rows = st
        .query_map(params![thread, ns], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })
        .during("reading the shapes")?;
    let mut out = BTreeMap::new();
    for row in rows {
        let (field, text) = row.during("reading a shape row")?;
        if let Ok(shape) = serde_json::from_str(&text) {
            out.insert(field, shape);
        }
    }
    Ok(out)
}

/// Delete a thread's shapes (the thread is deleted).
pub(crate) fn delete_thread(conn: &Connection, thread: &str) -> Result<(), CheckpointError> {
    conn.execute("DELETE FROM sg_shapes WHERE thread = ?1", [thread])
        .during("deleting a thread's shapes")?;
    Ok(())
}

/// Give the new thread `to` the shapes of `from` (a copy of it or of one of its branches).
pub(crate) fn copy_thread(conn: &Connection, from: &str, to: &str) -> Result<(), CheckpointError> {
    conn.execute(
        "INSERT OR REPLACE INTO sg_shapes (thread, ns, field, shape)
         SELECT ?2, ns, field, shape FROM sg_shapes WHERE thread = ?1",
        params![from, to],
    )
    .during("copying a thread's shapes")?;
    Ok(())
}
