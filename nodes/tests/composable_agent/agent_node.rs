//! An assembled agent as a node of a user's graph (research → agent → review): it maps the
//! parent's state in and its result out, runs on the parent's thread, and an interrupt inside
//! it pauses the parent and resumes the agent where it stopped.

use std::sync::{Arc, Mutex};

use serde_json::json;
use stategraph::checkpoints::{MemorySaver, SqliteSaver};
use stategraph::reducers::MessagesUpdate;
use stategraph::{
    BoxError, Command, CompiledGraph, List, NodeContext, Resume, RunConfig, State, StateGraph, END,
    START,
};
use stategraph_nodes::prelude::*;
use stategraph_nodes::{impl_messages_state, Agent, MessagesState, ToolError};

use crate::support::{call, R};

/// The parent's state: sources gathered by research, the conversation, the review's verdict.
#[derive(State, Clone, Default, Debug, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub(crate) struct Paper {
    pub(crate) topic: String,
    #[reduce(append)]
    pub(crate) sources: Vec<String>,
    #[reduce(add_messages)]
    pub(crate) chat: List<Message>,
    pub(crate) verdict: String,
}
impl_messages_state!(Paper, chat);

/// research → agent → review, with `agent` as the agent's node.
pub(crate) fn paper_graph(agent: &Agent) -> Result<CompiledGraph<Paper>, stategraph::CompileError> {
    StateGraph::<Paper>::new()
        .add_node("research", |p: Arc<Paper>, _cx: NodeContext| async move {
            let sources = vec![
                format!("{} paper A", p.topic),
                format!("{} paper B", p.topic),
            ];
            let ask = Message::human(format!("summarise {}", sources.join(", ")));
            Ok::<_, BoxError>(Paper::update().sources(sources).chat(ask.into()))
        })
        .add_node(
            "agent",
            agent.as_node(
                |p: &Paper| ThreadState::update().messages(MessagesUpdate::from(p.chat.to_vec())),
                |s: &ThreadState| Paper::append_messages(s.last_ai().cloned().map(Message::Ai)),
            ),
        )
        .add_node("review", |p: Arc<Paper>, _cx: NodeContext| async move {
            let summary = p
                .last_ai_message()
                .map(|m| m.content.clone())
                .unwrap_or_default();
            let verdict = if summary.starts_with("summary") {
                "approved"
            } else {
                "rejected"
            };
            Ok::<_, BoxError>(Paper::update().verdict(verdict.to_owned()))
        })
        .add_edge(START, "research")
        .add_edge("research", "agent")
        .add_edge("agent", "review")
        .add_edge("review", END)
        .compile()
}

/// A tool answering with the thread its run context names (and keeping it in `seen`).
fn whereami(seen: &Arc<Mutex<Vec<Option<String>>>>) -> FnTool {
    let seen = Arc::clone(seen);
    FnTool::new(
        ToolSpec::new("whereami", "names the thread", ToolSource::Config).read_only(true),
        move |call, cx| {
            let thread = cx.run.thread_id.clone();
            seen.lock().map(|mut s| s.push(thread.clone())).ok();
            async move { Ok(ToolMessage::new(call.id, "whereami", format!("{thread:?}")).into()) }
        },
    )
}

#[tokio::test]
async fn an_agent_runs_as_a_node_between_research_and_review_on_the_parents_thread() -> R {
    let dir = tempfile::tempdir()?;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([call("w1", "whereami")]),
            AiMessage::text("summary: both agree"),
        ],
    );
    // Assembled for another thread: the node must follow the parent's.
    let agent = AgentBuilder::new(model.clone())
        .tool(whereami(&seen))
        .assemble(RunContext::new("assembly-thread", "ana"))
        .await?;
    let graph = paper_graph(&agent)?
        .with_checkpointer(Arc::new(SqliteSaver::open(dir.path().join("paper.db"))?));
    let config = RunConfig::new().thread("paper-thread");
    let out = graph
        .invoke(Paper::update().topic("rust".into()), &config)
        .await?;

    assert_eq!(
        out.state.verdict, "approved",
        "review read the agent's answer"
    );
    assert_eq!(out.state.sources.len(), 2, "research's field kept");
    let texts: Vec<&str> = out.state.chat.iter().map(Message::text).collect();
    assert_eq!(
        texts,
        [
            "summarise rust paper A, rust paper B",
            "summary: both agree"
        ]
    );
    // The agent saw the conversation research started.
    assert_eq!(model.requests()[0].messages.len(), 1);
    let seen = seen.lock().map_err(|_| "poisoned")?.clone();
    assert_eq!(seen, [Some("paper-thread".to_owned())]);

    let trace = agent.thread_trace("paper-thread");
    let returned: Vec<_> = trace
        .iter()
        .filter(|e| e.tool == "whereami" && e.stage == Stage::Returned)
        .collect();
    assert_eq!(returned.len(), 1);
    let run = returned[0].run_id.as_deref().ok_or("no run id")?;
    assert!(run.starts_with("run-"), "{run}");
    assert!(agent
        .thread_trace("assembly-thread")
        .iter()
        .all(|e| e.run_id.is_none()));
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn an_interrupt_inside_the_agent_node_pauses_the_parent_and_resumes_the_agent() -> R {
    let ask_user = FnTool::new(
        ToolSpec::new("ask_user", "asks the user", ToolSource::Config),
        |call, cx| async move {
            let answer: String = cx
                .interrupt(json!({"question": "which angle?"}))
                .map_err(|e| ToolError::failed("ask_user", e))?;
            Ok(ToolMessage::new(call.id, "ask_user", answer).into())
        },
    );
    // Two replies only: a resume that restarted the agent would call the model a third time
    // and fail with an exhausted script.
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([call("a1", "ask_user")]),
            AiMessage::text("summary: from the safety angle"),
        ],
    );
    let agent = AgentBuilder::new(model.clone())
        .tool(ask_user)
        .assemble(RunContext::default())
        .await?;
    let graph = paper_graph(&agent)?.with_checkpointer(Arc::new(MemorySaver::new()));
    let config = RunConfig::new().thread("t-pause");

    let first = graph
        .invoke(Paper::update().topic("ai".into()), &config)
        .await?;
    assert!(first.is_interrupted());
    assert_eq!(
        first.interrupts[0].value,
        json!({"question": "which angle?"})
    );
    assert_eq!(first.state.verdict, "", "review has not run");

    let done = graph
        .invoke(Command::<Paper>::resume(Resume::value("safety")), &config)
        .await?;
    assert!(!done.is_interrupted());
    assert_eq!(done.state.verdict, "approved");
    assert_eq!(done.state.sources.len(), 2, "research ran once");
    let second = &model.requests()[1];
    assert!(
        second.messages.iter().any(|m| m.text() == "safety"),
        "the tool got the answer"
    );
    // The paused and the resumed part are one run of the agent.
    let runs: std::collections::BTreeSet<_> = agent
        .thread_trace("t-pause")
        .into_iter()
        .filter_map(|e| e.run_id)
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    model.verify()?;
    Ok(())
}
