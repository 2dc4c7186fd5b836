//! Clauses only the PostgreSQL saver has: several pools (as several processes have) on one
//! schema, garbage collection while another writes, damaged and newer tables, and the
//! tables' layout.

use stategraph_tests::writes::{header_at as header_with, put_of, tail, whole};
use std::sync::Arc;

use stategraph_checkpoints::{
    CheckpointError, CheckpointId, FieldPart, ListOptions, Namespace, PostgresOptions,
    PostgresSaver, PutCheckpoint, Retention, Saver, Source, ThreadId, POSTGRES_FORMAT_VERSION,
};

use crate::pg_support::{self, SchemaGuard};
use crate::TestResult;

/// A second saver (its own pool, as another process has) on the schema of `first`.
async fn another_pool(url: &str, first: &PostgresSaver) -> Result<PostgresSaver, CheckpointError> {
    let options = PostgresOptions {
        schema: first.schema().to_owned(),
        pool_size: 4,
        ..PostgresOptions::default()
    };
    PostgresSaver::connect_with(url, options).await
}

async fn count(
    client: &tokio_postgres::Client,
    guard: &SchemaGuard,
    sql: &str,
) -> Result<i64, tokio_postgres::Error> {
    let sql = sql.replace("{s}", &format!("\"{}\"", guard.schema));
    client.query_one(&sql, &[]).await?.try_get(0)
}

