//! The studio's options, its shared state, and listening.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use stategraph_checkpoints::inspect::{self, Store};
use stategraph_checkpoints::CheckpointError;

/// How a [`Studio`] serves a file or a database.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StudioOptions {
    /// The checkpoint file, or a `postgres://` URL (with `?schema=NAME` and the TLS
    /// parameters [`inspect::database_options`] reads) to serve a PostgreSQL saver's schema;
    /// a URL is opened by [`Studio::connect`].
    pub file: PathBuf,
    /// The address to listen on (loopback by default).
    pub bind: IpAddr,
    /// The port (0: any free one).
    pub port: u16,
    /// Refuse forks (the file is then never opened for writing; a database is never
    /// written).
    pub read_only: bool,
}

impl StudioOptions {
    /// Serve `file` (a path or a `postgres://` URL) on 127.0.0.1, any free port, forks
    /// allowed.
    pub fn new(file: impl AsRef<Path>) -> Self {
        StudioOptions {
            file: file.as_ref().to_path_buf(),
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            read_only: false,
        }
    }

    /// On port `port`.
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// On address `bind`.
    pub fn bind(mut self, bind: IpAddr) -> Self {
        self.bind = bind;
        self
    }

    /// Read-only or not.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }
}

/// Why the studio could not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StudioError {
    /// The file could not be opened as a checkpoint file, or the database not reached.
    #[error("{file}: {source}")]
    Open {
        /// The file, or the URL without its password.
        file: String,
        /// Why.
        #[source]
        source: Box<CheckpointError>,
    },
    /// No random token could be made.
    #[error("cannot make a random token: {0}")]
    Token(String),
    /// The address could not be listened on, or serving failed.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// What every request handler shares.
#[derive(Debug)]
pub(crate) struct AppState {
    /// The file (opened for writing for a fork); unused for a database.
    pub(crate) file: PathBuf,
    /// What the page shows as the source: the file's name, or the URL without password.
    pub(crate) label: String,
    pub(crate) saver: Store,
    pub(crate) read_only: bool,
    pub(crate) token: String,
    /// One fork at a time.
    pub(crate) fork_lock: tokio::sync::Mutex<()>,
}

/// A studio over one file, ready to listen.
#[derive(Debug, Clone)]
pub struct Studio {
    state: Arc<AppState>,
    options: StudioOptions,
}

impl Studio {
    /// Open `options.file` read-only (it must exist) and make the session's token. A
    /// `postgres://` URL needs [`Studio::connect`].
    ///
    /// # Errors
    /// [`StudioError::Open`] for a missing or unreadable file or a URL; [`StudioError::Token`].
    pub fn open(options: StudioOptions) -> Result<Self, StudioError> {
        let file = options.file.clone();
        if inspect::is_database_url(&file) {
            let url = inspect::url_without_password(&file.to_string_lossy());
            return Err(StudioError::Open {
                file: url.clone(),
                source: Box::new(CheckpointError::InvalidPath {
                    path: url,
                    reason: "a postgres:// URL is opened with Studio::connect",
                }),
            });
        }
        let saver =
            inspect::open_existing_read_only(&file).map_err(|source| StudioError::Open {
                file: file.display().to_string(),
                source: Box::new(source),
            })?;
        let label = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Self::with_store(options, Store::File(saver), label)
    }

    /// Open `options.file` as [`Studio::open`] does, or connect to the PostgreSQL schema a
    /// `postgres://` URL names, as `stategraph` does for every command: the schema must
    /// exist (nothing is created), and forks write through the same connection pool unless
    /// `read_only`.
    ///
    /// ```
    /// use stategraph_studio::{Studio, StudioOptions};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("threads.db");
    /// stategraph_checkpoints::SqliteSaver::open(&path)?.close()?;
    /// let studio = Studio::connect(StudioOptions::new(&path)).await?;
    /// assert_eq!(studio.token().len(), 32);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`Studio::open`]; [`StudioError::Open`] when the database cannot be reached or
    /// holds no stategraph schema of that name.
    pub async fn connect(options: StudioOptions) -> Result<Self, StudioError> {
        if !inspect::is_database_url(&options.file) {
            return Self::open(options);
        }
        let url = options.file.to_string_lossy().into_owned();
        let label = inspect::url_without_password(&url);
        let saver = inspect::open_database(&url)
            .await
            .map_err(|source| StudioError::Open {
                file: label.clone(),
                source: Box::new(source),
            })?;
        Self::with_store(options, Store::Postgres(saver), label)
    }

    fn with_store(
        options: StudioOptions,
        saver: Store,
        label: String,
    ) -> Result<Self, StudioError> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|e| StudioError::Token(e.to_string()))?;
        let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Ok(Studio {
            state: Arc::new(AppState {
                file: options.file.clone(),
                label,
                saver,
                read_only: options.read_only,
                token,
                fork_lock: tokio::sync::Mutex::new(()),
            }),
            options,
        })
    }

    /// The session's token (32 hex digits), required on every request.
    pub fn token(&self) -> &str {
        &self.state.token
    }

    /// The web app: the API, the UI and the token check, ready for any server or for
    /// `tower::ServiceExt::oneshot` in tests.
    pub fn router(&self) -> axum::Router {
        crate::api::router(Arc::clone(&self.state))
    }

    /// Listen on the options' address and port.
    ///
    /// # Errors
    /// [`StudioError::Listen`] when the address cannot be bound.
    pub async fn bind(self) -> Result<Bound, StudioError> {
        let addr = SocketAddr::new(self.options.bind, self.options.port);
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| StudioError::Listen { addr, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| StudioError::Listen { addr, source })?;
        let host = match local.ip() {
            IpAddr::V6(ip) => format!("[{ip}]"),
            IpAddr::V4(ip) => ip.to_string(),
        };
        let url = format!("http://{host}:{}/?token={}", local.port(), self.token());
        Ok(Bound {
            listener,
            router: self.router(),
            url,
            local,
        })
    }
}

/// A studio listening on its address.
#[derive(Debug)]
pub struct Bound {
    listener: tokio::net::TcpListener,
    router: axum::Router,
    url: String,
    local: SocketAddr,
}

impl Bound {
    /// The URL to open, with the token.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The address listened on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Serve until the task is dropped or the process ends.
    ///
    /// # Errors
    /// [`StudioError::Listen`] when serving fails.
    pub async fn serve(self) -> Result<(), StudioError> {
        let addr = self.local;
        axum::serve(self.listener, self.router)
            .await
            .map_err(|source| StudioError::Listen { addr, source })
    }
}
