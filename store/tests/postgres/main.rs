//! The PostgreSQL store against a real server (`STATEGRAPH_PG_URL`, started by
//! `.ci/postgres.sh`; without it these tests skip, and fail under `CI=true`). Each test has
//! a schema of its own, so they run in parallel. Where the memory store is the reference,
//! a test runs the same operations on both and compares.
//!
//! `items` the item operations, filters, full-text search and TTL; `vectors` the vector
//! backends; `shared` opening a schema and processes sharing it; `support` what they share.
#![cfg(feature = "postgres")]
#![allow(clippy::expect_used, clippy::unwrap_used, unreachable_pub)]

mod items;
mod shared;
mod support;
mod vectors;
