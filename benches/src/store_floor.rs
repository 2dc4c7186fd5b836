//! The floor under the store's `put` and `get` rows: the same timed loop with nothing of a
//! store around it, so that no store can be faster, and the floor's rate over LangGraph's is
//! the most any store could show against it on this machine.
//!
//! - **Memory:** the loop of `store_rows::measure` (per op it builds the namespace, formats
//!   the key, builds the value for a put, awaits a boxed future and reads the clock, with the
//!   same counts and budgets) against a `HashMap` from namespace and key to the value behind
//!   a `Mutex`, with no index, no order and no TTL; a get clones what an item holds
//!   (namespace, key and value).
//! - **SQLite and PostgreSQL:** the bare driver. A table `(ns, key, value)` keyed by
//!   `(ns, key)` is filled with the same items; a put is one upsert of the value's JSON text
//!   in its own implicit transaction (SQLite at the store's `synchronous` setting, WAL;
//!   PostgreSQL `jsonb`, a prepared statement), a get one `SELECT` by the key whose JSON text
//!   is parsed into a map, as a store returns it. What a store adds (TTL columns, full-text
//!   and vector upkeep, locks, its API) is not there.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures::FutureExt;
use rusqlite::{params, Connection};
use serde_json::{Map, Value};
use stategraph::BoxError;
use stategraph_store::Namespace;
use tokio_postgres::NoTls;

use crate::store_rows::{namespace, timed, value, FILL_BATCH, GETS, PUTS};
use crate::Args;

/// Puts and gets per second of the floor's loops.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Floor {
    pub(crate) put: f64,
    pub(crate) get: f64,
}

/// The floor on `backend` at `items` items; `None` on PostgreSQL without a server's URL.
pub(crate) async fn measure(
    backend: &str,
    items: usize,
    args: &Args,
) -> Result<Option<Floor>, BoxError> {
    match backend {
        "memory" => memory(items).await.map(Some),
        "sqlite" => sqlite(items, args).await.map(Some),
        "postgres" => match args.pg_url.as_deref() {
            Some(url) => postgres(url, items).await.map(Some),
            None => Ok(None),
        },
        _ => Ok(None),
    }
}

type Items = Mutex<HashMap<(Namespace, String), Value>>;

/// Fills a bare map with `items` items as ours is filled, then times its puts and gets.
async fn memory(items: usize) -> Result<Floor, BoxError> {
    let map: Items = Mutex::default();
    for start in (0..items).step_by(FILL_BATCH) {
        let mut m = map.lock().unwrap_or_else(PoisonError::into_inner);
        for i in start..items.min(start + FILL_BATCH) {
            m.insert((namespace(i)?, format!("k{i}")), Value::Object(value(i, i)));
        }
    }
    let map = &map;
    let put = timed(PUTS, 3, |j| async move {
        let (ns, key, v) = (namespace(j)?, format!("n{j}"), value(j, j % items));
        async move {
            let mut m = map.lock().unwrap_or_else(PoisonError::into_inner);
            m.insert((ns, key), Value::Object(v));
        }
        .boxed()
        .await;
        Ok(())
    })
    .await?
    .0;
    let get = timed(GETS, 3, |j| async move {
        let key = (j * 7919) % items;
        let wanted = (namespace(key)?, format!("k{key}"));
        let found = async move {
            let m = map.lock().unwrap_or_else(PoisonError::into_inner);
            m.get_key_value(&wanted)
                .map(|((ns, k), v)| (ns.clone(), k.clone(), v.clone()))
        }
        .boxed()
        .await;
        match found {
            Some(_) => Ok(()),
            None => Err(format!("store floor: k{key} is missing").into()),
        }
    })
    .await?
    .0;
    Ok(Floor { put, get })
}

fn text_of(i: usize, text_of: usize) -> Result<String, BoxError> {
    Ok(serde_json::to_string(&value(i, text_of))?)
}

fn parsed(text: &str) -> Result<Map<String, Value>, BoxError> {
    Ok(serde_json::from_str(text)?)
}

