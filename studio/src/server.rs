//! The studio's options, its shared state, and listening.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use stategraph_checkpoints::{inspect, CheckpointError, SqliteSaver};

/// How a [`Studio`] serves a file.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StudioOptions {
    /// The checkpoint file.
    pub file: PathBuf,
    /// The address to listen on (loopback by default).
    pub bind: IpAddr,
    /// The port (0: any free one).
    pub port: u16,
    /// Refuse forks (the file is then never opened for writing).
    pub read_only: bool,
}

impl StudioOptions {
    /// Serve `file` on 127.0.0.1, any free port, forks allowed.
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
    /// The file could not be opened as a checkpoint file.
    #[error("{file}: {source}")]
    Open {
        /// The file.
        file: PathBuf,
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
    pub(crate) file: PathBuf,
    pub(crate) saver: SqliteSaver,
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
    /// Open `options.file` read-only (it must exist) and make the session's token.
    ///
    /// # Errors
    /// [`StudioError::Open`] for a missing or unreadable file; [`StudioError::Token`].
    pub fn open(options: StudioOptions) -> Result<Self, StudioError> {
        let file = options.file.clone();
        let saver =
            inspect::open_existing_read_only(&file).map_err(|source| StudioError::Open {
                file: file.clone(),
                source: Box::new(source),
            })?;
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|e| StudioError::Token(e.to_string()))?;
        let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Ok(Studio {
            state: Arc::new(AppState {
                file,
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
