//! The `func` workload: a functional workflow's cost per task (`stategraph::func`), durable
//! on a SQLite file, beside LangGraph's `@entrypoint`/`@task` on its `SqliteSaver`
//! (`benches/func/func_lg.py`, run with `--lg-python`) and beside our own graph's cost per
//! step in the same run.
//!
//! The workflow calls `FUNC_TASKS` tasks one after another, each returning its argument
//! plus one; the graph runs as many steps of one node that counts. Each is invoked
//! `--repeats` times on fresh threads; rows per durability (`sync`, `async` of
//! `--durabilities`): `per_task_us` (median), `graph_per_step_us`, `langgraph_per_task_us`,
//! `vs_langgraph`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use stategraph::func::{entrypoint, Entrypoint, WorkflowContext};
use stategraph::prelude::*;
use stategraph::Durability;

use crate::report::{median, round, Record};
use crate::sqlite_db::SqliteDb;
use crate::{Args, ENGINE};

/// Tasks per workflow run, and steps per graph run.
const FUNC_TASKS: u64 = 1_000;
/// The target: per task, this many times LangGraph's speed.
const TARGET_RATIO: f64 = 50.0;

fn workflow() -> Result<Entrypoint<u64, u64>, BoxError> {
    Ok(entrypoint(
        "count",
        |n: u64, cx: WorkflowContext| async move {
            let mut total = 0;
            for i in 0..n {
                total += cx
                    .task("step", async move { Ok::<_, BoxError>(i + 1) })
                    .await?;
            }
            Ok::<_, BoxError>(total)
        },
    )?)
}

#[derive(State, Clone, Default, Debug)]
struct Count {
    n: u64,
    limit: u64,
}

fn counting_graph() -> Result<CompiledGraph<Count>, BoxError> {
    Ok(StateGraph::<Count>::new()
        .add_node("count", |s: Arc<Count>, _cx: NodeContext| async move {
            Ok::<_, BoxError>(Count::update().n(s.n + 1))
        })
        .add_edge(START, "count")
        .add_conditional_edges(
            "count",
            |s: &Count| if s.n >= s.limit { END } else { "count" },
            ["count", END],
        )
        .compile()?)
}

/// Median seconds of `args.repeats` runs of `run` on fresh threads.
async fn timed<F, Fut>(args: &Args, mut run: F) -> Result<f64, BoxError>
where
    F: FnMut(String) -> Fut,
    Fut: std::future::Future<Output = Result<(), BoxError>>,
{
    let mut times = Vec::new();
    for r in 0..args.repeats.max(1) {
        let start = Instant::now();
        run(format!("t{r}")).await?;
        times.push(start.elapsed().as_secs_f64());
    }
    Ok(median(&times))
}

async fn ours(args: &Args, durability: Durability) -> Result<(f64, f64), BoxError> {
    let db = SqliteDb::open(&args.workdir, "func", args.sqlite_options())?;
    let saver: Arc<dyn stategraph::checkpoints::Saver> = Arc::new(db.saver.clone());
    let wf = workflow()?.with_checkpointer(saver.clone());
    let want: u64 = (1..=FUNC_TASKS).sum();
    let func_s = timed(args, |thread| {
        let wf = wf.clone();
        async move {
            let config = RunConfig::new().thread(thread).durability(durability);
            let out = wf.invoke(FUNC_TASKS, &config).await?;
            match out.output {
                Some(total) if total == want => Ok(()),
                other => Err(format!("the workflow returned {other:?}").into()),
            }
        }
    })
    .await?;
    let graph = counting_graph()?.with_checkpointer(saver);
    let graph_s = timed(args, |thread| {
        let graph = graph.clone();
        async move {
            let config = RunConfig::new()
                .thread(format!("g{thread}"))
                .durability(durability)
                .recursion_limit(FUNC_TASKS as usize + 10);
            graph
                .invoke(Count::update().limit(FUNC_TASKS), &config)
                .await?;
            Ok(())
        }
    })
    .await?;
    db.close(args.keep_db)?;
    let per = |s: f64| s / FUNC_TASKS as f64 * 1e6;
    Ok((per(func_s), per(graph_s)))
}

/// LangGraph's time per task, when `--lg-python` is given.
async fn langgraph(args: &Args, durability: &str) -> Result<Option<f64>, BoxError> {
    let Some(python) = &args.lg_python else {
        eprintln!("# func: LangGraph's side not run (give --lg-python)");
        return Ok(None);
    };
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("func/func_lg.py");
    let out = tokio::process::Command::new(python)
        .arg(&script)
        .args(["--tasks", &FUNC_TASKS.to_string()])
        .args(["--repeats", &args.repeats.max(1).to_string()])
        .args(["--durability", durability])
        .arg("--workdir")
        .arg(&args.workdir)
        .output()
        .await?;
    if !out.status.success() {
        return Err(format!(
            "func_lg.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let line: Value = serde_json::from_slice(&out.stdout)?;
    Ok(line["per_task_us"].as_f64())
}

pub(crate) async fn run_func(args: &Args) -> Result<(), BoxError> {
    for (name, durability) in &args.durabilities {
        if *durability == Durability::Exit {
            continue;
        }
        let (per_task, per_step) = ours(args, *durability).await?;
        let lg = langgraph(args, name).await?;
        Record::new()
            .kv("engine", ENGINE)
            .kv("workload", "func")
            .kv("checkpointer", "sqlite")
            .kv("durability", name.as_str())
            .kv("tasks", FUNC_TASKS)
            .kv("per_task_us", round(per_task, 2))
            .kv("graph_per_step_us", round(per_step, 2))
            .kv("langgraph_per_task_us", lg.map(|x| round(x, 1)))
            .kv("vs_langgraph", lg.map(|x| round(x / per_task, 1)))
            .kv("target_vs_langgraph", TARGET_RATIO)
            .emit();
    }
    Ok(())
}
