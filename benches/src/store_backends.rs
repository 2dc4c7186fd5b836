//! The stores the `store` workload opens: ours, by backend name.

use std::sync::Arc;

use stategraph::BoxError;
use stategraph_store::{IndexConfig, MemoryStore, Store, StoreConfig};

use crate::Args;

/// The backends the workload knows.
pub(crate) const BACKENDS: [&str; 1] = ["memory"];

/// Whether LangGraph's store on `backend` runs without a vector index here.
pub(crate) fn langgraph_has_no_index(backend: &str) -> bool {
    backend == "postgres"
}

/// A fresh, empty store on `backend`, with `index` when given.
pub(crate) async fn open(
    backend: &str,
    index: Option<IndexConfig>,
    _args: &Args,
) -> Result<Arc<dyn Store>, BoxError> {
    let config = StoreConfig {
        index,
        ..StoreConfig::default()
    };
    match backend {
        "memory" => Ok(Arc::new(MemoryStore::new(config))),
        other => Err(format!("store: unknown backend {other:?} ({})", BACKENDS.join(", ")).into()),
    }
}
