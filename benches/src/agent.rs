//! The `agent` workload: a scripted `model` node and a `tools` node alternate for `turns`
//! turns on one thread, then the reads LangGraph's users do on such a thread: latest state,
//! full history, a page of 10, a fork from the middle checkpoint, an update-as-node
//! (`CompiledGraph::update_state`) on that same checkpoint.
//!
//! Shapes as `langgraph_bench.py`'s `build_agent` / `run_agent`:
//! - input: `{role: "human", i: 0, content: 160 × "x"}`;
//! - `model`, while fewer than `turns` tool messages: `{role: "ai", i: n_tool,
//!   content: 100 × "x", tool_calls: [{name: "search", args: {q: "query n"}, id: "call_n"}]}`,
//!   goto `tools`; then `{role: "ai", i: n_tool, content: "final answer"}`, goto END;
//! - `tools`: `{role: "tool", i: last.i, tool_call_id: call.id, content: 160 × "x"}`, goto
//!   `model`.

use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use stategraph::checkpoints::ListOptions;
use stategraph::{
    BoxError, Command, CompiledGraph, Input, List, NodeContext, NodeOptions, RunConfig, State,
    StateGraph, StateSnapshot, END, START,
};

use crate::postgres_db::{floor_ms, PgDb, PgFloor};
use crate::report::{median, peak_rss_mb, round, Record};
use crate::sqlite_db::SqliteDb;
use crate::{adjacent_floor, json_len, pad, Args, Saver, ENGINE};

/// `{"q": "query n"}`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
struct ToolArgs {
    q: String,
}

/// `{"name", "args", "id"}`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
struct ToolCall {
    name: String,
    args: ToolArgs,
    id: String,
}

/// One message; the optional keys are absent from the JSON when unset, as in the Python
/// dicts.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub(crate) struct AgentMsg {
    role: String,
    i: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<String>,
    content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool_calls: Option<Vec<ToolCall>>,
}

#[derive(State, Clone, Default, Debug)]
pub(crate) struct AgentState {
    #[reduce(append)]
    messages: List<AgentMsg>,
}

fn human(i: i64) -> AgentMsg {
    AgentMsg {
        role: "human".to_owned(),
        i,
        content: pad(160),
        ..Default::default()
    }
}

fn build_agent(turns: i64) -> Result<CompiledGraph<AgentState>, BoxError> {
    let g = StateGraph::<AgentState>::new()
        .add_node_with(
            "model",
            move |s: Arc<AgentState>, _ctx: NodeContext| async move {
                let n_tool = s.messages.iter().filter(|m| m.role == "tool").count() as i64;
                let cmd = if n_tool < turns {
                    let call = AgentMsg {
                        role: "ai".to_owned(),
                        i: n_tool,
                        content: pad(100),
                        tool_calls: Some(vec![ToolCall {
                            name: "search".to_owned(),
                            args: ToolArgs {
                                q: format!("query {n_tool}"),
                            },
                            id: format!("call_{n_tool}"),
                        }]),
                        ..Default::default()
                    };
                    Command::new()
                        .update(AgentState::update().messages(vec![call]))
                        .goto("tools")
                } else {
                    let answer = AgentMsg {
                        role: "ai".to_owned(),
                        i: n_tool,
                        content: "final answer".to_owned(),
                        ..Default::default()
                    };
                    Command::new()
                        .update(AgentState::update().messages(vec![answer]))
                        .goto(END)
                };
                Ok::<_, BoxError>(cmd)
            },
            NodeOptions::new().destinations(["tools", END]),
        )
        .add_node_with(
            "tools",
            |s: Arc<AgentState>, _ctx: NodeContext| async move {
                let last = s.messages.last().ok_or("tools: no messages")?;
                let call = last
                    .tool_calls
                    .as_ref()
                    .and_then(|c| c.first())
                    .ok_or("tools: the last message has no tool call")?;
                let res = AgentMsg {
                    role: "tool".to_owned(),
                    i: last.i,
                    tool_call_id: Some(call.id.clone()),
                    content: pad(160),
                    ..Default::default()
                };
                Ok::<_, BoxError>(
                    Command::new()
                        .update(AgentState::update().messages(vec![res]))
                        .goto("model"),
                )
            },
            NodeOptions::new().destinations(["model"]),
        )
        .add_edge(START, "model")
        .compile()?;
    Ok(g)
}

