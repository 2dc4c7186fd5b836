//! `Saver::list_namespaces`: a thread's root graph and subgraph namespaces, each with its
//! count and its oldest and newest checkpoint.

use stategraph_checkpoints::{Namespace, Source, ThreadId};
use stategraph_tests::writes::whole;

use crate::clauses::step;
use crate::{Subject, TestResult};

pub async fn a_threads_namespaces_are_listed_with_counts_and_their_first_and_last_ids(
    s: Subject,
) -> TestResult {
    let (t, other) = (ThreadId::new("t")?, ThreadId::new("other")?);
    let root = Namespace::root();
    let child = root.child("sub:1");
    let leaf = child.child("leaf");
    let r1 = step(
        &s.saver,
        &t,
        &root,
        None,
        Source::Input,
        vec![whole("v", "1")],
    )
    .await?;
    let c1 = step(
        &s.saver,
        &t,
        &child,
        None,
        Source::Input,
        vec![whole("v", "2")],
    )
    .await?;
    let l1 = step(
        &s.saver,
        &t,
        &leaf,
        None,
        Source::Input,
        vec![whole("v", "3")],
    )
    .await?;
    let l2 = step(
        &s.saver,
        &t,
        &leaf,
        Some(l1),
        Source::Loop,
        vec![whole("v", "4")],
    )
    .await?;
    let r2 = step(
        &s.saver,
        &t,
        &root,
        Some(r1),
        Source::Loop,
        vec![whole("v", "5")],
    )
    .await?;
    step(
        &s.saver,
        &other,
        &root,
        None,
        Source::Input,
        vec![whole("v", "6")],
    )
    .await?;
    let list = s.saver.list_namespaces(&t).await?;
    let got: Vec<(&str, usize, _, _)> = list
        .iter()
        .map(|n| (n.ns.as_str(), n.checkpoints, n.first, n.last))
        .collect();
    assert_eq!(
        got,
        vec![
            ("", 2, r1, r2),
            ("sub:1", 1, c1, c1),
            ("sub:1|leaf", 2, l1, l2),
        ]
    );
    let others = s.saver.list_namespaces(&other).await?;
    assert_eq!(others.len(), 1);
    assert!(s
        .saver
        .list_namespaces(&ThreadId::new("nobody")?)
        .await?
        .is_empty());
    Ok(())
}
