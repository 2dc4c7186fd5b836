//! What a server is given ([`ServerOptions`]) and why it may refuse to start
//! ([`ServerError`]).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// The port LangGraph's `langgraph dev` listens on, and so ours by default.
pub const DEFAULT_PORT: u16 = 2024;

/// Most bytes of a request body by default (10 MiB).
pub const DEFAULT_BODY_LIMIT: usize = 10 * 1024 * 1024;

/// How a server listens and where it keeps its threads.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerOptions {
    /// The SQLite file of threads, checkpoints and runs.
    pub file: PathBuf,
    /// Where to listen. Beyond loopback an API key is required.
    pub addr: SocketAddr,
    /// The key clients send in `x-api-key`; every route but `/ok` then requires it.
    pub api_key: Option<String>,
    /// Origins whose pages may call the API from a browser (exact `scheme://host:port`).
    pub cors_origins: Vec<String>,
    /// Most bytes of a request body.
    pub body_limit: usize,
    /// How long an event stream stays silent before a `: heartbeat` comment (5 s).
    pub heartbeat: Duration,
    /// Serve from PostgreSQL at this URL instead of the file (feature `postgres`): threads,
    /// checkpoints and runs in one schema, which several servers may share.
    pub postgres: Option<String>,
    /// The schema on PostgreSQL (`stategraph` by default).
    pub postgres_schema: Option<String>,
    /// How long a server's lease of a run lasts without a heartbeat (30 s; it beats every
    /// third of it): on PostgreSQL a server that dies loses its runs to another this long
    /// after its last beat (on SQLite the next server on the file takes them at once).
    pub lease: Duration,
    /// Most runs this server runs at once (64); more wait in the queue.
    pub concurrency: usize,
    /// Serve the chat page built into this directory at `/ui/` (its `index.html`, `chat.js`
    /// and `chat.css`, which `.ci/chat-page.sh` builds). The page's files need no API key;
    /// the page sends the key given in its URL's fragment, `#key=…`.
    pub ui: Option<PathBuf>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            file: PathBuf::from("stategraph.db"),
            addr: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), DEFAULT_PORT),
            api_key: None,
            cors_origins: Vec::new(),
            body_limit: DEFAULT_BODY_LIMIT,
            heartbeat: Duration::from_secs(5),
            postgres: None,
            postgres_schema: None,
            lease: Duration::from_secs(30),
            concurrency: 64,
            ui: None,
        }
    }
}

impl ServerOptions {
    /// Refuse what must not start: a non-loopback address without an API key, an empty key.
    ///
    /// # Errors
    /// [`ServerError::NeedsApiKey`], [`ServerError::EmptyApiKey`].
    pub fn check(&self) -> Result<(), ServerError> {
        if self.lease < Duration::from_millis(300) {
            return Err(ServerError::Options("the lease must last at least 300 ms"));
        }
        if let Some(dir) = &self.ui {
            if let Some(missing) = crate::routes::ui::missing_file(dir) {
                return Err(ServerError::NoChatPage {
                    dir: dir.display().to_string(),
                    missing,
                });
            }
        }
        match &self.api_key {
            Some(k) if k.trim().is_empty() => Err(ServerError::EmptyApiKey),
            None if !self.addr.ip().is_loopback() => Err(ServerError::NeedsApiKey(self.addr)),
            _ => Ok(()),
        }
    }
}

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// Listening beyond loopback needs an API key.
    #[error(
        "{0} is not a loopback address: give an API key (--api-key or STATEGRAPH_API_KEY) \
         so that only clients holding it are served"
    )]
    NeedsApiKey(SocketAddr),
    /// The API key is empty.
    #[error("the API key is empty")]
    EmptyApiKey,
    /// Options that cannot work.
    #[error("{0}")]
    Options(&'static str),
    /// The chat page's directory lacks one of its files.
    #[error(
        "the chat page in {dir} has no {missing}: build it with .ci/chat-page.sh \
         (it needs npm), or give the directory it printed"
    )]
    NoChatPage {
        /// The directory given.
        dir: String,
        /// The file it lacks.
        missing: &'static str,
    },
    /// Two graphs were registered under one name.
    #[error("two graphs are named {0:?}")]
    DuplicateGraph(String),
    /// The file could not be opened.
    #[error("{file}: {reason}")]
    Open {
        /// The file.
        file: String,
        /// Why.
        reason: String,
    },
    /// The address could not be listened on.
    #[error("cannot listen on {addr}: {reason}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beyond_loopback_a_server_needs_an_api_key() {
        let mut o = ServerOptions {
            addr: "0.0.0.0:2024"
                .parse()
                .unwrap_or(ServerOptions::default().addr),
            ..ServerOptions::default()
        };
        assert!(matches!(o.check(), Err(ServerError::NeedsApiKey(_))));
        o.api_key = Some("k".to_owned());
        assert!(o.check().is_ok());
        o.api_key = Some(" ".to_owned());
        assert!(matches!(o.check(), Err(ServerError::EmptyApiKey)));
        assert!(ServerOptions::default().check().is_ok());
    }
}
