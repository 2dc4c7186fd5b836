//! The checkpoint pipeline's own tests: how checkpoints reach savers that do and do not
//! order batches, and how their errors surface.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use stategraph_checkpoints::{
    Checkpoint, CheckpointId, Control, ListOptions, LoadedCheckpoint, MemorySaver, Namespace,
    Retention, ThreadId, ThreadInfo,
};

use super::*;

type Error = Box<dyn std::error::Error>;
type Done<'a, T> = BoxFuture<'a, Result<T, CheckpointError>>;

/// A memory saver that records how checkpoints reach it, says whether it orders
/// batches, and fails every put from the `fail_from`-th on. A gated one stores a batch
/// only once a permit of `gate` lets it.
struct Recording {
    inner: MemorySaver,
    ordered: bool,
    fail_from: usize,
    puts: AtomicUsize,
    calls: Mutex<Vec<String>>,
    gate: Option<tokio::sync::Semaphore>,
}

impl Recording {
    fn new(ordered: bool, fail_from: usize) -> Arc<Self> {
        Arc::new(Recording {
            inner: MemorySaver::new(),
            ordered,
            fail_from,
            puts: AtomicUsize::new(0),
            calls: Mutex::new(Vec::new()),
            gate: None,
        })
    }

    /// A saver that does not order batches and stores each only once let through.
    fn gated() -> Arc<Self> {
        Arc::new(Recording {
            inner: MemorySaver::new(),
            ordered: false,
            fail_from: usize::MAX,
            puts: AtomicUsize::new(0),
            calls: Mutex::new(Vec::new()),
            gate: Some(tokio::sync::Semaphore::new(0)),
        })
    }

    /// Let `n` more batches of a gated saver be stored.
    fn let_through(&self, n: usize) {
        if let Some(gate) = &self.gate {
            gate.add_permits(n);
        }
    }

    fn note(&self, call: String) {
        self.calls.lock().unpoisoned().push(call);
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().unpoisoned().clone()
    }

    async fn put_each(&self, puts: Vec<PutCheckpoint>) -> Result<(), CheckpointError> {
        if let Some(gate) = &self.gate {
            gate.acquire()
                .await
                .map_err(|e| CheckpointError::Storage(Box::new(e)))?
                .forget();
        }
        for put in puts {
            self.put_one(put).await?;
        }
        Ok(())
    }

    async fn put_one(&self, put: PutCheckpoint) -> Result<(), CheckpointError> {
        if self.puts.fetch_add(1, Ordering::SeqCst) >= self.fail_from {
            return Err(CheckpointError::Storage("disk full".into()));
        }
        self.inner.put(put).await
    }
}

impl Saver for Recording {
    fn put(&self, put: PutCheckpoint) -> Done<'_, ()> {
        self.note("put".to_owned());
        Box::pin(self.put_one(put))
    }
    fn put_writes<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        id: CheckpointId,
        writes: Vec<PendingWrite>,
    ) -> Done<'a, ()> {
        self.inner.put_writes(thread, ns, id, writes)
    }
    fn get<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        id: Option<CheckpointId>,
    ) -> Done<'a, Option<LoadedCheckpoint>> {
        self.inner.get(thread, ns, id)
    }
    fn list<'a>(
        &'a self,
        thread: &'a ThreadId,
        ns: &'a Namespace,
        options: ListOptions,
    ) -> Done<'a, Vec<Checkpoint>> {
        self.inner.list(thread, ns, options)
    }
    fn delete_thread<'a>(&'a self, thread: &'a ThreadId) -> Done<'a, ()> {
        self.inner.delete_thread(thread)
    }
    fn list_threads(&self) -> Done<'_, Vec<ThreadInfo>> {
        self.inner.list_threads()
    }
    fn copy_thread<'a>(&'a self, from: &'a ThreadId, to: &'a ThreadId) -> Done<'a, ()> {
        self.inner.copy_thread(from, to)
    }
    fn prune<'a>(&'a self, thread: &'a ThreadId, retention: Retention) -> Done<'a, usize> {
        self.inner.prune(thread, retention)
    }
    fn queues_in_call_order(&self) -> bool {
        self.ordered
    }
    fn put_many(&self, puts: Vec<PutCheckpoint>) -> Done<'_, ()> {
        self.note(format!("put_many({})", puts.len()));
        Box::pin(self.put_each(puts))
    }
    fn put_streamed(&self, puts: Vec<PutCheckpoint>) -> Done<'_, ()> {
        self.note(format!("put_streamed({})", puts.len()));
        Box::pin(self.put_each(puts))
    }
    fn flush(&self) -> Done<'_, ()> {
        self.note("flush".to_owned());
        Box::pin(async { Ok(()) })
    }
}

/// `n` checkpoints of one thread, each the parent of the next.
fn chain(n: usize) -> Result<Vec<PutCheckpoint>, Error> {
    let thread = ThreadId::new("t")?;
    let mut parent = None;
    let mut puts = Vec::new();
    for step in 0..n {
        let id = CheckpointId::generate();
        puts.push(PutCheckpoint {
            thread: thread.clone(),
            ns: Namespace::root(),
            checkpoint: Checkpoint {
                id,
                parent,
                step: i64::try_from(step)?,
                source: Source::Loop,
                created_at_ms: id.created_at_ms(),
                control: Control::default(),
                metadata: BTreeMap::new(),
            },
            writes: Vec::new(),
        });
        parent = Some(id);
    }
    Ok(puts)
}

