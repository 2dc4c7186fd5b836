//! The holder index check of [`verify`](super::verify()) (a format-3 file): every value row and
//! log a thread's checkpoints refer to, with the logs those rest on and the value row a root
//! log's first part refers to, must have its `sg_holders` row for that thread. A missing row is
//! a problem: deleting or pruning another thread that holds the same value would delete it
//! while this thread still reads it. A row with no reference behind it only keeps a value
//! longer, and is not reported.

use std::collections::{BTreeSet, HashSet};

use rusqlite::Connection;

use super::verify::VerifyReport;
use crate::sqlite::{FieldRef, LoadRow, Values};

/// `sg_holders.kind` of a value row and of a log.
const BLOB: i64 = 0;
const LOG: i64 = 1;

/// Longest chain of log bases followed (as a load does).
const MAX_LOG_BASES: usize = 10_000;

/// Check that `sg_holders` names every hold the rows' records make.
pub(super) fn holder_check(
    conn: &Connection,
    rows: &[LoadRow],
    values: &Values,
    report: &mut VerifyReport,
) -> rusqlite::Result<()> {
    let mut direct: HashSet<(&str, i64, i64)> = HashSet::new();
    let mut last = None;
    for r in rows {
        let Ok(body) = &r.body else { continue };
        for (_, f) in &body.fields {
            let (kind, id) = match *f {
                FieldRef::Blob(b) => (BLOB, b),
                FieldRef::Log { log, .. } => (LOG, log),
                FieldRef::Inline | FieldRef::InlineNotJson(_) => continue,
            };
            let hold = (&*r.thread, kind, id);
            // Rows of a thread mostly refer to the same lists: skip the repeat.
            if last != Some(hold) {
                direct.insert(hold);
                last = Some(hold);
            }
        }
    }
    let mut holds: BTreeSet<(&str, i64, i64)> = BTreeSet::new();
    for &(thread, kind, id) in &direct {
        holds.insert((thread, kind, id));
        if kind == LOG {
            down_the_bases(values, thread, id, &mut holds);
        }
    }
    let held: HashSet<(i64, i64, String)> = conn
        .prepare("SELECT kind, id, thread FROM sg_holders")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_, _>>()?;
    for (thread, kind, id) in holds {
        if !held.contains(&(kind, id, thread.to_owned())) {
            let what = if kind == BLOB { "value row" } else { "log" };
            report.problem(
                "sg_holders",
                format!("{what} {id} (thread {thread:?})"),
                format!(
                    "thread {thread:?} refers to {what} {id}, but the holder index does not say \
                     so: deleting or pruning another thread that holds it would delete it"
                ),
            );
        }
    }
    Ok(())
}

/// Add the logs log `log` rests on, and the value row its root log's first part refers to.
fn down_the_bases<'a>(
    values: &Values,
    thread: &'a str,
    log: i64,
    holds: &mut BTreeSet<(&'a str, i64, i64)>,
) {
    let mut cur = log;
    for _ in 0..MAX_LOG_BASES {
        let Some(state) = values.logs.get(&cur) else {
            return;
        };
        match state.base() {
            Some(base) => {
                holds.insert((thread, LOG, base));
                cur = base;
            }
            None => {
                if let Some(b) = state.first_blob() {
                    holds.insert((thread, BLOB, b));
                }
                return;
            }
        }
    }
}
