//! A `get` on Postgres is one call of a server-side function (and one more statement for
//! the values of a walked chain). The state a saver remembers of a head and the state a
//! walk of the chain finds are two ways to one answer; these clauses check that they agree
//! and that a head without its checkpoint row is a typed error.

use stategraph_checkpoints::{
    CheckpointError, Namespace, PendingWrite, Saver, TaskId, ThreadId, WriteKind,
};

use crate::pg_support;
use crate::postgres_extend::{chain, open};
use crate::TestResult;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remembered_head_and_a_walked_chain_load_the_same_checkpoint_with_its_writes(
) -> TestResult {
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let (writer, guard) = pg_support::fresh(&url, "get_alike").await?;
    let (t, ns) = (ThreadId::new("t")?, Namespace::root());
    // Longer than the records between base records, so a walk crosses deltas.
    let puts = chain(&t, 40);
    let (middle, head) = (puts[17].checkpoint.id, puts[39].checkpoint.id);
    writer.put_many(puts).await?;
    let write = PendingWrite {
        task_id: TaskId::derive(&[b"get"]),
        node: "a".to_owned(),
        kind: WriteKind::Error("boom".into()),
    };
    writer
        .put_writes(&t, &ns, head, vec![write.clone()])
        .await?;
    // `writer` remembers the head it stored; `reader`, another pool, walks the chain.
    let reader = open(&url, &guard.schema).await?;
    let remembered = writer.get(&t, &ns, None).await?.ok_or("no head")?;
    let walked = reader.get(&t, &ns, None).await?.ok_or("no head")?;
    assert_eq!(remembered.checkpoint.id, head);
    assert_eq!(remembered.pending, vec![write]);
    assert_eq!(
        remembered.fields.get("log").map(Vec::len),
        Some(40),
        "every appended part"
    );
    assert_eq!(walked, remembered, "a walk finds what the writer remembers");
    // `reader` now remembers the head it loaded; an older checkpoint is walked by both.
    assert_eq!(reader.get(&t, &ns, None).await?, Some(remembered));
    let older = writer
        .get(&t, &ns, Some(middle))
        .await?
        .ok_or("no middle")?;
    assert_eq!(older.fields.get("log").map(Vec::len), Some(18));
    assert_eq!(reader.get(&t, &ns, Some(middle)).await?, Some(older));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_whose_checkpoint_row_is_gone_is_not_found_naming_it() -> TestResult {
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let (saver, guard) = pg_support::fresh(&url, "get_gone").await?;
    let (t, ns) = (ThreadId::new("t")?, Namespace::root());
    let puts = chain(&t, 3);
    let head = puts[2].checkpoint.id;
    saver.put_many(puts).await?;
    // An edit by hand leaves the head pointing at no row.
    let raw = pg_support::raw(&url).await?;
    let s = format!("\"{}\"", guard.schema);
    raw.execute(
        &format!("DELETE FROM {s}.sg_checkpoints WHERE id = $1"),
        &[&head.as_u128().to_be_bytes().to_vec()],
    )
    .await?;
    let other = open(&url, &guard.schema).await?;
    for (who, reader) in [("the writer", &saver), ("another pool", &other)] {
        let got = reader.get(&t, &ns, None).await;
        assert!(
            matches!(&got, Err(CheckpointError::NotFound { id, .. }) if *id == head),
            "{who}: {got:?}"
        );
    }
    Ok(())
}
