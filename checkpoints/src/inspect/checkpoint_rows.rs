//! The `sg_checkpoints` scan of [`verify`](super::verify()): each row read in place (its
//! bytes borrowed from SQLite), its record envelope hashed and its record decoded once, its
//! header checked, its parent link checked against the other rows. Thread and namespace names
//! and field names are kept once per scan, not once per row.

use std::cell::OnceCell;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use rusqlite::{Connection, Row};
use serde::de::IgnoredAny;

use super::verify::{cp_key, Problem, VerifyReport};
use crate::envelope::{hex, open, CODEC_BINCODE};
use crate::sqlite::{decode_fields, header_fault, Fixed, LoadRow, Names};
use crate::{CheckpointId, ThreadId};

/// What the parent-link check needs of every row.
struct Link {
    seq: i64,
    thread: Arc<str>,
    ns: Arc<str>,
    id: Fixed<16>,
    parent: Option<Fixed<16>>,
    parent_seq: Option<i64>,
}

/// Where each checkpoint row is: by its `seq` (the rows are in `seq` order), and, built only
/// when a parent link needs it, the set of `(thread, ns, id)` keys.
struct LinkIndex<'a> {
    rows: &'a [Link],
    by_key: OnceCell<HashSet<(&'a str, &'a str, &'a [u8])>>,
}

impl<'a> LinkIndex<'a> {
    fn at(&self, seq: i64) -> Option<&'a Link> {
        let rows = self.rows;
        rows.binary_search_by_key(&seq, |r| r.seq)
            .ok()
            .map(|i| &rows[i])
    }

    fn has(&self, thread: &str, ns: &str, id: &[u8]) -> bool {
        let rows = self.rows;
        self.by_key
            .get_or_init(|| {
                rows.iter()
                    .map(|r| (&*r.thread, &*r.ns, r.id.as_slice()))
                    .collect()
            })
            .contains(&(thread, ns, id))
    }

    fn parent_row_is(&self, r: &Link, parent: &[u8], parent_seq: i64) -> bool {
        self.at(parent_seq)
            .is_some_and(|p| p.thread == r.thread && p.ns == r.ns && p.id.as_slice() == parent)
    }
}

/// Thread and namespace names, each kept once; and whether each thread name is a valid id.
#[derive(Default)]
struct Texts {
    seen: HashSet<Arc<str>>,
    last_thread: Option<(Arc<str>, Option<Arc<str>>)>,
    last_ns: Option<Arc<str>>,
}

impl Texts {
    fn get(&mut self, text: &str) -> Arc<str> {
        if let Some(t) = self.seen.get(text) {
            return Arc::clone(t);
        }
        let t: Arc<str> = Arc::from(text);
        self.seen.insert(Arc::clone(&t));
        t
    }

    /// A namespace name (rows come namespace by namespace: the last one is tried first).
    fn ns(&mut self, text: &str) -> Arc<str> {
        match &self.last_ns {
            Some(n) if &**n == text => Arc::clone(n),
            _ => {
                let n = self.get(text);
                self.last_ns = Some(Arc::clone(&n));
                n
            }
        }
    }

    /// The thread name and, when it is not a valid thread id, why (checked once per run of
    /// rows of one thread).
    fn thread(&mut self, text: &str) -> (Arc<str>, Option<Arc<str>>) {
        match &self.last_thread {
            Some((t, bad)) if &**t == text => (Arc::clone(t), bad.clone()),
            _ => {
                let t = self.get(text);
                let bad = ThreadId::new(text.to_owned())
                    .err()
                    .map(|e| Arc::from(e.to_string()));
                self.last_thread = Some((Arc::clone(&t), bad.clone()));
                (t, bad)
            }
        }
    }
}

/// A text column in place; an error as `Row::get` gives it for anything but text.
pub(super) fn text<'r>(r: &'r Row<'_>, i: usize) -> rusqlite::Result<&'r str> {
    match r.get_ref(i)?.as_str() {
        Ok(s) => Ok(s),
        Err(e) => r
            .get::<_, String>(i)
            .and(Err(rusqlite::Error::FromSqlConversionFailure(
                i,
                r.get_ref(i)?.data_type(),
                Box::new(e),
            ))),
    }
}

