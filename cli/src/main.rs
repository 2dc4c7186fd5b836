//! `stategraph`: inspect a stategraph checkpoint file (SQLite) without the graph's Rust types.
//!
//! Every command takes the file first (or a `postgres://` URL, with `?schema=NAME` for
//! another schema than `stategraph`, to inspect a PostgreSQL saver's tables); `--json` prints one JSON document for scripts, and
//! colour is used only on a terminal (`--color`, `NO_COLOR`). Exit codes: 0 success, 1 a
//! run-time problem (missing file, unknown thread or checkpoint, corruption found), 2 a usage
//! error. Messages go to stderr and start with `stategraph: `.

mod cmd;
mod failure;
mod file;
mod output;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// Inspect a stategraph checkpoint file (SQLite) without the graph's Rust types.
///
/// In place of FILE, a postgres:// URL inspects a PostgreSQL saver's tables (add
/// ?schema=NAME for another schema than stategraph).
///
/// State values are shown as the JSON they are stored as. A checkpoint is named by its
/// 32-hex-digit id, by at least 6 digits from its start or end that no other checkpoint's id
/// has (history shows the shortest such end), by step:N (superstep N on the newest branch),
/// or by step:N@REF (on the branch that ends at checkpoint REF).
#[derive(Debug, Parser)]
#[command(name = "stategraph", version, propagate_version = true)]
#[command(
    after_help = "Exit status: 0 ok, 1 a problem (missing file, unknown thread or \
                        checkpoint, corruption found), 2 a usage error."
)]
pub(crate) struct Cli {
    /// Print one JSON document instead of text (for scripts).
    #[arg(long, global = true)]
    pub(crate) json: bool,

