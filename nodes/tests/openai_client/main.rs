//! The OpenAI-compatible client against a small HTTP server on loopback, written here: it
//! records what the client sent and answers with canned bodies, streams in several writes.
//! One module per area; the server and the shared helpers have their own.
#![cfg(feature = "openai")]
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod answers;
mod configuration;
mod errors;
mod requests;
mod server;
mod streams;
mod support;
