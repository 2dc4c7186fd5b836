//! Ways to damage a checkpoint file, as proptest strategies: bytes of the main file, of its
//! `-wal` or of its high-water record flipped, cut off or overwritten at arbitrary offsets, and
//! SQL-level damage (a row
//! deleted or one of its columns replaced by another row's value or by random bytes, every row
//! of a table deleted, a table dropped or renamed, the format record changed). Tables are
//! named by their index among the file's `sg_` tables, rows by their index in primary-key
//! order, columns by their index, so every case is reproducible from its printed value.

use std::path::Path;

use proptest::prelude::*;
use rusqlite::types::Value;
use rusqlite::Connection;

/// Which file a byte-level damage hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    Main,
    Wal,
    /// `<file>-highwater` (decision 0043).
    HighWater,
}

/// The undamaged length of each file a byte-level damage may hit (0: not there).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spans {
    pub(crate) main: u64,
    /// Up to where the `-wal`'s log ends, see [`wal_span`].
    pub(crate) wal: u64,
    pub(crate) high_water: u64,
}

/// One byte-level damage. Offsets are taken modulo the damaged span of the file (see
/// [`Spans`]).
#[derive(Debug, Clone)]
pub(crate) enum Bytes {
    /// XOR one byte with a non-zero mask.
    Flip {
        target: Target,
        offset: u64,
        mask: u8,
    },
    /// Cut the file at an offset.
    Truncate { target: Target, offset: u64 },
    /// Write arbitrary bytes over the file at an offset (growing it if they run past its end).
    Overwrite {
        target: Target,
        offset: u64,
        bytes: Vec<u8>,
    },
}

/// A value a damaged column is set to.
#[derive(Debug, Clone)]
pub(crate) enum NewValue {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
    /// The same column's value in another row (a plausible mix-up, such as a parent link to
    /// another checkpoint or a value hash of another blob).
    FromRow(usize),
    /// The value with one byte flipped (a text is flipped as bytes and stored as a blob).
    FlipByte {
        at: usize,
        mask: u8,
    },
}

/// One SQL-level damage; `table`, `row` and `column` are indexes taken modulo what the file
/// holds.
#[derive(Debug, Clone)]
pub(crate) enum Sql {
    DeleteRow {
        table: usize,
        row: usize,
    },
    Update {
        table: usize,
        row: usize,
        column: usize,
        value: NewValue,
    },
    DeleteAll {
        table: usize,
    },
    Drop {
        table: usize,
    },
    Rename {
        table: usize,
    },
    /// `sg_meta.format_version` set to this text (or deleted when `None`).
    Format(Option<String>),
    /// A table of another application added to the file.
    Foreign,
}

/// A byte offset: mostly anywhere, often in the first page (the SQLite header and schema).
fn offset() -> impl Strategy<Value = u64> {
    prop_oneof![1 => 0u64..128, 1 => 0u64..4096, 3 => any::<u64>()]
}

fn bytes_on(target: Target) -> impl Strategy<Value = Bytes> {
    prop_oneof![
        4 => (offset(), 1u8..=255).prop_map(move |(offset, mask)| Bytes::Flip { target, offset, mask }),
        1 => offset().prop_map(move |offset| Bytes::Truncate { target, offset }),
        2 => (offset(), proptest::collection::vec(any::<u8>(), 1..48))
            .prop_map(move |(offset, bytes)| Bytes::Overwrite { target, offset, bytes }),
    ]
}

/// One to three byte-level damages: to the main file, its high-water record, and with `wal`
/// its `-wal`.
pub(crate) fn byte_damage(wal: bool) -> BoxedStrategy<Vec<Bytes>> {
    let one = if wal {
        prop_oneof![
            3 => bytes_on(Target::Main),
            3 => bytes_on(Target::Wal),
            1 => bytes_on(Target::HighWater),
        ]
        .boxed()
    } else {
        prop_oneof![3 => bytes_on(Target::Main), 1 => bytes_on(Target::HighWater)].boxed()
    };
    proptest::collection::vec(one, 1..4).boxed()
}

fn new_value() -> impl Strategy<Value = NewValue> {
    prop_oneof![
        Just(NewValue::Null),
        prop_oneof![
            Just(-1i64),
            Just(0),
            Just(i64::MAX),
            Just(i64::MIN),
            any::<i64>()
        ]
        .prop_map(NewValue::Integer),
        prop_oneof![Just(f64::NAN), Just(1.5), Just(-0.0), Just(1e300)].prop_map(NewValue::Real),
        "\\PC{0,12}".prop_map(NewValue::Text),
        proptest::collection::vec(any::<u8>(), 0..80).prop_map(NewValue::Blob),
        any::<usize>().prop_map(NewValue::FromRow),
        (any::<usize>(), 1u8..=255).prop_map(|(at, mask)| NewValue::FlipByte { at, mask }),
    ]
}

