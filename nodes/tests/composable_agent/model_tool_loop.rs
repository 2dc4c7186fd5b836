//! A user state with its own messages field runs model → tools → model to END on a SQLite
//! file: the conversation merges through the add-messages reducer and the other fields stay
//! the user's.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use stategraph::checkpoints::SqliteSaver;
use stategraph::RunConfig;
use stategraph_nodes::prelude::*;
use stategraph_nodes::toolbox::Toolbox;
use stategraph_nodes::MessagesState;

use crate::support::{ask, call, counted, research_graph, tool_messages, Research, R};

#[tokio::test]
async fn a_user_state_runs_the_model_tool_loop_to_end_on_sqlite() -> R {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("research.db");
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([call("c1", "search"), call("c2", "fetch")]),
            AiMessage::text("two sources found"),
        ],
    );
    let tools = Toolbox::new()
        .tool(counted("search", true, &runs))
        .tool(counted("fetch", true, &runs));
    let graph =
        research_graph(&model, &tools)?.with_checkpointer(Arc::new(SqliteSaver::open(&path)?));
    let config = RunConfig::new().thread("t-loop");
    let out = graph.invoke(ask("rust", "find sources"), &config).await?;

    assert_eq!(runs.load(Ordering::SeqCst), 2, "each call ran once");
    let texts: Vec<&str> = out.state.chat.iter().map(Message::text).collect();
    assert_eq!(
        texts,
        [
            "find sources",
            "",
            "search ok",
            "fetch ok",
            "two sources found"
        ],
        "human, the AI's calls, one tool message per call in call order, the answer"
    );
    let answered: Vec<String> = tool_messages(&out.state.chat)
        .into_iter()
        .map(|m| m.tool_call_id)
        .collect();
    assert_eq!(answered, ["c1", "c2"]);
    assert_eq!(out.state.topic, "rust", "the user's own field is untouched");
    assert!(out
        .state
        .last_ai_message()
        .is_some_and(|m| m.tool_calls.is_empty()));

    // The model saw both tools, and on its second call the tools' answers.
    let requests = model.requests();
    let shown: Vec<&str> = requests[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(shown, ["search", "fetch"]);
    assert_eq!(requests[1].messages.len(), 4);
    assert!(tools.trace().reached("search", Stage::Returned));
    assert!(tools.trace().reached("fetch", Stage::Returned));
    model.verify()?;

    // The file holds the thread: a new saver over it reads the same conversation back.
    let reopened = research_graph(&ScriptedModel::new("idle", Vec::<AiMessage>::new()), &tools)?
        .with_checkpointer(Arc::new(SqliteSaver::open(&path)?));
    let stored = reopened
        .get_state("t-loop", None)
        .await?
        .ok_or("no checkpoint stored")?;
    assert_eq!(*stored.values, *out.state);
    assert!(stored.next.is_empty(), "the run reached END");
    Ok(())
}

#[tokio::test]
async fn the_messages_field_replaces_a_message_with_the_same_id() -> R {
    // The user's field merges through the add-messages reducer, as ThreadState's does: a
    // message with an id already in the conversation replaces it in place.
    let mut first = AiMessage::text("draft");
    first.id = Some("a1".into());
    let mut second = AiMessage::text("final");
    second.id = Some("a1".into());
    let mut state = Research::default();
    for (step, update) in [
        Research::append_messages([Message::human("q"), Message::Ai(first)]),
        Research::append_messages([Message::Ai(second)]),
    ]
    .into_iter()
    .enumerate()
    {
        let mut ctx = stategraph::reducers::ReduceCtx::new(i64::try_from(step)?);
        <Research as stategraph::State>::apply(&mut state, vec![update], &mut ctx)
            .map_err(|(field, e)| format!("{field:?}: {e}"))?;
    }
    let texts: Vec<&str> = state.chat.iter().map(Message::text).collect();
    assert_eq!(texts, ["q", "final"]);
    Ok(())
}