/// A blob column in place; an error as `Row::get` gives it for anything but a blob.
pub(super) fn bytes<'r>(r: &'r Row<'_>, i: usize) -> rusqlite::Result<&'r [u8]> {
    match r.get_ref(i)?.as_blob() {
        Ok(b) => Ok(b),
        Err(e) => r
            .get::<_, Vec<u8>>(i)
            .and(Err(rusqlite::Error::FromSqlConversionFailure(
                i,
                r.get_ref(i)?.data_type(),
                Box::new(e),
            ))),
    }
}

/// A blob-or-NULL column in place.
pub(super) fn opt_bytes<'r>(r: &'r Row<'_>, i: usize) -> rusqlite::Result<Option<&'r [u8]>> {
    match r.get_ref(i)? {
        rusqlite::types::ValueRef::Null => Ok(None),
        _ => bytes(r, i).map(Some),
    }
}

/// What the scan keeps of the rows: every row's link, and the rows to prove loadable.
struct Scan {
    links: Vec<Link>,
    loads: Vec<LoadRow>,
    /// The problems found row by row, with the index of their row.
    problems: Vec<(usize, Problem)>,
}

/// Check every `sg_checkpoints` row; the rows to prove loadable (every row with a readable
/// id), in `seq` order, with their field names in `names`.
pub(super) fn checkpoint_check(
    conn: &Connection,
    report: &mut VerifyReport,
    names: &mut Names,
) -> rusqlite::Result<Vec<LoadRow>> {
    let scan = read_rows(conn, names)?;
    report.counts.checkpoints += scan.links.len();
    let index = LinkIndex {
        rows: &scan.links,
        by_key: OnceCell::new(),
    };
    let mut links = Vec::new();
    for (i, r) in scan.links.iter().enumerate() {
        let mut found = VerifyReport::default();
        parent_check(r, &index, &mut found);
        links.extend(found.problems.into_iter().map(|p| (i, p)));
    }
    // Each row's own problems, then its link's: the order a row-by-row check gives.
    let mut own = scan.problems.into_iter().peekable();
    for (i, p) in links {
        while let Some((_, q)) = own.next_if(|(j, _)| *j <= i) {
            report.problems.push(q);
        }
        report.problems.push(p);
    }
    report.problems.extend(own.map(|(_, q)| q));
    Ok(scan.loads)
}

fn read_rows(conn: &Connection, names: &mut Names) -> rusqlite::Result<Scan> {
    let mut stmt = conn.prepare(
        "SELECT seq, thread, ns, id, parent, parent_seq, source, metadata, body_hash, body,
                typeof(step)
         FROM sg_checkpoints ORDER BY seq",
    )?;
    // Room for the rows at once (growing by doubling copies them into fresh pages several
    // times over): the largest row number SQLite has given, which bounds the count.
    let room = row_number_bound(conn).min(1 << 20);
    let mut rows = stmt.query([])?;
    let mut texts = Texts::default();
    let mut scan = Scan {
        links: Vec::with_capacity(room),
        loads: Vec::with_capacity(room),
        problems: Vec::new(),
    };
    while let Some(r) = rows.next()? {
        let at = scan.links.len();
        let (thread, bad_thread) = texts.thread(text(r, 1)?);
        let ns = texts.ns(text(r, 2)?);
        let link = Link {
            seq: r.get(0)?,
            id: Fixed::new(bytes(r, 3)?),
            parent: opt_bytes(r, 4)?.map(Fixed::new),
            parent_seq: r.get(5)?,
            thread,
            ns,
        };
        let row = RowText {
            source: text(r, 6)?,
            metadata: text(r, 7)?,
            hash: bytes(r, 8)?,
            body: bytes(r, 9)?,
        };
        let mut found = VerifyReport::default();
        // The step is read as an integer by every listing: any other type is damage.
        let step_type = text(r, 10)?;
        if step_type != "integer" {
            let key = cp_key(&link.thread, &link.ns, link.id.as_slice());
            found.problem("sg_checkpoints", key, format!("step stored as {step_type}"));
        }
        if let Some(load) = check_row(&link, bad_thread, &row, names, &mut found) {
            scan.loads.push(load);
        }
        scan.problems
            .extend(found.problems.into_iter().map(|p| (at, p)));
        scan.links.push(link);
    }
    Ok(scan)
}