fn input() -> AgentStateUpdate {
    AgentState::update().messages(vec![human(0)])
}

/// JSON bytes of the messages (each appended item once).
fn msgs_bytes<'a>(msgs: impl IntoIterator<Item = &'a AgentMsg>) -> usize {
    msgs.into_iter().map(json_len).sum()
}

fn ms(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64() * 1000.0
}

/// The recursion limit an agent run of `--agent-turns` needs (two steps a turn, room to spare).
fn recursion_limit(args: &Args) -> usize {
    4 * args.agent_turns + 50
}

/// The node steps of an agent run: two a turn and the last answer (plus a hidden
/// `__start__`).
fn supersteps(args: &Args) -> usize {
    2 * args.agent_turns + 1
}

pub(crate) async fn run_agent(args: &Args) -> Result<(), BoxError> {
    let turns = args.agent_turns as i64;
    let graph = build_agent(turns)?;
    let rl = recursion_limit(args);
    let supersteps = supersteps(args);
    let base = |cp: &str| {
        Record::new()
            .kv("engine", ENGINE)
            .kv("workload", "agent")
            .kv("checkpointer", cp)
    };
    graph
        .invoke(input(), &RunConfig::new().recursion_limit(rl))
        .await?; // warm-up

    if args.checkpointers.contains(&Saver::None) {
        let t0 = Instant::now();
        let out = graph
            .invoke(input(), &RunConfig::new().recursion_limit(rl))
            .await?;
        let wall = t0.elapsed().as_secs_f64();
        base("none")
            .kv("turns", turns)
            .kv("supersteps", supersteps)
            .kv("final_messages", out.state.messages.len())
            .kv("wall_s", round(wall, 6))
            .kv("per_turn_ms", round(wall * 1000.0 / turns as f64, 6))
            .kv("per_step_ms", round(wall * 1000.0 / supersteps as f64, 6))
            .kv("peak_rss_mb", peak_rss_mb())
            .emit();
    }

    if args.checkpointers.contains(&Saver::Sqlite) {
        run_agent_sqlite(args, &graph).await?;
    }
    if args.checkpointers.contains(&Saver::Postgres) {
        if let Some(url) = args.pg_url.as_deref() {
            run_agent_postgres(args, url, &graph).await?;
        }
    }
    Ok(())
}

/// What a run's row needs in common: its configuration and the record's first keys.
struct AgentRun {
    tid: &'static str,
    cfg: RunConfig,
    turns: i64,
    supersteps: usize,
}

impl AgentRun {
    fn new(args: &Args, durability: stategraph::Durability) -> Self {
        let tid = "agent-1";
        AgentRun {
            tid,
            cfg: RunConfig::new()
                .thread(tid)
                .durability(durability)
                .recursion_limit(recursion_limit(args)),
            turns: args.agent_turns as i64,
            supersteps: supersteps(args),
        }
    }

    /// A row's first keys.
    fn record(checkpointer: &str, durability: &str) -> Record {
        Record::new()
            .kv("engine", ENGINE)
            .kv("workload", "agent")
            .kv("checkpointer", checkpointer)
            .kv("durability", durability)
    }

    /// Run the agent on `g`: the wall time, the final messages' bytes, and the record's run
    /// keys (`checkpointer` and `durability` first).
    async fn run(
        &self,
        g: &CompiledGraph<AgentState>,
        rec: Record,
    ) -> Result<(f64, usize, Record), BoxError> {
        let t0 = Instant::now();
        let out = g.invoke(input(), &self.cfg).await?;
        let wall = t0.elapsed().as_secs_f64();
        let n_final = out.state.messages.len();
        if n_final != 2 * self.turns as usize + 2 {
            return Err(format!("agent: {n_final} messages, not {}", 2 * self.turns + 2).into());
        }
        let rec = rec
            .kv("turns", self.turns)
            .kv("supersteps", self.supersteps)
            .kv("final_messages", n_final)
            .kv("wall_s", round(wall, 6))
            .kv("per_turn_ms", round(wall * 1000.0 / self.turns as f64, 6))
            .kv(
                "per_step_ms",
                round(wall * 1000.0 / self.supersteps as f64, 6),
            );
        Ok((wall, msgs_bytes(&out.state.messages), rec))
    }
}

