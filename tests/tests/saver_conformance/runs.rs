//! The clauses about runs and their delivery receipts, which every saver must pass.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::json;
use stategraph_checkpoints::{
    Checkpoint, CheckpointError, CheckpointId, DeliveryReceipt, ListOptions, LoadedCheckpoint,
    MemorySaver, Namespace, PendingWrite, PutCheckpoint, Retention, RunId, RunRecord, RunStatus,
    Saver, ThreadId, ThreadInfo,
};

use crate::{Subject, TestResult};

fn run(id: &str, thread: &str, status: RunStatus, at_ms: u64) -> RunRecord {
    RunRecord::new(
        RunId::new(id).expect("valid run id"),
        ThreadId::new(thread).expect("valid thread id"),
        status,
        at_ms,
    )
}

fn receipt(presented: u32) -> DeliveryReceipt {
    DeliveryReceipt::new(json!({"presented": presented, "paths": [], "by_tool": {}}))
}

pub async fn a_run_loads_back_with_its_reasons_and_metadata(s: Subject) -> TestResult {
    let mut r = run("r1", "t", RunStatus::Running, 1_000);
    r.metadata.insert("model".into(), json!("m1"));
    s.saver.put_run(r.clone()).await?;
    assert_eq!(s.saver.get_run(None, &r.run_id).await?, Some(r.clone()));
    let mut done = run("r1", "t", RunStatus::Error, 2_000);
    done.reason = Some("Artifact delivery incomplete".into());
    done.stop_reason = Some("loop_capped".into());
    s.saver.put_run(done.clone()).await?;
    let got = s
        .saver
        .get_run(Some(&r.thread), &r.run_id)
        .await?
        .ok_or("run gone")?;
    assert_eq!(got.status, RunStatus::Error);
    assert_eq!(got.reason.as_deref(), Some("Artifact delivery incomplete"));
    assert_eq!(got.stop_reason.as_deref(), Some("loop_capped"));
    assert_eq!((got.created_at_ms, got.updated_at_ms), (1_000, 2_000));
    assert!(
        got.metadata.is_empty(),
        "the update's metadata replaces the first"
    );
    let other = ThreadId::new("other")?;
    assert_eq!(s.saver.get_run(Some(&other), &r.run_id).await?, None);
    assert_eq!(s.saver.get_run(None, &RunId::new("ghost")?).await?, None);
    Ok(())
}

pub async fn runs_are_listed_newest_first_per_thread(s: Subject) -> TestResult {
    for (id, at) in [("a", 10), ("c", 30), ("b", 20), ("b2", 20)] {
        s.saver
            .put_run(run(id, "t", RunStatus::Pending, at))
            .await?;
    }
    s.saver
        .put_run(run("x", "u", RunStatus::Pending, 99))
        .await?;
    let ids: Vec<String> = s
        .saver
        .list_runs(&ThreadId::new("t")?)
        .await?
        .into_iter()
        .map(|r| r.run_id.to_string())
        .collect();
    assert_eq!(ids, ["c", "b2", "b", "a"]);
    assert!(s.saver.list_runs(&ThreadId::new("none")?).await?.is_empty());
    Ok(())
}

pub async fn running_runs_are_listed_newest_first_without_the_others(s: Subject) -> TestResult {
    let mut old = run("old", "t", RunStatus::Running, 10);
    old.metadata.insert("status".into(), json!("success"));
    for r in [
        old,
        run("new", "t", RunStatus::Running, 30),
        run("done", "t", RunStatus::Success, 20),
        run("queued", "t", RunStatus::Pending, 40),
        run("elsewhere", "u", RunStatus::Running, 50),
    ] {
        s.saver.put_run(r).await?;
    }
    s.saver
        .put_run(run("settled", "t", RunStatus::Running, 5))
        .await?;
    s.saver
        .put_run(run("settled", "t", RunStatus::Cancelled, 6))
        .await?;
    let ids: Vec<String> = s
        .saver
        .list_running_runs(&ThreadId::new("t")?)
        .await?
        .into_iter()
        .map(|r| r.run_id.to_string())
        .collect();
    assert_eq!(ids, ["new", "old"]);
    assert!(s
        .saver
        .list_running_runs(&ThreadId::new("none")?)
        .await?
        .is_empty());
    Ok(())
}

