//! The engine on the SQLite saver: resume after interrupts and failures, subgraphs, schema
//! evolution, and a golden checkpoint file that must keep loading.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use stategraph::checkpoints::{ListOptions, SqliteSaver};
use stategraph::prelude::*;

use crate::subgraph_checkpointing::Child;
use crate::superstep_semantics::Log;
use crate::{Counter, TestResult};

fn saver(
    dir: &tempfile::TempDir,
) -> Result<Arc<SqliteSaver>, Box<dyn std::error::Error + Send + Sync>> {
    Ok(Arc::new(SqliteSaver::open(dir.path().join("threads.db"))?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupts_and_a_subgraph_resume_where_they_stopped_on_sqlite() -> TestResult {
    let dir = tempfile::tempdir()?;
    let prep = Counter::default();
    let p2 = prep.clone();
    let child = StateGraph::<Child>::new()
        .add_node("prep", move |_s: Arc<Child>, _c: NodeContext| {
            p2.hit();
            async { Ok::<_, BoxError>(Child::update().notes(vec!["prep".into()])) }
        })
        .add_node("ask", |_s: Arc<Child>, c: NodeContext| async move {
            let a: String = c.interrupt("approve?")?;
            Ok::<_, BoxError>(Child::update().notes(vec![a]))
        })
        .add_edge(START, "prep")
        .add_edge("prep", "ask")
        .compile()?;
    let g = StateGraph::<Log>::new()
        .add_subgraph(
            "sub",
            child,
            Checkpointing::Inherit,
            |_p: &Log| Child::update(),
            |c: &Child| Log::update().log(c.notes.clone()),
        )
        .add_edge(START, "sub")
        .compile()?
        .with_checkpointer(saver(&dir)?);
    for durability in [Durability::Sync, Durability::Async] {
        let cfg = RunConfig::new()
            .thread(format!("{durability:?}"))
            .durability(durability);
        let paused = g.invoke(Log::update(), &cfg).await?;
        assert_eq!(paused.interrupts.len(), 1);
        let done = g
            .invoke(Command::resume(Resume::value("yes")), &cfg)
            .await?;
        assert_eq!(done.state.log, ["prep", "yes"]);
    }
    assert_eq!(prep.get(), 2, "once per thread");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_thread_loads_back_identically_from_a_reopened_file() -> TestResult {
    let dir = tempfile::tempdir()?;
    let g = StateGraph::<Log>::new()
        .add_node("tick", |s: Arc<Log>, _c: NodeContext| async move {
            Ok::<_, BoxError>(
                Log::update()
                    .log(vec![format!("tick {}", s.value)])
                    .value(s.value + 1),
            )
        })
        .add_edge(START, "tick")
        .add_conditional_edges(
            "tick",
            |s: &Log| if s.value % 50 == 0 { END } else { "tick" },
            ["tick", END],
        )
        .compile()?;
    let cfg = RunConfig::new().thread("long");
    {
        let app = g.with_checkpointer(saver(&dir)?);
        for _ in 0..4 {
            app.invoke(Log::update(), &cfg).await?;
        }
    }
    let app = g.with_checkpointer(saver(&dir)?);
    let snap = app.get_state("long", None).await?.ok_or("no state")?;
    assert_eq!(snap.values.value, 200);
    assert_eq!(snap.values.log.len(), 200);
    assert_eq!(snap.values.log[137], "tick 137");
    let history = app
        .get_state_history("long", ListOptions::default())
        .await?;
    assert_eq!(history.len(), 4 * (1 + 1 + 50));
    for h in history.iter().step_by(17) {
        let at = app
            .get_state("long", Some(h.checkpoint.id))
            .await?
            .ok_or("missing")?;
        assert_eq!(at.values.log.len() as u32, at.values.value as u32);
    }
    Ok(())
}

/// Version 1 of a state type, as an older build stored it.
#[derive(State, Clone, Default, Debug, PartialEq)]
pub struct NotesV1 {
    #[reduce(append)]
    pub notes: Vec<String>,
    pub count: u32,
}

/// Version 2 gains a field (with a default) and a message type that gained a field.
#[derive(State, Clone, Default, Debug, PartialEq)]
pub struct NotesV2 {
    #[reduce(append)]
    pub notes: Vec<String>,
    pub count: u32,
    pub owner: String,
    #[reduce(append)]
    pub events: Vec<Event2>,
}

#[derive(Clone, Default, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event2 {
    pub what: String,
    #[serde(default)]
    pub when: u64,
}

fn v1_graph() -> Result<CompiledGraph<NotesV1>, stategraph::CompileError> {
    StateGraph::<NotesV1>::new()
        .add_node("note", |s: Arc<NotesV1>, _c: NodeContext| async move {
            Ok::<_, BoxError>(
                NotesV1::update()
                    .notes(vec![format!("note {}", s.count)])
                    .count(s.count + 1),
            )
        })
        .add_edge(START, "note")
        .compile()
}

fn v2_graph() -> Result<CompiledGraph<NotesV2>, stategraph::CompileError> {
    StateGraph::<NotesV2>::new()
        .add_node("note", |s: Arc<NotesV2>, _c: NodeContext| async move {
            Ok::<_, BoxError>(
                NotesV2::update()
                    .notes(vec![format!("note {}", s.count)])
                    .count(s.count + 1),
            )
        })
        .add_edge(START, "note")
        .compile()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_that_gains_a_field_with_a_default_still_loads_old_checkpoints() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = saver(&dir)?;
    let cfg = RunConfig::new().thread("t");
    v1_graph()?
        .with_checkpointer(store.clone())
        .invoke(NotesV1::update(), &cfg)
        .await?;
    let v2 = v2_graph()?.with_checkpointer(store);
    let snap = v2.get_state("t", None).await?.ok_or("no state")?;
    assert_eq!(snap.values.notes, ["note 0"]);
    assert_eq!(snap.values.owner, "");
    let out = v2
        .invoke(NotesV2::update().owner("ada".into()), &cfg)
        .await?;
    assert_eq!(out.state.notes, ["note 0", "note 1"]);
    assert_eq!(out.state.owner, "ada");
    Ok(())
}

/// The golden file written by the build of file format `format` (the `NotesV1` graph, three
/// runs of thread `golden`).
fn golden_path(format: u32) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join("checkpoints")
        .join(if format == 1 {
            "notes_v1.db".to_owned()
        } else {
            format!("notes_v1_format{format}.db")
        })
}

/// Each committed golden file (format 1: `notes_v1.db`; format 2, small values in the
/// records: `notes_v1_format2.db`) keeps loading and resuming with the newer state struct.
/// `STATEGRAPH_UPDATE_GOLDEN=1` writes the current format's file again (never an older one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_golden_checkpoint_files_keep_loading_and_resuming() -> TestResult {
    if std::env::var_os("STATEGRAPH_UPDATE_GOLDEN").is_some() {
        let path = golden_path(stategraph::checkpoints::FORMAT_VERSION);
        let _ = std::fs::remove_file(&path);
        let store = Arc::new(SqliteSaver::open(&path)?);
        let g = v1_graph()?.with_checkpointer(store.clone());
        for _ in 0..3 {
            g.invoke(NotesV1::update(), &RunConfig::new().thread("golden"))
                .await?;
        }
        store.close()?;
    }
    for format in 1..=stategraph::checkpoints::FORMAT_VERSION {
        golden_file_loads_and_resumes(&golden_path(format))
            .await
            .map_err(|e| format!("format {format}: {e}"))?;
    }
    Ok(())
}

async fn golden_file_loads_and_resumes(path: &std::path::Path) -> TestResult {
    // Work on a copy: the fixture itself never changes.
    let dir = tempfile::tempdir()?;
    let copy = dir.path().join("copy.db");
    std::fs::copy(path, &copy)?;
    let store = Arc::new(SqliteSaver::open(&copy)?);
    let v2 = v2_graph()?.with_checkpointer(store);
    let snap = v2
        .get_state("golden", None)
        .await?
        .ok_or("no state in the fixture")?;
    assert_eq!(snap.values.notes, ["note 0", "note 1", "note 2"]);
    assert_eq!(snap.values.count, 3);
    let history = v2
        .get_state_history("golden", ListOptions::default())
        .await?;
    assert_eq!(history.len(), 9);
    let out = v2
        .invoke(NotesV2::update(), &RunConfig::new().thread("golden"))
        .await?;
    assert_eq!(out.state.notes.last().map(String::as_str), Some("note 3"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_snapshots_equal_the_states_loaded_one_by_one() -> TestResult {
    let dir = tempfile::tempdir()?;
    let g = StateGraph::<Log>::new()
        .add_node("tick", |s: Arc<Log>, _c: NodeContext| async move {
            let update = if s.value % 7 == 6 {
                // Now and then a step replaces the list instead of appending to it.
                Log::update().log(vec![format!("reset at {}", s.value)])
            } else {
                Log::update().log(vec![format!("tick {}", s.value)])
            };
            Ok::<_, BoxError>(update.value(s.value + 1))
        })
        .add_edge(START, "tick")
        .add_conditional_edges(
            "tick",
            |s: &Log| if s.value % 20 == 0 { END } else { "tick" },
            ["tick", END],
        )
        .compile()?;
    for store in [
        saver(&dir)? as Arc<dyn stategraph::checkpoints::Saver>,
        Arc::new(stategraph::checkpoints::MemorySaver::new()),
    ] {
        let app = g.with_checkpointer(store);
        let cfg = RunConfig::new().thread("h");
        app.invoke(Log::update(), &cfg).await?;
        app.invoke(Log::update(), &cfg).await?;
        let history = app.get_state_history("h", ListOptions::default()).await?;
        assert_eq!(history.len(), 2 * (1 + 1 + 20));
        for h in &history {
            let one = app
                .get_state("h", Some(h.checkpoint.id))
                .await?
                .ok_or("missing")?;
            assert_eq!(*h.values, *one.values, "at {}", h.checkpoint.id);
            assert_eq!(h.next, one.next);
        }
    }
    Ok(())
}

/// A conversation kept as a shared [`List`]: every snapshot of the history shares the items
/// of the one before it instead of owning a copy.
#[derive(State, Clone, Default, Debug)]
struct Chat {
    #[reduce(append)]
    lines: List<String>,
}

/// The same field declared as a `Vec`: the stored form is the same JSON array.
#[derive(State, Clone, Default, Debug)]
struct ChatAsVec {
    #[reduce(append)]
    lines: Vec<String>,
}

fn chat_graph(turns: usize) -> Result<CompiledGraph<Chat>, BoxError> {
    let route = move |s: &Chat| if s.lines.len() < turns { "say" } else { END };
    Ok(StateGraph::<Chat>::new()
        .add_node("say", |s: Arc<Chat>, _c: NodeContext| async move {
            Ok::<_, BoxError>(Chat::update().lines(vec![format!("line {}", s.lines.len())]))
        })
        .add_conditional_edges(START, route, ["say", END])
        .add_conditional_edges("say", route, ["say", END])
        .compile()?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_snapshots_of_a_list_field_share_their_items_on_sqlite() -> TestResult {
    let dir = tempfile::tempdir()?;
    let g = chat_graph(120)?.with_checkpointer(saver(&dir)?);
    let cfg = RunConfig::new().thread("chat").recursion_limit(500);
    let out = g.invoke(Chat::update(), &cfg).await?;
    assert_eq!(out.state.lines.len(), 120);
    let history = g.get_state_history("chat", ListOptions::default()).await?;
    assert_eq!(
        history.len(),
        122,
        "input, start and one checkpoint per line"
    );
    for pair in history.windows(2) {
        let (newer, older) = (&pair[0].values.lines, &pair[1].values.lines);
        assert!(newer.len() >= older.len());
        assert!(newer.iter().take(older.len()).eq(older.iter()));
        if !older.is_empty() {
            assert!(
                newer.shares_storage_with(older),
                "the snapshot with {} lines copied the {} before it",
                newer.len(),
                older.len()
            );
        }
    }
    // The stored form is a JSON array either way: a `Vec` field reads the same thread.
    let as_vec = StateGraph::<ChatAsVec>::new()
        .add_node("say", |_s: Arc<ChatAsVec>, _c: NodeContext| async move {
            Ok::<_, BoxError>(ChatAsVec::update())
        })
        .add_edge(START, "say")
        .compile()?
        .with_checkpointer(saver(&dir)?);
    let snap = as_vec.get_state("chat", None).await?.ok_or("no state")?;
    assert_eq!(snap.values.lines, out.state.lines.to_vec());
    Ok(())
}
