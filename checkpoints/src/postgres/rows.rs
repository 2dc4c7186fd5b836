//! The rows of a batch of puts, stored by one statement: every checkpoint row, the settling of
//! each `loop` checkpoint's parent, the heads moved to the greatest ids, and (with the last
//! rows of the batch) every value the batch wrote. One round trip for what took one per
//! checkpoint.

use std::collections::BTreeMap;

use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Client;

use super::record::{base_text, refs, wrote_text, Base, Wrote};
use super::sql::{id_bytes, to_i64, Sql};
use crate::{CheckpointError, PutCheckpoint};

/// Store the rows given as parallel arrays (`refs` of row `i` are `$13[$14[i]:$15[i]]`), then
/// drop the task outputs recorded against each `loop` row's parent (the new checkpoint holds
/// them; a pending write's `kind` is serde_json's compact text of its `WriteKind`, so an
/// output's starts with `{"Output":`), move each thread's head to its greatest id, and store
/// the values `$16`/`$17` (sorted by hash, so two batches never wait on each other's new
/// values in opposite orders).
const STORE: &str = r#"
WITH v AS (
    INSERT INTO {s}.sg_values (hash, data)
    SELECT * FROM unnest($16::bytea[], $17::bytea[])
    ON CONFLICT (hash) DO NOTHING
), r AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::bytea[], $4::bytea[], $5::int8[],
        $6::text[], $7::int8[], $8::text[], $9::text[], $10::text[], $11::text[], $12::int4[],
        $14::int4[], $15::int4[])
    AS r(thread, ns, id, parent, step, source, created_at, control, metadata, wrote, base,
         since_base, lo, hi)
), c AS (
    INSERT INTO {s}.sg_checkpoints
        (thread, ns, id, parent, step, source, created_at, control, metadata, wrote, base,
         since_base, refs)
    SELECT thread, ns, id, parent, step, source, created_at, control, metadata, wrote, base,
        since_base, COALESCE(($13::bytea[])[lo:hi], '{}')
    FROM r
), settled AS (
    DELETE FROM {s}.sg_writes w USING r
    WHERE r.source = 'loop' AND w.thread = r.thread AND w.ns = r.ns AND w.checkpoint = r.parent
      AND w.kind LIKE '{"Output":%'
)
UPDATE {s}.sg_heads h SET head = n.id
FROM (SELECT DISTINCT ON (thread, ns) thread, ns, id FROM r ORDER BY thread, ns, id DESC) n
WHERE h.thread = n.thread AND h.ns = n.ns AND h.head < n.id"#;

/// [`STORE`] for one row and its values, with scalar parameters: a smaller statement for the
/// server to plan (a step under durability `sync` is a batch of one). `$14`/`$15` the values.
const STORE_ONE: &str = r#"
WITH v AS (
    INSERT INTO {s}.sg_values (hash, data)
    SELECT * FROM unnest($14::bytea[], $15::bytea[])
    ON CONFLICT (hash) DO NOTHING
), c AS (
    INSERT INTO {s}.sg_checkpoints
        (thread, ns, id, parent, step, source, created_at, control, metadata, wrote, base,
         since_base, refs)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
), settled AS (
    DELETE FROM {s}.sg_writes
    WHERE $6 = 'loop' AND thread = $1 AND ns = $2 AND checkpoint = $4
      AND kind LIKE '{"Output":%'
)
UPDATE {s}.sg_heads SET head = $3 WHERE thread = $1 AND ns = $2 AND head < $3"#;

/// Checkpoint rows not yet stored, as the columns of [`STORE`], and the batch's values.
#[derive(Default)]
pub(crate) struct Rows {
    thread: Vec<String>,
    ns: Vec<String>,
    id: Vec<Vec<u8>>,
    parent: Vec<Option<Vec<u8>>>,
    step: Vec<i64>,
    source: Vec<&'static str>,
    created: Vec<i64>,
    control: Vec<String>,
    metadata: Vec<String>,
    wrote: Vec<String>,
    base: Vec<Option<String>>,
    since: Vec<i32>,
    refs: Vec<Vec<u8>>,
    lo: Vec<i32>,
    hi: Vec<i32>,
    values: BTreeMap<[u8; 32], Vec<u8>>,
}

impl Rows {
    /// Add `put`'s row (its record `wrote`, whole state `base` if it has one, distance from
    /// its base) and the values it wrote.
    pub(crate) fn push(
        &mut self,
        put: &PutCheckpoint,
        (wrote, base, since_base): (&Wrote, Option<&Base>, i32),
        values: Vec<([u8; 32], Vec<u8>)>,
    ) -> Result<(), CheckpointError> {
        let cp = &put.checkpoint;
        let control = serde_json::to_string(&cp.control)
            .map_err(|e| crate::StorageError::new("encoding a checkpoint's control state", e))?;
        let metadata = serde_json::to_string(&cp.metadata)
            .map_err(|e| crate::StorageError::new("encoding a checkpoint's metadata", e))?;
        let row_refs = refs(wrote, base);
        let lo = i32::try_from(self.refs.len() + 1).unwrap_or(i32::MAX);
        self.refs.extend(row_refs);
        self.lo.push(lo);
        self.hi
            .push(i32::try_from(self.refs.len()).unwrap_or(i32::MAX));
        self.thread.push(put.thread.as_str().to_owned());
        self.ns.push(put.ns.as_str().to_owned());
        self.id.push(id_bytes(cp.id));
        self.parent.push(cp.parent.map(id_bytes));
        self.step.push(cp.step);
        self.source.push(cp.source.as_str());
        self.created.push(to_i64(cp.created_at_ms));
        self.control.push(control);
        self.metadata.push(metadata);
        self.wrote.push(wrote_text(wrote));
        self.base.push(base.map(base_text));
        self.since.push(if base.is_some() { 0 } else { since_base });
        self.values.extend(values);
        Ok(())
    }

