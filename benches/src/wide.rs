//! The `wide` workload: 100 last-value fields, ten writer nodes in a loop, one field changed per
//! step — what a checkpoint of a big state costs when little of it changes.

use std::sync::Arc;
use std::time::Instant;

use stategraph::checkpoints::MemorySaver;
use stategraph::{BoxError, CompiledGraph, NodeContext, RunConfig, StateGraph, END, START};

use crate::args::{Args, Saver};
use crate::report::{median, peak_rss_mb, round, Record};
use crate::sqlite_db::SqliteDb;
use crate::wide_state::{WideState, WideStateUpdate, WideVal};
use crate::{adjacent_floor, floor, json_len, pad, ENGINE};

pub(crate) const WIDE_NODES: usize = 10;

/// What every `wide` run starts from: the graph, its input and its step count.
pub(crate) struct Wide {
    pub(crate) n_fields: usize,
    pub(crate) n_nodes: usize,
    /// Passes over the writer nodes.
    pub(crate) loops: usize,
    pub(crate) supersteps: usize,
    pub(crate) graph: CompiledGraph<WideState>,
    /// Every field at iteration 0.
    pub(crate) init: WideStateUpdate,
    pub(crate) cfg: RunConfig,
}

impl Wide {
    /// The workload `--wide-fields` and `--wide-steps` ask for.
    pub(crate) fn new(args: &Args) -> Result<Self, BoxError> {
        let (n_fields, n_nodes) = (args.wide_fields, WIDE_NODES);
        let loops = (args.wide_steps / n_nodes).max(1);
        let supersteps = loops * n_nodes;
        Ok(Self {
            n_fields,
            n_nodes,
            loops,
            supersteps,
            graph: build_wide(n_nodes, loops as i64)?,
            init: (0..n_fields).fold(WideState::update(), |u, i| u.set(i, wide_val(0))),
            cfg: RunConfig::new().recursion_limit(supersteps + 50),
        })
    }
}

fn wide_val(iter: i64) -> WideVal {
    WideVal {
        iter,
        pad: pad(100),
    }
}

fn build_wide(n_nodes: usize, loops: i64) -> Result<CompiledGraph<WideState>, BoxError> {
    let mut b = StateGraph::<WideState>::new();
    let mut prev = START.to_owned();
    for idx in 0..n_nodes {
        let name = format!("w{idx}");
        b = b
            .add_node(
                name.clone(),
                move |s: Arc<WideState>, _ctx: NodeContext| async move {
                    let it = s.get(idx).map_or(0, |v| v.iter) + 1;
                    Ok::<_, BoxError>(WideState::update().set(idx, wide_val(it)))
                },
            )
            .add_edge(prev, name.clone());
        prev = name;
    }
    let last = n_nodes - 1;
    let b = b.add_conditional_edges(
        prev,
        move |s: &WideState| {
            if s.get(last).map_or(0, |v| v.iter) < loops {
                "w0"
            } else {
                END
            }
        },
        ["w0", END],
    );
    Ok(b.compile()?)
}

/// A wide run's final state is right: the last writer's field holds the last iteration.
pub(crate) fn wide_checked(s: &WideState, n_nodes: usize, loops: usize) -> Result<(), BoxError> {
    match s.get(n_nodes - 1) {
        Some(v) if v.iter == loops as i64 => Ok(()),
        other => Err(format!("wide: last writer field is {other:?}, not iter {loops}").into()),
    }
}

