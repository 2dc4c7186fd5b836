//! Workers (feature `postgres`): processes on any number of machines that take runs from a
//! PostgreSQL [`RunQueue`], run them on a graph, and keep their lease alive while they do.
//!
//! Each run a worker leases is run with the saver [fenced](PostgresSaver::fenced) by the
//! lease, so every checkpoint it writes is checked against the lease epoch in the write's own
//! transaction: a worker paused past its lease (a zombie) writes nothing once another worker
//! took the run over. A run whose worker died is leased again when its lease ends and goes
//! on from the thread's newest checkpoint, reusing the writes its finished tasks recorded.
//! See `docs/guides/scale-out.md` and decision 0058.

mod command;

use std::sync::Arc;
use std::time::Duration;

use stategraph_checkpoints::{
    CheckpointError, Lease, PostgresSaver, RunEnd, RunId, RunQueue, RunStatus, ThreadId, Wakeups,
};

use crate::node::CancelToken;
use crate::{CompiledGraph, Durability, Input, RunConfig, RunError, State};
pub use command::CommandNotQueueable;
use stategraph_runs::{Beat, Heartbeat};

/// How a [`Worker`] leases and heart-beats.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// The worker's name, logged with each of its writes (default: `worker-<pid>-<random>`).
    pub name: String,
    /// How long a lease lasts without a heartbeat (default 30 s): a worker that stops
    /// heart-beating loses its run this long after its last beat.
    pub lease: Duration,
    /// How often the lease is extended (default 10 s; must be shorter than `lease`).
    pub heartbeat: Duration,
    /// How often an idle worker looks for runs when no notification wakes it (default 1 s;
    /// also how soon an expired lease is noticed).
    pub poll: Duration,
    /// The runs' durability (default [`Durability::Sync`]: each step stored before the next
    /// starts, so a dead worker's successor repeats at most the step it was in).
    pub durability: Durability,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            name: format!(
                "worker-{}-{}",
                std::process::id(),
                &stategraph_checkpoints::CheckpointId::generate().to_string()[20..]
            ),
            lease: Duration::from_secs(30),
            heartbeat: Duration::from_secs(10),
            poll: Duration::from_secs(1),
            durability: Durability::Sync,
        }
    }
}

/// Why a worker could not be made or could not go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// Options that cannot work together.
    #[error("invalid worker options: {0}")]
    Options(&'static str),
    /// The queue could not be read or written.
    #[error(transparent)]
    Queue(#[from] CheckpointError),
}

/// How a leased run ended for this worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Worked {
    /// The run ended with this status, recorded by this worker.
    Ended(RunStatus),
    /// The lease was lost (another worker took the run over, or it was deleted): this worker
    /// stopped and recorded nothing more.
    LeaseLost,
}

/// One run a worker handled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkedRun {
    /// The run.
    pub run: RunId,
    /// Its thread.
    pub thread: ThreadId,
    /// Its lease epoch.
    pub epoch: u64,
    /// How it ended here.
    pub worked: Worked,
}

/// A worker: takes runs from a queue and runs them on its graph.
///
/// ```
/// use std::sync::Arc;
/// use stategraph::checkpoints::{
///     Multitask, PostgresOptions, PostgresSaver, RunStatus, Saver, ThreadId,
/// };
/// use stategraph::prelude::*;
/// use stategraph::worker::{Worker, WorkerOptions};
///
/// #[derive(stategraph::State, Clone, Default, Debug)]
/// struct Count { n: u64 }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let Ok(url) = std::env::var("STATEGRAPH_PG_URL") else { return Ok(()) };
/// let options = PostgresOptions { schema: "doc_worker".to_owned(), ..Default::default() };
/// let saver = PostgresSaver::connect_with(&url, options).await?;
/// let graph = StateGraph::<Count>::new()
///     .add_node("inc", |s: Arc<Count>, _ctx: NodeContext| async move {
///         Ok::<_, BoxError>(Count::update().n(s.n + 1))
///     })
///     .add_edge(START, "inc")
///     .add_edge("inc", END)
///     .compile()?;
/// let thread = ThreadId::new("doc-worker")?;
/// saver.delete_thread(&thread).await?;
/// let run = saver.queue().submit(&thread, serde_json::json!({"n": 41}), Multitask::Enqueue).await?;
/// let worker = Worker::new(saver.clone(), graph, WorkerOptions::default())?;
/// let Some(worked) = worker.run_next().await? else { panic!("a run was queued") };
/// assert_eq!(worked.run, run);
/// assert_eq!(saver.queue().run(&run).await?.map(|r| r.status), Some(RunStatus::Success));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct Worker<S: State> {
    saver: PostgresSaver,
    queue: RunQueue,
    graph: CompiledGraph<S>,
    options: WorkerOptions,
    /// The queue's notifications, listened for once per worker.
    wakeups: tokio::sync::OnceCell<Wakeups>,
}

