//! Secrets in a tool's environment: the five conditions, revocation between calls, and a
//! canary run over a real SQLite file (reliability R-30).

mod canary;
mod conditions;
mod logs;
mod support;