/// `wide` on the in-process checkpointers asked for: none, memory, SQLite.
pub(crate) async fn run_wide(args: &Args) -> Result<(), BoxError> {
    let Wide {
        n_fields,
        n_nodes,
        loops,
        supersteps,
        graph,
        init,
        cfg,
    } = Wide::new(args)?;
    let check = |s: &WideState| wide_checked(s, n_nodes, loops);
    check(&graph.invoke(init.clone(), &cfg).await?.state)?; // warm-up

    let per_step = |wall: f64| round(wall * 1000.0 / supersteps as f64, 6);
    let base = |cp: &str| {
        Record::new()
            .kv("engine", ENGINE)
            .kv("workload", "wide")
            .kv("checkpointer", cp)
    };

    if args.checkpointers.contains(&Saver::None) {
        // The Python script times one run; the extra runs only show the spread.
        let mut walls = Vec::new();
        for _ in 0..args.repeats {
            let input = init.clone();
            let t0 = Instant::now();
            let out = graph.invoke(input, &cfg).await?;
            walls.push(t0.elapsed().as_secs_f64());
            check(&out.state)?;
        }
        let wall = walls[0];
        base("none")
            .kv("fields", n_fields)
            .kv("writer_nodes", n_nodes)
            .kv("supersteps", supersteps)
            .kv("wall_s", round(wall, 6))
            .kv("per_step_ms", per_step(wall))
            .kv(
                "repeats_per_step_ms",
                walls.iter().map(|&w| per_step(w)).collect::<Vec<_>>(),
            )
            .kv("peak_rss_mb", peak_rss_mb())
            .emit();
    }

    if args.checkpointers.contains(&Saver::Memory) {
        for (dname, durability) in &args.durabilities {
            let saver = MemorySaver::new();
            let g = graph.with_checkpointer(Arc::new(saver.clone()));
            let cfg = cfg.clone().thread("wide-1").durability(*durability);
            let input = init.clone();
            let t0 = Instant::now();
            let out = g.invoke(input, &cfg).await?;
            let wall = t0.elapsed().as_secs_f64();
            check(&out.state)?;
            let t1 = Instant::now();
            g.get_state("wide-1", None).await?;
            let gs_ms = t1.elapsed().as_secs_f64() * 1000.0;
            base("memory")
                .kv("durability", dname.as_str())
                .kv("fields", n_fields)
                .kv("writer_nodes", n_nodes)
                .kv("supersteps", supersteps)
                .kv("wall_s", round(wall, 6))
                .kv("per_step_ms", per_step(wall))
                .kv("get_state_ms", round(gs_ms, 3))
                .kv("checkpoint_rows", saver.checkpoint_count())
                .kv("peak_rss_mb", peak_rss_mb())
                .emit();
        }
    }

    if args.checkpointers.contains(&Saver::Sqlite) {
        // Bytes written: the input's fields, then one field value per step.
        let bytes_written = n_fields * json_len(&wide_val(0))
            + (0..supersteps)
                .map(|s| json_len(&wide_val((s / n_nodes + 1) as i64)))
                .sum::<usize>();
        for (dname, durability) in &args.durabilities {
            let db = SqliteDb::open(
                &args.workdir,
                &format!("wide-{dname}"),
                args.sqlite_options(),
            )?;
            let g = graph.with_checkpointer(Arc::new(db.saver.clone()));
            let cfg = cfg.clone().thread("wide-1").durability(*durability);
            let input = init.clone();
            let floor_before = adjacent_floor(args)?;
            let t0 = Instant::now();
            let out = g.invoke(input, &cfg).await?;
            let wall = t0.elapsed().as_secs_f64();
            let floor_after = adjacent_floor(args)?;
            check(&out.state)?;
            let t1 = Instant::now();
            g.get_state("wide-1", None).await?;
            let gs_ms = t1.elapsed().as_secs_f64() * 1000.0;
            drop(g);
            let st = db.close(args.keep_db)?;
            let commits = st.checkpoint_rows.max(1);
            let per_commit = wall * 1000.0 / commits as f64;
            // A run of 100 commits is a small sample of a noisy disk: the extra passes (each on
            // a fresh file, between its own floor samples) give the per-commit ratio to the
            // floor a median; the keys above stay those of the first pass, as the Python
            // script times one run.
            let ratio = |per_commit: f64, floor: floor::Adjacent| {
                (per_commit / floor.plain, per_commit / floor.preallocated)
            };
            let mut ratios = vec![ratio(
                per_commit,
                floor::Adjacent::mean(floor_before, floor_after),
            )];
            for r in 1..args.repeats {
                let db = SqliteDb::open(
                    &args.workdir,
                    &format!("wide-{dname}-{r}"),
                    args.sqlite_options(),
                )?;
                let g = graph.with_checkpointer(Arc::new(db.saver.clone()));
                let before = adjacent_floor(args)?;
                let t0 = Instant::now();
                check(&g.invoke(init.clone(), &cfg).await?.state)?;
                let wall = t0.elapsed().as_secs_f64();
                let after = adjacent_floor(args)?;
                drop(g);
                let rows = db.close(false)?.checkpoint_rows.max(1);
                ratios.push(ratio(
                    wall * 1000.0 / rows as f64,
                    floor::Adjacent::mean(before, after),
                ));
            }
            let rec = base("sqlite")
                .kv("durability", dname.as_str())
                .kv("sqlite_synchronous", args.sqlite_sync.as_str())
                .kv("fields", n_fields)
                .kv("writer_nodes", n_nodes)
                .kv("supersteps", supersteps)
                .kv("wall_s", round(wall, 6))
                .kv("per_step_ms", per_step(wall))
                .kv("get_state_ms", round(gs_ms, 3));
            let (plain, preallocated): (Vec<f64>, Vec<f64>) = ratios.into_iter().unzip();
            let rec = st
                .add_to(rec)
                .kv("bytes_written_by_steps", bytes_written)
                .kv("per_commit_ms", round(per_commit, 6));
            floor::Adjacent::keys(rec, floor_before, floor_after)
                .kv(
                    "repeats_per_commit_vs_floor",
                    plain.iter().map(|&x| round(x, 3)).collect::<Vec<_>>(),
                )
                .kv("per_commit_vs_floor_median", round(median(&plain), 3))
                .kv(
                    "per_commit_vs_preallocated_floor_median",
                    round(median(&preallocated), 3),
                )
                .kv("peak_rss_mb", peak_rss_mb())
                .emit();
        }
    }
    Ok(())
}
