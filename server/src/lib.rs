//! `stategraph serve`: LangGraph's Agent Server API over stategraph graphs, so the clients
//! people already use (`langgraph-sdk` for Python and JS, agent-chat-ui, `RemoteGraph`) run
//! on them unmodified.
//!
//! Register compiled graphs by name; each becomes an assistant. Threads, their checkpoints,
//! the runs and their queue live in one SQLite file, so a server that is killed picks its
//! queued and running runs up again when it starts. With [`ServerBuilder::postgres`]
//! (feature `postgres`) they live in PostgreSQL instead, where several servers share them:
//! any accepts a request, one leases and runs each run, and a client's stream is relayed
//! from the server that runs it.
//!
//! ```
//! use std::sync::Arc;
//! use stategraph::prelude::*;
//! use stategraph_server::Server;
//!
//! #[derive(State, Clone, Default, Debug)]
//! struct Log {
//!     #[reduce(append)]
//!     log: Vec<String>,
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let graph = StateGraph::<Log>::new()
//!     .add_node("a", |_s: Arc<Log>, _cx: NodeContext| async move {
//!         Ok::<_, BoxError>(Log::update().log(vec!["a".into()]))
//!     })
//!     .add_edge(START, "a")
//!     .add_edge("a", END)
//!     .compile()?;
//! let dir = tempfile::tempdir()?;
//! let server = Server::builder()
//!     .graph("chain", &graph)
//!     .file(dir.path().join("threads.db"))
//!     .addr("127.0.0.1:0".parse()?) // any free port; 2024 by default, as `langgraph dev`
//!     .start()
//!     .await?;
//! println!("serving on {}", server.url());
//! server.shutdown().await;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! Inside: `wire` the request shapes; `graph` a graph with its state type erased; `store`
//! the server's tables; `runs` the run queue and event logs; `sse` the event stream;
//! `routes` the HTTP API; `guard` API key, CORS and body limits; `options` what a server is
//! given.

pub mod demo;
mod error;
mod graph;
mod guard;
mod ids;
mod options;
mod routes;
mod runner;
mod runs;
mod sse;
mod store;
mod wire;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use stategraph::checkpoints::{Saver, SqliteSaver};
use stategraph::{CompiledGraph, State};
use stategraph_runs::{RunQueue, SqliteRunQueue, Wakeups};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use error::ApiError;
pub use options::{ServerError, ServerOptions, DEFAULT_BODY_LIMIT, DEFAULT_PORT};
pub use runner::{RunEvents, RunFailure, Runner};
pub use wire::Multitask;

use graph::{Served, ServedGraph};
use runs::Runs;
use store::Book;

/// A graph the server serves: its name (the assistant's `graph_id`), its assistant id, and
/// the graph bound to the server's saver.
pub(crate) struct Registered {
    pub(crate) name: String,
    pub(crate) assistant_id: String,
    pub(crate) graph: Arc<dyn ServedGraph>,
}

/// What every request handler shares.
pub(crate) struct Shared {
    pub(crate) book: Book,
    /// The runs, queued (a table of the file, or the database's queue).
    pub(crate) queue: Arc<dyn RunQueue>,
    /// The queue's notifications (one source; each waiter clones it).
    pub(crate) wakeups: Wakeups,
    /// How this server's worker leases runs.
    pub(crate) worker: runs::Worker,
    /// The logs this server's clients read.
    pub(crate) runs: Runs,
    /// On PostgreSQL: frames and results in the database, relayed between servers.
    #[cfg(feature = "postgres")]
    pub(crate) frames: Option<Arc<runs::pg::FrameStore>>,
    pub(crate) saver: Arc<dyn Saver>,
    /// The long-term store of `/store/*`, which the graphs share.
    pub(crate) store: Arc<dyn stategraph_store::Store>,
    pub(crate) graphs: HashMap<String, Arc<Registered>>,
    pub(crate) options: ServerOptions,
    pub(crate) started_ms: i64,
}

impl Shared {
    /// The graph an assistant id names: its UUID or the graph's name.
    pub(crate) fn assistant(&self, id: &str) -> Result<&Arc<Registered>, ApiError> {
        self.graphs
            .get(id)
            .or_else(|| self.graphs.values().find(|g| g.assistant_id == id))
            .ok_or_else(|| ApiError::not_found("assistant", id))
    }

    /// The graph a run's `assistant_id` names. LangGraph answers an unknown UUID 404 and an
    /// unknown graph name 422.
    pub(crate) fn run_assistant(&self, id: &str) -> Result<&Arc<Registered>, ApiError> {
        self.assistant(id).map_err(|e| {
            if is_uuid(id) {
                return e;
            }
            let mut names: Vec<&str> = self.graphs.keys().map(String::as_str).collect();
            names.sort_unstable();
            ApiError::Invalid(format!(
                "invalid assistant {id:?}: neither an assistant's id nor one of the graphs {}",
                names.join(", ")
            ))
        })
    }
}

fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        })
}

type Bind = Box<
    dyn FnOnce(Arc<dyn Saver>, Arc<dyn stategraph_store::Store>) -> Arc<dyn ServedGraph> + Send,
