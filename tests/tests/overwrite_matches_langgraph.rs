//! `Overwrite`: a write that replaces a field's value bypassing its reducer, compared with
//! what LangGraph 1.2.24 did (`fixtures/langgraph/overwrite_*.json`, written by
//! `probe_overwrite.py`). Where we differ on purpose (a last-value field), decision 0091.
#![allow(missing_docs)]

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use stategraph::checkpoints::{ListOptions, MemorySaver};
use stategraph::prelude::*;
use stategraph::reducers::{Message, MessagesUpdate, ReduceError};
use stategraph::RunError;
use stategraph_tests::langgraph::{recorded, strings};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

#[derive(State, Clone, Default, Debug, PartialEq)]
pub struct S {
    pub x: i64,
    #[reduce(append)]
    pub log: Vec<String>,
}

fn strs(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// A node returning `update` every time it runs.
fn writes(
    update: SUpdate,
) -> impl Fn(Arc<S>, NodeContext) -> futures::future::Ready<Result<SUpdate, BoxError>>
       + Clone
       + Send
       + Sync
       + 'static {
    move |_s, _c| futures::future::ready(Ok(update.clone()))
}

/// START -> n0 -> n1 -> ... -> END, node i returning `steps[i]`.
fn chain(steps: Vec<SUpdate>) -> Result<CompiledGraph<S>, stategraph::CompileError> {
    let mut g = StateGraph::<S>::new();
    let names: Vec<String> = (0..steps.len()).map(|i| format!("n{i}")).collect();
    for (name, update) in names.iter().zip(steps) {
        g = g.add_node(name.as_str(), writes(update));
    }
    g = g.add_edge(START, names[0].as_str());
    for w in names.windows(2) {
        g = g.add_edge(w[0].as_str(), w[1].as_str());
    }
    g.add_edge(names[names.len() - 1].as_str(), END).compile()
}

/// START -> first (appends "first") -> the `declared` nodes in parallel -> END.
fn parallel(declared: &[(&str, SUpdate)]) -> Result<CompiledGraph<S>, stategraph::CompileError> {
    let mut g = StateGraph::<S>::new()
        .add_node("first", writes(S::update().log(strs(&["first"]))))
        .add_edge(START, "first");
    for (name, update) in declared {
        g = g
            .add_node(*name, writes(update.clone()))
            .add_edge("first", *name)
            .add_edge(*name, END);
    }
    g.compile()
}

fn over(items: &[&str]) -> SUpdate {
    S::update().overwrite_log(strs(items))
}

fn plain(items: &[&str]) -> SUpdate {
    S::update().log(strs(items))
}

#[tokio::test]
async fn an_overwrite_then_appends_in_later_steps_matches_langgraph() -> TestResult {
    let lg = recorded("overwrite_then_append")?;
    let out = chain(vec![
        plain(&["a"]),
        over(&["o"]),
        plain(&["b"]),
        plain(&["c", "d"]),
    ])?
    .invoke(plain(&["in"]), &RunConfig::new())
    .await?;
    assert_eq!(out.state.log, strings(&lg, "/final_log")?);
    assert_eq!(out.state.log, ["o", "b", "c", "d"]);
    Ok(())
}

#[tokio::test]
async fn an_overwrite_beside_a_plain_write_in_one_step_wins_in_any_task_order() -> TestResult {
    let lg = recorded("overwrite_same_step_mix")?;
    let cases = lg["cases"].as_array().ok_or("no cases")?;
    assert_eq!(cases.len(), 3);
    for case in cases {
        let declared = strings(case, "/declared")?;
        let nodes: Vec<(&str, SUpdate)> = declared
            .iter()
            .map(|n| match n.ends_with("_over") {
                true => (n.as_str(), over(&["over"])),
                false => (n.as_str(), plain(&["plain"])),
            })
            .collect();
        let g = parallel(&nodes)?.with_checkpointer(Arc::new(MemorySaver::new()));
        let cfg = RunConfig::new().thread("b");
        let out = g.invoke(plain(&["in"]), &cfg).await?;
        assert_eq!(out.state.log, strings(case, "/final_log")?, "{declared:?}");
        let history: Vec<Vec<String>> = g
            .get_state_history("b", ListOptions::default())
            .await?
            .iter()
            .map(|s| s.values.log.clone())
            .collect();
        let lg_history: Vec<Vec<String>> = (0..4)
            .map(|i| strings(case, &format!("/history_values_newest_first/{i}/log")))
            .collect::<Result<_, _>>()?;
        assert_eq!(history, lg_history, "{declared:?}");
    }
    Ok(())
}

