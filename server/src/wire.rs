//! The JSON shapes of LangGraph's Agent Server API that requests carry: what a run, a thread
//! or a search asks for. Names and defaults are the clients' (`langgraph-sdk`'s `schema.py`).
//! Responses are built where they are answered, in `routes`.

pub(crate) mod store;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One value or a list of them (`stream_mode: "values"` or `["values", "updates"]`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum OneOrMany<T> {
    /// One.
    One(T),
    /// Several.
    Many(Vec<T>),
}

impl<T: Clone> OneOrMany<T> {
    pub(crate) fn to_vec(&self) -> Vec<T> {
        match self {
            OneOrMany::One(v) => vec![v.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

/// What to do with a run for a thread that already has one (`multitask_strategy`): the run
/// queue's strategies, named as LangGraph names them.
pub use stategraph::checkpoints::Multitask;

/// What a streaming run does when its client goes away (`on_disconnect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum OnDisconnect {
    Cancel,
    Continue,
}

/// What a run on a missing thread does (`if_not_exists`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum IfNotExists {
    Create,
    Reject,
}

/// `interrupt_before` / `interrupt_after`: every node, or these.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum NodeList {
    All(String),
    Nodes(Vec<String>),
}

/// A checkpoint named by a request (`{"checkpoint_id": …, "checkpoint_ns": …}`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct CheckpointRef {
    #[serde(default)]
    pub(crate) checkpoint_id: Option<String>,
    #[serde(default)]
    pub(crate) checkpoint_ns: Option<String>,
    #[serde(default)]
    pub(crate) thread_id: Option<String>,
}

/// A `Send` in a command's `goto`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum GotoIn {
    Node(String),
    Send { node: String, input: Value },
}

/// A run's `command`: resume interrupts, update the state, route.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct CommandIn {
    #[serde(default)]
    pub(crate) resume: Option<Value>,
    #[serde(default)]
    pub(crate) update: Option<Value>,
    #[serde(default)]
    pub(crate) goto: Option<OneOrMany<GotoIn>>,
}

/// A run's `config`: what of it this server reads.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct ConfigIn {
    #[serde(default)]
    pub(crate) recursion_limit: Option<usize>,
    #[serde(default)]
    pub(crate) tags: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) configurable: Option<Map<String, Value>>,
}

/// The body of every run-creating request (`RunCreate`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct RunCreate {
    pub(crate) assistant_id: String,
    #[serde(default)]
    pub(crate) input: Option<Value>,
    #[serde(default)]
    pub(crate) command: Option<CommandIn>,
    #[serde(default)]
    pub(crate) config: Option<ConfigIn>,
    #[serde(default)]
    pub(crate) context: Option<Value>,
    #[serde(default)]
    pub(crate) metadata: Option<Map<String, Value>>,
    #[serde(default)]
    pub(crate) stream_mode: Option<OneOrMany<String>>,
    #[serde(default)]
    pub(crate) stream_subgraphs: Option<bool>,
    #[serde(default)]
    pub(crate) stream_resumable: Option<bool>,
    #[serde(default)]
    pub(crate) interrupt_before: Option<NodeList>,
    #[serde(default)]
    pub(crate) interrupt_after: Option<NodeList>,
    #[serde(default)]
    pub(crate) checkpoint: Option<CheckpointRef>,
    #[serde(default)]
    pub(crate) checkpoint_id: Option<String>,
    #[serde(default)]
    pub(crate) durability: Option<String>,
    #[serde(default)]
    pub(crate) multitask_strategy: Option<Multitask>,
    #[serde(default)]
    pub(crate) if_not_exists: Option<IfNotExists>,
    #[serde(default)]
    pub(crate) on_disconnect: Option<OnDisconnect>,
}

impl RunCreate {
    /// The checkpoint the run starts from, if it names one.
    pub(crate) fn checkpoint_id(&self) -> Option<&str> {
        self.checkpoint
            .as_ref()
            .and_then(|c| c.checkpoint_id.as_deref())
            .or(self.checkpoint_id.as_deref())
    }
}

/// `POST /threads`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ThreadCreate {
    #[serde(default)]
    pub(crate) thread_id: Option<String>,
    #[serde(default)]
    pub(crate) metadata: Option<Map<String, Value>>,
    #[serde(default)]
    pub(crate) if_exists: Option<String>,
    #[serde(default)]
    pub(crate) graph_id: Option<String>,
}

/// `PATCH /threads/{id}`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ThreadPatch {
    #[serde(default)]
    pub(crate) metadata: Option<Map<String, Value>>,
}

/// `POST /threads/search`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ThreadSearch {
    #[serde(default)]
    pub(crate) metadata: Option<Map<String, Value>>,
    #[serde(default)]
    pub(crate) ids: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) status: Option<String>,
    #[serde(default)]
    pub(crate) limit: Option<usize>,
    #[serde(default)]
    pub(crate) offset: Option<usize>,
    #[serde(default)]
    pub(crate) sort_by: Option<String>,
    #[serde(default)]
    pub(crate) sort_order: Option<String>,
}

/// `POST /threads/{id}/state`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct StateUpdate {
    #[serde(default)]
    pub(crate) values: Option<Value>,
    #[serde(default)]
    pub(crate) as_node: Option<String>,
    #[serde(default)]
    pub(crate) checkpoint: Option<CheckpointRef>,
    #[serde(default)]
    pub(crate) checkpoint_id: Option<String>,
}

/// `POST /threads/{id}/history`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct HistoryQuery {
    #[serde(default)]
    pub(crate) limit: Option<usize>,
    #[serde(default)]
    pub(crate) before: Option<BeforeRef>,
    #[serde(default)]
    pub(crate) metadata: Option<Map<String, Value>>,
}

/// `before` in a history query: a checkpoint id or a config naming one.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum BeforeRef {
    Id(String),
    Config { configurable: CheckpointRef },
    Checkpoint(CheckpointRef),
}

impl BeforeRef {
    pub(crate) fn id(&self) -> Option<&str> {
        match self {
            BeforeRef::Id(id) => Some(id),
            BeforeRef::Config { configurable } => configurable.checkpoint_id.as_deref(),
            BeforeRef::Checkpoint(c) => c.checkpoint_id.as_deref(),
        }
    }
}

/// `POST /assistants/search`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct AssistantSearch {
    #[serde(default)]
    pub(crate) graph_id: Option<String>,
    #[serde(default)]
    pub(crate) name: Option<String>,
    #[serde(default)]
    pub(crate) limit: Option<usize>,
    #[serde(default)]
    pub(crate) offset: Option<usize>,
}
