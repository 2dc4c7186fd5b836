//! The `chain`, `fanout` and `wide` workloads on the PostgreSQL saver (`--checkpointer postgres`),
//! with the keys the SQLite runs print and a Postgres commit floor sampled next to each run.

use super::*;

use crate::chain::{build_chain, invoke_chain, ChainSize, CHAIN_NODES};
use crate::postgres_db::{floor_ms, PgDb, PgFloor};
use crate::wide::Wide;

/// Commits of each floor sample taken next to a run.
const FLOOR_COMMITS: usize = 200;

async fn adjacent(url: &str) -> Result<f64, BoxError> {
    floor_ms(url, FLOOR_COMMITS, &floor_row()).await
}

/// `chain` on every checkpointer asked for: the others', then Postgres.
pub(crate) async fn chain_everywhere(args: &Args) -> Result<(), BoxError> {
    crate::chain::run_chain(args).await?;
    run_chain(args).await
}

/// `fanout` on every checkpointer asked for: the others', then Postgres.
pub(crate) async fn fanout_everywhere(args: &Args) -> Result<(), BoxError> {
    crate::run_fanout(args).await?;
    run_fanout(args).await
}

/// `wide` on every checkpointer asked for: the others', then Postgres.
pub(crate) async fn wide_everywhere(args: &Args) -> Result<(), BoxError> {
    crate::wide::run_wide(args).await?;
    run_wide(args).await
}

/// `chain` on Postgres: one thread carrying its messages, and a thread per invoke.
pub(crate) async fn run_chain(args: &Args) -> Result<(), BoxError> {
    let Some(url) = args.pg_url.as_deref() else {
        return Ok(());
    };
    if !args.checkpointers.contains(&Saver::Postgres) {
        return Ok(());
    }
    let size = ChainSize::of(args);
    let graph = build_chain(CHAIN_NODES)?;
    for (dname, durability) in &args.durabilities {
        for thread_mode in ["one_thread", "thread_per_invoke"] {
            let db = PgDb::open(url, &format!("chain_{dname}_{thread_mode}")).await?;
            let g = graph.with_checkpointer(Arc::new(db.saver.clone()));
            let before = adjacent(url).await?;
            let (wall, last) = invoke_chain(&g, size.invokes, thread_mode, *durability).await?;
            let after = adjacent(url).await?;
            let commits = db.checkpoint_rows().await?;
            drop(g);
            let rec = size
                .record("postgres", thread_mode, wall)
                .kv("durability", dname.as_str())
                .kv("final_messages", last.messages.len());
            let rec = PgFloor { before, after }.keys(rec, wall, commits);
            db.close(rec).await?.kv("peak_rss_mb", peak_rss_mb()).emit();
        }
    }
    Ok(())
}

/// `fanout` on Postgres: K sends, one thread per repeat.
pub(crate) async fn run_fanout(args: &Args) -> Result<(), BoxError> {
    let Some(url) = args.pg_url.as_deref() else {
        return Ok(());
    };
    if !args.checkpointers.contains(&Saver::Postgres) {
        return Ok(());
    }
    let k = args.fanout_k;
    let graph = build_fanout(args.fanout_waves)?;
    for (dname, durability) in &args.durabilities {
        let db = PgDb::open(url, &format!("fanout_{dname}")).await?;
        let g = graph.with_checkpointer(Arc::new(db.saver.clone()));
        let before = adjacent(url).await?;
        let t0 = Instant::now();
        let times = time_fanout(&g, k, args.repeats, thread_per_repeat(*durability)).await?;
        let wall = t0.elapsed().as_secs_f64();
        let after = adjacent(url).await?;
        let commits = db.checkpoint_rows().await?;
        drop(g);
        let rec = fan_record("postgres", k, args.fanout_waves, args.repeats, &times)
            .kv("durability", dname.as_str())
            .kv("threads", args.repeats);
        let rec = PgFloor { before, after }.keys(rec, wall, commits);
        db.close(rec).await?.kv("peak_rss_mb", peak_rss_mb()).emit();
    }
    Ok(())
}

/// `wide` on Postgres: 100 fields, one of them rewritten each step, on one thread.
pub(crate) async fn run_wide(args: &Args) -> Result<(), BoxError> {
    let Some(url) = args.pg_url.as_deref() else {
        return Ok(());
    };
    if !args.checkpointers.contains(&Saver::Postgres) {
        return Ok(());
    }
    let w = Wide::new(args)?;
    for (dname, durability) in &args.durabilities {
        let db = PgDb::open(url, &format!("wide_{dname}")).await?;
        let g = w.graph.with_checkpointer(Arc::new(db.saver.clone()));
        let cfg = w.cfg.clone().thread("wide-1").durability(*durability);
        let before = adjacent(url).await?;
        let wall = w.timed(&g, &cfg).await?;
        // Right after the run, as the Python script times it.
        let gs_ms = Wide::get_state_ms(&g).await?;
        let after = adjacent(url).await?;
        let commits = db.checkpoint_rows().await?;
        drop(g);
        let rec = w
            .record("postgres", &[("durability", dname.as_str())], wall)
            .kv("get_state_ms", gs_ms);
        let rec = PgFloor { before, after }.keys(rec, wall, commits);
        db.close(rec).await?.kv("peak_rss_mb", peak_rss_mb()).emit();
    }
    Ok(())
}