#[tokio::test]
async fn two_overwrites_in_one_step_fail_naming_field_and_step_and_keep_the_checkpoint(
) -> TestResult {
    let lg = recorded("overwrite_twice_in_one_step")?;
    assert_eq!(lg["error_type"], "InvalidUpdateError");
    let saver = Arc::new(MemorySaver::new());
    let g = parallel(&[("a_over", over(&["one"])), ("b_over", over(&["two"]))])?
        .with_checkpointer(saver);
    let cfg = RunConfig::new().thread("c");
    let err = g
        .invoke(plain(&["in"]), &cfg)
        .await
        .err()
        .ok_or("expected two overwrites to fail")?;
    let shown = err.to_string();
    match err {
        RunError::Reduce {
            field,
            writers,
            step,
            source: ReduceError::ConcurrentOverwrite { writes: 2 },
        } => {
            assert_eq!(field, "log");
            assert_eq!(writers, ["a_over", "b_over"]);
            assert_eq!(step, 2);
        }
        other => return Err(format!("unexpected error {other}").into()),
    }
    assert!(
        shown.contains("step 2") && shown.contains("\"log\""),
        "{shown}"
    );
    assert!(shown.contains("at most one overwrite per step"), "{shown}");
    // The committed checkpoint is the one before the failed step, as LangGraph's.
    let snap = g.get_state("c", None).await?.ok_or("no state")?;
    assert_eq!(snap.values.log, strings(&lg, "/committed_log")?);
    assert_eq!(
        snap.checkpoint.step,
        lg["committed_step"].as_i64().ok_or("step")?
    );
    Ok(())
}

#[tokio::test]
async fn an_overwrite_of_a_last_value_field_sets_the_value_where_langgraph_stores_the_wrapper(
) -> TestResult {
    let lg = recorded("overwrite_last_value")?;
    // LangGraph's last-value channel keeps the `Overwrite` object itself as the value ...
    assert_eq!(lg["alone_final_x_type"], "Overwrite");
    assert_eq!(lg["alone_final_x"]["Overwrite"], 5);
    let out = chain(vec![S::update().x(1), S::update().overwrite_x(5)])?
        .invoke(S::update().x(0), &RunConfig::new())
        .await?;
    // ... ours sets the value it carries (decision 0091).
    assert_eq!(out.state.x, 5);

    // LangGraph counts an Overwrite beside a plain write as two writes; ours drops the plain
    // one, as for every reducer.
    assert_eq!(lg["mixed_error_type"], "InvalidUpdateError");
    let out = StateGraph::<S>::new()
        .add_node("a_over", writes(S::update().overwrite_x(7)))
        .add_node("b_plain", writes(S::update().x(8)))
        .add_edge(START, "a_over")
        .add_edge(START, "b_plain")
        .compile()?
        .invoke(S::update().x(0), &RunConfig::new())
        .await?;
    assert_eq!(out.state.x, 7);
    Ok(())
}

