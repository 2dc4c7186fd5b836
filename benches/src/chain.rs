//! The `chain` workload: a ten-node chain of message-appending steps, run as one thread that
//! carries its messages or as a fresh thread per invoke, in memory or on SQLite.

use super::*;

/// A chain message: `{role, i, content}`, about 190 bytes as JSON.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub(crate) struct Msg {
    role: String,
    i: i64,
    content: String,
}

pub(crate) fn make_msg(kind: &str, i: i64) -> Msg {
    Msg {
        role: kind.to_owned(),
        i,
        content: pad(160),
    }
}

#[derive(State, Clone, Default, Debug)]
pub(crate) struct ChainState {
    #[reduce(append)]
    pub(crate) messages: List<Msg>,
    counter: i64,
}

pub(crate) const CHAIN_NODES: usize = 10;

pub(crate) fn build_chain(n_nodes: usize) -> Result<CompiledGraph<ChainState>, BoxError> {
    let mut b = StateGraph::<ChainState>::new();
    let mut prev = START.to_owned();
    for i in 0..n_nodes {
        let name = format!("n{i}");
        b = b
            .add_node(
                name.clone(),
                |s: Arc<ChainState>, _ctx: NodeContext| async move {
                    let c = s.counter + 1;
                    Ok::<_, BoxError>(
                        ChainState::update()
                            .messages(vec![make_msg("node", c)])
                            .counter(c),
                    )
                },
            )
            .add_edge(prev, name.clone());
        prev = name;
    }
    Ok(b.add_edge(prev, END).compile()?)
}

pub(crate) fn fresh_chain_input() -> ChainStateUpdate {
    ChainState::update().messages(Vec::new()).counter(0)
}

/// Run `invokes` invokes of the chain on `g` (`thread_mode`: `one_thread`, each invoke going
/// on from the last, or `thread_per_invoke`, each a fresh thread); the wall time in seconds
/// and the last invoke's state.
pub(crate) async fn invoke_chain(
    g: &CompiledGraph<ChainState>,
    invokes: usize,
    thread_mode: &str,
    durability: stategraph::Durability,
) -> Result<(f64, Arc<ChainState>), BoxError> {
    let mut tid = "chain-1".to_owned();
    let mut last = None;
    let t0 = Instant::now();
    for k in 0..invokes {
        if thread_mode == "thread_per_invoke" {
            tid = format!("t-{k}");
        }
        let input = if k == 0 || thread_mode == "thread_per_invoke" {
            fresh_chain_input()
        } else {
            ChainState::update().messages(Vec::new())
        };
        let cfg = RunConfig::new().thread(tid.clone()).durability(durability);
        last = Some(g.invoke(input, &cfg).await?.state);
    }
    let wall = t0.elapsed().as_secs_f64();
    Ok((wall, last.ok_or("chain: no invoke ran")?))
}

