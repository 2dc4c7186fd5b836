//! Opening a schema (versions, dimensions, a schema in use) and batches of many processes.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use stategraph_checkpoints::{PostgresOptions, PostgresSaver};
use stategraph_store::{
    HashEmbedder, IndexConfig, ManualClock, Op, PutOp, Store, StoreConfig, StoreError, Timestamp,
};

use crate::support::*;

#[tokio::test]
async fn a_newer_schema_version_is_refused_untouched() {
    let Some(saver) = saver("format").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    stategraph_store::PostgresStore::from_saver(&saver, clocked(&clock))
        .await
        .expect("open");
    let client = saver.connection().await.expect("connection");
    client
        .batch_execute(&format!(
            "UPDATE \"{}\".sg_store_meta SET value = '99' WHERE key = 'schema_version'",
            saver.schema()
        ))
        .await
        .expect("raise the version");
    drop(client);
    let refused = stategraph_store::PostgresStore::from_saver(&saver, clocked(&clock)).await;
    assert!(
        matches!(
            refused,
            Err(StoreError::SchemaTooNew {
                found: 99,
                supported: 1
            })
        ),
        "{refused:?}"
    );
    saver.drop_schema().await.expect("drop");
}

#[tokio::test]
async fn a_schema_opened_without_the_recency_index_gets_it() {
    let Some(saver) = saver("recency").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    stategraph_store::PostgresStore::from_saver(&saver, clocked(&clock))
        .await
        .expect("open");
    let index = format!("\"{}\".sg_store_items_by_recency", saver.schema());
    assert!(holds(&saver, &index).await);
    let client = saver.connection().await.expect("connection");
    client
        .batch_execute(&format!("DROP INDEX {index}"))
        .await
        .expect("drop the index, as a schema made before it was");
    drop(client);
    assert!(!holds(&saver, &index).await);
    stategraph_store::PostgresStore::from_saver(&saver, clocked(&clock))
        .await
        .expect("reopen");
    assert!(holds(&saver, &index).await);
    saver.drop_schema().await.expect("drop");
}

#[tokio::test]
async fn a_schema_opened_without_the_put_function_gets_it() {
    let Some((saver, _, _)) = plain_store("put_function").await else {
        return;
    };
    let function = format!("\"{}\".sg_store_put_v1", saver.schema());
    let client = saver.connection().await.expect("connection");
    client
        .batch_execute(&format!("DROP FUNCTION {function}"))
        .await
        .expect("drop the function, as a schema made before it was");
    let clock = ManualClock::at(Timestamp(1_000));
    let store = stategraph_store::PostgresStore::from_saver(&saver, clocked(&clock))
        .await
        .expect("reopen");
    let at = ns(&["users", "a"]);
    store
        .put(&at, "k", obj(json!({"v": 1})))
        .await
        .expect("put");
    let found = client
        .query_one("SELECT to_regproc($1) IS NOT NULL", &[&function])
        .await
        .expect("look");
    assert!(
        found.get::<_, bool>(0),
        "the reopened schema lacks {function}"
    );
    assert!(store.get(&at, "k").await.expect("get").is_some());
    drop(client);
    saver.drop_schema().await.expect("drop");
}

/// Whether the database holds the relation `name`.
async fn holds(saver: &PostgresSaver, name: &str) -> bool {
    let client = saver.connection().await.expect("connection");
    let row = client
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&name])
        .await
        .expect("look for a relation");
    row.get(0)
}

#[tokio::test]
async fn an_index_of_other_dimensions_than_the_stored_vectors_is_refused() {
    let Some(saver) = saver("dims").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    stategraph_store::PostgresStore::from_saver(&saver, indexed(&clock))
        .await
        .expect("open");
    let other = clocked(&clock).index(IndexConfig::new(Arc::new(HashEmbedder::new(32))));
    let refused = stategraph_store::PostgresStore::from_saver(&saver, other).await;
    match refused {
        Err(StoreError::Invalid { what, why }) => {
            assert_eq!(what, "index dims");
            assert!(why.contains("64") && why.contains("32"), "{why}");
        }
        other => panic!("expected a dims error, got {other:?}"),
    }
    saver.drop_schema().await.expect("drop");
}