/// The largest `seq` SQLite has given `sg_checkpoints` (0 if unknown): at least its row count.
fn row_number_bound(conn: &Connection) -> usize {
    conn.query_row(
        "SELECT seq FROM sqlite_sequence WHERE name = 'sg_checkpoints'",
        [],
        |r| r.get::<_, i64>(0),
    )
    .ok()
    .and_then(|n| usize::try_from(n).ok())
    .unwrap_or(0)
}

/// The columns of a row the scan checks and does not keep.
struct RowText<'r> {
    source: &'r str,
    metadata: &'r str,
    hash: &'r [u8],
    body: &'r [u8],
}

/// Check one row's id, record envelope, source and metadata; the row to prove loadable, if
/// its id is readable.
fn check_row(
    link: &Link,
    bad_thread: Option<Arc<str>>,
    row: &RowText<'_>,
    names: &mut Names,
    report: &mut VerifyReport,
) -> Option<LoadRow> {
    let key = || cp_key(&link.thread, &link.ns, link.id.as_slice());
    let id = match &link.id {
        Fixed::Exact(bytes) => Some(CheckpointId::from_u128(u128::from_be_bytes(*bytes))),
        Fixed::Other(b) => {
            report.problem("sg_checkpoints", key(), format!("id of {} bytes", b.len()));
            None
        }
    };
    let payload = open(row.body, CODEC_BINCODE, row.hash);
    if let Err(detail) = &payload {
        report.problem(
            "sg_checkpoints",
            key(),
            format!("record body (hash {}): {detail}", hex(row.hash)),
        );
    }
    let source_ok = matches!(row.source, "input" | "loop" | "update" | "fork");
    if !source_ok {
        report.problem(
            "sg_checkpoints",
            key(),
            format!("unknown source {:?}", row.source),
        );
    }
    let metadata = serde_json::from_str::<BTreeMap<String, IgnoredAny>>(row.metadata)
        .err()
        .map(|e| e.to_string());
    if let Some(e) = &metadata {
        report.problem(
            "sg_checkpoints",
            key(),
            format!("metadata is not a JSON object: {e}"),
        );
    }
    let id = id?;
    let body = payload.and_then(|p| decode_fields(p, names));
    let header = body.as_ref().ok().and_then(|b| {
        header_fault(
            &link.thread,
            id,
            row.source,
            metadata.as_deref(),
            b.bad_send.as_deref(),
            link.parent.as_ref().map(Fixed::as_slice),
        )
    });
    Some(LoadRow {
        thread: Arc::clone(&link.thread),
        ns: Arc::clone(&link.ns),
        id,
        seq: link.seq,
        parent_seq: link.parent_seq,
        bad_thread,
        header: header.map(Box::new),
        hash: Fixed::new(row.hash),
        body,
    })
}

/// The row's parent link: in the same thread and namespace, and `parent_seq` its row.
fn parent_check(r: &Link, index: &LinkIndex<'_>, report: &mut VerifyReport) {
    let key = || cp_key(&r.thread, &r.ns, r.id.as_slice());
    let parent = r.parent.as_ref().map(Fixed::as_slice);
    match (parent, r.parent_seq) {
        (None, None) => {}
        (Some(p), Some(ps)) if index.parent_row_is(r, p, ps) => {}
        (Some(p), _) if !index.has(&r.thread, &r.ns, p) => {
            report.problem(
                "sg_checkpoints",
                key(),
                format!(
                    "its parent {} is not in the same thread and namespace",
                    hex(p)
                ),
            );
        }
        (Some(p), Some(ps)) => match index.at(ps) {
            Some(_) => report.problem(
                "sg_checkpoints",
                key(),
                format!("parent_seq {ps} is not the row of its parent {}", hex(p)),
            ),
            None => report.problem(
                "sg_checkpoints",
                key(),
                format!("parent_seq {ps} is missing"),
            ),
        },
        (Some(p), None) => report.problem(
            "sg_checkpoints",
            key(),
            format!("has parent {} but no parent_seq", hex(p)),
        ),
        (None, Some(ps)) => report.problem(
            "sg_checkpoints",
            key(),
            format!("has parent_seq {ps} but no parent"),
        ),
    }
}
