//! SKILL.md parsing and the skill tool policy (deerflow-runtime semantics §6), one test per
//! rule.

// Helpers panic on a broken fixture, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod end_to_end;
mod parsing;
mod properties;
mod resolution;
mod support;
mod tool_search;
mod visible_and_check_call;
