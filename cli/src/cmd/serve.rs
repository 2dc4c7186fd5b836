//! `stategraph serve [FILE|URL] [--postgres URL] [--schema S] [--lease AGE] [--port P]
//! [--host ADDR] [--api-key KEY] [--cors ORIGIN] [--ui [DIR]]`: serve LangGraph's Agent Server API (the
//! `stategraph-server` crate) over the demo graphs until interrupted. A program serves its own graphs with `stategraph_server::Server`.

use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use stategraph_server::{demo, Server, ServerError, ServerOptions};

use crate::failure::{Failure, Outcome};

/// What `serve` is given.
pub(crate) struct ServeArgs<'a> {
    pub(crate) file: &'a Path,
    pub(crate) postgres: Option<&'a str>,
    pub(crate) schema: Option<&'a str>,
    pub(crate) lease: std::time::Duration,
    pub(crate) host: IpAddr,
    pub(crate) port: u16,
    pub(crate) api_key: Option<&'a str>,
    pub(crate) cors: &'a [String],
    /// `--ui`: the chat page's directory ([`chat_page`]).
    pub(crate) ui: Option<std::path::PathBuf>,
}

/// Where `--ui` finds the chat page: the directory given, else `$STATEGRAPH_CHAT_PAGE`, else
/// where `.ci/chat-page.sh` builds it.
pub(crate) fn chat_page(given: Option<&Path>) -> std::path::PathBuf {
    if let Some(dir) = given {
        return dir.to_owned();
    }
    std::env::var_os("STATEGRAPH_CHAT_PAGE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from("target/chat-page/dist"))
}

/// Serve until the process is stopped (Ctrl-C or SIGTERM stops it cleanly).
pub(super) async fn run(args: ServeArgs<'_>) -> Outcome {
    let mut options = ServerOptions::default();
    options.file = args.file.to_owned();
    options.addr = SocketAddr::new(args.host, args.port);
    let url = args
        .file
        .to_str()
        .filter(|_| crate::file::is_url(args.file));
    options.postgres = args.postgres.or(url).map(str::to_owned);
    options.postgres_schema = args.schema.map(str::to_owned);
    options.lease = args.lease;
    options.ui = args.ui.clone();
    let mut builder = Server::builder().options(options);
    let key = args
        .api_key
        .map(str::to_owned)
        .or_else(|| std::env::var("STATEGRAPH_API_KEY").ok());
    if let Some(key) = key {
        builder = builder.api_key(key);
    }
    for origin in args.cors {
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