#[tokio::test]
async fn connect_opens_the_store_in_the_options_schema() {
    let Some(saver) = saver("connect").await else {
        return;
    };
    let url = std::env::var("STATEGRAPH_PG_URL").expect("url");
    let options = PostgresOptions {
        schema: saver.schema().to_owned(),
        ..PostgresOptions::default()
    };
    let store = stategraph_store::PostgresStore::connect(&url, options, StoreConfig::default())
        .await
        .expect("connect");
    assert_eq!(store.saver().schema(), saver.schema());
    assert_eq!(store.vector_backend(), None, "no index, no vector backend");
    let at = ns(&["users", "a"]);
    store
        .put(&at, "k", obj(json!({"v": 1})))
        .await
        .expect("put");
    let seen = stategraph_store::PostgresStore::from_saver(&saver, StoreConfig::default())
        .await
        .expect("open");
    assert!(seen.get(&at, "k").await.expect("get").is_some());
    saver.drop_schema().await.expect("drop");
}

#[tokio::test]
async fn opening_a_schema_in_use_waits_for_no_writer() {
    let Some(saver) = saver("open_busy").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    stategraph_store::PostgresStore::from_saver(&saver, indexed(&clock))
        .await
        .expect("open");
    // A writer in the middle of its transaction holds what every put holds.
    let mut writer = saver.connection().await.expect("connection");
    let tx = writer.transaction().await.expect("begin");
    tx.batch_execute(&format!(
        "LOCK TABLE \"{0}\".sg_store_items, \"{0}\".sg_store_vectors IN ROW EXCLUSIVE MODE",
        saver.schema()
    ))
    .await
    .expect("lock");
    let opened = tokio::time::timeout(
        Duration::from_secs(3),
        stategraph_store::PostgresStore::from_saver(&saver, indexed(&clock)),
    )
    .await;
    assert!(matches!(opened, Ok(Ok(_))), "{opened:?}");
    tx.rollback().await.expect("rollback");
    drop(writer);
    saver.drop_schema().await.expect("drop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_batches_writing_the_same_items_in_opposite_orders_all_land() {
    let Some(saver) = saver("crossed").await else {
        return;
    };
    let clock = ManualClock::at(Timestamp(1_000));
    // With an index (batches also take the generation's lock) and without.
    for config in [indexed(&clock), clocked(&clock)] {
        crossed_batches(&saver, config).await;
    }
    saver.drop_schema().await.expect("drop");
}

async fn crossed_batches(saver: &PostgresSaver, config: StoreConfig) {
    let store = Arc::new(
        stategraph_store::PostgresStore::from_saver(saver, config)
            .await
            .expect("open"),
    );
    let at = ns(&["docs"]);
    let batch = |first: &str, second: &str, round: usize| {
        vec![
            Op::Put(PutOp::new(
                at.clone(),
                first,
                obj(json!({"text": format!("tea {round}")})),
            )),
            Op::Put(PutOp::new(
                at.clone(),
                second,
                obj(json!({"text": format!("boat {round}")})),
            )),
        ]
    };
    let tasks: Vec<_> = (0..4)
        .map(|task| {
            let store = store.clone();
            let ops: Vec<Vec<Op>> = (0..15)
                .map(|round| match task % 2 {
                    0 => batch("x", "y", round),
                    _ => batch("y", "x", round),
                })
                .collect();
            tokio::spawn(async move {
                for ops in ops {
                    store.batch(ops).await?;
                }
                Ok::<(), StoreError>(())
            })
        })
        .collect();
    for task in tasks {
        let landed = task.await.expect("task");
        assert!(landed.is_ok(), "{landed:?}");
    }
}
