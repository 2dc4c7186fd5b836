//! The stategraph agent runtime: what an agent is assembled from, and the capability
//! lifecycle a tool passes on its way to a result.
//!
//! - [`Message`], [`ChatModel`], [`ScriptedModel`]: conversations and models; [`media`]:
//!   the images, audio and files a tool message carries, and which kinds a model takes;
//!   [`RecordedReplies`]: a thread's recorded replies, so a replay calls no model.
//! - `OpenAiModel` (feature `openai`): a client for OpenAI-compatible chat-completions servers.
//! - [`Tool`], [`ToolSpec`], [`FnTool`]: tools that return a tool message or a `Command`.
//! - [`ThreadState`]: the agent's state with every reducer of the runtime.
//! - [`Observer`], [`ModelLayer`], [`ToolLayer`], [`ToolPolicy`]: the extension points.
//! - [`AgentBuilder`]: model node + tool node + routing, assembled per run; an assembled
//!   [`Agent`] is a node of any graph with [`Agent::as_node`].
//! - [`toolbox`]: a model node, a tool node and [`tools_condition`] for your own state
//!   ([`MessagesState`], implemented with [`impl_messages_state!`]).
//! - [`CapabilityTrace`]: every tool through Available, Authorized, Visible, Executed,
//!   Returned (and Delivered).
//! - [`sandbox`], [`sandbox_tools`]: a thread's files behind virtual paths, the agent's
//!   sandbox lifecycle, and the file tools, `bash` and `present_files`.
//! - [`subagent`], [`subagent_tools`]: delegation to ephemeral subagents (`task`,
//!   `multi_task`) with explicit, isolated capabilities.
//! - [`secret`]: secrets a skill needs, given to the tools that declare them.
//! - `mcp` (feature `mcp`): MCP servers over stdio as a tool source.
//!
//! ```
//! use stategraph_nodes::prelude::*;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let model = ScriptedModel::new("demo", [
//!     AiMessage::calls([ToolCall::new("c1", "add", serde_json::json!({"a": 2, "b": 3}))]),
//!     AiMessage::text("2 + 3 = 5"),
//! ]);
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Add { a: i64, b: i64 }
//! let add = FnTool::typed(ToolSpec::new("add", "Add two numbers", ToolSource::Config),
//!     |args: Add, _cx| async move { Ok((args.a + args.b).to_string()) });
//! let agent = AgentBuilder::new(model.clone()).tool(add)
//!     .assemble(RunContext::new("t1", "ana")).await?;
//! let out = agent.ask("what is 2 + 3?").await?;
//! assert_eq!(out.state.messages.last().map(|m| m.text()), Some("2 + 3 = 5"));
//! assert!(agent.trace().reached("add", Stage::Returned));
//! model.verify()?;
//! # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
//! # }).unwrap();
//! ```

pub mod agent;
pub mod authz;
pub mod catalog;
pub mod context;
pub mod deferred;
pub mod delivery;
pub mod guardrail;
pub mod last_step;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod media;
pub mod mediation;
pub mod memory;
pub mod message;
pub mod middleware;
pub mod model;
#[cfg(feature = "openai")]
pub mod openai;
pub mod recorded;
pub mod sandbox;
pub mod sandbox_tools;
pub mod scripted;
pub mod secret;
pub mod skill;
pub mod state;
pub mod subagent;
pub mod subagent_tools;
pub mod tokens;
pub mod tool;
pub mod toolbox;
pub mod trace;

pub use stategraph;
pub use stategraph::BoxError;

pub use agent::{
    Agent, AgentBuilder, AgentError, AgentNode, AgentOutcome, AgentRunError, AgentStream,
    DeliveryFailure, OutputsError, Recorded, Settlement, TurnLimitReached, DROPPED_REASON,
    LEFT_RUNNING_REASON, OWNER_KEY, RECEIPT_NOT_STORED, RECEIPT_RETRY_DELAYS, TRACE_KEY,
    TURN_CAPPED,
};
pub use authz::{Authorization, AuthorizationProvider, FailMode, RoleTable};
pub use catalog::{
    AdmissionRule, Catalog, FilteredTool, Rejection, SkippedDuplicate, SourceFailure, ToolProvider,
};
pub use context::{Principal, RunContext, StopStamp};
pub use deferred::{
    catalog_hash, DeferredSetup, DeferredToolFilter, MakeDeferredSetup, MAX_RESULTS, TOOL_SEARCH,
};
pub use guardrail::{
    AllowlistProvider, Guardrail, GuardrailDecision, GuardrailProvider, GuardrailReason,
    GuardrailRequest,
};
#[cfg(feature = "mcp")]
pub use mcp::{McpError, McpServer, McpServerConfig};
pub use media::{Attachment, MediaKind, MediaKinds};
pub use message::{AiMessage, FinishReason, Message, ToolCall, ToolMessage, ToolStatus, Usage};
pub use middleware::{
    Denial, ModelCall, ModelLayer, ModelNext, Observer, PolicyLayer, ToolErrorHandling,
    ToolInvocation, ToolLayer, ToolNext, ToolPolicy,
};
pub use model::{ChatModel, ModelChunk, ModelError, ModelRequest, ModelResponse, ToolSchema};
#[cfg(feature = "openai")]
pub use openai::{OpenAiConfig, OpenAiModel};
pub use recorded::RecordedReplies;
pub use scripted::ScriptedModel;
pub use skill::{
    parse_skill_md, PolicyDecision, PolicySource, Skill, SkillParseError, SkillParseErrorKind,
    SkillRegistry, SkillStore, SkillToolPolicy, FRAMEWORK_TOOLS,
};
pub use state::{MessagesState, ThreadState, ThreadStateField, ThreadStateUpdate};
pub use tool::{
    FnTool, Tool, ToolAnnotations, ToolContext, ToolError, ToolOutput, ToolSource, ToolSpec,
};
pub use toolbox::{
    model_node, tool_node, tools_condition, ModelNode, ToolNode, ToolNodeError, Toolbox, TOOLS,
};
pub use trace::{CapabilityTrace, Stage, TraceEntry, Verdict};

/// The items most agent code uses.
pub mod prelude {
    pub use crate::{
        AgentBuilder, AgentOutcome, AgentRunError, AiMessage, CapabilityTrace, ChatModel, FnTool,
        Message, RunContext, ScriptedModel, Stage, ThreadState, Tool, ToolCall, ToolMessage,
        ToolOutput, ToolSource, ToolSpec,
    };
}