fn one_sql() -> impl Strategy<Value = Sql> {
    let table = any::<usize>();
    prop_oneof![
        3 => (table, any::<usize>()).prop_map(|(table, row)| Sql::DeleteRow { table, row }),
        6 => (table, any::<usize>(), any::<usize>(), new_value())
            .prop_map(|(table, row, column, value)| Sql::Update { table, row, column, value }),
        1 => table.prop_map(|table| Sql::DeleteAll { table }),
        1 => table.prop_map(|table| Sql::Drop { table }),
        1 => table.prop_map(|table| Sql::Rename { table }),
        1 => proptest::option::of(prop_oneof![
            Just(String::new()),
            Just("0".to_owned()),
            Just("2".to_owned()),
            Just("999999999999999999999".to_owned()),
            Just("-1".to_owned()),
            "\\PC{0,6}",
        ])
        .prop_map(Sql::Format),
        1 => Just(Sql::Foreign),
    ]
}

/// One to three SQL-level damages.
pub(crate) fn sql_damage() -> impl Strategy<Value = Vec<Sql>> {
    proptest::collection::vec(one_sql(), 1..4)
}

/// The part of a `-wal` worth damaging: up to its last non-zero byte, plus a page of the
/// zeros after it (the writer pads its WAL with zeros it has not used yet, decision 0017).
pub(crate) fn wal_span(wal: &[u8]) -> u64 {
    let used = wal.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
    (used + 4096).min(wal.len()) as u64
}

/// `path` with `suffix` appended to its file name.
pub(crate) fn beside(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    std::path::PathBuf::from(name)
}

/// Apply byte-level damage to `db` (and the files beside it), whose undamaged spans are
/// `spans`. A damage to a file that is not there changes nothing.
pub(crate) fn apply_bytes(db: &Path, damage: &[Bytes], spans: Spans) {
    for d in damage {
        let (target, offset) = match d {
            Bytes::Flip { target, offset, .. }
            | Bytes::Truncate { target, offset }
            | Bytes::Overwrite { target, offset, .. } => (*target, *offset),
        };
        let (path, span) = match target {
            Target::Main => (db.to_path_buf(), spans.main),
            Target::Wal => (beside(db, "-wal"), spans.wal),
            Target::HighWater => (beside(db, "-highwater"), spans.high_water),
        };
        let Ok(mut data) = std::fs::read(&path) else {
            continue;
        };
        let at = usize::try_from(offset % span.max(1)).expect("offset fits");
        match d {
            Bytes::Flip { mask, .. } => {
                if let Some(b) = data.get_mut(at) {
                    *b ^= mask;
                }
            }
            Bytes::Truncate { .. } => data.truncate(at),
            Bytes::Overwrite { bytes, .. } => {
                if data.len() < at + bytes.len() {
                    data.resize(at + bytes.len(), 0);
                }
                data[at..at + bytes.len()].copy_from_slice(bytes);
            }
        }
        std::fs::write(&path, data).expect("write the damaged file");
    }
}

/// The file's `sg_` tables, by name.
fn sg_tables(conn: &Connection) -> Vec<String> {
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'sg\\_%' ESCAPE '\\' ORDER BY name")
        .expect("list tables");
    let names = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .expect("query");
    names.map(|n| n.expect("a name")).collect()
}