/// The agent on SQLite, one row per durability.
async fn run_agent_sqlite(args: &Args, graph: &CompiledGraph<AgentState>) -> Result<(), BoxError> {
    for (dname, durability) in &args.durabilities {
        let db = SqliteDb::open(
            &args.workdir,
            &format!("agent-{dname}"),
            args.sqlite_options(),
        )?;
        let g = graph.with_checkpointer(Arc::new(db.saver.clone()));
        let run = AgentRun::new(args, *durability);
        let floor_before = adjacent_floor(args)?;
        let head =
            AgentRun::record("sqlite", dname).kv("sqlite_synchronous", args.sqlite_sync.as_str());
        let (wall, run_bytes, rec) = run.run(&g, head).await?;
        let floor_after = adjacent_floor(args)?;
        let st_run = db.stats()?;
        let rec = rec
            .kv(
                "per_commit_ms",
                round(wall * 1000.0 / st_run.checkpoint_rows.max(1) as f64, 6),
            )
            .kv("checkpoint_rows_after_run", st_run.checkpoint_rows)
            .kv(
                "checkpoint_blob_bytes_after_run",
                st_run.checkpoint_blob_bytes,
            )
            .kv("write_rows_after_run", st_run.write_rows)
            .kv("db_logical_bytes_after_run", st_run.db_logical_bytes);
        let rec = crate::floor::Adjacent::keys(rec, floor_before, floor_after);
        let rows = || async { Ok(db.stats()?.checkpoint_rows) };
        let (rec, fork_bytes) = reads_and_fork(args, &g, &run, rec, rows).await?;
        drop(g);
        let st = db.close(args.keep_db)?;
        bytes_keys(st.add_to(rec), run_bytes, fork_bytes).emit();
    }
    Ok(())
}

/// The agent on PostgreSQL, one row per durability, with the Postgres commit floor sampled
/// before and after the run.
async fn run_agent_postgres(
    args: &Args,
    url: &str,
    graph: &CompiledGraph<AgentState>,
) -> Result<(), BoxError> {
    for (dname, durability) in &args.durabilities {
        let db = PgDb::open(url, &format!("agent_{dname}")).await?;
        let g = graph.with_checkpointer(Arc::new(db.saver.clone()));
        let run = AgentRun::new(args, *durability);
        let before = pg_floor(url).await?;
        let head = AgentRun::record("postgres", dname);
        let (wall, run_bytes, rec) = run.run(&g, head).await?;
        let after = pg_floor(url).await?;
        let commits = db.checkpoint_rows().await?;
        let rec = PgFloor { before, after }
            .keys(rec, wall, commits)
            .kv("checkpoint_rows_after_run", commits);
        let rows = || db.checkpoint_rows();
        let (rec, fork_bytes) = reads_and_fork(args, &g, &run, rec, rows).await?;
        drop(g);
        bytes_keys(db.close(rec).await?, run_bytes, fork_bytes).emit();
    }
    Ok(())
}

/// A row's last keys: the bytes the run and then the fork and update wrote, and the peak RSS.
fn bytes_keys(rec: Record, run_bytes: usize, fork_bytes: usize) -> Record {
    rec.kv("bytes_written_by_steps", run_bytes + fork_bytes)
        .kv("bytes_written_by_run", run_bytes)
        .kv("bytes_written_by_fork_and_update", fork_bytes)
        .kv("peak_rss_mb", peak_rss_mb())
}

async fn pg_floor(url: &str) -> Result<f64, BoxError> {
    floor_ms(url, crate::ADJACENT_FLOOR_STEPS, &crate::floor_row()).await
}