pub async fn a_settled_run_cannot_run_again(s: Subject) -> TestResult {
    s.saver
        .put_run(run("r", "t", RunStatus::Pending, 1))
        .await?;
    s.saver
        .put_run(run("r", "t", RunStatus::Running, 2))
        .await?;
    let back = s.saver.put_run(run("r", "t", RunStatus::Pending, 3)).await;
    assert!(matches!(
        back,
        Err(CheckpointError::InvalidRunTransition {
            from: RunStatus::Running,
            to: RunStatus::Pending,
            ..
        })
    ));
    s.saver
        .put_run(run("r", "t", RunStatus::Cancelled, 4))
        .await?;
    for late in [RunStatus::Running, RunStatus::Success, RunStatus::Pending] {
        let err = s.saver.put_run(run("r", "t", late, 5)).await;
        assert!(
            matches!(
                err,
                Err(CheckpointError::InvalidRunTransition {
                    from: RunStatus::Cancelled,
                    ..
                })
            ),
            "{late}: {err:?}"
        );
    }
    // The same terminal status again is allowed (a retried write).
    s.saver
        .put_run(run("r", "t", RunStatus::Cancelled, 6))
        .await?;
    let got = s
        .saver
        .get_run(None, &RunId::new("r")?)
        .await?
        .ok_or("gone")?;
    assert_eq!((got.status, got.updated_at_ms), (RunStatus::Cancelled, 6));
    let moved = s
        .saver
        .put_run(run("r", "elsewhere", RunStatus::Cancelled, 7))
        .await;
    assert!(matches!(
        moved,
        Err(CheckpointError::RunOfAnotherThread { .. })
    ));
    Ok(())
}

pub async fn exactly_one_receipt_is_stored_under_concurrent_puts(s: Subject) -> TestResult {
    s.saver
        .put_run(run("r", "t", RunStatus::Running, 1))
        .await?;
    let saver: Arc<dyn Saver> = s.saver.clone();
    let puts: Vec<_> = (0..8)
        .map(|i| {
            let saver = saver.clone();
            tokio::spawn(async move {
                let id = RunId::new("r")?;
                saver.put_receipt_if_absent(&id, receipt(i)).await
            })
        })
        .collect();
    let mut winners = Vec::new();
    for (i, put) in puts.into_iter().enumerate() {
        if put.await?? {
            winners.push(i);
        }
    }
    assert_eq!(winners.len(), 1, "exactly one put stores: {winners:?}");
    let stored = s
        .saver
        .get_receipt(&RunId::new("r")?)
        .await?
        .ok_or("no receipt")?;
    assert_eq!(stored, receipt(u32::try_from(winners[0])?));
    assert!(
        !s.saver
            .put_receipt_if_absent(&RunId::new("r")?, receipt(99))
            .await?
    );
    assert_eq!(s.saver.get_receipt(&RunId::new("r")?).await?, Some(stored));
    Ok(())
}

/// A receipt needs its run: a run that fails before the graph starts is still stored (as
/// pending, then error) before its receipt.
pub async fn a_receipt_for_an_unknown_run_is_refused(s: Subject) -> TestResult {
    let ghost = RunId::new("ghost")?;
    let err = s.saver.put_receipt_if_absent(&ghost, receipt(0)).await;
    assert!(matches!(err, Err(CheckpointError::RunNotFound { ref run }) if *run == ghost));
    assert_eq!(s.saver.get_receipt(&ghost).await?, None);
    Ok(())
}

pub async fn bad_run_ids_are_typed_errors(_s: Subject) -> TestResult {
    for bad in [String::new(), "a\u{7}b".to_owned(), "r".repeat(300)] {
        assert!(matches!(
            RunId::new(bad),
            Err(CheckpointError::InvalidRunId { .. })
        ));
    }
    let parsed: Result<RunRecord, _> = serde_json::from_value(json!({
        "run_id": "", "thread": "t", "status": "running", "reason": null, "stop_reason": null,
        "created_at_ms": 1, "updated_at_ms": 1, "metadata": {}
    }));
    assert!(parsed.is_err(), "an empty run id does not deserialise");
    Ok(())
}