/// `(name, primary-key position)` of each column of `table`, in order (position 0: not part
/// of the key). A table without a declared key is keyed by its rowid.
fn columns(conn: &Connection, table: &str) -> Vec<(String, i64)> {
    let mut stmt = conn
        .prepare("SELECT name, pk FROM pragma_table_info(?1) ORDER BY cid")
        .expect("table info");
    let cols = stmt
        .query_map([table], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query");
    cols.map(|c| c.expect("a column")).collect()
}

/// The key columns of `table`: its declared primary key, or `rowid`.
fn key_of(cols: &[(String, i64)]) -> Vec<String> {
    let mut key: Vec<&(String, i64)> = cols.iter().filter(|(_, pk)| *pk > 0).collect();
    key.sort_by_key(|(_, pk)| *pk);
    if key.is_empty() {
        vec!["rowid".to_owned()]
    } else {
        key.into_iter().map(|(n, _)| n.clone()).collect()
    }
}

/// Every row's key of `table`, in key order.
fn keys(conn: &Connection, table: &str, key: &[String]) -> Vec<Vec<Value>> {
    let list = key.join(", ");
    let mut stmt = conn
        .prepare(&format!("SELECT {list} FROM \"{table}\" ORDER BY {list}"))
        .expect("select keys");
    let rows = stmt
        .query_map([], |r| {
            (0..key.len()).map(|i| r.get::<_, Value>(i)).collect()
        })
        .expect("query keys");
    rows.map(|r| r.expect("a key")).collect()
}

/// `a = ?1 AND b = ?2 ...` for the key columns, numbered from `first`.
fn matching(key: &[String], first: usize) -> String {
    key.iter()
        .enumerate()
        .map(|(i, k)| format!("{k} IS ?{}", i + first))
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// The value a damaged column gets, from its old value and the column's values in every row.
fn replacement(value: &NewValue, old: &Value, all: &[Value]) -> Value {
    match value {
        NewValue::Null => Value::Null,
        NewValue::Integer(i) => Value::Integer(*i),
        NewValue::Real(f) => Value::Real(*f),
        NewValue::Text(t) => Value::Text(t.clone()),
        NewValue::Blob(b) => Value::Blob(b.clone()),
        NewValue::FromRow(i) => all[i % all.len()].clone(),
        NewValue::FlipByte { at, mask } => {
            let mut bytes = match old {
                Value::Blob(b) => b.clone(),
                Value::Text(t) => t.clone().into_bytes(),
                Value::Integer(i) => i.to_le_bytes().to_vec(),
                Value::Real(f) => f.to_le_bytes().to_vec(),
                Value::Null => vec![0],
            };
            if bytes.is_empty() {
                bytes.push(0);
            }
            let n = bytes.len();
            bytes[at % n] ^= mask;
            Value::Blob(bytes)
        }
    }
}

/// Apply one SQL-level damage. A damage the schema refuses (a NOT NULL or UNIQUE column, a
/// table with no rows) changes nothing; `Ok(false)` says so.
fn apply_one(conn: &Connection, damage: &Sql) -> rusqlite::Result<bool> {
    if let Sql::Format(value) = damage {
        let n = match value {
            Some(v) => conn.execute(
                "UPDATE sg_meta SET value = ?1 WHERE key = 'format_version'",
                [v],
            )?,
            None => conn.execute("DELETE FROM sg_meta WHERE key = 'format_version'", [])?,
        };
        return Ok(n > 0);
    }
    if let Sql::Foreign = damage {
        conn.execute_batch("CREATE TABLE orders (id INTEGER); INSERT INTO orders VALUES (1);")?;
        return Ok(true);
    }
    let tables = sg_tables(conn);
    if tables.is_empty() {
        return Ok(false);
    }
    let pick = |i: &usize| tables[i % tables.len()].clone();
    match damage {
        Sql::DeleteAll { table } => conn
            .execute(&format!("DELETE FROM \"{}\"", pick(table)), [])
            .map(|n| n > 0),
        Sql::Drop { table } => conn
            .execute(&format!("DROP TABLE \"{}\"", pick(table)), [])
            .map(|_| true),
        Sql::Rename { table } => {
            let name = pick(table);
            conn.execute(
                &format!("ALTER TABLE \"{name}\" RENAME TO \"old_{name}\""),
                [],
            )
            .map(|_| true)
        }
        Sql::DeleteRow { table, row } => {
            let name = pick(table);
            let key = key_of(&columns(conn, &name));
            let rows = keys(conn, &name, &key);
            let Some(k) = rows.get(row % rows.len().max(1)) else {
                return Ok(false);
            };
            let sql = format!("DELETE FROM \"{name}\" WHERE {}", matching(&key, 1));
            conn.execute(&sql, rusqlite::params_from_iter(k))
                .map(|n| n > 0)
        }
        Sql::Update {
            table,
            row,
            column,
            value,
        } => update(conn, &pick(table), *row, *column, value),
        Sql::Format(_) | Sql::Foreign => Ok(false),
    }
}

/// Set one column of one row of `table`.
fn update(
    conn: &Connection,
    table: &str,
    row: usize,
    column: usize,
    value: &NewValue,
) -> rusqlite::Result<bool> {
    let cols = columns(conn, table);
    let key = key_of(&cols);
    let rows = keys(conn, table, &key);
    if rows.is_empty() || cols.is_empty() {
        return Ok(false);
    }
    let k = &rows[row % rows.len()];
    let col = &cols[column % cols.len()].0;
    let all: Vec<Value> = {
        let mut stmt = conn.prepare(&format!(
            "SELECT \"{col}\" FROM \"{table}\" ORDER BY {}",
            key.join(", ")
        ))?;
        let values = stmt.query_map([], |r| r.get::<_, Value>(0))?;
        values.collect::<rusqlite::Result<_>>()?
    };
    let old: Value = conn.query_row(
        &format!(
            "SELECT \"{col}\" FROM \"{table}\" WHERE {}",
            matching(&key, 1)
        ),
        rusqlite::params_from_iter(k),
        |r| r.get(0),
    )?;
    let new = replacement(value, &old, &all);
    let sql = format!(
        "UPDATE \"{table}\" SET \"{col}\" = ?1 WHERE {}",
        matching(&key, 2)
    );
    let params = std::iter::once(&new).chain(k.iter());
    conn.execute(&sql, rusqlite::params_from_iter(params))
        .map(|n| n > 0)
}

/// Apply SQL-level damage to `db` through one connection (closed before returning, which
/// folds the WAL into the file). How many of the damages changed the file.
pub(crate) fn apply_sql(db: &Path, damage: &[Sql]) -> usize {
    let conn = Connection::open(db).expect("open the file to damage");
    let mut changed = 0;
    for d in damage {
        // A refused damage (constraint, missing table after a drop) leaves the file as it was.
        if let Ok(true) = apply_one(&conn, d) {
            changed += 1;
        }
    }
    conn.close().map_err(|(_, e)| e).expect("close");
    changed
}
