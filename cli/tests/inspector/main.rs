//! End-to-end tests of the `stategraph` inspector binary against checkpoint files the engine
//! wrote: a graph with an appended field, last-value fields, a subgraph (own namespace) and an
//! interrupt inside it. Every command is run as a separate process: its text output, its
//! `--json` output, its exit code and messages; `verify` against bytes flipped in each kind
//! of stored envelope; `fork --set` against the engine reading and continuing the new branch.
#![allow(
    missing_docs,
    unreachable_pub,
    clippy::expect_used,
    clippy::unwrap_used
)]

mod support;

mod accept_loss;
mod damage;
mod damaged_files;

mod diff;
mod errors;
mod fork;
mod help;
mod history;
mod postgres;
mod prune;
mod read_only;
mod refs;
mod run;
mod runs;
mod serve;
mod show;
mod store;
mod studio;
mod threads;
mod verify;