/// After a run: the reads LangGraph's users do on the thread (latest state, full history,
/// a page of 10) and a fork plus an update-as-node from its middle, as record keys; the
/// bytes the fork and the update wrote. `rows` counts the stored checkpoints.
async fn reads_and_fork<F, Fut>(
    args: &Args,
    g: &CompiledGraph<AgentState>,
    run: &AgentRun,
    rec: Record,
    rows: F,
) -> Result<(Record, usize), BoxError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<i64, BoxError>>,
{
    let (rec, hist) = reads(args, g, run.tid, rec).await?;
    // fork: continue from the middle checkpoint whose next node is `model`
    let candidates: Vec<_> = hist.iter().filter(|s| s.next == ["model"]).collect();
    let Some(mid) = candidates.get(candidates.len() / 2) else {
        eprintln!("# agent: no checkpoint with next == [model]: fork skipped");
        return Ok((rec, 0));
    };
    let before = rows().await?;
    let (rec, fork_bytes) = fork(g, run, rec, mid).await?;
    let rec = rec.kv("fork_new_checkpoints", rows().await? - before);
    // update_state(as_node) on the same middle checkpoint (a second fork)
    let update = human(-1);
    let update_bytes = json_len(&update);
    let t0 = Instant::now();
    g.update_state(
        run.tid,
        Some(mid.checkpoint.id),
        AgentState::update().messages(vec![update]),
        "tools",
    )
    .await?;
    Ok((
        rec.kv("update_state_as_node_ms", round(ms(t0), 3)),
        fork_bytes + update_bytes,
    ))
}

/// The latest state (median of several reads), the full history and a page of the 10
/// newest, as record keys; the history.
async fn reads(
    args: &Args,
    g: &CompiledGraph<AgentState>,
    tid: &str,
    rec: Record,
) -> Result<(Record, Vec<StateSnapshot<AgentState>>), BoxError> {
    let mut gs = Vec::new();
    let mut snap_msgs = 0;
    for _ in 0..args.repeats.max(3) {
        let t0 = Instant::now();
        let snap = g.get_state(tid, None).await?.ok_or("agent: no state")?;
        gs.push(ms(t0));
        snap_msgs = snap.values.messages.len();
    }
    let t0 = Instant::now();
    let hist = g.get_state_history(tid, ListOptions::default()).await?;
    let history_ms = ms(t0);
    let t0 = Instant::now();
    let page = g
        .get_state_history(
            tid,
            ListOptions {
                limit: Some(10),
                ..Default::default()
            },
        )
        .await?;
    let page_ms = ms(t0);
    if page.len() != hist.len().min(10) {
        return Err(format!("agent: a page of {} snapshots, not 10", page.len()).into());
    }
    let rec = rec
        .kv("get_state_ms", round(median(&gs), 3))
        .kv("get_state_messages", snap_msgs)
        .kv(
            "get_state_ms_samples",
            gs.iter().map(|&x| round(x, 3)).collect::<Vec<_>>(),
        )
        .kv("get_state_history_ms", round(history_ms, 2))
        .kv("history_len", hist.len())
        .kv("get_state_history_limit10_ms", round(page_ms, 3));
    Ok((rec, hist))
}

/// Continue the thread from `mid` (a fork) to its end; the keys and the bytes it wrote.
async fn fork(
    g: &CompiledGraph<AgentState>,
    run: &AgentRun,
    rec: Record,
    mid: &StateSnapshot<AgentState>,
) -> Result<(Record, usize), BoxError> {
    let from_msgs = mid.values.messages.len();
    let fcfg = run.cfg.clone().checkpoint(mid.checkpoint.id);
    let t0 = Instant::now();
    let fout = g.invoke(Input::Continue, &fcfg).await?;
    let fwall = t0.elapsed().as_secs_f64();
    let tools_before = mid
        .values
        .messages
        .iter()
        .filter(|m| m.role == "tool")
        .count() as i64;
    let fork_turns = (run.turns - tools_before).max(1);
    let rec = rec
        .kv("fork_from_step", mid.checkpoint.step)
        .kv("fork_from_messages", from_msgs)
        .kv("fork_invoke_ms", round(fwall * 1000.0, 2))
        .kv("fork_final_messages", fout.state.messages.len());
    let rec = rec.kv(
        "fork_per_turn_ms",
        round(fwall * 1000.0 / fork_turns as f64, 6),
    );
    Ok((rec, msgs_bytes(fout.state.messages.iter().skip(from_msgs))))
}
