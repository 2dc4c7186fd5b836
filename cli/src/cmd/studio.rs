//! `stategraph studio FILE [--port P] [--bind ADDR] [--read-only]`: serve the web inspector
//! (the `stategraph-studio` crate) until interrupted. FILE may be a `postgres://` URL, opened
//! as every other command opens one.

use std::io::Write as _;
use std::net::IpAddr;
use std::path::Path;

use stategraph_checkpoints::inspect;
use stategraph_studio::{Studio, StudioOptions};

use crate::failure::{Failure, Outcome};
use crate::file::{exists, is_url};

/// Serve `file` until the process is stopped.
pub(super) async fn run(file: &Path, bind: IpAddr, port: u16, read_only: bool) -> Outcome {
    if is_url(file) {
        // A URL the commands refuse as a usage error (half a client certificate) is one here.
        let text = file.to_str().unwrap_or_default();
        inspect::database_options(text).map_err(|e| Failure::usage(e.to_string()))?;
    } else {
        exists(file)?;
    }
    let options = StudioOptions::new(file)
        .bind(bind)
        .port(port)
        .read_only(read_only);
    let studio = Studio::connect(options)
        .await
        .map_err(|e| Failure::runtime(e.to_string()))?;
    let bound = studio
        .bind()
        .await
        .map_err(|e| Failure::runtime(e.to_string()))?;
    if !bind.is_loopback() {
        eprintln!(
            "stategraph: warning: listening on {bind}, reachable from other machines; the token is the only guard"
        );
    }
    let mode = if read_only { " (read-only)" } else { "" };
    let mut stdout = std::io::stdout();
    let _ = writeln!(stdout, "stategraph studio{mode}: open {}", bound.url());
    let _ = stdout.flush();
    bound
        .serve()
        .await
        .map_err(|e| Failure::runtime(e.to_string()))
}