    /// When to colour the output: auto = only on a terminal, and not when NO_COLOR is set.
    #[arg(long, value_enum, global = true, default_value_t = ColorWhen::Auto, value_name = "WHEN")]
    pub(crate) color: ColorWhen,

    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// When to use ANSI colours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ColorWhen {
    /// Only when stdout is a terminal and `NO_COLOR` is not set.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// List the threads of the file with their status and namespaces.
    Threads {
        /// The checkpoint file, or a postgres:// URL.
        file: PathBuf,
    },
    /// A thread's checkpoints, newest first, with their branch and what each step wrote;
    /// with --tree, as the tree of its branches.
    History {
        /// The checkpoint file, or a postgres:// URL.
        file: PathBuf,
        /// The thread.
        #[arg(long, short = 't')]
        thread: String,
        /// Show at most this many checkpoints.
        #[arg(long, short = 'n', conflicts_with = "tree")]
        limit: Option<usize>,
        /// Draw the branches: each checkpoint under its parent, oldest first, a fork or an
        /// edit of an older checkpoint indented as a branch of its own.
        #[arg(long)]
        tree: bool,
        /// A namespace as `threads` lists it (`(root)` for the root graph, the default).
        #[arg(long, default_value = "", hide_default_value = true)]
        ns: String,
    },
    /// The state at a checkpoint (the newest by default), as JSON, with its header.
    Show {
        /// The checkpoint file, or a postgres:// URL.
        file: PathBuf,
        /// The thread.
        #[arg(long, short = 't')]
        thread: String,
        /// The checkpoint (id, unique start or end of one, step:N, step:N@REF); the newest
        /// by default.
        #[arg(long, short = 'c')]
        checkpoint: Option<String>,
        /// Print only this field's value.
        #[arg(long, conflicts_with = "path")]
        field: Option<String>,
        /// Print only the value at this JSON pointer into the state (RFC 6901), e.g. /log/0.
        #[arg(long)]
        path: Option<String>,
        /// A namespace as `threads` lists it (`(root)` for the root graph, the default).
        #[arg(long, default_value = "", hide_default_value = true)]
        ns: String,
    },
    /// What changed between two checkpoints of a thread (A older, B newer).
    Diff {
        /// The checkpoint file, or a postgres:// URL.
        file: PathBuf,
        /// The thread.
        #[arg(long, short = 't')]
        thread: String,
        /// The checkpoint to diff from.
        #[arg(required_unless_present = "since_parent", requires = "b")]
        a: Option<String>,
        /// The checkpoint to diff to.
        b: Option<String>,
        /// Diff this checkpoint against its parent instead: what its step changed.
        #[arg(long, value_name = "CHECKPOINT", conflicts_with_all = ["a", "b"])]
        since_parent: Option<String>,
        /// A namespace as `threads` lists it (`(root)` for the root graph, the default).
        #[arg(long, default_value = "", hide_default_value = true)]
        ns: String,
    },
    /// Start a new branch from a checkpoint, optionally with changed values.
    ///
    /// A `fork` checkpoint whose parent is the given checkpoint starts a new branch: in the
    /// thread itself, or with --to in a new thread that gets a copy of the forked branch
    /// (that branch only). The forked branch is not changed.
    Fork {
        /// The checkpoint file, or a postgres:// URL.
        file: PathBuf,
        /// The thread to fork.
        #[arg(long, short = 't')]
        thread: String,
        /// The checkpoint to branch from (id, unique start or end of one, step:N, step:N@REF).
        #[arg(long, short = 'c')]
        checkpoint: String,
        /// A new thread for the branch (must not exist yet); without it, the branch is made
        /// in the forked thread.
        #[arg(long)]
        to: Option<String>,
        /// Change a value in the new branch: a JSON pointer to a field (or into it), `=`,
        /// and JSON, e.g. --set /count=3 or --set '/log/0="edited"'. Repeatable.
        #[arg(long = "set", value_name = "PATH=JSON")]
        set: Vec<String>,
        /// Fork even when a --set value is of a kind the field never held (the program's
        /// type then likely fails to load the branch).
        #[arg(long)]
        force: bool,
    },
    /// Check the file: every blob's hash, every parent link, SQLite's integrity check, and
    /// that every checkpoint loads.
    Verify {
        /// The checkpoint file, or a postgres:// URL.
        file: PathBuf,
    },
    /// Go on from what a file that lost committed checkpoints still holds (a damaged or
    /// lost -wal, a copy restored over it): every command and program then opens it again.
    /// A file that lost nothing is left as it is.
    AcceptLoss {
        /// The checkpoint file.
        file: PathBuf,
    },
    /// Delete a thread's older checkpoints, keeping the newest N of each namespace.
    Prune {
        /// The checkpoint file, or a postgres:// URL.
        file: PathBuf,
        /// The thread.
        #[arg(long, short = 't')]
        thread: String,
        /// How many checkpoints to keep (at least 1).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        keep: u64,
    },
    /// A thread's runs, newest first: status, reason, times, and whether each left a
    /// delivery receipt.
    Runs {
        /// The checkpoint file, or a postgres:// URL.
        file: PathBuf,
        /// The thread.
        #[arg(long, short = 't')]
        thread: String,
    },
    /// Delete the fenced-write log (sg_run_writes) of queued runs that ended longer ago than
    /// --older-than; the runs, their status and the checkpoints stay. PostgreSQL only.
    TrimLog {
        /// A postgres:// URL.
        file: PathBuf,
        /// How long ago a run must have ended: a whole number and s, m, h or d (e.g. 30d).
        #[arg(long, value_parser = cmd::parse_age, value_name = "AGE")]
        older_than: std::time::Duration,
    },
    /// The long-term store kept in the file (by `stategraph serve` or a program's
    /// SqliteStore): list its namespaces, show an item, search items. Reads refresh no TTL.
    Store {
        /// The checkpoint file.
        file: PathBuf,
        /// What to show.
        #[command(subcommand)]
        view: cmd::StoreView,
    },
    /// Serve a local web inspector for the file: threads, the graph, the branch tree, states,
    /// diffs, agent conversations and traces, and fork from a checkpoint.
    ///
    /// Listens on 127.0.0.1 unless --bind says otherwise, and prints a URL with a random
    /// token that every request must carry. The file is read read-only; a fork opens it for
    /// writing for that request (off with --read-only). Each thread's subgraphs show as
    /// namespaces with their own graph, history and states.
    Studio {
        /// The checkpoint file, or a postgres:// URL.
        file: PathBuf,
        /// The port (a free one by default).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// The address to listen on.
        #[arg(long, default_value = "127.0.0.1")]
        bind: std::net::IpAddr,
        /// Refuse forks: nothing is ever written to the file or database.
        #[arg(long)]
        read_only: bool,
    },
    /// Serve LangGraph's Agent Server API over the demo graphs (chain, agent, approval,
    /// custom, slow, nested, boom, greet, chat, guarded_chat), so langgraph-sdk and agent-chat-ui
    /// can be tried on them; with --ui, a chat page too.
    ///
    /// Threads, checkpoints and runs live in FILE (made if missing); runs left queued or
    /// running by a stopped server are picked up when it starts again. With --postgres (or
    /// a postgres:// URL for FILE) they live in PostgreSQL instead, where several servers
    /// share them: any takes requests, one runs each run, and a server that dies loses its
    /// runs to another when their leases end. Listens on 127.0.0.1; any other address needs
    /// an API key, which clients then send as x-api-key. To serve your own graphs, build a
    /// stategraph_server::Server in your program.
    Serve(cmd::ServeArgs),
    /// One run with its delivery receipt.
    Run {
        /// The checkpoint file, or a postgres:// URL.
        file: PathBuf,
        /// The run's id.
        run_id: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The server runs on every core; the other commands need one thread.
    let mut builder = match cli.command {
        Command::Serve(_) => tokio::runtime::Builder::new_multi_thread(),
        _ => tokio::runtime::Builder::new_current_thread(),
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("stategraph: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(cmd::run(&cli));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            if !failure.message.is_empty() {
                eprintln!("stategraph: {}", failure.message);
            }
            ExitCode::from(failure.code)
        }
    }
}
