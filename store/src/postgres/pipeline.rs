//! A batch of only writes (puts and deletes) in one round trip: `BEGIN`, the batch's locks,
//! the statement that counts the change of the vectors, every write and `COMMIT` are sent
//! together, and only then are the answers awaited.
//!
//! Whether a write changes the stored vectors (which every process's mirror must hear of) is
//! settled before the writes run, so that the count goes with them: a put with vectors
//! changes them; a put or a delete changes them when the item had vectors; in a store that
//! counts every write (one with an index), a delete changes them when the item exists. An
//! earlier write of the same item in the batch answers that from the batch; otherwise the
//! counting statement asks the tables, after the locks are held, so that no other batch's
//! write of the item comes between.
//!
//! A batch of one write is sent this way only when the statements are prepared ([`runs`]):
//! unnamed, its own statements in a transaction cost the server less than planning the
//! counting statement. (A single put with a value into a store without an index is tried
//! first as its one statement, outside any transaction: `super::alone`.)
//!
//! Puts of distinct items, all with values (a bulk load's batches), go as one statement
//! that checks, writes and counts them all in its one snapshot ([`writes::items`]): the
//! server parses and plans one statement where it planned two per put.
//!
//! A failed statement aborts the transaction: the server refuses the statements after it,
//! and the `COMMIT` after them rolls it back. Nothing of the batch is applied, and the
//! connection goes back to the pool outside any transaction.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use deadpool_postgres::Object;
use futures::future::{join_all, maybe_done, MaybeDone};
use stategraph_checkpoints::PostgresSaver;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, Row};

use super::locks;
use super::mirror::Change;
use super::rows::col;
use super::schema::named;
use super::sql::{big, db, Query};
use super::writes;
use crate::prepare::Prepared;
use crate::{Op, PutOp, StoreConfig, StoreError};

/// What a committed batch did to the vectors: the generation it raised them to and the
/// changes, in the batch's order; `None` when it changed none.
pub(super) type Counted = Option<(i64, Vec<Change>)>;

/// Whether this module runs `prepared`: a batch of puts and deletes only, of two or more
/// unless the saver prepares its statements (`named`). A single write as unnamed statements
/// costs the server less in a transaction of three round trips than through this module's
/// vector-counting statement, which it must plan each time (on a loopback connection to a
/// 10,000-item store: 997 against 853 puts a second); prepared, it costs less here (1,749
/// against 945).
pub(super) fn runs(prepared: &Prepared, named: bool) -> bool {
    (named || prepared.ops.len() > 1) && prepared.ops.iter().all(|op| matches!(op, Op::Put(_)))
}

/// Runs a batch of puts and deletes ([`runs`]) on `client`, in one transaction, in one
/// round trip; as named statements when the saver prepares its statements.
/// `counted`: whether the store counts every write ([`super::vectors::Vectors::counted`]).
pub(super) async fn run(
    client: &Object,
    saver: &PostgresSaver,
    config: &StoreConfig,
    counted: bool,
    prepared: &Prepared,
) -> Result<Counted, StoreError> {
    let (schema, now) = (saver.schema(), config.clock.now());
    let writes: Vec<(&PutOp, &[Vec<f32>])> = prepared
        .ops
        .iter()
        .zip(&prepared.vectors)
        .filter_map(|(op, vectors)| match op {
            Op::Put(put) => Some((put, vectors.as_slice())),
            _ => None,
        })
        .collect();
    let mut statements = locks::statements(schema, &prepared.ops, counted);
    let counting;
    if let Some(items) = writes::items(schema, config, now, &writes)? {
        // Puts of distinct items: one statement writes and counts them all.
        counting = Some(statements.len());
        statements.push(items);
        for (put, vectors) in &writes {
            for (field, v) in vectors.iter().enumerate() {
                statements.push(writes::vector(schema, put, field, v));
            }
        }
    } else {
        let probes = Probes::of(&writes, counted);
        counting = (!probes.is_empty()).then_some(statements.len());
        if !probes.is_empty() {
            statements.push(probes.statement(schema));
        }
        for (put, vectors) in &writes {
            match &put.value {
                Some(value) => {
                    statements.push(writes::item(schema, config, now, put, value)?);
                    for (field, v) in vectors.iter().enumerate() {
                        statements.push(writes::vector(schema, put, field, v));
                    }
                }
                None => statements.push(writes::delete(schema, put)),
            }
        }
    }
    let named = saver.prepared_statements();
    let answers = in_transaction(client, &statements, named, "writing a batch").await?;
    let Some(rows) = counting.and_then(|at| answers.get(at)) else {
        return Ok(None);
    };
    let mut generation = None;
    let mut changes = Vec::with_capacity(rows.len());
    for row in rows {
        generation = Some(col::<i64>(row, 0)?);
        let at = usize::try_from(col::<i64>(row, 1)?).unwrap_or(usize::MAX);
        let Some((put, vectors)) = writes.get(at) else {
            continue;
        };
        changes.push(Change {
            ns: put.namespace.to_string(),
            key: put.key.clone(),
            vectors: match put.value {
                Some(_) => vectors.to_vec(),
                None => Vec::new(),
            },
        });
    }
    Ok(generation.map(|g| (g, changes)))
}

