//! Puts that extend a head the saver knows go by one call of a server-side function
//! (decision 0059). A known head is a hint: these clauses check that a stale hint, a lost
//! lease and a schema made before the function all end as the general path would, and that
//! both paths store the same rows (two savers that both know the head and race:
//! `postgres_only`).

use std::time::Duration;

use stategraph_checkpoints::{
    CheckpointError, CheckpointId, FieldPart, ListOptions, Multitask, Namespace, PostgresOptions,
    PostgresSaver, PutCheckpoint, QueuedCommand, QueuedGoto, Resume, RunEnd, RunStatus, Saver,
    ThreadId,
};
use stategraph_tests::writes::{put_of, tail, whole};

use crate::pg_support::{self, SchemaGuard};
use crate::TestResult;

/// A saver with its own pool (as another process has) on `schema`.
pub(crate) async fn open(url: &str, schema: &str) -> Result<PostgresSaver, CheckpointError> {
    let options = PostgresOptions {
        schema: schema.to_owned(),
        pool_size: 2,
        ..PostgresOptions::default()
    };
    PostgresSaver::connect_with(url, options).await
}

/// A chain of `n` puts on `t`: a root, then steps appending to `log` and replacing `n`.
pub(crate) fn chain(t: &ThreadId, n: i64) -> Vec<PutCheckpoint> {
    let mut puts = Vec::new();
    let mut parent: Option<CheckpointId> = None;
    for i in 0..n {
        let put = put_of(
            t,
            parent,
            i - 1,
            vec![tail("log", format!("[{i}]")), whole("n", i.to_string())],
        );
        parent = Some(put.checkpoint.id);
        puts.push(put);
    }
    puts
}

