//! The deferred tool catalog, `tool_search` and the deferred-tool filter
//! (deerflow-runtime semantics §4–5), one test per rule.

// Helpers panic on a broken fixture, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod end_to_end;
mod fail_closed;
mod filter;
mod mediation;
mod prompt_section;
mod properties;
mod search;
mod setup_and_hash;
mod support;
mod tool_search;
