//! The order a batch takes its locks in, so that concurrent batches never wait on each other
//! in a cycle: first the vectors' generation row (when the store counts it), then one
//! transaction-scoped advisory lock per item the batch writes, in ascending order of key.
//! A deadlock that remains possible (a sweep, or reads that restart TTLs, against a batch)
//! is retried: see [`retryable`]. A single put run alone (one put with a value into a store
//! without an index) takes its item's advisory lock first too, inside the function it calls
//! ([`super::writes::put_function`]).

use tokio_postgres::types::Type;
use tokio_postgres::Transaction;

use super::schema::named;
use super::sql::{db, Query};
use crate::{Op, StoreError};

/// The statements that take a batch's write locks, to run before anything it writes (none
/// for a batch without a put). The batch sends them with its first run of puts, or awaits
/// them before its first other op.
pub(super) fn statements(schema: &str, ops: &[Op], counted: bool) -> Vec<Query> {
    let mut keys: Vec<i64> = ops
        .iter()
        .filter_map(|op| match op {
            Op::Put(put) => Some(lock_key(schema, &put.namespace.to_string(), &put.key)),
            _ => None,
        })
        .collect();
    if keys.is_empty() {
        return Vec::new();
    }
    keys.sort_unstable();
    keys.dedup();
    let mut out = Vec::with_capacity(2);
    if counted {
        out.push(Query::new(named(schema, GENERATION_LOCK)));
    }
    // `unnest` yields the keys in the array's order, and each row takes its lock in turn.
    let mut items = Query::new("");
    let keys = items.bind(keys, Type::INT8_ARRAY);
    items.push(&format!(
        "SELECT count(pg_advisory_xact_lock(k)) FROM unnest({keys}::int8[]) AS k"
    ));
    out.push(items);
    out
}

const GENERATION_LOCK: &str =
    "SELECT 1 FROM {s}.sg_store_meta WHERE key = 'vector_generation' FOR UPDATE";

/// Locks the vectors' generation row until the transaction ends.
pub(super) async fn lock_generation(tx: &Transaction<'_>, schema: &str) -> Result<(), StoreError> {
    tx.query_typed(&named(schema, GENERATION_LOCK), &[])
        .await
        .map_err(db("locking the vectors' generation"))?;
    Ok(())
}

/// Whether a failed transaction may simply be run again: the server broke a deadlock
/// (SQLSTATE 40P01) or refused a serialisation (40001) by rolling it back.
pub(super) fn retryable(e: &StoreError) -> bool {
    matches!(e, StoreError::Database(why)
        if why.ends_with("(SQLSTATE 40P01)") || why.ends_with("(SQLSTATE 40001)"))
}

/// An item's advisory lock key: FNV-1a of the schema, namespace and key, NUL-separated.
pub(super) fn lock_key(schema: &str, ns: &str, key: &str) -> i64 {
    let bytes = [
        schema.as_bytes(),
        b"\0",
        ns.as_bytes(),
        b"\0",
        key.as_bytes(),
    ];
    let h = bytes
        .iter()
        .flat_map(|b| b.iter())
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
        });
    i64::from_ne_bytes(h.to_ne_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_deadlocks_and_serialisation_failures_are_retried() {
        let db = |code: &str| StoreError::Database(format!("writing an item: x (SQLSTATE {code})"));
        assert!(retryable(&db("40P01")));
        assert!(retryable(&db("40001")));
        assert!(!retryable(&db("23505")));
        assert!(!retryable(&StoreError::Closed));
    }
}
