//! Inspecting a SQLite checkpoint file from outside the program that wrote it: what the
//! `stategraph` inspector binary is built on, usable from tests and tools.
//!
//! - [`open_existing`] opens a file as a [`SqliteSaver`](crate::SqliteSaver) only if it exists
//!   and is a stategraph file (a missing file is never created, another program's database
//!   never gets tables); [`namespaces`] lists its `(thread, namespace)` pairs;
//! - [`Store`] is a file or (feature `postgres`) a PostgreSQL schema, which
//!   `open_database` opens from a `postgres://` URL ([`is_database_url`]) as the CLI and the
//!   studio do;
//! - [`verify`] checks every stored envelope against its hash, every parent link, SQLite's own
//!   `integrity_check`, every stored run and delivery receipt, and that every checkpoint
//!   loads;
//! - [`find_checkpoint`] finds a checkpoint by a unique start or end of its id or by
//!   `step:N` on a branch, and [`short_suffix_len`] says how many trailing digits tell a
//!   listing's ids apart; [`resolve_prefix`] finds one by a unique prefix only;
//! - [`format_utc_ms`] shows a time stamp as ISO-8601 UTC; [`header_json`] and
//!   [`pending_json`] are the JSON forms tools show headers and pending writes in.
//!
//! ```
//! use stategraph_checkpoints::inspect::format_utc_ms;
//! assert_eq!(format_utc_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
//! ```

mod checkpoint_rows;
mod existing;
mod holder_check;
mod json;
mod lookup;
mod prefix;
mod run_tables;
mod scan;
mod store;
mod tables;
mod time;
mod verify;
#[cfg(test)]
mod verify_long;

pub use existing::{namespaces, open_existing, open_existing_read_only};
pub use json::{header_json, pending_json};
pub use lookup::{find_checkpoint, short_suffix, short_suffix_len, LookupError, MIN_REF_LEN};
pub use prefix::{resolve_prefix, short_id_len, PrefixError, MIN_PREFIX_LEN};
#[cfg(feature = "postgres")]
pub use store::{database_options, open_database};
pub use store::{is_database_url, url_without_password, Store};
pub use time::{format_utc_ms, unix_ms};
pub use verify::{verify, Problem, VerifyCounts, VerifyReport};