impl<S: State> Worker<S> {
    /// A worker taking runs from `saver`'s queue and running them on `graph` (its own
    /// checkpointer, if any, is replaced by the fenced saver of each run).
    ///
    /// # Errors
    /// [`WorkerError::Options`] when the heartbeat is not shorter than the lease, or a
    /// duration is zero.
    pub fn new(
        saver: PostgresSaver,
        graph: CompiledGraph<S>,
        options: WorkerOptions,
    ) -> Result<Self, WorkerError> {
        if options.lease.is_zero() || options.heartbeat.is_zero() || options.poll.is_zero() {
            return Err(WorkerError::Options(
                "lease, heartbeat and poll must not be zero",
            ));
        }
        if options.heartbeat >= options.lease {
            return Err(WorkerError::Options(
                "the heartbeat must be shorter than the lease",
            ));
        }
        Ok(Worker {
            queue: saver.queue(),
            saver,
            graph,
            options,
            wakeups: tokio::sync::OnceCell::new(),
        })
    }

    /// A receiver of the queue's notifications (the worker's one listening connection).
    async fn wakeups(&self) -> Wakeups {
        self.wakeups
            .get_or_init(|| self.queue.wakeups())
            .await
            .clone()
    }

    /// The worker's name.
    pub fn name(&self) -> &str {
        &self.options.name
    }

    /// Serve until `shutdown` is cancelled: run every run the queue hands over, waiting for a
    /// notification (or the poll interval) when there is none. A run in progress when
    /// `shutdown` is cancelled is finished first. A queue error (the database unreachable)
    /// is logged (`tracing`, at warn) and retried after the poll interval; a run it
    /// interrupted is left to its lease, so this or another worker takes it over.
    pub async fn serve(&self, shutdown: CancelToken) {
        let mut wakeups = self.wakeups().await;
        while !shutdown.is_cancelled() {
            match self.run_next().await {
                Ok(Some(_)) => continue,
                Ok(None) => {}
                Err(e) => tracing::warn!(worker = %self.options.name, error = %e, "run queue"),
            }
            tokio::select! {
                _ = wakeups.wait(self.options.poll) => {}
                _ = shutdown.cancelled() => {}
            }
        }
    }

    /// Lease one runnable run and run it to its end; `None` when no run is runnable now.
    ///
    /// # Errors
    /// A queue error while leasing (a run's own failure is its status, not an error here).
    pub async fn run_next(&self) -> Result<Option<WorkedRun>, WorkerError> {
        let Some(lease) = self
            .queue
            .lease(&self.options.name, self.options.lease)
            .await?
        else {
            return Ok(None);
        };
        let worked = match lease.stop {
            // Asked to stop while its last worker was gone: end it without running.
            Some(stop) => self.end(&lease, RunEnd::Stopped(stop)).await?,
            None => self.run_leased(&lease).await?,
        };
        Ok(Some(WorkedRun {
            run: lease.run,
            thread: lease.thread,
            epoch: lease.epoch,
            worked,
        }))
    }

    /// Run a leased run with its heartbeat going; record how it ended.
    async fn run_leased(&self, lease: &Lease) -> Result<Worked, WorkerError> {
        let input = match self.input_of(lease) {
            Ok(input) => input,
            Err(problem) => return self.end(lease, RunEnd::Failed(problem)).await,
        };
        let graph = self
            .graph
            .with_checkpointer(Arc::new(self.saver.fenced(lease)));
        let cancel = CancelToken::new();
        let config = RunConfig::new()
            .thread(lease.thread.as_str())
            .durability(self.options.durability)
            .cancel_token(cancel.clone())
            .metadata("run_id", lease.run.as_str())
            .metadata("lease_epoch", lease.epoch);
        let heartbeat = Heartbeat::start(
            Arc::new(self.queue.clone()),
            lease.clone(),
            self.options.lease,
            self.options.heartbeat,
            stategraph_runs::Wakeups::postgres(self.wakeups().await),
            move || cancel.cancel(),
        );
        let result = graph.invoke(input, &config).await;
        let beat = heartbeat.stop().await;
        let end = match (result, beat) {
            (_, Beat::Lost) | (Err(RunError::Checkpoint(CheckpointError::LeaseLost { .. })), _) => {
                return Ok(Worked::LeaseLost)
            }
            (Err(RunError::Cancelled { .. }), Beat::Stop(stop)) => RunEnd::Stopped(stop),
            (Ok(outcome), _) if outcome.is_interrupted() => RunEnd::Paused,
            (Ok(_), _) => RunEnd::Success,
            (Err(e), _) => RunEnd::Failed(e.to_string()),
        };
        self.end(lease, end).await
    }

    /// The run's input: its own (an input, or a command) on its first run, "go on" once an
    /// earlier lease wrote.
    fn input_of(&self, lease: &Lease) -> Result<Input<S>, String> {
        if let Some(problem) = &lease.unreadable {
            return Err(problem.clone());
        }
        if lease.resumed {
            return Ok(Input::Continue);
        }
        if let Some(command) = &lease.command {
            return command::command_of(command).map(Input::Command);
        }
        if lease.input.is_null() {
            return Ok(Input::Continue);
        }
        serde_json::from_value::<S::Update>(lease.input.clone())
            .map(Input::Update)
            .map_err(|e| format!("the run's input does not fit the graph's state: {e}"))
    }

    /// Record the run's end; a lost lease is not an error.
    async fn end(&self, lease: &Lease, end: RunEnd) -> Result<Worked, WorkerError> {
        let status = end.status();
        match self.queue.finish(lease, end).await {
            Ok(()) => Ok(Worked::Ended(status)),
            Err(CheckpointError::LeaseLost { .. }) => Ok(Worked::LeaseLost),
            Err(e) => Err(e.into()),
        }
    }
}
