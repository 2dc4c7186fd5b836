//! Graph shapes in the SQLite file (`sg_graphs`, `sg_thread_graphs`): each
//! [`GraphShape`] stored once by its key, and per thread the row of `sg_checkpoints` after
//! which the thread's checkpoints are made by it (see [`crate::graph_shape`]).

use rusqlite::{params, Connection, OptionalExtension};

use super::sql::{id_bytes, integrity, SqlResult};
use super::writer::memory::WriterMemory;
use crate::graph_shape::GraphShape;
use crate::{CheckpointError, CheckpointId, ThreadId};

/// Record that `thread`'s next checkpoints are made by `shape`: nothing when it is the shape
/// the thread ran last, else the shape (once) and a pointer from the thread's newest row on.
pub(crate) fn put_graph(
    conn: &Connection,
    memory: &mut WriterMemory,
    thread: &ThreadId,
    shape: &GraphShape,
) -> Result<(), CheckpointError> {
    let canonical = shape.canonical();
    let key = blake3::hash(&canonical).to_hex().to_string();
    if memory.graphs.get(thread.as_str()) == Some(&key) {
        return Ok(());
    }
    // Cached statements: a run on a new thread (one per invoke, say) comes here each time.
    let last: Option<String> = conn
        .prepare_cached(
            "SELECT hash FROM sg_thread_graphs WHERE thread = ?1 \
             ORDER BY since_seq DESC LIMIT 1",
        )
        .and_then(|mut st| {
            st.query_row(params![thread.as_str()], |r| r.get(0))
                .optional()
        })
        .during("reading the thread's graph")?;
    if last.as_deref() != Some(key.as_str()) {
        conn.prepare_cached("INSERT OR IGNORE INTO sg_graphs (hash, shape) VALUES (?1, ?2)")
            .and_then(|mut st| st.execute(params![key, canonical]))
            .during("storing a graph shape")?;
        conn.prepare_cached(
            "INSERT OR REPLACE INTO sg_thread_graphs (thread, since_seq, hash) \
             VALUES (?1, (SELECT COALESCE(MAX(seq), 0) FROM sg_checkpoints WHERE thread = ?1), ?2)",
        )
        .and_then(|mut st| st.execute(params![thread.as_str(), key]))
        .during("pointing the thread at its graph")?;
    }
    memory.graphs.insert(thread.as_str().to_owned(), key);
    Ok(())
}

/// The shape recorded last for `thread` before `checkpoint`'s row was written (before now
/// when `None`); `None` when there is none or the file predates graph shapes.
pub(crate) fn graph_of(
    conn: &Connection,
    thread: &ThreadId,
    checkpoint: Option<CheckpointId>,
) -> Result<Option<GraphShape>, CheckpointError> {
    let has_table: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' \
             AND name = 'sg_thread_graphs')",
            [],
            |r| r.get(0),
        )
        .during("looking for the graph tables")?;
    if !has_table {
        return Ok(None);
    }
    let seq: i64 = match checkpoint {
        None => i64::MAX,
        Some(id) => {
            let seq = conn
                .query_row(
                    "SELECT MIN(seq) FROM sg_checkpoints WHERE thread = ?1 AND id = ?2",
                    params![thread.as_str(), id_bytes(id)],
                    |r| r.get::<_, Option<i64>>(0),
                )
                .during("finding the checkpoint's row")?;
            match seq {
                Some(seq) => seq,
                None => return Ok(None),
            }
        }
    };
    let row: Option<(String, Vec<u8>)> = conn
        .query_row(
            "SELECT g.hash, g.shape FROM sg_thread_graphs t JOIN sg_graphs g ON g.hash = t.hash \
             WHERE t.thread = ?1 AND t.since_seq < ?2 ORDER BY t.since_seq DESC LIMIT 1",
            params![thread.as_str(), seq],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .during("reading a graph shape")?;
    let Some((hash, bytes)) = row else {
        return Ok(None);
    };
    let shape = GraphShape::from_canonical(&bytes).map_err(|e| {
        integrity(
            thread.as_str(),
            "-",
            format!("sg_graphs {hash}"),
            e.to_string(),
        )
    })?;
    if shape.key() != hash {
        return Err(integrity(
            thread.as_str(),
            "-",
            format!("sg_graphs {hash}"),
            "the stored shape does not hash to its key",
        ));
    }
    Ok(Some(shape))
}