/// The items of a list field as loaded.
fn items(parts: &[FieldPart]) -> Result<Vec<i64>, serde_json::Error> {
    let mut out = Vec::new();
    for p in parts {
        let (FieldPart::Whole(b) | FieldPart::Tail(b)) = p;
        out.extend(serde_json::from_slice::<Vec<i64>>(b)?);
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writers_from_two_pools_on_one_thread_commit_exactly_one_child_and_the_other_stores_nothing(
) -> TestResult {
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let (a, guard) = pg_support::fresh(&url, "two_pools").await?;
    let b = another_pool(&url, &a).await?;
    let t = ThreadId::new("shared")?;
    let root = put_of(&t, None, -1, vec![whole("w", "0")]);
    let mut head = root.checkpoint.id;
    a.put(root).await?;
    for round in 0..20 {
        if round % 2 == 0 {
            // Both load the head: both know it, and both puts go by one call (decision 0059).
            a.get(&t, &Namespace::root(), None).await?;
            b.get(&t, &Namespace::root(), None).await?;
        }
        let pa = put_of(
            &t,
            Some(head),
            round,
            vec![whole("w", format!("\"a{round}\""))],
        );
        let pb = put_of(
            &t,
            Some(head),
            round,
            vec![whole("w", format!("\"b{round}\""))],
        );
        let (ida, idb) = (pa.checkpoint.id, pb.checkpoint.id);
        let (ra, rb) = tokio::join!(a.put(pa), b.put(pb));
        let won = match (&ra, &rb) {
            (Ok(()), Err(CheckpointError::StaleParent { .. })) => ida,
            (Err(CheckpointError::StaleParent { .. }), Ok(())) => idb,
            other => return Err(format!("round {round}: {other:?}").into()),
        };
        let lost = if won == ida { idb } else { ida };
        let gone = b.get(&t, &Namespace::root(), Some(lost)).await;
        assert!(
            matches!(gone, Err(CheckpointError::NotFound { .. })),
            "{gone:?}"
        );
        head = won;
    }
    let list = a
        .list(&t, &Namespace::root(), ListOptions::default())
        .await?;
    assert_eq!(list.len(), 21);
    for pair in list.windows(2) {
        assert_eq!(pair[0].parent, Some(pair[1].id));
    }
    // The losers' values were never stored: 21 distinct values for 21 checkpoints.
    let raw = pg_support::raw(&url).await?;
    assert_eq!(
        count(&raw, &guard, "SELECT count(*) FROM {s}.sg_values").await?,
        21
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collecting_values_while_another_pool_writes_the_same_values_loses_none() -> TestResult {
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let (collector, _guard) = pg_support::fresh(&url, "gc_race").await?;
    let writer = another_pool(&url, &collector).await?;
    let (doomed, kept) = (ThreadId::new("doomed")?, ThreadId::new("kept")?);
    let mut head = None;
    for i in 0..60i64 {
        // The doomed thread stores value i first; then, at once, the kept thread refers to
        // the same value (already stored, so its put inserts nothing) while the doomed
        // thread is deleted, which makes value i a candidate for collection.
        let value = format!("\"value {i}\"");
        collector
            .put(put_of(&doomed, None, -1, vec![whole("v", &value)]))
            .await?;
        let put = put_of(&kept, head, i, vec![whole("v", &value)]);
        let id = put.checkpoint.id;
        let (wrote, deleted) = tokio::join!(writer.put(put), collector.delete_thread(&doomed));
        wrote?;
        deleted?;
        head = Some(id);
    }
    for c in collector
        .list(&kept, &Namespace::root(), ListOptions::default())
        .await?
    {
        let loaded = collector.get(&kept, &Namespace::root(), Some(c.id)).await?;
        let loaded = loaded.ok_or("missing checkpoint")?;
        assert_eq!(loaded.fields["v"].len(), 1, "{:?}", c.id);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pruning_collects_values_only_pruned_checkpoints_referred_to() -> TestResult {
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let (saver, guard) = pg_support::fresh(&url, "prune_gc").await?;
    let (t, other) = (ThreadId::new("t")?, ThreadId::new("other")?);
    saver
        .put(put_of(&other, None, -1, vec![whole("n", "\"shared\"")]))
        .await?;
    let mut parent = None;
    for i in 0..10i64 {
        let n = if i == 0 {
            "\"shared\"".to_owned()
        } else {
            format!("\"n{i}\"")
        };
        let put = put_of(&t, parent, i, vec![whole("n", &n)]);
        parent = Some(put.checkpoint.id);
        saver.put(put).await?;
    }
    let raw = pg_support::raw(&url).await?;
    assert_eq!(
        count(&raw, &guard, "SELECT count(*) FROM {s}.sg_values").await?,
        10
    );
    assert_eq!(saver.prune(&t, Retention::KeepLast(2)).await?, 8);
    // Left: the shared value (the other thread's) and the two kept checkpoints' values.
    assert_eq!(
        count(&raw, &guard, "SELECT count(*) FROM {s}.sg_values").await?,
        3
    );
    assert_eq!(
        saver.collect_garbage().await?,
        0,
        "nothing unreferenced is left"
    );
    let head = saver
        .get(&t, &Namespace::root(), None)
        .await?
        .ok_or("no head")?;
    assert_eq!(head.fields["n"], [FieldPart::Whole(b"\"n9\"".to_vec())]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_value_is_an_integrity_error_naming_thread_checkpoint_and_value() -> TestResult {
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let (saver, guard) = pg_support::fresh(&url, "damage").await?;
    let t = ThreadId::new("victim")?;
    let put = put_of(
        &t,
        None,
        -1,
        vec![whole("title", "\"a title\""), tail("log", "[1]")],
    );
    let id = put.checkpoint.id;
    saver.put(put).await?;
    let hash = blake3::hash(b"\"a title\"").to_hex().to_string();
    let raw = pg_support::raw(&url).await?;
    let s = format!("\"{}\"", guard.schema);
    for (damage, detail) in [
        // One flipped bit in the payload: the bytes no longer match their hash.
        (format!("UPDATE {s}.sg_values SET data = set_byte(data, 6, get_byte(data, 6) # 1) WHERE encode(hash, 'hex') = '{hash}'"), "does not match its hash"),
        // A broken envelope.
        (format!("UPDATE {s}.sg_values SET data = 'XYZ' || substr(data, 4) WHERE encode(hash, 'hex') = '{hash}'"), "bad magic"),
        // The value gone.
        (format!("DELETE FROM {s}.sg_values WHERE encode(hash, 'hex') = '{hash}'"), "missing"),
    ] {
        raw.batch_execute(&format!("BEGIN; {damage}; COMMIT")).await?;
        match saver.get(&t, &Namespace::root(), Some(id)).await {
            Err(e @ CheckpointError::Integrity { .. }) => {
                let CheckpointError::Integrity { thread, checkpoint, blob, detail: got } = &e else {
                    unreachable!()
                };
                assert_eq!(thread, "victim");
                assert_eq!(checkpoint, &id.to_string());
                assert_eq!(blob, &hash);
                assert!(got.contains(detail), "{e}");
            }
            other => return Err(format!("expected an integrity error, got {other:?}").into()),
        }
        // Put the value back for the next kind of damage.
        raw.batch_execute(&format!("DELETE FROM {s}.sg_values WHERE encode(hash, 'hex') = '{hash}'"))
            .await?;
        saver
            .put(put_of(&ThreadId::new("repair")?, None, -1, vec![whole("title", "\"a title\"")]))
            .await
            .or_else(|e| match e {
                CheckpointError::StaleParent { .. } => Ok(()),
                e => Err(e),
            })?;
        let repaired = count(&raw, &guard, &format!("SELECT count(*) FROM {{s}}.sg_values WHERE encode(hash, 'hex') = '{hash}'")).await?;
        if repaired == 0 {
            raw.batch_execute(&format!(
                "INSERT INTO {s}.sg_values (hash, data) VALUES (decode('{hash}', 'hex'), 'SGB' || '\\x0101'::bytea || convert_to('\"a title\"', 'UTF8'))"
            ))
            .await?;
        }
        assert!(saver.get(&t, &Namespace::root(), Some(id)).await.is_ok());
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_of_a_newer_format_is_refused_untouched() -> TestResult {
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let (saver, guard) = pg_support::fresh(&url, "newer").await?;
    drop(saver);
    let raw = pg_support::raw(&url).await?;
    let s = format!("\"{}\"", guard.schema);
    raw.batch_execute(&format!(
        "UPDATE {s}.sg_meta SET value = '99' WHERE key = 'format_version'"
    ))
    .await?;
    let options = PostgresOptions {
        schema: guard.schema.clone(),
        ..PostgresOptions::default()
    };
    match PostgresSaver::connect_with(&url, options).await {
        Err(CheckpointError::UnsupportedFormatVersion {
            found: 99,
            supported,
        }) => {
            assert_eq!(supported, POSTGRES_FORMAT_VERSION);
        }
        other => return Err(format!("expected UnsupportedFormatVersion, got {other:?}").into()),
    }
    let row = raw
        .query_one(
            &format!("SELECT value FROM {s}.sg_meta WHERE key = 'format_version'"),
            &[],
        )
        .await?;
    assert_eq!(row.try_get::<_, String>(0)?, "99");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_openers_of_a_new_schema_create_it_once() -> TestResult {
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let schema = pg_support::unique_schema("openers");
    let guard = SchemaGuard {
        url: url.clone(),
        schema: schema.clone(),
    };
    let opens = (0..8).map(|_| {
        let options = PostgresOptions {
            schema: schema.clone(),
            pool_size: 1,
            ..PostgresOptions::default()
        };
        let url = url.clone();
        tokio::spawn(async move { PostgresSaver::connect_with(&url, options).await })
    });
    let mut savers = Vec::new();
    for open in opens {
        savers.push(open.await??);
    }
    let raw = pg_support::raw(&url).await?;
    assert_eq!(
        count(&raw, &guard, "SELECT count(*) FROM {s}.sg_meta").await?,
        1
    );
    // Each opener's saver works on the one set of tables.
    let t = ThreadId::new("t")?;
    savers[0]
        .put(put_of(&t, None, -1, vec![whole("n", "1")]))
        .await?;
    assert!(savers[7].get(&t, &Namespace::root(), None).await?.is_some());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_id_not_greater_than_its_parent_is_refused_and_stores_nothing() -> TestResult {
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let (saver, _guard) = pg_support::fresh(&url, "ids").await?;
    let t = ThreadId::new("t")?;
    // The parent was made by a machine whose clock is an hour ahead of ours.
    let ahead = CheckpointId::generate().as_u128() + ((3_600_000u128 << 16) << 64);
    let parent = CheckpointId::from_u128(ahead);
    saver
        .put(PutCheckpoint {
            thread: t.clone(),
            ns: Namespace::root(),
            checkpoint: header_with(parent, None, -1, Source::Input),
            writes: vec![whole("n", "1")],
        })
        .await?;
    // A child made by our clock alone, without having seen the parent.
    let behind = CheckpointId::from_u128(ahead - ((7_200_000u128 << 16) << 64));
    let refused = saver
        .put(PutCheckpoint {
            thread: t.clone(),
            ns: Namespace::root(),
            checkpoint: header_with(behind, Some(parent), 0, Source::Loop),
            writes: vec![whole("n", "2")],
        })
        .await;
    match refused {
        Err(CheckpointError::IdNotAfterParent { id, parent: p, .. }) => {
            assert_eq!((id, p), (behind, parent));
        }
        other => return Err(format!("expected IdNotAfterParent, got {other:?}").into()),
    }
    let list = saver
        .list(&t, &Namespace::root(), ListOptions::default())
        .await?;
    assert_eq!(list.iter().map(|c| c.id).collect::<Vec<_>>(), [parent]);
    // Loading the parent raises our clock: the next id is greater, and the child lands.
    let loaded = saver
        .get(&t, &Namespace::root(), None)
        .await?
        .ok_or("no head")?;
    let child = CheckpointId::generate();
    assert!(
        child > loaded.checkpoint.id,
        "{child} <= {}",
        loaded.checkpoint.id
    );
    saver
        .put(PutCheckpoint {
            thread: t.clone(),
            ns: Namespace::root(),
            checkpoint: header_with(child, Some(parent), 0, Source::Loop),
            writes: vec![whole("n", "2")],
        })
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_are_stored_once_across_threads_and_a_list_stores_only_its_tails() -> TestResult {
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let (saver, guard) = pg_support::fresh(&url, "dedup").await?;
    let big = format!("\"{}\"", "x".repeat(1000));
    for name in ["a", "b", "c"] {
        let t = ThreadId::new(name)?;
        saver
            .put(put_of(&t, None, -1, vec![whole("doc", &big)]))
            .await?;
    }
    let raw = pg_support::raw(&url).await?;
    assert_eq!(
        count(&raw, &guard, "SELECT count(*) FROM {s}.sg_values").await?,
        1
    );
    // A list of 40 appends: each step stores its one item, never the list again.
    let t = ThreadId::new("list")?;
    let mut parent = None;
    for i in 0..40i64 {
        let put = put_of(&t, parent, i, vec![tail("log", format!("[{i}]"))]);
        parent = Some(put.checkpoint.id);
        saver.put(put).await?;
    }
    let largest = count(
        &raw,
        &guard,
        "SELECT max(length(data))::bigint FROM {s}.sg_values WHERE length(data) < 100",
    )
    .await?;
    assert!(
        largest <= 5 + 4,
        "an appended item's value is {largest} bytes"
    );
    // Full records every 16 checkpoints of the chain: steps 0, 16 and 32.
    let bases = count(
        &raw,
        &guard,
        "SELECT count(*) FROM {s}.sg_checkpoints WHERE thread = 'list' AND base IS NOT NULL",
    )
    .await?;
    assert_eq!(bases, 3);
    let head = saver
        .get(&t, &Namespace::root(), None)
        .await?
        .ok_or("no head")?;
    assert_eq!(items(&head.fields["log"])?, (0..40).collect::<Vec<_>>());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saver_is_send_sync_and_clones_share_the_pool() -> TestResult {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<PostgresSaver>();
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let (saver, _guard) = pg_support::fresh(&url, "clone").await?;
    let shared: Arc<dyn Saver> = Arc::new(saver.clone());
    let t = ThreadId::new("t")?;
    shared
        .put(put_of(&t, None, -1, vec![whole("n", "1")]))
        .await?;
    assert!(saver.get(&t, &Namespace::root(), None).await?.is_some());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_a_long_chain_with_a_stale_put_and_a_fork_stores_each_as_one_at_a_time_would(
) -> TestResult {
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let (saver, guard) = pg_support::fresh(&url, "batch").await?;
    let t = ThreadId::new("t")?;
    let mut puts = Vec::new();
    let mut parent = None;
    let mut ids = Vec::new();
    for i in 0..40i64 {
        let put = put_of(&t, parent, i, vec![tail("log", format!("[{i}]"))]);
        parent = Some(put.checkpoint.id);
        ids.push(put.checkpoint.id);
        puts.push(put);
        if i == 20 {
            // A second child of step 19's checkpoint: stale inside the batch.
            puts.push(put_of(&t, Some(ids[19]), 20, vec![tail("log", "[-1]")]));
        }
    }
    // A fork from step 10, written in the same batch.
    let mut fork = put_of(&t, Some(ids[10]), 11, vec![tail("log", "[99]")]);
    fork.checkpoint.source = Source::Fork;
    let fork_id = fork.checkpoint.id;
    puts.push(fork);
    let stored = saver.put_many(puts).await;
    assert!(
        matches!(stored, Err(CheckpointError::StaleParent { .. })),
        "{stored:?}"
    );
    let list = saver
        .list(&t, &Namespace::root(), ListOptions::default())
        .await?;
    assert_eq!(
        list.len(),
        41,
        "40 steps and the fork; the stale put stored nothing"
    );
    assert_eq!(list[0].id, fork_id, "the fork is the newest");
    let head = saver
        .get(&t, &Namespace::root(), Some(ids[39]))
        .await?
        .ok_or("no step 39")?;
    assert_eq!(items(&head.fields["log"])?, (0..40).collect::<Vec<_>>());
    let forked = saver
        .get(&t, &Namespace::root(), Some(fork_id))
        .await?
        .ok_or("no fork")?;
    let mut expected: Vec<i64> = (0..=10).collect();
    expected.push(99);
    assert_eq!(items(&forked.fields["log"])?, expected);
    let raw = pg_support::raw(&url).await?;
    let bases = count(
        &raw,
        &guard,
        "SELECT count(*) FROM {s}.sg_checkpoints WHERE base IS NOT NULL",
    )
    .await?;
    assert_eq!(
        bases, 3,
        "bases at steps 0, 16 and 32, as one put at a time places them"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_checkpoint_drops_its_parents_recorded_outputs_and_keeps_the_rest() -> TestResult {
    use stategraph_checkpoints::{PendingWrite, TaskId, WriteKind};
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let (saver, _guard) = pg_support::fresh(&url, "settle").await?;
    let root = Namespace::root();
    let w = |n: u8, kind: WriteKind| PendingWrite {
        task_id: TaskId::derive(&[&[n]]),
        node: format!("n{n}"),
        kind,
    };
    let recorded = || {
        vec![
            w(1, WriteKind::Output(serde_json::json!({ "updates": [1] }))),
            w(2, WriteKind::Error("boom".into())),
            w(3, WriteKind::Resume(vec![serde_json::json!("yes")])),
            w(4, WriteKind::Output(serde_json::json!({ "updates": [4] }))),
        ]
    };
    for (name, source, left) in [("looped", Source::Loop, 2), ("edited", Source::Update, 4)] {
        let t = ThreadId::new(name)?;
        let first = put_of(&t, None, -1, vec![whole("x", "0")]);
        let parent = first.checkpoint.id;
        saver.put(first).await?;
        saver.put_writes(&t, &root, parent, recorded()).await?;
        let mut next = put_of(&t, Some(parent), 0, vec![whole("x", "1")]);
        next.checkpoint.source = source;
        saver.put(next).await?;
        let kept = saver
            .get(&t, &root, Some(parent))
            .await?
            .ok_or("no parent")?;
        assert_eq!(kept.pending.len(), left, "{name}: {:?}", kept.pending);
        if source == Source::Loop {
            assert!(kept
                .pending
                .iter()
                .all(|p| !matches!(p.kind, WriteKind::Output(_))));
        }
    }
    // A stale loop checkpoint settles nothing.
    let t = ThreadId::new("stale")?;
    let first = put_of(&t, None, -1, vec![whole("x", "0")]);
    let parent = first.checkpoint.id;
    saver.put(first).await?;
    saver
        .put(put_of(&t, Some(parent), 0, vec![whole("x", "1")]))
        .await?;
    saver.put_writes(&t, &root, parent, recorded()).await?;
    let stale = saver
        .put(put_of(&t, Some(parent), 0, vec![whole("x", "2")]))
        .await;
    assert!(
        matches!(stale, Err(CheckpointError::StaleParent { .. })),
        "{stale:?}"
    );
    let kept = saver
        .get(&t, &root, Some(parent))
        .await?
        .ok_or("no parent")?;
    assert_eq!(kept.pending.len(), 4);
    Ok(())
}