pub async fn deleting_a_thread_deletes_its_runs_and_copying_or_pruning_leaves_them(
    s: Subject,
) -> TestResult {
    let (t, u) = (ThreadId::new("t")?, ThreadId::new("u")?);
    crate::clauses::chain(&s, &t, 3).await?;
    s.saver
        .put_run(run("rt", "t", RunStatus::Success, 1))
        .await?;
    s.saver
        .put_run(run("ru", "u", RunStatus::Success, 1))
        .await?;
    for id in ["rt", "ru"] {
        assert!(
            s.saver
                .put_receipt_if_absent(&RunId::new(id)?, receipt(1))
                .await?
        );
    }
    s.saver
        .prune(&t, stategraph_checkpoints::Retention::KeepLast(1))
        .await?;
    assert_eq!(
        s.saver.list_runs(&t).await?.len(),
        1,
        "prune leaves runs alone"
    );
    let copy = ThreadId::new("t-copy")?;
    s.saver.copy_thread(&t, &copy).await?;
    assert!(
        s.saver.list_runs(&copy).await?.is_empty(),
        "a copy has no runs"
    );
    s.saver.delete_thread(&t).await?;
    assert!(s.saver.list_runs(&t).await?.is_empty());
    assert_eq!(s.saver.get_run(None, &RunId::new("rt")?).await?, None);
    assert_eq!(s.saver.get_receipt(&RunId::new("rt")?).await?, None);
    assert!(s
        .saver
        .get_run(Some(&u), &RunId::new("ru")?)
        .await?
        .is_some());
    assert!(s.saver.get_receipt(&RunId::new("ru")?).await?.is_some());
    Ok(())
}

/// A saver written before runs: it implements only the methods the trait requires.
#[derive(Debug, Default)]
struct SaverBeforeRuns(MemorySaver);

impl Saver for SaverBeforeRuns {
    fn put(&self, put: PutCheckpoint) -> BoxFuture<'_, Result<(), CheckpointError>> {
        self.0.put(put)
    }

    fn put_writes<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        id: CheckpointId,
        writes: Vec<PendingWrite>,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        self.0.put_writes(thread, ns, id, writes)
    }

    fn get<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        id: Option<CheckpointId>,
    ) -> BoxFuture<'a, Result<Option<LoadedCheckpoint>, CheckpointError>> {
        self.0.get(thread, ns, id)
    }

    fn list<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        options: ListOptions,
    ) -> BoxFuture<'a, Result<Vec<Checkpoint>, CheckpointError>> {
        self.0.list(thread, ns, options)
    }

    fn delete_thread<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        self.0.delete_thread(thread)
    }

    fn list_threads(&self) -> BoxFuture<'_, Result<Vec<ThreadInfo>, CheckpointError>> {
        self.0.list_threads()
    }

    fn copy_thread<'a>(
        &'a self,
        from: &'a ThreadId,
        to: &'a ThreadId,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        self.0.copy_thread(from, to)
    }

    fn prune<'a>(
        &'a self,
        thread: &'a ThreadId,
        retention: Retention,
    ) -> BoxFuture<'a, Result<usize, CheckpointError>> {
        self.0.prune(thread, retention)
    }
}

/// A saver written before runs (it implements none of the run methods) still compiles, and
/// says so with a typed error rather than storing nothing silently.
#[tokio::test]
async fn a_saver_without_runs_reports_them_unsupported() -> TestResult {
    let saver = SaverBeforeRuns::default();
    let r = run("r", "t", RunStatus::Pending, 1);
    let unsupported =
        |e: &CheckpointError| matches!(e, CheckpointError::Unsupported { what } if *what == "runs");
    assert!(saver
        .put_run(r.clone())
        .await
        .is_err_and(|e| unsupported(&e)));
    assert!(saver
        .get_run(None, &r.run_id)
        .await
        .is_err_and(|e| unsupported(&e)));
    assert!(saver
        .list_runs(&r.thread)
        .await
        .is_err_and(|e| unsupported(&e)));
    let put = saver.put_receipt_if_absent(&r.run_id, receipt(0)).await;
    assert!(put.is_err_and(|e| unsupported(&e)));
    assert!(saver
        .get_receipt(&r.run_id)
        .await
        .is_err_and(|e| unsupported(&e)));
    Ok(())
}
