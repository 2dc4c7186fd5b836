//! The stategraph agent runtime: model and tool nodes, middleware and the capability
//! lifecycle. This crate is being built; today it only re-exports the engine so that agent code
//! can depend on one crate.

pub use stategraph;