#[tokio::test]
async fn an_overwrite_as_input_and_in_commands_matches_langgraph() -> TestResult {
    let lg = recorded("overwrite_input_and_commands")?;

    // (1) As the input of a thread's second run.
    let g = chain(vec![plain(&["a"])])?.with_checkpointer(Arc::new(MemorySaver::new()));
    let cfg = RunConfig::new().thread("e");
    g.invoke(plain(&["in"]), &cfg).await?;
    let second = g.invoke(over(&["fresh"]), &cfg).await?;
    assert_eq!(
        second.state.log,
        strings(&lg, "/input_overwrite_final_log")?
    );

    // (2) In a node's command.
    let from_node = StateGraph::<S>::new()
        .add_node_with(
            "cmd",
            |_s: Arc<S>, _c: NodeContext| async {
                Ok::<_, BoxError>(Command::new().update(over(&["cmd"])).goto("after"))
            },
            NodeOptions::new().destinations(["after"]),
        )
        .add_node("after", writes(plain(&["after"])))
        .add_edge(START, "cmd")
        .add_edge("after", END)
        .compile()?
        .invoke(plain(&["in"]), &RunConfig::new())
        .await?;
    assert_eq!(
        from_node.state.log,
        strings(&lg, "/node_command_final_log")?
    );

    // (3) In the command that resumes an interrupt.
    let g = StateGraph::<S>::new()
        .add_node("first", writes(plain(&["first"])))
        .add_node("ask", |_s: Arc<S>, c: NodeContext| async move {
            let answer: String = c.interrupt("question")?;
            Ok::<_, BoxError>(S::update().log(vec![format!("ask:{answer}")]))
        })
        .add_edge(START, "first")
        .add_edge("first", "ask")
        .add_edge("ask", END)
        .compile()?
        .with_checkpointer(Arc::new(MemorySaver::new()));
    let cfg = RunConfig::new().thread("r");
    g.invoke(plain(&["in"]), &cfg).await?;
    let resume = Command::resume(Resume::value("yes")).update(over(&["upd"]));
    let resumed = g.invoke(resume, &cfg).await?;
    assert_eq!(
        resumed.state.log,
        strings(&lg, "/resume_command_final_log")?
    );
    Ok(())
}

#[tokio::test]
async fn the_json_overwrite_forms_are_read_as_langgraph_reads_them() -> TestResult {
    let lg = recorded("overwrite_wire_forms")?;
    let g = chain(vec![plain(&["a"])])?.with_checkpointer(Arc::new(MemorySaver::new()));
    for (form, expected) in [
        ("/keyed_input", "/keyed_final_log"),
        ("/typed_input", "/typed_final_log"),
    ] {
        let thread = format!("f{form}");
        let cfg = RunConfig::new().thread(thread.as_str());
        g.invoke(plain(&["in"]), &cfg).await?;
        let input: SUpdate = serde_json::from_value(lg.pointer(form).ok_or(form)?.clone())?;
        let out = g.invoke(input, &cfg).await?;
        assert_eq!(out.state.log, strings(&lg, expected)?, "{form}");
    }
    // A node's write read from the keyed form.
    let from_json: SUpdate =
        serde_json::from_value(serde_json::json!({"log": {"__overwrite__": ["node"]}}))?;
    let out = chain(vec![plain(&["a"]), from_json, plain(&["b"])])?
        .invoke(plain(&["in"]), &RunConfig::new())
        .await?;
    assert_eq!(out.state.log, strings(&lg, "/node_keyed_final_log")?);
    Ok(())
}

/// A message with an id (for `add_messages`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Msg {
    pub id: Option<String>,
    pub text: String,
}

impl Message for Msg {
    fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    fn set_id(&mut self, id: String) {
        self.id = Some(id);
    }
}

fn msg(id: &str, text: &str) -> Msg {
    Msg {
        id: Some(id.into()),
        text: text.into(),
    }
}

#[derive(State, Clone, Default, Debug, PartialEq)]
pub struct Chat {
    #[reduce(add_messages)]
    pub messages: List<Msg>,
}

#[tokio::test]
async fn an_overwrite_of_a_messages_field_then_appends_matches_langgraph() -> TestResult {
    let lg = recorded("overwrite_messages")?;
    let add = |m: Msg| Chat::update().messages(MessagesUpdate::from(m));
    let step = |u: ChatUpdate| {
        move |_s: Arc<Chat>, _c: NodeContext| {
            let u = u.clone();
            async move { Ok::<_, BoxError>(u) }
        }
    };
    let out = StateGraph::<Chat>::new()
        .add_node("one", step(add(msg("m1", "one"))))
        .add_node(
            "over",
            step(Chat::update().overwrite_messages(List::from(vec![msg("m2", "over")]))),
        )
        .add_node("two", step(add(msg("m3", "two"))))
        .add_edge(START, "one")
        .add_edge("one", "over")
        .add_edge("over", "two")
        .add_edge("two", END)
        .compile()?
        .invoke(add(msg("h1", "hi")), &RunConfig::new())
        .await?;
    let texts: Vec<&str> = out.state.messages.iter().map(|m| m.text.as_str()).collect();
    let lg_texts: Vec<&str> = lg["final_messages"]
        .as_array()
        .ok_or("no messages")?
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(texts, lg_texts);
    Ok(())
}
