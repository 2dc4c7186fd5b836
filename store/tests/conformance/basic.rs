//! get, put and delete, one item at a time.

use serde_json::json;
use stategraph_store::{GetOp, Namespace, Op, PutOp, StoreError};

use crate::support::{ns, obj, secs, Backend, TestResult, T0};

pub async fn put_then_get_returns_the_value_and_its_times(b: Backend) -> TestResult {
    let s = b.plain().await?;
    let at = ns(&["users", "alice"]);
    s.put(&at, "tea", obj(json!({"text": "green tea", "n": 2})))
        .await?;
    let item = s.get(&at, "tea").await?.expect("the item");
    assert_eq!(item.namespace, at);
    assert_eq!(item.key, "tea");
    assert_eq!(item.value, obj(json!({"text": "green tea", "n": 2})));
    assert_eq!(item.created_at, T0);
    assert_eq!(item.updated_at, T0);
    Ok(())
}

pub async fn overwrite_keeps_created_at_and_moves_updated_at(b: Backend) -> TestResult {
    let s = b.plain().await?;
    let at = ns(&["a"]);
    s.put(&at, "k", obj(json!({"v": 1}))).await?;
    s.clock.advance(secs(5));
    s.put(&at, "k", obj(json!({"v": 2}))).await?;
    let item = s.get(&at, "k").await?.expect("the item");
    assert_eq!(item.value, obj(json!({"v": 2})));
    assert_eq!(item.created_at, T0);
    assert_eq!(item.updated_at, T0.plus(secs(5)));
    Ok(())
}

pub async fn delete_removes_the_item_and_a_missing_one_is_fine(b: Backend) -> TestResult {
    let s = b.plain().await?;
    let at = ns(&["a", "b"]);
    s.put(&at, "k", obj(json!({"v": 1}))).await?;
    s.put(&at, "other", obj(json!({"v": 2}))).await?;
    s.delete(&at, "k").await?;
    assert!(s.get(&at, "k").await?.is_none());
    assert!(s.get(&at, "other").await?.is_some());
    s.delete(&at, "k").await?;
    s.delete(&ns(&["nowhere"]), "k").await?;
    Ok(())
}

pub async fn get_of_a_missing_key_is_none(b: Backend) -> TestResult {
    let s = b.plain().await?;
    s.put(&ns(&["a"]), "k", obj(json!({}))).await?;
    assert!(s.get(&ns(&["a"]), "nope").await?.is_none());
    assert!(s.get(&ns(&["a", "k"]), "k").await?.is_none());
    assert!(s.get(&ns(&["b"]), "k").await?.is_none());
    Ok(())
}

pub async fn an_empty_key_or_a_root_namespace_is_refused(b: Backend) -> TestResult {
    let s = b.plain().await?;
    let err = s.put(&ns(&["a"]), "", obj(json!({}))).await;
    assert!(
        matches!(err, Err(StoreError::Invalid { what: "key", .. })),
        "{err:?}"
    );
    let err = s.put(&Namespace::root(), "k", obj(json!({}))).await;
    assert!(matches!(err, Err(StoreError::Namespace(_))), "{err:?}");
    let err = s
        .batch(vec![Op::Get(GetOp::new(Namespace::root(), "k"))])
        .await;
    assert!(matches!(err, Err(StoreError::Namespace(_))), "{err:?}");
    let err = s.batch(vec![Op::Put(PutOp::delete(ns(&["a"]), ""))]).await;
    assert!(matches!(err, Err(StoreError::Invalid { .. })), "{err:?}");
    Ok(())
}

pub async fn values_round_trip_unchanged(b: Backend) -> TestResult {
    let s = b.plain().await?;
    let value = obj(json!({
        "unicode": "thé vert — 緑茶 🍵",
        "quote": "say \"hi\"\n\t\\",
        "big": 9_007_199_254_740_993i64,
        "neg": -42,
        "float": 0.1,
        "nested": {"list": [1, "two", null, true, {"x": []}]},
        "empty": {},
        "z": null,
    }));
    let at = ns(&["odd label with spaces", "ünïcode", "'; DROP TABLE x; --"]);
    let key = "key/with 'quotes' and %_ wildcards";
    s.put(&at, key, value.clone()).await?;
    let item = s.get(&at, key).await?.expect("the item");
    assert_eq!(item.value, value);
    assert_eq!(item.namespace, at);
    Ok(())
}
