//! `stategraph serve [FILE|URL] [--postgres URL] [--schema S] [--lease AGE] [--port P]
//! [--host ADDR] [--api-key KEY] [--cors ORIGIN] [--ui [DIR]]`: serve LangGraph's Agent Server API (the
//! `stategraph-server` crate) over the demo graphs until interrupted. A program serves its own graphs with `stategraph_server::Server`.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use stategraph_server::{demo, Server, ServerError, ServerOptions};

use crate::failure::{Failure, Outcome};

/// What `serve` is given on the command line.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// The SQLite file of threads, checkpoints and runs, or a postgres:// URL.
    #[arg(default_value = "stategraph.db")]
    pub(crate) file: PathBuf,
    /// Serve from PostgreSQL at this URL.
    #[arg(long, value_name = "URL")]
    pub(crate) postgres: Option<String>,
    /// The PostgreSQL schema (default stategraph).
    #[arg(long, value_name = "NAME")]
    pub(crate) schema: Option<String>,
    /// How long a server's lease of a run lasts without a heartbeat: on PostgreSQL, how
    /// soon another server takes over the runs of one that died.
    #[arg(long, value_parser = super::parse_age, value_name = "AGE", default_value = "30s")]
    pub(crate) lease: std::time::Duration,
    /// The port.
    #[arg(long, default_value_t = 2024)]
    pub(crate) port: u16,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub(crate) host: std::net::IpAddr,
    /// The key clients must send in x-api-key (or STATEGRAPH_API_KEY); required beyond
    /// loopback.
    #[arg(long)]
    pub(crate) api_key: Option<String>,
    /// An origin whose pages may call the API (CORS), e.g. http://localhost:3000.
    /// Repeatable.
    #[arg(long = "cors", value_name = "ORIGIN")]
    pub(crate) cors: Vec<String>,
    /// Serve the chat page at /ui/ (LangGraph's useStream, built by .ci/chat-page.sh)
    /// from DIR, or from $STATEGRAPH_CHAT_PAGE, or target/chat-page/dist.
    #[arg(long, value_name = "DIR", num_args = 0..=1)]
    #[allow(clippy::option_option)]
    pub(crate) ui: Option<Option<PathBuf>>,
}

/// Where `--ui` finds the chat page: the directory given, else `$STATEGRAPH_CHAT_PAGE`, else
/// where `.ci/chat-page.sh` builds it.
fn chat_page(given: Option<&Path>) -> PathBuf {
    if let Some(dir) = given {
        return dir.to_owned();
    }
    std::env::var_os("STATEGRAPH_CHAT_PAGE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/chat-page/dist"))
}

/// Serve until the process is stopped (Ctrl-C or SIGTERM stops it cleanly).
pub(super) async fn run(args: &ServeArgs) -> Outcome {
    let mut options = ServerOptions::default();
    options.file = args.file.clone();
    options.addr = SocketAddr::new(args.host, args.port);
    let url = args
        .file
        .to_str()
        .filter(|_| crate::file::is_url(&args.file));
    options.postgres = args.postgres.as_deref().or(url).map(str::to_owned);
    options.postgres_schema = args.schema.clone();
    options.lease = args.lease;
    options.ui = args.ui.as_ref().map(|dir| chat_page(dir.as_deref()));
    let mut builder = Server::builder().options(options);
    let key = args
        .api_key
        .clone()
        .or_else(|| std::env::var("STATEGRAPH_API_KEY").ok());
    if let Some(key) = key {
        builder = builder.api_key(key);
    }
    for origin in &args.cors {
        builder = builder.cors_origin(origin.clone());
    }
    let builder = demo::register(builder).map_err(|e| Failure::runtime(e.to_string()))?;
    let server = builder.start().await.map_err(|e| match e {
        ServerError::NeedsApiKey(_)
        | ServerError::EmptyApiKey
        | ServerError::Options(_)
        | ServerError::NoChatPage { .. } => Failure::usage(e.to_string()),
        other => Failure::runtime(other.to_string()),
    })?;
    let mut stdout = std::io::stdout();
    let _ = writeln!(
        stdout,
        "stategraph serve: {} (graphs: agent, approval, boom, chain, chat, custom, guarded_chat, nested, slow)",
        server.url()
    );
    if args.ui.is_some() {
        let _ = writeln!(stdout, "chat page: {}/ui/", server.url());
    }
    let _ = stdout.flush();
    stopped().await;
    server.shutdown().await;
    Ok(())
}

/// Ctrl-C, or (on Unix) SIGTERM, as a service manager stops a process.
async fn stopped() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
