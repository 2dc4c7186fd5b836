//! `stategraph studio`: a local web inspector for a stategraph checkpoint file or a
//! PostgreSQL saver's schema.
//!
//! [`Studio::open`] opens the file read-only ([`Studio::connect`] also takes a
//! `postgres://` URL, read as the `stategraph` CLI reads it); [`Studio::bind`] listens on loopback (by
//! default) and [`Bound::serve`] answers a JSON API and a single-page UI whose every asset is
//! compiled into the binary. Each request must carry the random token of the printed URL (or
//! the cookie the first tokened request sets). With [`StudioOptions::read_only`] false, a
//! fork opens the file for writing for that one request, through the library's
//! [`ForkPlan`](stategraph_checkpoints::fork::ForkPlan) — the same fork and shape check as
//! `stategraph fork`.
//!
//! Every thread shows its root graph and each subgraph's namespace (`/api/threads/{thread}/namespaces`):
//! a subgraph has its own graph shape, history and states (`ns=` on every read route), and
//! each step's history row names the subgraphs it ran.
//!
//! ```
//! use stategraph_studio::{Studio, StudioOptions};
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("threads.db");
//! stategraph_checkpoints::SqliteSaver::open(&path)?.close()?;
//! let studio = Studio::open(StudioOptions::new(&path))?;
//! assert_eq!(studio.token().len(), 32);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod api;
mod assets;
mod auth;
mod layout;
mod server;
mod store;

pub use server::{Bound, Studio, StudioError, StudioOptions};
pub use store::open_store;