    /// Store the rows held so far, and with `with_values` every value of the batch.
    pub(crate) async fn store(
        &mut self,
        tx: &Client,
        sql: &Sql,
        with_values: bool,
    ) -> Result<(), CheckpointError> {
        let values = if with_values {
            std::mem::take(&mut self.values)
        } else {
            BTreeMap::new()
        };
        if self.id.is_empty() && values.is_empty() {
            return Ok(());
        }
        let (hashes, data): (Vec<&[u8]>, Vec<&[u8]>) =
            values.iter().map(|(h, d)| (&h[..], &d[..])).unzip();
        if self.id.len() == 1 {
            self.store_one(tx, sql, (&hashes, &data)).await?;
        } else {
            self.store_all(tx, sql, (&hashes, &data)).await?;
        }
        let values = std::mem::take(&mut self.values);
        *self = Rows {
            values,
            ..Rows::default()
        };
        Ok(())
    }

    /// The held rows (any number) by [`STORE`].
    async fn store_all(
        &self,
        tx: &Client,
        sql: &Sql,
        values: (&Vec<&[u8]>, &Vec<&[u8]>),
    ) -> Result<(), CheckpointError> {
        sql.query(tx, STORE, &self.columns(values), "storing checkpoint rows")
            .await?;
        Ok(())
    }

    /// The held rows and `values` as the parameters `$1`–`$17` of [`STORE`].
    pub(crate) fn columns<'a>(
        &'a self,
        (hashes, data): (&'a Vec<&'a [u8]>, &'a Vec<&'a [u8]>),
    ) -> Vec<(&'a (dyn ToSql + Sync), Type)> {
        vec![
            (&self.thread, Type::TEXT_ARRAY),
            (&self.ns, Type::TEXT_ARRAY),
            (&self.id, Type::BYTEA_ARRAY),
            (&self.parent, Type::BYTEA_ARRAY),
            (&self.step, Type::INT8_ARRAY),
            (&self.source, Type::TEXT_ARRAY),
            (&self.created, Type::INT8_ARRAY),
            (&self.control, Type::TEXT_ARRAY),
            (&self.metadata, Type::TEXT_ARRAY),
            (&self.wrote, Type::TEXT_ARRAY),
            (&self.base, Type::TEXT_ARRAY),
            (&self.since, Type::INT4_ARRAY),
            (&self.refs, Type::BYTEA_ARRAY),
            (&self.lo, Type::INT4_ARRAY),
            (&self.hi, Type::INT4_ARRAY),
            (hashes, Type::BYTEA_ARRAY),
            (data, Type::BYTEA_ARRAY),
        ]
    }

    /// Every value held, as the hash and data arrays [`Rows::columns`] takes.
    pub(crate) fn values(&self) -> (Vec<&[u8]>, Vec<&[u8]>) {
        self.values.iter().map(|(h, d)| (&h[..], &d[..])).unzip()
    }

    /// The one held row by [`STORE_ONE`].
    async fn store_one(
        &self,
        tx: &Client,
        sql: &Sql,
        (hashes, data): (&Vec<&[u8]>, &Vec<&[u8]>),
    ) -> Result<(), CheckpointError> {
        let refs: Vec<&[u8]> = self.refs.iter().map(Vec::as_slice).collect();
        sql.query(
            tx,
            STORE_ONE,
            &[
                (&self.thread[0], Type::TEXT),
                (&self.ns[0], Type::TEXT),
                (&self.id[0], Type::BYTEA),
                (&self.parent[0], Type::BYTEA),
                (&self.step[0], Type::INT8),
                (&self.source[0], Type::TEXT),
                (&self.created[0], Type::INT8),
                (&self.control[0], Type::TEXT),
                (&self.metadata[0], Type::TEXT),
                (&self.wrote[0], Type::TEXT),
                (&self.base[0], Type::TEXT),
                (&self.since[0], Type::INT4),
                (&refs, Type::BYTEA_ARRAY),
                (hashes, Type::BYTEA_ARRAY),
                (data, Type::BYTEA_ARRAY),
            ],
            "storing a checkpoint row",
        )
        .await?;
        Ok(())
    }

    /// Whether rows wait to be stored.
    pub(crate) fn is_empty(&self) -> bool {
        self.id.is_empty()
    }
}
