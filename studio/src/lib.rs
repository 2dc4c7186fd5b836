//! `stategraph studio`: a local web inspector for a stategraph checkpoint file.
//!
//! [`Studio::open`] opens the file read-only; [`Studio::bind`] listens on loopback (by
//! default) and [`Bound::serve`] answers a JSON API and a single-page UI whose every asset is
//! compiled into the binary. Each request must carry the random token of the printed URL (or
//! the cookie the first tokened request sets). With [`StudioOptions::read_only`] false, a
//! fork opens the file for writing for that one request, through the library's
//! [`ForkPlan`](stategraph_checkpoints::fork::ForkPlan) — the same fork and shape check as
//! `stategraph fork`.
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

pub use server::{Bound, Studio, StudioError, StudioOptions};