async fn stored(saver: &Recording) -> Result<usize, Error> {
    let thread = ThreadId::new("t")?;
    let list = saver
        .list(&thread, &Namespace::root(), ListOptions::default())
        .await?;
    Ok(list.len())
}

fn pipeline(saver: &Arc<Recording>, durability: Durability) -> CheckpointPipeline {
    let saver: Arc<dyn Saver> = saver.clone();
    CheckpointPipeline::new(Some(saver), durability, 1)
}

#[tokio::test]
async fn a_saver_that_does_not_order_batches_gets_batches() -> Result<(), Error> {
    let saver = Recording::new(false, usize::MAX);
    let mut p = pipeline(&saver, Durability::Async);
    assert!(p.async_writes == AsyncWrites::Batched);
    for put in chain(20)? {
        p.submit(put, false).await?;
    }
    assert_eq!(saver.calls(), ["put_many(16)"]);
    p.drain().await?;
    assert_eq!(saver.calls(), ["put_many(16)", "put_many(4)"]);
    assert_eq!(stored(&saver).await?, 20);
    Ok(())
}

#[tokio::test]
async fn checkpoints_made_while_a_batch_is_stored_go_together_as_the_next_batch(
) -> Result<(), Error> {
    let saver = Recording::gated();
    let mut p = pipeline(&saver, Durability::Async);
    // Nothing here may wait for the gated batch (a run that did would hang here, not fail).
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        for put in chain(16 + 40)? {
            p.submit(put, false).await?;
        }
        Ok::<_, Error>(())
    })
    .await??;
    // The first batch is not stored yet: the 40 made meanwhile wait, as one.
    assert_eq!(saver.calls(), ["put_many(16)"]);
    saver.let_through(2);
    p.drain().await?;
    assert_eq!(saver.calls(), ["put_many(16)", "put_many(40)"]);
    assert_eq!(stored(&saver).await?, 56);
    Ok(())
}

#[tokio::test]
async fn a_batch_still_being_stored_holds_the_run_at_the_in_flight_bound() -> Result<(), Error> {
    let saver = Recording::gated();
    let mut p = pipeline(&saver, Durability::Async);
    let mut puts = chain(MAX_INFLIGHT + 1)?.into_iter();
    for put in puts.by_ref().take(MAX_INFLIGHT) {
        p.submit(put, false).await?;
    }
    assert_eq!(p.inflight_puts + p.buffer.len(), MAX_INFLIGHT);
    let over = puts.next().ok_or("no checkpoint over the bound")?;
    // The one over the bound waits for the batch in flight, then goes with the buffer.
    let waited = tokio::spawn({
        let saver = saver.clone();
        async move {
            tokio::task::yield_now().await;
            saver.let_through(2);
        }
    });
    p.submit(over, false).await?;
    waited.await?;
    assert_eq!(
        saver.calls(),
        [
            "put_many(16)".to_owned(),
            format!("put_many({})", MAX_INFLIGHT + 1 - 16)
        ]
    );
    p.drain().await?;
    assert_eq!(stored(&saver).await?, MAX_INFLIGHT + 1);
    Ok(())
}

#[tokio::test]
async fn a_saver_that_queues_in_call_order_gets_each_checkpoint_as_made() -> Result<(), Error> {
    let saver = Recording::new(true, usize::MAX);
    let mut p = pipeline(&saver, Durability::Async);
    assert!(p.async_writes == AsyncWrites::Streamed);
    for put in chain(3)? {
        p.submit(put, false).await?;
    }
    p.drain().await?;
    assert_eq!(saver.calls(), ["put_streamed(1)"; 3]);
    assert_eq!(stored(&saver).await?, 3);
    Ok(())
}

#[tokio::test]
async fn sync_and_waited_checkpoints_are_put_at_once() -> Result<(), Error> {
    let saver = Recording::new(true, usize::MAX);
    let mut p = pipeline(&saver, Durability::Sync);
    let mut puts = chain(3)?.into_iter();
    for put in puts.by_ref().take(2) {
        p.submit(put, false).await?;
    }
    let mut p = pipeline(&saver, Durability::Async);
    for put in puts {
        p.submit(put, true).await?;
    }
    assert_eq!(saver.calls(), ["put"; 3]);
    assert_eq!(stored(&saver).await?, 3);
    Ok(())
}

#[tokio::test]
async fn a_storage_error_surfaces_as_a_checkpoint_error() -> Result<(), Error> {
    for (durability, ordered) in [
        (Durability::Sync, false),
        (Durability::Async, true),
        (Durability::Async, false),
    ] {
        let saver = Recording::new(ordered, 1);
        let mut p = pipeline(&saver, durability);
        let mut first_error = None;
        for put in chain(ASYNC_BATCH + 1)? {
            if let Err(e) = p.submit(put, false).await {
                first_error = Some(e);
                break;
            }
        }
        let e = match first_error {
            Some(e) => e,
            None => p.drain().await.err().ok_or("no error")?,
        };
        assert!(
            matches!(e, RunError::Checkpoint(CheckpointError::Storage(_))),
            "{durability:?}: {e}"
        );
    }
    Ok(())
}
