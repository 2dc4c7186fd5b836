//! The subcommands, one module each: each opens the file, does its work through the
//! [`Saver`](stategraph_checkpoints::Saver) API and the library's `inspect` and `fork`
//! helpers, and prints text or JSON.

mod accept_loss;
mod diff;
mod fork;
mod history;
mod prune;
mod run;
mod runs;
mod serve;
mod show;
mod store;
mod studio;
mod threads;
mod trim_log;
mod verify;

pub(crate) use trim_log::parse_age;

pub(crate) use serve::ServeArgs;
pub(crate) use store::StoreView;

use crate::failure::Outcome;
use crate::output::{Output, Style};
use crate::{Cli, Command};

/// Run the command `cli` names.
pub(crate) async fn run(cli: &Cli) -> Outcome {
    let out = Output {
        json: cli.json,
        style: Style::new(cli.color),
    };
    match &cli.command {
        Command::Threads { file } => threads::run(out, file).await,
        Command::History {
            file,
            thread,
            limit,
            tree,
            ns,
        } => history::run(out, file, thread, history::Shape::of(*tree, *limit), ns).await,
        Command::Show {
            file,
            thread,
            checkpoint,
            field,
            path,
            ns,
        } => {
            let part = show::StatePart::of(field, path);
            show::run(out, file, thread, checkpoint.as_deref(), part, ns).await
        }
        Command::Diff {
            file,
            thread,
            a,
            b,
            since_parent,
            ns,
        } => {
            let comparison = diff::Comparison::of(since_parent, a, b)?;
            diff::run(out, file, thread, comparison, ns).await
        }
        Command::Fork {
            file,
            thread,
            checkpoint,
            to,
            set,
            force,
        } => fork::run(out, file, thread, checkpoint, to.as_deref(), set, *force).await,
        Command::Verify { file } => verify::run(out, file).await,
        Command::AcceptLoss { file } => accept_loss::run(out, file).await,
        Command::Prune { file, thread, keep } => prune::run(out, file, thread, *keep).await,
        Command::Runs { file, thread } => runs::run(out, file, thread).await,
        Command::Run { file, run_id } => run::run(out, file, run_id).await,
        Command::TrimLog { file, older_than } => trim_log::run(out, file, *older_than).await,
        Command::Studio {
            file,
            port,
            bind,
            read_only,
        } => studio::run(file, *bind, *port, *read_only).await,
        Command::Store { file, view } => store::run(out, file, view).await,
        Command::Serve(args) => serve::run(args).await,
    }
}
