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
    let w = Wide::new(args)?;
    w.check(&w.graph.invoke(w.init.clone(), &w.cfg).await?.state)?; // warm-up
    if args.checkpointers.contains(&Saver::None) {
        wide_none(args, &w).await?;
    }
    if args.checkpointers.contains(&Saver::Memory) {
        wide_memory(args, &w).await?;
    }
    if args.checkpointers.contains(&Saver::Sqlite) {
        for (dname, durability) in &args.durabilities {
            wide_sqlite(args, &w, dname, *durability).await?;
        }
    }
    Ok(())
}

impl Wide {
    fn check(&self, s: &WideState) -> Result<(), BoxError> {
        wide_checked(s, self.n_nodes, self.loops)
    }

    fn per_step(&self, wall: f64) -> f64 {
        round(wall * 1000.0 / self.supersteps as f64, 6)
    }

    /// A row's first keys: the checkpointer, then `labels` (durability and such), then the
    /// workload's shape and the run's time.
    pub(crate) fn record(&self, checkpointer: &str, labels: &[(&str, &str)], wall: f64) -> Record {
        let r = Record::new()
            .kv("engine", ENGINE)
            .kv("workload", "wide")
            .kv("checkpointer", checkpointer);
        labels
            .iter()
            .fold(r, |r, (k, v)| r.kv(k, *v))
            .kv("fields", self.n_fields)
            .kv("writer_nodes", self.n_nodes)
            .kv("supersteps", self.supersteps)
            .kv("wall_s", round(wall, 6))
            .kv("per_step_ms", self.per_step(wall))
    }

    /// One checked run on `g` as `cfg` says; its wall time in seconds.
    pub(crate) async fn timed(
        &self,
        g: &CompiledGraph<WideState>,
        cfg: &RunConfig,
    ) -> Result<f64, BoxError> {
        let t0 = Instant::now();
        let out = g.invoke(self.init.clone(), cfg).await?;
        let wall = t0.elapsed().as_secs_f64();
        self.check(&out.state)?;
        Ok(wall)
    }

    /// Milliseconds of a `get_state` of the run's thread.
    pub(crate) async fn get_state_ms(g: &CompiledGraph<WideState>) -> Result<f64, BoxError> {
        let t1 = Instant::now();
        g.get_state("wide-1", None).await?;
        Ok(round(t1.elapsed().as_secs_f64() * 1000.0, 3))
    }

    /// The bytes the input and the steps write: every field once, then one field per step.
    fn bytes_written(&self) -> usize {
        self.n_fields * json_len(&wide_val(0))
            + (0..self.supersteps)
                .map(|s| json_len(&wide_val((s / self.n_nodes + 1) as i64)))
                .sum::<usize>()
    }
}

/// Without a checkpointer. The Python script times one run; the extra runs only show the
/// spread.
async fn wide_none(args: &Args, w: &Wide) -> Result<(), BoxError> {
    let mut walls = Vec::new();
    for _ in 0..args.repeats {
        walls.push(w.timed(&w.graph, &w.cfg).await?);
    }
    let wall = walls.first().copied().unwrap_or_default();
    w.record("none", &[], wall)
        .kv(
            "repeats_per_step_ms",
            walls.iter().map(|&x| w.per_step(x)).collect::<Vec<_>>(),
        )
        .kv("peak_rss_mb", peak_rss_mb())
        .emit();
    Ok(())
}

async fn wide_memory(args: &Args, w: &Wide) -> Result<(), BoxError> {
    for (dname, durability) in &args.durabilities {
        let saver = MemorySaver::new();
        let g = w.graph.with_checkpointer(Arc::new(saver.clone()));
        let cfg = w.cfg.clone().thread("wide-1").durability(*durability);
        let wall = w.timed(&g, &cfg).await?;
        let gs_ms = Wide::get_state_ms(&g).await?;
        w.record("memory", &[("durability", dname.as_str())], wall)
            .kv("get_state_ms", gs_ms)
            .kv("checkpoint_rows", saver.checkpoint_count())
            .kv("peak_rss_mb", peak_rss_mb())
            .emit();
    }
    Ok(())
}

/// One SQLite row: the first pass's keys, and the per-commit ratio to the floor over
/// `--repeats` passes.
async fn wide_sqlite(
    args: &Args,
    w: &Wide,
    dname: &str,
    durability: stategraph::Durability,
) -> Result<(), BoxError> {
    let cfg = w.cfg.clone().thread("wide-1").durability(durability);
    let db = SqliteDb::open(
        &args.workdir,
        &format!("wide-{dname}"),
        args.sqlite_options(),
    )?;
    let g = w.graph.with_checkpointer(Arc::new(db.saver.clone()));
    let floor_before = adjacent_floor(args)?;
    let wall = w.timed(&g, &cfg).await?;
    // Right after the run, as the Python script times it.
    let gs_ms = Wide::get_state_ms(&g).await?;
    let floor_after = adjacent_floor(args)?;
    drop(g);
    let st = db.close(args.keep_db)?;
    let per_commit = wall * 1000.0 / st.checkpoint_rows.max(1) as f64;
    // A run of 100 commits is a small sample of a noisy disk: the extra passes (each on a
    // fresh file, between its own floor samples) give the per-commit ratio to the floor a
    // median; the keys above stay those of the first pass, as the Python script times one
    // run.
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
        let g = w.graph.with_checkpointer(Arc::new(db.saver.clone()));
        let before = adjacent_floor(args)?;
        let wall = w.timed(&g, &cfg).await?;
        let after = adjacent_floor(args)?;
        drop(g);
        let rows = db.close(false)?.checkpoint_rows.max(1);
        ratios.push(ratio(
            wall * 1000.0 / rows as f64,
            floor::Adjacent::mean(before, after),
        ));
    }
    let labels = [
        ("durability", dname),
        ("sqlite_synchronous", args.sqlite_sync.as_str()),
    ];
    let rec = w.record("sqlite", &labels, wall).kv("get_state_ms", gs_ms);
    let (plain, preallocated): (Vec<f64>, Vec<f64>) = ratios.into_iter().unzip();
    let rec = st
        .add_to(rec)
        .kv("bytes_written_by_steps", w.bytes_written())
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
    Ok(())
}