pub(crate) async fn run_chain(args: &Args) -> Result<(), BoxError> {
    let invokes = (args.steps / CHAIN_NODES).max(1);
    let supersteps = invokes * CHAIN_NODES;
    let engine_steps = invokes * (CHAIN_NODES + 1);
    let graph = build_chain(CHAIN_NODES)?;
    let cfg = RunConfig::new();

    // warm-up
    graph.invoke(fresh_chain_input(), &cfg).await?;

    let per_step = |wall: f64| round(wall * 1000.0 / supersteps as f64, 6);
    let base = |cp: &str| {
        Record::new()
            .kv("engine", ENGINE)
            .kv("workload", "chain")
            .kv("checkpointer", cp)
    };

    if args.checkpointers.contains(&Saver::None) {
        for mode in ["carry", "fresh"] {
            // The Python script times one pass; the extra passes only show the spread.
            let mut walls = Vec::new();
            let mut final_messages = 0;
            for _ in 0..args.repeats {
                let mut state: Option<Arc<ChainState>> = None;
                let t0 = Instant::now();
                for _ in 0..invokes {
                    let input = match (state.take(), mode) {
                        // Hand the output back as input, as the Python script passes its
                        // output dict: moved when this is the only reference (no copy).
                        (Some(s), "carry") => {
                            let s = Arc::try_unwrap(s).unwrap_or_else(|s| (*s).clone());
                            ChainState::update()
                                .messages(s.messages.into_vec())
                                .counter(s.counter)
                        }
                        _ => fresh_chain_input(),
                    };
                    let out = graph.invoke(input, &cfg).await?;
                    final_messages = out.state.messages.len();
                    state = Some(out.state);
                }
                walls.push(t0.elapsed().as_secs_f64());
            }
            let wall = walls[0];
            base("none")
                .kv("state_mode", mode)
                .kv("invokes", invokes)
                .kv("supersteps", supersteps)
                .kv("engine_supersteps", engine_steps)
                .kv("final_messages", final_messages)
                .kv("wall_s", round(wall, 6))
                .kv("per_step_ms", per_step(wall))
                .kv(
                    "per_engine_step_ms",
                    round(wall * 1000.0 / engine_steps as f64, 6),
                )
                .kv("per_invoke_ms", round(wall * 1000.0 / invokes as f64, 6))
                .kv(
                    "repeats_per_step_ms",
                    walls.iter().map(|&w| per_step(w)).collect::<Vec<_>>(),
                )
                .kv("peak_rss_mb", peak_rss_mb())
                .emit();
        }
    }

    if args.checkpointers.contains(&Saver::Memory) {
        for (dname, durability) in &args.durabilities {
            for thread_mode in ["one_thread", "thread_per_invoke"] {
                let saver = MemorySaver::new();
                let g = graph.with_checkpointer(Arc::new(saver.clone()));
                let (wall, last) = invoke_chain(&g, invokes, thread_mode, *durability).await?;
                let final_messages = last.messages.len();
                base("memory")
                    .kv("durability", dname.as_str())
                    .kv("state_mode", thread_mode)
                    .kv("invokes", invokes)
                    .kv("supersteps", supersteps)
                    .kv("engine_supersteps", engine_steps)
                    .kv("final_messages", final_messages)
                    .kv("wall_s", round(wall, 6))
                    .kv("per_step_ms", per_step(wall))
                    .kv(
                        "per_engine_step_ms",
                        round(wall * 1000.0 / engine_steps as f64, 6),
                    )
                    .kv("per_invoke_ms", round(wall * 1000.0 / invokes as f64, 6))
                    .kv("checkpoint_rows", saver.checkpoint_count())
                    .kv("peak_rss_mb", peak_rss_mb())
                    .emit();
            }
        }
    }

    if args.checkpointers.contains(&Saver::Sqlite) {
        for (dname, durability) in &args.durabilities {
            for thread_mode in ["one_thread", "thread_per_invoke"] {
                let db = SqliteDb::open(
                    &args.workdir,
                    &format!("chain-{dname}-{thread_mode}"),
                    args.sqlite_options(),
                )?;
                let g = graph.with_checkpointer(Arc::new(db.saver.clone()));
                let floor_before = adjacent_floor(args)?;
                let (wall, last) = invoke_chain(&g, invokes, thread_mode, *durability).await?;
                let floor_after = adjacent_floor(args)?;
                // Bytes the steps wrote: each appended message, each counter value, the
                // input's counter (the input's empty message list appends nothing).
                let written = |s: &ChainState| -> usize {
                    s.messages.iter().map(json_len).sum::<usize>()
                        + s.messages.iter().map(|m| json_len(&m.i)).sum::<usize>()
                };
                let bytes_written = if thread_mode == "one_thread" {
                    written(&last) + json_len(&0)
                } else {
                    invokes * (written(&last) + json_len(&0))
                };
                drop(g);
                let st = db.close(args.keep_db)?;
                let rec = base("sqlite")
                    .kv("durability", dname.as_str())
                    .kv("sqlite_synchronous", args.sqlite_sync.as_str())
                    .kv("state_mode", thread_mode)
                    .kv("invokes", invokes)
                    .kv("supersteps", supersteps)
                    .kv("engine_supersteps", engine_steps)
                    .kv("final_messages", last.messages.len())
                    .kv("wall_s", round(wall, 6))
                    .kv("per_step_ms", per_step(wall))
                    .kv(
                        "per_engine_step_ms",
                        round(wall * 1000.0 / engine_steps as f64, 6),
                    )
                    .kv("per_invoke_ms", round(wall * 1000.0 / invokes as f64, 6));
                let commits = st.checkpoint_rows.max(1);
                let rec = st
                    .add_to(rec)
                    .kv("bytes_written_by_steps", bytes_written)
                    .kv("per_commit_ms", round(wall * 1000.0 / commits as f64, 6));
                floor::Adjacent::keys(rec, floor_before, floor_after)
                    .kv("peak_rss_mb", peak_rss_mb())
                    .emit();
            }
        }
    }
    Ok(())
}