async fn sqlite(items: usize, args: &Args) -> Result<Floor, BoxError> {
    let dir = tempfile::tempdir_in(&args.workdir)?;
    let mut conn = Connection::open(dir.path().join("floor.db"))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", args.sqlite_sync.as_str())?;
    conn.execute_batch(
        "CREATE TABLE items (ns TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, \
         PRIMARY KEY (ns, key))",
    )?;
    let upsert = "INSERT INTO items (ns, key, value) VALUES (?1, ?2, ?3) \
                  ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value";
    let tx = conn.transaction()?;
    for i in 0..items {
        tx.prepare_cached(upsert)?.execute(params![
            namespace(i)?.to_string(),
            format!("k{i}"),
            text_of(i, i)?
        ])?;
    }
    tx.commit()?;
    let conn = &conn;
    let put = timed(PUTS, 3, |j| async move {
        let text = text_of(j, j % items)?;
        conn.prepare_cached(upsert)?.execute(params![
            namespace(j)?.to_string(),
            format!("n{j}"),
            text
        ])?;
        Ok(())
    })
    .await?
    .0;
    let get = timed(GETS, 3, |j| async move {
        let key = (j * 7919) % items;
        let text: String = conn
            .prepare_cached("SELECT value FROM items WHERE ns = ?1 AND key = ?2")?
            .query_row(
                params![namespace(key)?.to_string(), format!("k{key}")],
                |r| r.get(0),
            )?;
        parsed(&text).map(drop)
    })
    .await?
    .0;
    Ok(Floor { put, get })
}

async fn postgres(url: &str, items: usize) -> Result<Floor, BoxError> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    let driver = tokio::spawn(connection);
    let schema = format!("sg_store_floor_{}", std::process::id());
    let result = postgres_rates(&client, &schema, items).await;
    let dropped = client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await;
    drop(client);
    driver.abort();
    let floor = result?;
    dropped?;
    Ok(floor)
}

async fn postgres_rates(
    client: &tokio_postgres::Client,
    schema: &str,
    items: usize,
) -> Result<Floor, BoxError> {
    client
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}; \
             CREATE TABLE {schema}.items (ns TEXT NOT NULL, key TEXT NOT NULL, \
             value JSONB NOT NULL, PRIMARY KEY (ns, key))"
        ))
        .await?;
    let fill = format!(
        "INSERT INTO {schema}.items (ns, key, value) \
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[]::jsonb[])"
    );
    for start in (0..items).step_by(FILL_BATCH) {
        let range = start..items.min(start + FILL_BATCH);
        let ns = range
            .clone()
            .map(|i| Ok(namespace(i)?.to_string()))
            .collect::<Result<Vec<_>, BoxError>>()?;
        let keys: Vec<String> = range.clone().map(|i| format!("k{i}")).collect();
        let texts = range
            .map(|i| text_of(i, i))
            .collect::<Result<Vec<_>, _>>()?;
        client.execute(&fill, &[&ns, &keys, &texts]).await?;
    }
    let upsert = Arc::new(
        client
            .prepare(&format!(
                "INSERT INTO {schema}.items (ns, key, value) VALUES ($1, $2, $3::text::jsonb) \
                 ON CONFLICT (ns, key) DO UPDATE SET value = EXCLUDED.value"
            ))
            .await?,
    );
    let select = Arc::new(
        client
            .prepare(&format!(
                "SELECT value::text FROM {schema}.items WHERE ns = $1 AND key = $2"
            ))
            .await?,
    );
    let put = timed(PUTS, 3, |j| {
        let upsert = upsert.clone();
        async move {
            let (ns, key, text) = (
                namespace(j)?.to_string(),
                format!("n{j}"),
                text_of(j, j % items)?,
            );
            client.execute(upsert.as_ref(), &[&ns, &key, &text]).await?;
            Ok(())
        }
    })
    .await?
    .0;
    let get = timed(GETS, 3, |j| {
        let select = select.clone();
        async move {
            let k = (j * 7919) % items;
            let (ns, key) = (namespace(k)?.to_string(), format!("k{k}"));
            let row = client.query_one(select.as_ref(), &[&ns, &key]).await?;
            parsed(row.get::<_, &str>(0)).map(drop)
        }
    })
    .await?
    .0;
    Ok(Floor { put, get })
}