>;

/// The Agent Server.
#[derive(Debug)]
pub struct Server;

impl Server {
    /// Start describing a server.
    pub fn builder() -> ServerBuilder {
        ServerBuilder {
            graphs: Vec::new(),
            options: ServerOptions::default(),
            store: None,
        }
    }
}

/// Graphs and options of a [`Server`].
pub struct ServerBuilder {
    graphs: Vec<(String, Bind)>,
    options: ServerOptions,
    store: Option<Arc<dyn stategraph_store::Store>>,
}

impl std::fmt::Debug for ServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerBuilder")
            .field(
                "graphs",
                &self.graphs.iter().map(|g| &g.0).collect::<Vec<_>>(),
            )
            .field("options", &self.options)
            .field("store", &self.store)
            .finish()
    }
}

impl ServerBuilder {
    /// Serve `graph` as `name`: an assistant whose `graph_id` is `name` (and which
    /// `assistant_id: name` reaches too). Its state travels as JSON through the state's serde
    /// types. The server binds it to its own checkpoint file.
    pub fn graph<S: State>(self, name: impl Into<String>, graph: &CompiledGraph<S>) -> Self {
        self.runner(name, graph.clone())
    }

    /// Serve `runner` as `name`: like [`ServerBuilder::graph`], with every run started
    /// through the runner (an agent that records, settles and delivers its runs, say).
    pub fn runner<S: State, R: Runner<S>>(mut self, name: impl Into<String>, runner: R) -> Self {
        self.graphs.push((
            name.into(),
            Box::new(move |saver, store| {
                Arc::new(Served::<S, R>::new(runner, saver, store)) as Arc<dyn ServedGraph>
            }),
        ));
        self
    }

    /// Every option at once.
    pub fn options(mut self, options: ServerOptions) -> Self {
        self.options = options;
        self
    }

    /// The SQLite file holding threads, checkpoints and runs (made if missing).
    pub fn file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.options.file = path.into();
        self
    }

    /// Listen on `addr` (`127.0.0.1:2024` by default; port 0 takes a free one).
    pub fn addr(mut self, addr: SocketAddr) -> Self {
        self.options.addr = addr;
        self
    }

    /// Require this API key in `x-api-key` (required to listen beyond loopback).
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.options.api_key = Some(key.into());
        self
    }

    /// Allow browser pages from `origin` (CORS).
    pub fn cors_origin(mut self, origin: impl Into<String>) -> Self {
        self.options.cors_origins.push(origin.into());
        self
    }

    /// Send a `: heartbeat` on a stream silent this long (5 s by default).
    pub fn heartbeat(mut self, every: std::time::Duration) -> Self {
        self.options.heartbeat = every;
        self
    }

    /// Most bytes of a request body (10 MiB by default); a larger one is answered 413.
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.options.body_limit = bytes;
        self
    }

    /// Serve the chat page built into `dir` at `/ui/` (see [`ServerOptions::ui`]).
    pub fn ui(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.options.ui = Some(dir.into());
        self
    }

    /// Serve `store` at `/store/*` (LangGraph's store routes) and give it to the graphs
    /// instead of the server's own store, which lives with its checkpoints (in the file, or
    /// in the PostgreSQL schema). A graph compiled with a store of its own keeps that one.
    pub fn store(mut self, store: Arc<dyn stategraph_store::Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// Serve from PostgreSQL at `url` (feature `postgres`): threads, checkpoints and runs
    /// in one schema, which any number of servers may share. Each takes requests, and each
    /// runs queued runs; a client's stream is relayed from whichever server runs its run.
    pub fn postgres(mut self, url: impl Into<String>) -> Self {
        self.options.postgres = Some(url.into());
        self
    }

    /// Open the file (or the database), pick up the runs a stopped server left, and listen.
    ///
    /// # Errors
    /// [`ServerError`]: a non-loopback address without an API key, two graphs of one name,
    /// the file or database, the address.
    pub async fn start(self) -> Result<RunningServer, ServerError> {
        self.options.check()?;
        let store = open_store(&self.options).await?;
        let saver = store.saver.clone();
        let long_store = self.store.unwrap_or_else(|| store.long.clone());
        let sweeper = stategraph_store::spawn_sweeper(long_store.clone(), SWEEP_EVERY);
        let mut graphs = HashMap::new();
        for (name, bind) in self.graphs {
            let registered = Registered {
                assistant_id: ids::assistant_id(&name),
                name: name.clone(),
                graph: bind(saver.clone(), long_store.clone()),
            };
            if graphs.insert(name.clone(), Arc::new(registered)).is_some() {
                return Err(ServerError::DuplicateGraph(name));
            }
        }
        let wakeups = store.queue.wakeups().await;
        let shared = Arc::new(Shared {
            book: store.book,
            queue: store.queue,
            wakeups,
            worker: runs::Worker::new(self.options.lease, self.options.concurrency),
            runs: Runs::default(),
            #[cfg(feature = "postgres")]
            frames: store.frames,
            saver,
            store: long_store,
            graphs,
            options: self.options.clone(),
            started_ms: ids::now_ms(),
        });
        let worker = Some(tokio::spawn(shared.clone().work()));
        let listener = tokio::net::TcpListener::bind(self.options.addr)
            .await
            .map_err(|e| ServerError::Listen {
                addr: self.options.addr,
                reason: e.to_string(),
            })?;
        let addr = listener.local_addr().map_err(|e| ServerError::Listen {
            addr: self.options.addr,
            reason: e.to_string(),
        })?;
        let app = routes::router(shared.clone());
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            // Each frame goes out as it is written: without TCP_NODELAY, Nagle's algorithm
            // holds a stream's small frames until the client's delayed ACK (~40 ms).
            let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
                let _ = tcp.set_nodelay(true);
            });
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
        });
        Ok(RunningServer {
            addr,
            stop: Some(tx),
            task,
            worker,
            _sweeper: sweeper,
            shared,
        })
    }
}