/// Every stored row of the schema, as text, in a stable order.
async fn rows_of(url: &str, guard: &SchemaGuard) -> Result<Vec<String>, tokio_postgres::Error> {
    let raw = pg_support::raw(url).await?;
    let s = format!("\"{}\"", guard.schema);
    let mut out = Vec::new();
    for query in [
        format!(
            "SELECT concat_ws('|', thread, ns, encode(id, 'hex'), encode(parent, 'hex'), step, \
             source, wrote, base, since_base, refs::text) FROM {s}.sg_checkpoints ORDER BY id"
        ),
        format!("SELECT concat_ws('|', encode(hash, 'hex'), encode(data, 'hex')) FROM {s}.sg_values ORDER BY hash"),
        format!("SELECT concat_ws('|', thread, ns, encode(head, 'hex')) FROM {s}.sg_heads ORDER BY thread"),
    ] {
        for row in raw.query(&query, &[]).await? {
            out.push(row.try_get(0)?);
        }
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_put_by_a_saver_that_knows_its_head_stores_the_rows_the_general_path_stores(
) -> TestResult {
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let t = ThreadId::new("t")?;
    let puts = chain(&t, 40);
    // One saver for the whole chain: every put after the root extends the head it knows.
    let (knowing, fast) = pg_support::fresh(&url, "extend_fast").await?;
    for put in puts.clone() {
        knowing.put(put).await?;
    }
    // A new saver for every put: none knows a head, every put after the root takes the
    // general path.
    let (_, general) = pg_support::fresh(&url, "extend_general").await?;
    for put in puts {
        open(&url, &general.schema).await?.put(put).await?;
    }
    let (a, b) = (rows_of(&url, &fast).await?, rows_of(&url, &general).await?);
    assert_eq!(a.len(), 40 + 80 + 1, "40 checkpoints, 80 values, one head");
    assert_eq!(a, b);
    let loaded = knowing
        .get(&t, &Namespace::root(), None)
        .await?
        .ok_or("no head")?;
    assert_eq!(loaded.checkpoint.step, 38);
    assert_eq!(loaded.fields["log"].len(), 40, "one tail per step");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_on_a_head_another_saver_moved_is_refused_as_stale_and_the_next_one_stored(
) -> TestResult {
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let (a, guard) = pg_support::fresh(&url, "extend_stale").await?;
    let b = open(&url, &guard.schema).await?;
    let t = ThreadId::new("t")?;
    let ns = Namespace::root();
    let puts = chain(&t, 3);
    let (h1, h2) = (puts[1].checkpoint.id, puts[2].checkpoint.id);
    for put in puts {
        a.put(put).await?;
    }
    // `b` moves the head on; `a` still knows h2.
    let by_b = put_of(&t, Some(h2), 2, vec![whole("n", "100")]);
    let moved = by_b.checkpoint.id;
    b.put(by_b).await?;
    let stale = a
        .put(put_of(&t, Some(h2), 2, vec![whole("n", "200")]))
        .await;
    assert!(
        matches!(&stale, Err(CheckpointError::StaleParent { found: Some(f), .. }) if *f == moved),
        "{stale:?}"
    );
    let also = a
        .put(put_of(&t, Some(h1), 1, vec![whole("n", "300")]))
        .await;
    assert!(
        matches!(also, Err(CheckpointError::StaleParent { .. })),
        "{also:?}"
    );
    let next = put_of(&t, Some(moved), 3, vec![whole("n", "4")]);
    let next_id = next.checkpoint.id;
    a.put(next).await?;
    let list = a.list(&t, &ns, ListOptions::default()).await?;
    assert_eq!(list.len(), 5);
    assert_eq!(list[0].id, next_id);
    // A deleted thread: the known head is gone with it.
    a.delete_thread(&t).await?;
    let gone = b
        .put(put_of(&t, Some(next_id), 4, vec![whole("n", "5")]))
        .await;
    assert!(
        matches!(
            &gone,
            Err(CheckpointError::StaleParent { expected, found: None, .. })
                if *expected == Some(next_id)
        ),
        "{gone:?}"
    );
    assert!(a.get(&t, &ns, None).await?.is_none(), "nothing stored");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_put_on_a_known_head_after_a_takeover_is_lease_lost_and_stores_nothing(
) -> TestResult {
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let (saver, _guard) = pg_support::fresh(&url, "extend_fence").await?;
    let queue = saver.queue();
    let t = ThreadId::new("fenced")?;
    let run = queue
        .submit(&t, serde_json::json!({}), Multitask::Enqueue)
        .await?;
    let old = queue
        .lease("old", Duration::from_millis(300))
        .await?
        .ok_or("no lease")?;
    let zombie = saver.fenced(&old);
    let puts = chain(&t, 4);
    let ids: Vec<CheckpointId> = puts.iter().map(|p| p.checkpoint.id).collect();
    for put in puts[..3].iter().cloned() {
        zombie.put(put).await?;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let new = queue
        .lease("new", Duration::from_secs(60))
        .await?
        .ok_or("the expired lease is taken over")?;
    assert_eq!(new.epoch, 2);
    let lost = zombie.put(puts[3].clone()).await;
    assert!(
        matches!(&lost, Err(CheckpointError::LeaseLost { run: r, epoch: 1 }) if *r == run),
        "{lost:?}"
    );
    let ns = Namespace::root();
    let head = saver.get(&t, &ns, None).await?.ok_or("no head")?;
    assert_eq!(
        head.checkpoint.id, ids[2],
        "the zombie's put stored nothing"
    );
    // The puts that went by one call were logged under epoch 1, each with its checkpoint.
    let log = queue.write_log(&t).await?;
    let logged: Vec<CheckpointId> = log.iter().flat_map(|w| w.checkpoints.clone()).collect();
    assert_eq!(logged, ids[..3].to_vec());
    assert!(
        log.iter().all(|w| w.epoch == 1 && w.worker == "old"),
        "{log:?}"
    );
    // The current lease extends the same head.
    saver
        .fenced(&new)
        .put(put_of(&t, Some(ids[2]), 2, vec![whole("n", "9")]))
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_made_before_the_functions_and_queue_columns_gets_them_when_opened() -> TestResult
{
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let (first, guard) = pg_support::fresh(&url, "extend_old").await?;
    let t = ThreadId::new("t")?;
    let puts = chain(&t, 4);
    first.put(puts[0].clone()).await?;
    first.put(puts[1].clone()).await?;
    drop(first);
    let raw = pg_support::raw(&url).await?;
    let s = format!("\"{}\"", guard.schema);
    let functions = [
        "sg_extend_v1",
        "sg_get_v1",
        "sg_head_v1",
        "sg_lease_v3",
        "sg_finish_v1",
    ];
    for f in functions {
        raw.batch_execute(&format!("DROP FUNCTION {s}.{f}")).await?;
    }
    raw.batch_execute(&format!(
        "ALTER TABLE {s}.sg_run_queue DROP COLUMN resume, DROP COLUMN command, \
         DROP COLUMN usage"
    ))
    .await?;
    let reopened = open(&url, &guard.schema).await?;
    for f in functions {
        let has: bool = raw
            .query_one("SELECT to_regproc($1) IS NOT NULL", &[&format!("{s}.{f}")])
            .await?
            .try_get(0)?;
        assert!(has, "opening created {f}");
    }
    reopened.get(&t, &Namespace::root(), None).await?;
    reopened.put(puts[2].clone()).await?;
    reopened.put(puts[3].clone()).await?;
    let head = reopened
        .get(&t, &Namespace::root(), None)
        .await?
        .ok_or("no head")?;
    assert_eq!(head.checkpoint.id, puts[3].checkpoint.id);
    assert_eq!(head.fields["log"].len(), 4);
    let queue = reopened.queue();
    let run = queue
        .submit(&t, serde_json::json!({}), Multitask::Enqueue)
        .await?;
    let lease = queue
        .lease("w", Duration::from_secs(30))
        .await?
        .ok_or("the run is runnable")?;
    assert_eq!(lease.run, run);
    queue.finish(&lease, RunEnd::Success).await?;
    let status = queue.run(&run).await?.map(|r| r.status);
    assert_eq!(status, Some(RunStatus::Success));
    let resume = Resume::value("ok");
    let run = queue.submit_resume(&t, &resume, Multitask::Enqueue).await?;
    let lease = queue
        .lease("w", Duration::from_secs(30))
        .await?
        .ok_or("the resume is runnable")?;
    let resumed = Some(QueuedCommand::resume(resume));
    assert_eq!((&lease.run, &lease.command), (&run, &resumed));
    queue.finish(&lease, RunEnd::Success).await?;
    let command =
        QueuedCommand::update(serde_json::json!({"n": 9})).with_goto(QueuedGoto::node("a"));
    let run = queue
        .submit_command(&t, &command, Multitask::Enqueue)
        .await?;
    let lease = queue
        .lease("w", Duration::from_secs(30))
        .await?
        .ok_or("the command is runnable")?;
    assert_eq!((&lease.run, &lease.command), (&run, &Some(command)));
    let usage = stategraph_checkpoints::TokenUsage::of_call(3, 2, 5);
    queue
        .finish_with(&lease, RunEnd::Success, Some(usage))
        .await?;
    assert_eq!(queue.run(&run).await?.and_then(|r| r.usage), Some(usage));
    let record = reopened.get_run(None, &run).await?.ok_or("no run record")?;
    assert_eq!(record.usage, Some(usage));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_savers_starting_the_same_new_thread_store_one_root_and_refuse_the_other() -> TestResult
{
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let (a, guard) = pg_support::fresh(&url, "extend_roots").await?;
    let b = open(&url, &guard.schema).await?;
    let ns = Namespace::root();
    for round in 0..10 {
        let t = ThreadId::new(format!("new-{round}"))?;
        let (ca, cb) = (chain(&t, 3), chain(&t, 3));
        let (ra, rb) = tokio::join!(a.put_many(ca.clone()), b.put_many(cb.clone()));
        let won = match (&ra, &rb) {
            (Ok(()), Err(CheckpointError::StaleParent { .. })) => ca,
            (Err(CheckpointError::StaleParent { .. }), Ok(())) => cb,
            other => return Err(format!("round {round}: {other:?}").into()),
        };
        let list = a.list(&t, &ns, ListOptions::default()).await?;
        let ids: Vec<CheckpointId> = list.iter().rev().map(|c| c.id).collect();
        let expected: Vec<CheckpointId> = won.iter().map(|p| p.checkpoint.id).collect();
        assert_eq!(ids, expected, "round {round}: only the winner's chain");
    }
    Ok(())
}

/// The `n` field of a loaded checkpoint, as stored JSON.
fn n_of(loaded: &stategraph_checkpoints::LoadedCheckpoint) -> Option<String> {
    match loaded.fields.get("n")?.last()? {
        FieldPart::Whole(json) => String::from_utf8(json.clone()).ok(),
        FieldPart::Tail(_) => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_of_the_newest_reads_the_head_as_it_is_when_another_saver_moved_or_deleted_it(
) -> TestResult {
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let (a, guard) = pg_support::fresh(&url, "get_newest").await?;
    let b = open(&url, &guard.schema).await?;
    let (t, ns) = (ThreadId::new("t")?, Namespace::root());
    assert!(
        b.get(&t, &ns, None).await?.is_none(),
        "a new thread has none"
    );
    let puts = chain(&t, 3);
    let h2 = puts[2].checkpoint.id;
    a.put_many(puts).await?;
    // `b` loads the head and remembers it; `a` then moves it on twice.
    let seen = b.get(&t, &ns, None).await?.ok_or("no head")?;
    assert_eq!(
        (seen.checkpoint.id, n_of(&seen)),
        (h2, Some("2".to_owned()))
    );
    let h3 = put_of(&t, Some(h2), 2, vec![tail("log", "[3]"), whole("n", "3")]);
    let h4 = put_of(&t, Some(h3.checkpoint.id), 3, vec![whole("n", "4")]);
    let newest = h4.checkpoint.id;
    a.put_many(vec![h3, h4]).await?;
    let loaded = b.get(&t, &ns, None).await?.ok_or("no head")?;
    assert_eq!(loaded.checkpoint.id, newest, "the head another saver moved");
    assert_eq!(n_of(&loaded), Some("4".to_owned()));
    assert_eq!(
        loaded.fields.get("log").map(Vec::len),
        Some(4),
        "every appended part"
    );
    // `b` extends the head it loaded, so it knew it exactly.
    b.put(put_of(&t, Some(newest), 4, vec![whole("n", "5")]))
        .await?;
    a.delete_thread(&t).await?;
    assert!(
        b.get(&t, &ns, None).await?.is_none(),
        "deleted by another saver"
    );
    let by_id = b.get(&t, &ns, Some(newest)).await;
    assert!(
        matches!(&by_id, Err(CheckpointError::NotFound { id, .. }) if *id == newest),
        "{by_id:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_list_spaces_its_base_records_by_its_size_and_every_step_loads_whole() -> TestResult
{
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let (saver, guard) = pg_support::fresh(&url, "extend_spacing").await?;
    let t = ThreadId::new("long")?;
    let puts = chain(&t, 600);
    let ids: Vec<CheckpointId> = puts.iter().map(|p| p.checkpoint.id).collect();
    for batch in puts.chunks(50) {
        saver.put_many(batch.to_vec()).await?;
    }
    let raw = pg_support::raw(&url).await?;
    let rows = raw
        .query(
            &format!(
                "SELECT step, since_base, base IS NOT NULL FROM \"{}\".sg_checkpoints ORDER BY id",
                guard.schema
            ),
            &[],
        )
        .await?;
    let mut bases = 0;
    for row in &rows {
        let (step, since, based): (i64, i32, bool) =
            (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
        // The state of step s has s + 2 parts in `log` and one in `n`.
        let parts = usize::try_from(step + 3)?;
        let bound = (parts / 16).max(16);
        assert!(
            usize::try_from(since)? < bound.max(17),
            "step {step}: {since} rows to walk"
        );
        bases += usize::from(based);
    }
    assert!(
        bases < 600 / 16,
        "{bases} base records: spaced out as the list grew"
    );
    for &i in &[0usize, 15, 16, 17, 255, 300, 599] {
        let cp = saver
            .get(&t, &Namespace::root(), Some(ids[i]))
            .await?
            .ok_or("missing")?;
        assert_eq!(cp.fields["log"].len(), i + 1, "step {i}: one tail per put");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn base_records_are_stored_uncompressed_also_in_a_schema_made_before_that_rule() -> TestResult
{
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let (first, guard) = pg_support::fresh(&url, "extend_storage").await?;
    drop(first);
    let raw = pg_support::raw(&url).await?;
    let table = format!("\"{}\".sg_checkpoints", guard.schema);
    // As an older build made the table: both columns compressed when large.
    raw.batch_execute(&format!(
        "ALTER TABLE {table} ALTER COLUMN base SET STORAGE EXTENDED, \
         ALTER COLUMN refs SET STORAGE EXTENDED"
    ))
    .await?;
    let saver = open(&url, &guard.schema).await?;
    let storage: Vec<(String, String)> = raw
        .query(
            "SELECT attname::text, attstorage::text FROM pg_attribute \
             WHERE attrelid = to_regclass($1::text) AND attname IN ('base', 'refs') ORDER BY attname",
            &[&table],
        )
        .await?
        .iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect::<Result<_, tokio_postgres::Error>>()?;
    let external = "e".to_owned();
    assert_eq!(
        storage,
        vec![
            ("base".to_owned(), external.clone()),
            ("refs".to_owned(), external)
        ],
        "opening set both columns to stored uncompressed"
    );
    // A long list's base records are large enough to be compressed if the column allowed it.
    let t = ThreadId::new("long")?;
    let puts = chain(&t, 400);
    for batch in puts.chunks(50) {
        saver.put_many(batch.to_vec()).await?;
    }
    let row = raw
        .query_one(
            &format!(
                "SELECT count(*), count(pg_column_compression(base)), \
                 coalesce(max(octet_length(base)), 0) FROM {table} WHERE base IS NOT NULL"
            ),
            &[],
        )
        .await?;
    let (bases, compressed, largest): (i64, i64, i32) =
        (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
    assert!(bases > 1, "{bases} base records");
    assert!(largest > 8192, "the largest base is {largest} bytes");
    assert_eq!(compressed, 0, "no base record is compressed");
    let last = puts.last().ok_or("no puts")?.checkpoint.id;
    let head = saver
        .get(&t, &Namespace::root(), Some(last))
        .await?
        .ok_or("missing")?;
    assert_eq!(head.fields["log"].len(), 400);
    Ok(())
}
