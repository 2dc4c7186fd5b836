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
    pub(crate) counter: i64,
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

/// The chain's run sizes, as every row prints them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChainSize {
    /// Invokes of the ten-node chain.
    pub(crate) invokes: usize,
    /// Node steps: `invokes × 10`.
    pub(crate) supersteps: usize,
    /// Engine steps: each invoke's input step too.
    pub(crate) engine_steps: usize,
}

impl ChainSize {
    /// The sizes for `--steps`.
    pub(crate) fn of(args: &Args) -> Self {
        let invokes = (args.steps / CHAIN_NODES).max(1);
        ChainSize {
            invokes,
            supersteps: invokes * CHAIN_NODES,
            engine_steps: invokes * (CHAIN_NODES + 1),
        }
    }

    /// ms per node step of a run that took `wall` seconds.
    fn per_step(&self, wall: f64) -> f64 {
        round(wall * 1000.0 / self.supersteps as f64, 6)
    }

    /// The keys every chain row prints, for a run on `checkpointer` in `state_mode` that
    /// took `wall` seconds.
    pub(crate) fn record(&self, checkpointer: &str, state_mode: &str, wall: f64) -> Record {
        Record::new()
            .kv("engine", ENGINE)
            .kv("workload", "chain")
            .kv("checkpointer", checkpointer)
            .kv("state_mode", state_mode)
            .kv("invokes", self.invokes)
            .kv("supersteps", self.supersteps)
            .kv("engine_supersteps", self.engine_steps)
            .kv("wall_s", round(wall, 6))
            .kv("per_step_ms", self.per_step(wall))
            .kv(
                "per_engine_step_ms",
                round(wall * 1000.0 / self.engine_steps as f64, 6),
            )
            .kv(
                "per_invoke_ms",
                round(wall * 1000.0 / self.invokes as f64, 6),
            )
    }
}

/// `chain` without a saver, in memory and on SQLite, as `--checkpointer` asks.
pub(crate) async fn run_chain(args: &Args) -> Result<(), BoxError> {
    let size = ChainSize::of(args);
    let graph = build_chain(CHAIN_NODES)?;
    // warm-up
    graph.invoke(fresh_chain_input(), &RunConfig::new()).await?;
    if args.checkpointers.contains(&Saver::None) {
        chain_unsaved(args, &graph, size).await?;
    }
    if args.checkpointers.contains(&Saver::Memory) {
        chain_memory(args, &graph, size).await?;
    }
    if args.checkpointers.contains(&Saver::Sqlite) {
        chain_sqlite(args, &graph, size).await?;
    }
    Ok(())
}

/// Without a saver: each invoke's output carried into the next (`carry`, as the Python
/// script passes its output dict) or a fresh input each time (`fresh`).
async fn chain_unsaved(
    args: &Args,
    graph: &CompiledGraph<ChainState>,
    size: ChainSize,
) -> Result<(), BoxError> {
    let cfg = RunConfig::new();
    for mode in ["carry", "fresh"] {
        // The Python script times one pass; the extra passes only show the spread.
        let mut walls = Vec::new();
        let mut final_messages = 0;
        for _ in 0..args.repeats {
            let mut state: Option<Arc<ChainState>> = None;
            let t0 = Instant::now();
            for _ in 0..size.invokes {
                let input = match (state.take(), mode) {
                    // Moved when this is the only reference (no copy).
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
        let wall = walls.first().copied().unwrap_or_default();
        size.record("none", mode, wall)
            .kv("final_messages", final_messages)
            .kv(
                "repeats_per_step_ms",
                walls.iter().map(|&w| size.per_step(w)).collect::<Vec<_>>(),
            )
            .kv("peak_rss_mb", peak_rss_mb())
            .emit();
    }
    Ok(())
}

/// On the memory saver, per durability and thread mode.
async fn chain_memory(
    args: &Args,
    graph: &CompiledGraph<ChainState>,
    size: ChainSize,
) -> Result<(), BoxError> {
    for (dname, durability) in &args.durabilities {
        for thread_mode in ["one_thread", "thread_per_invoke"] {
            let saver = MemorySaver::new();
            let g = graph.with_checkpointer(Arc::new(saver.clone()));
            let (wall, last) = invoke_chain(&g, size.invokes, thread_mode, *durability).await?;
            size.record("memory", thread_mode, wall)
                .kv("durability", dname.as_str())
                .kv("final_messages", last.messages.len())
                .kv("checkpoint_rows", saver.checkpoint_count())
                .kv("peak_rss_mb", peak_rss_mb())
                .emit();
        }
    }
    Ok(())
}

/// On SQLite, per durability and thread mode, between two floor samples.
async fn chain_sqlite(
    args: &Args,
    graph: &CompiledGraph<ChainState>,
    size: ChainSize,
) -> Result<(), BoxError> {
    for (dname, durability) in &args.durabilities {
        for thread_mode in ["one_thread", "thread_per_invoke"] {
            let db = SqliteDb::open(
                &args.workdir,
                &format!("chain-{dname}-{thread_mode}"),
                args.sqlite_options(),
            )?;
            let g = graph.with_checkpointer(Arc::new(db.saver.clone()));
            let floor_before = adjacent_floor(args)?;
            let (wall, last) = invoke_chain(&g, size.invokes, thread_mode, *durability).await?;
            let floor_after = adjacent_floor(args)?;
            // Bytes the steps wrote: each appended message, each counter value, the
            // input's counter (the input's empty message list appends nothing).
            let written = last.messages.iter().map(json_len).sum::<usize>()
                + last.messages.iter().map(|m| json_len(&m.i)).sum::<usize>()
                + json_len(&0);
            let bytes_written = match thread_mode {
                "one_thread" => written,
                _ => size.invokes * written,
            };
            drop(g);
            let st = db.close(args.keep_db)?;
            let rec = size
                .record("sqlite", thread_mode, wall)
                .kv("durability", dname.as_str())
                .kv("sqlite_synchronous", args.sqlite_sync.as_str())
                .kv("final_messages", last.messages.len());
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
    Ok(())
}