/// How a write is known to change the vectors.
#[derive(Clone, Copy)]
enum Probe {
    /// It does.
    Always = 1,
    /// When the item has vectors before it.
    HadVectors = 2,
    /// When the item exists before it.
    Existed = 3,
}

/// The writes that change or may change the vectors, with how each is known.
#[derive(Default)]
struct Probes {
    ns: Vec<String>,
    keys: Vec<String>,
    how: Vec<i32>,
    at: Vec<i64>,
}

impl Probes {
    /// The probes of `writes`, in order.
    fn of(writes: &[(&PutOp, &[Vec<f32>])], counted: bool) -> Self {
        // What the batch's earlier writes left of an item: whether it exists and has vectors.
        let mut known: HashMap<(String, &str), (bool, bool)> = HashMap::new();
        let mut probes = Self::default();
        for (at, (put, vectors)) in writes.iter().enumerate() {
            let ns = put.namespace.to_string();
            let before = known.get(&(ns.clone(), put.key.as_str())).copied();
            let (wanted, after) = match (&put.value, counted) {
                (Some(_), _) => {
                    let wanted = match before {
                        _ if !vectors.is_empty() => Some(Probe::Always),
                        Some((_, had)) => had.then_some(Probe::Always),
                        None => Some(Probe::HadVectors),
                    };
                    (wanted, (true, !vectors.is_empty()))
                }
                (None, true) => {
                    let wanted = match before {
                        Some((existed, _)) => existed.then_some(Probe::Always),
                        None => Some(Probe::Existed),
                    };
                    (wanted, (false, false))
                }
                (None, false) => {
                    let wanted = match before {
                        Some((_, had)) => had.then_some(Probe::Always),
                        None => Some(Probe::HadVectors),
                    };
                    (wanted, (false, false))
                }
            };
            if let Some(how) = wanted {
                probes.ns.push(ns.clone());
                probes.keys.push(put.key.clone());
                probes.how.push(how as i32);
                probes.at.push(big(at));
            }
            known.insert((ns, put.key.as_str()), after);
        }
        probes
    }

    fn is_empty(&self) -> bool {
        self.how.is_empty()
    }

