//! A long-term store: what an agent remembers across threads. JSON items live under a
//! [`Namespace`] and a key; a [`Store`] gets, puts, deletes and searches them (filters,
//! full-text or vector ranking), lists namespaces, and forgets items whose TTL ran out.
//!
//! One contract, three backends that keep it: [`MemoryStore`] (the reference),
//! [`SqliteStore`] (in its own file or a checkpoint file) and, with feature `postgres`, the
//! PostgreSQL backend. The conformance suite in `store/tests/conformance/` runs the same
//! behaviours on each.
//!
//! ```
//! use serde_json::json;
//! use stategraph_store::{Filter, MemoryStore, Namespace, SearchOp, Store};
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let store = MemoryStore::default();
//! let alice = Namespace::new(["users", "alice"])?;
//! store.put(&alice, "drink", json!({"text": "prefers green tea", "kind": "fact"}).as_object().unwrap().clone()).await?;
//! store.put(&alice, "plan", json!({"text": "pro plan", "kind": "account"}).as_object().unwrap().clone()).await?;
//! let facts = Filter::from_json(json!({"kind": "fact"}).as_object().unwrap())?;
//! let found = store.search(SearchOp::new(Namespace::new(["users"])?).filter(facts)).await?;
//! assert_eq!(found.len(), 1);
//! assert_eq!(found[0].item.key, "drink");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! Inside: `namespace` and `item` the data; `op` a batch's operations; `filter` conditions
//! on values; `ttl` expiry and clocks; `index` and `embedder` the semantic index; `vector`
//! and `text` ranking; `mirror` vectors held in memory for a SQL backend; `openai` (feature
//! `live`) an embeddings client; `prepare` what each backend does before its transaction;
//! `memory` the reference backend; `sqlite` the SQLite backend; `postgres` the PostgreSQL
//! backend; `store` the contract and the sweeper.

mod embedder;
mod error;
mod filter;
mod index;
mod item;
mod memory;
pub mod mirror;
mod namespace;
mod op;
#[cfg(feature = "live")]
mod openai;
#[cfg(feature = "postgres")]
mod postgres;
pub mod prepare;
mod sqlite;
mod store;
pub mod text;
mod ttl;
pub mod vector;

pub use embedder::HashEmbedder;
pub use error::{check_key, StoreError};
pub use filter::{field_at, json_eq, Cmp, Condition, Filter, FilterError};
pub use index::{field_texts, searchable_text, EmbedError, Embedder, IndexConfig, IndexFields};
pub use item::{Item, SearchItem, Timestamp};
pub use memory::MemoryStore;
pub use namespace::{MatchCondition, MatchSide, Namespace, NamespaceError};
pub use op::{GetOp, ListNamespacesOp, Op, OpResult, PutOp, SearchOp};
#[cfg(feature = "live")]
pub use openai::{OpenAiEmbedder, OpenAiEmbedderConfig};
#[cfg(feature = "postgres")]
pub use postgres::{PostgresStore, VectorBackend, POSTGRES_SCHEMA_VERSION};
pub use sqlite::{SqliteStore, SqliteStoreOptions, Synchronous, SCHEMA_VERSION};
pub use store::{spawn_sweeper, Store, StoreConfig, Sweeper};
pub use ttl::{Clock, ManualClock, SystemClock, Ttl, TtlConfig};
