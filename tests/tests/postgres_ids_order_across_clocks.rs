//! Ids that order across machines: a thread whose head was written by a machine whose clock
//! is an hour ahead of ours goes on here, and every checkpoint this process adds has a
//! greater id than its parent (the saver would refuse one that has not). In a test binary of
//! its own: observing a future id moves this process's id clock forward.
#![allow(missing_docs, clippy::expect_used, clippy::unwrap_used)]

#[path = "pg_support/mod.rs"]
mod pg_support;

use std::sync::Arc;

use stategraph::checkpoints::{
    CheckpointId, ListOptions, Namespace, PutCheckpoint, Saver, Source, ThreadId,
};
use stategraph::prelude::*;
use stategraph_tests::tally;

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_whose_head_came_from_a_clock_ahead_goes_on_with_greater_ids() -> TestResult {
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let (saver, _guard) = pg_support::fresh(&url, "clock").await?;
    let g = tally::graph(10)?.with_checkpointer(Arc::new(saver.clone()));
    let cfg = RunConfig::new().thread("t");
    g.invoke(tally::Tally::update(), &cfg).await?;
    let t = ThreadId::new("t")?;
    let root = Namespace::root();
    let head = saver.get(&t, &root, None).await?.ok_or("no head")?;

    // Another machine, its clock an hour ahead of ours, records a state edit on the head:
    // its id is an hour in our future.
    let hour = (3_600_000u128 << 16) << 64;
    let ahead = CheckpointId::from_u128(CheckpointId::generate().as_u128() + hour);
    let mut edit = head.checkpoint.clone();
    edit.id = ahead;
    edit.parent = Some(head.checkpoint.id);
    edit.source = Source::Update;
    edit.created_at_ms = ahead.created_at_ms();
    saver
        .put(PutCheckpoint {
            thread: t.clone(),
            ns: root.clone(),
            checkpoint: edit,
            writes: Vec::new(),
        })
        .await?;

    // Our clock is behind that head; the run goes on from it all the same.
    let longer = tally::graph(20)?.with_checkpointer(Arc::new(saver.clone()));
    let out = longer.invoke(tally::Tally::update(), &cfg).await?;
    assert_eq!(tally::check(&out.state, "result")?, 20);
    let list = saver.list(&t, &root, ListOptions::default()).await?;
    let after: Vec<_> = list.iter().take_while(|c| c.id != ahead).collect();
    assert_eq!(
        after.len(),
        12,
        "the new input, its start step and ten steps"
    );
    for pair in list.windows(2) {
        assert_eq!(pair[0].parent, Some(pair[1].id), "one chain");
        assert!(
            pair[0].id > pair[1].id,
            "a child's id is greater than its parent's"
        );
    }
    Ok(())
}