    /// The statement that raises the vectors' generation and logs the writes that change
    /// them, when any does: one row per such write, its generation and its place in the
    /// batch's writes, in order.
    fn statement(self, schema: &str) -> Query {
        let mut q = Query::new("");
        let ns = q.bind(self.ns, Type::TEXT_ARRAY);
        let keys = q.bind(self.keys, Type::TEXT_ARRAY);
        let how = q.bind(self.how, Type::INT4_ARRAY);
        let at = q.bind(self.at, Type::INT8_ARRAY);
        let (always, had, existed) = (
            Probe::Always as i32,
            Probe::HadVectors as i32,
            Probe::Existed as i32,
        );
        q.push(&named(
            schema,
            &format!(
                "WITH w AS (SELECT * FROM unnest({ns}::text[], {keys}::text[], {how}::int4[], \
                 {at}::int8[]) AS w(ns, key, how, at)), \
                 changed AS (SELECT ns, key, at FROM w WHERE how = {always} \
                 OR (how = {had} AND EXISTS (SELECT 1 FROM {{s}}.sg_store_vectors v \
                 WHERE v.ns = w.ns AND v.key = w.key)) \
                 OR (how = {existed} AND EXISTS (SELECT 1 FROM {{s}}.sg_store_items i \
                 WHERE i.ns = w.ns AND i.key = w.key))), \
                 {bump_and_log} \
                 SELECT generation, at FROM bumped, changed ORDER BY at",
                bump_and_log = writes::BUMP_AND_LOG,
            ),
        ));
        q
    }
}

/// A statement's future, boxed so that `BEGIN`, the statements and `COMMIT` share one type.
type Answer<'a> =
    Pin<Box<dyn Future<Output = Result<Vec<Row>, tokio_postgres::Error>> + Send + 'a>>;

/// Runs `statements` between `BEGIN` and `COMMIT`, every message sent before any answer
/// is awaited; their rows, in order. The first failure is the error, saying it happened
/// `what`ever the statements do (the statements after it fail only because the
/// transaction is aborted, and the `COMMIT` rolls it back).
///
/// `prepared`: as named statements the connection prepares once (the first time, one
/// round trip each, before anything is sent; its cache keeps them with the connection),
/// which the server neither parses nor plans again; otherwise unnamed, as a
/// transaction-mode pooler carries them. Only statements of a fixed text go prepared, so
/// that the cache stays small.
pub(super) async fn in_transaction(
    client: &Object,
    statements: &[Query],
    prepared: bool,
    what: &'static str,
) -> Result<Vec<Vec<Row>>, StoreError> {
    let mut named = Vec::new();
    if prepared {
        for q in statements {
            let statement = client.prepare_typed_cached(q.text(), &q.types()).await;
            named.push(statement.map_err(db("preparing a batch's statements"))?);
        }
    }
    let client: &Client = client;
    let params: Vec<_> = statements.iter().map(Query::params).collect();
    let values: Vec<_> = statements.iter().map(Query::values).collect();
    let mut sent: Vec<Pin<Box<MaybeDone<Answer<'_>>>>> = Vec::with_capacity(params.len() + 2);
    let begin: Answer<'_> =
        Box::pin(async { client.batch_execute("BEGIN").await.map(|()| Vec::new()) });
    sent.push(Box::pin(maybe_done(begin)));
    for (at, q) in statements.iter().enumerate() {
        let answer: Answer<'_> = match (named.get(at), values.get(at), params.get(at)) {
            (Some(statement), Some(values), _) => Box::pin(client.query(statement, values)),
            (_, _, Some(params)) => Box::pin(client.query_typed(q.text(), params)),
            _ => return Err(StoreError::Database(format!("{what}: a statement lost"))),
        };
        sent.push(Box::pin(maybe_done(answer)));
    }
    let commit: Answer<'_> =
        Box::pin(async { client.batch_execute("COMMIT").await.map(|()| Vec::new()) });
    sent.push(Box::pin(maybe_done(commit)));
    // A statement's request is sent on its future's first poll: poll each once, in order,
    // so that the server gets them in this order; then wait for every answer.
    futures::future::poll_fn(|cx| {
        for answer in &mut sent {
            let _ = answer.as_mut().poll(cx);
        }
        Poll::Ready(())
    })
    .await;
    join_all(sent.iter_mut().map(Pin::as_mut)).await;
    let mut answers = sent.iter_mut().map(|a| a.as_mut().take_output());
    let mut take = |what: &'static str| match answers.next().flatten() {
        Some(answer) => answer.map_err(db(what)),
        None => Err(StoreError::Database(format!("{what}: no answer"))),
    };
    take("beginning a batch")?;
    let mut rows = Vec::with_capacity(statements.len());
    for _ in statements {
        rows.push(take(what)?);
    }
    take("committing a batch")?;
    Ok(rows)
}
