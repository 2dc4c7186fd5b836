//! Run settlement's pure parts: what a run produced in its outputs, what it presented, and
//! the delivery receipt that decides whether a success stands.
//!
//! - [`Snapshot`]: a root's files (size, mtime, blake3; symlinks as symlinks), skipping
//!   [`EXCLUDED_DIRS`], re-hashing only files whose size or mtime changed.
//! - [`produced_outputs`], [`settle`], [`DeliveryReceipt`]: the verdict (`presented`,
//!   `mismatched`, `not_started`) and [`DeliveryIncomplete`].
//! - [`normalize_presented`]: `present_files` paths to `/mnt/user-data/outputs/<rel>`, all or
//!   nothing ([`PresentError`]).
//!
//! ```
//! use stategraph_nodes::delivery::*;
//! use std::path::Path;
//!
//! let outputs_host = Path::new("/srv/threads/t1/user-data/outputs");
//! let presented = normalize_presented(&["/mnt/user-data/outputs/charts/"], outputs_host)?;
//! let mut facts = DeliveryFacts::default();
//! facts.record(Some(PRESENT_FILES), presented);
//! let produced = vec![
//!     "/mnt/user-data/outputs/charts/a.png".to_owned(),
//!     "/mnt/user-data/outputs/notes.md".to_owned(),
//! ];
//! let receipt = settle(facts, produced);
//! let verdict = receipt.verdict.as_ref().ok_or("outputs were produced")?;
//! assert_eq!(verdict.stage, DeliveryStage::Presented);
//! assert_eq!(verdict.matched_paths, ["/mnt/user-data/outputs/charts/a.png"]);
//! receipt.check()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod present;
mod snapshot;
mod verdict;

pub use present::{normalize_presented, PresentError, PresentRule, PRESENT_ERROR_PREFIX};
pub use snapshot::{
    Exclusions, FileFacts, Mtime, Snapshot, SnapshotEntry, SnapshotError, EXCLUDED_DIRS,
};
pub use verdict::{
    covers, produced_outputs, settle, DeliveryFacts, DeliveryIncomplete, DeliveryReceipt,
    DeliveryStage, DeliveryVerdict, Requirement, Verification, VerificationSource, PRESENT_FILES,
};