/// How often the server deletes the store's expired items (reads never see them anyway).
const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// What a server keeps its records, runs and checkpoints in.
struct Store {
    book: Book,
    queue: Arc<dyn RunQueue>,
    saver: Arc<dyn Saver>,
    /// The long-term store.
    long: Arc<dyn stategraph_store::Store>,
    #[cfg(feature = "postgres")]
    frames: Option<Arc<runs::pg::FrameStore>>,
}

async fn open_store(options: &ServerOptions) -> Result<Store, ServerError> {
    if let Some(url) = &options.postgres {
        return open_postgres(url, options).await;
    }
    let file = options.file.clone();
    let open = |e: &dyn std::fmt::Display| ServerError::Open {
        file: file.display().to_string(),
        reason: e.to_string(),
    };
    let saver: Arc<dyn Saver> = Arc::new(SqliteSaver::open(&file).map_err(|e| open(&e))?);
    let queue = SqliteRunQueue::open(&file).map_err(|e| open(&e))?;
    // A file is served by one server: the leases its last server held when it stopped are
    // over, and their runs are taken over at once, one attempt more.
    queue.expire_leases().map_err(|e| open(&e))?;
    let book = store::SqliteBook::open(&file).map_err(|e| open(&e))?;
    let long = stategraph_store::SqliteStore::open(&file, stategraph_store::StoreConfig::default())
        .map_err(|e| open(&e))?;
    Ok(Store {
        book: Book::Sqlite(book),
        queue: Arc::new(queue),
        saver,
        long: Arc::new(long),
        #[cfg(feature = "postgres")]
        frames: None,
    })
}

#[cfg(feature = "postgres")]
async fn open_postgres(url: &str, options: &ServerOptions) -> Result<Store, ServerError> {
    use stategraph::checkpoints::{PostgresOptions, PostgresSaver};
    let mut pg_options = PostgresOptions::default();
    if let Some(schema) = &options.postgres_schema {
        pg_options.schema.clone_from(schema);
    }
    let open = |e: &dyn std::fmt::Display| ServerError::Open {
        file: format!("PostgreSQL schema {}", pg_options.schema),
        reason: e.to_string(),
    };
    let saver = PostgresSaver::connect_with(url, pg_options.clone())
        .await
        .map_err(|e| open(&e))?;
    let book = store::postgres::PgBook::open(saver.clone())
        .await
        .map_err(|e| open(&e))?;
    let long = stategraph_store::PostgresStore::from_saver(
        &saver,
        stategraph_store::StoreConfig::default(),
    )
    .await
    .map_err(|e| open(&e))?;
    Ok(Store {
        queue: Arc::new(saver.queue()),
        frames: Some(Arc::new(runs::pg::FrameStore::new(book.clone()))),
        book: Book::Postgres(book),
        saver: Arc::new(saver),
        long: Arc::new(long),
    })
}

#[cfg(not(feature = "postgres"))]
async fn open_postgres(_url: &str, _options: &ServerOptions) -> Result<Store, ServerError> {
    Err(ServerError::Options(
        "this build serves from SQLite only: PostgreSQL needs the `postgres` feature",
    ))
}

/// A server listening (see [`ServerBuilder::start`]).
#[derive(Debug)]
pub struct RunningServer {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
    /// The worker leasing runs from the queue.
    worker: Option<JoinHandle<()>>,
    /// Deletes the store's expired items while the server runs.
    _sweeper: stategraph_store::Sweeper,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("graphs", &self.graphs.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl RunningServer {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its base URL (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Wait until it stops (it stops on [`RunningServer::shutdown`] or when its task ends).
    pub async fn wait(mut self) {
        let task = std::mem::replace(&mut self.task, tokio::spawn(async {}));
        let _ = task.await;
    }

    /// Stop listening (after the requests in flight are answered) and flush the file. Runs
    /// still running go on while the process lives; those the process does not finish are
    /// picked up by the next server on the file.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        // It takes no more runs; those it runs go on while the process lives, and the next
        // server on the file (or another on the database) takes over the ones it does not
        // finish.
        if let Some(worker) = self.worker.take() {
            worker.abort();
        }
        let task = std::mem::replace(&mut self.task, tokio::spawn(async {}));
        let _ = task.await;
        let _ = self.shared.saver.flush().await;
    }
}
