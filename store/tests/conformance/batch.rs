//! Batches: ops apply in order, atomically.

use serde_json::json;
use stategraph_store::{GetOp, ListNamespacesOp, Namespace, Op, OpResult, PutOp, SearchOp};

use crate::support::{ns, obj, Backend, TestResult};

pub async fn batch_returns_one_result_per_op_in_order(b: Backend) -> TestResult {
    let s = b.plain().await?;
    let at = ns(&["a"]);
    let results = s
        .batch(vec![
            Op::Put(PutOp::new(at.clone(), "k", obj(json!({"v": 1})))),
            Op::Get(GetOp::new(at.clone(), "missing")),
            Op::Search(SearchOp::new(at.clone())),
            Op::ListNamespaces(ListNamespacesOp::new()),
        ])
        .await?;
    assert_eq!(results.len(), 4);
    assert!(matches!(results[0], OpResult::Done));
    assert!(matches!(results[1], OpResult::Item(None)));
    assert!(matches!(&results[2], OpResult::Items(items) if items.len() == 1));
    assert!(matches!(&results[3], OpResult::Namespaces(list) if list == &vec![at.clone()]));
    Ok(())
}

pub async fn a_read_in_a_batch_sees_the_batchs_earlier_writes(b: Backend) -> TestResult {
    let s = b.plain().await?;
    let at = ns(&["a", "b"]);
    let results = s
        .batch(vec![
            Op::Get(GetOp::new(at.clone(), "k")),
            Op::Put(PutOp::new(at.clone(), "k", obj(json!({"v": 1})))),
            Op::Get(GetOp::new(at.clone(), "k")),
            Op::Put(PutOp::new(at.clone(), "k", obj(json!({"v": 2})))),
            Op::Search(SearchOp::new(ns(&["a"]))),
            Op::Put(PutOp::delete(at.clone(), "k")),
            Op::Get(GetOp::new(at.clone(), "k")),
            Op::ListNamespaces(ListNamespacesOp::new()),
        ])
        .await?;
    assert!(matches!(results[0], OpResult::Item(None)));
    match &results[2] {
        OpResult::Item(Some(item)) => assert_eq!(item.value, obj(json!({"v": 1}))),
        other => panic!("expected the first value, got {other:?}"),
    }
    match &results[4] {
        OpResult::Items(items) => {
            assert_eq!(items.len(), 1);
            assert_eq!(items[0].item.value, obj(json!({"v": 2})));
        }
        other => panic!("expected one item, got {other:?}"),
    }
    assert!(matches!(results[6], OpResult::Item(None)));
    assert!(matches!(&results[7], OpResult::Namespaces(list) if list.is_empty()));
    Ok(())
}

pub async fn a_batch_with_an_invalid_later_op_applies_nothing(b: Backend) -> TestResult {
    let s = b.plain().await?;
    let at = ns(&["a"]);
    s.put(&at, "kept", obj(json!({"v": 0}))).await?;
    let bad_key = s
        .batch(vec![
            Op::Put(PutOp::new(at.clone(), "k1", obj(json!({"v": 1})))),
            Op::Put(PutOp::delete(at.clone(), "kept")),
            Op::Put(PutOp::new(at.clone(), "", obj(json!({"v": 2})))),
        ])
        .await;
    assert!(bad_key.is_err());
    let bad_ns = s
        .batch(vec![
            Op::Put(PutOp::new(at.clone(), "k1", obj(json!({"v": 1})))),
            Op::Put(PutOp::delete(at.clone(), "kept")),
            Op::Put(PutOp::new(Namespace::root(), "k2", obj(json!({"v": 2})))),
        ])
        .await;
    assert!(bad_ns.is_err());
    assert!(s.get(&at, "k1").await?.is_none());
    assert_eq!(
        s.get(&at, "kept").await?.map(|i| i.value),
        Some(obj(json!({"v": 0})))
    );
    Ok(())
}

pub async fn a_batch_puts_then_deletes_in_order(b: Backend) -> TestResult {
    let s = b.plain().await?;
    let at = ns(&["a"]);
    s.batch(vec![
        Op::Put(PutOp::new(at.clone(), "gone", obj(json!({"v": 1})))),
        Op::Put(PutOp::delete(at.clone(), "gone")),
        Op::Put(PutOp::delete(at.clone(), "back")),
        Op::Put(PutOp::new(at.clone(), "back", obj(json!({"v": 1})))),
        Op::Put(PutOp::new(at.clone(), "last", obj(json!({"v": 1})))),
        Op::Put(PutOp::new(at.clone(), "last", obj(json!({"v": 2})))),
    ])
    .await?;
    assert!(s.get(&at, "gone").await?.is_none());
    assert!(s.get(&at, "back").await?.is_some());
    assert_eq!(
        s.get(&at, "last").await?.map(|i| i.value),
        Some(obj(json!({"v": 2})))
    );
    Ok(())
}
