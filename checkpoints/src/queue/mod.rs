//! What run queues hand out and report, whatever their backend: strategies, stop requests,
//! leases, runs, commands and the log of fenced writes. The queues themselves are the
//! PostgreSQL saver's ([`RunQueue`](crate::RunQueue), feature `postgres`) and the
//! `stategraph-runs` crate's, which keeps their one contract.

mod command;
mod notice;
mod types;

pub use command::{QueuedCommand, QueuedGoto};
pub use notice::wait_for_notice;
pub use types::{FencedWrite, Lease, Multitask, QueuedRun, RunEnd, StopRequest};
