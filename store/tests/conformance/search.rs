//! Search without a query: prefix, filter, order, pages.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use stategraph_store::{
    Filter, ManualClock, MemoryStore, Namespace, Op, PutOp, SearchItem, SearchOp, Store,
    StoreConfig,
};

use crate::support::{keys, ns, obj, secs, Backend, TestResult};

pub async fn search_finds_only_items_under_the_prefix(b: Backend) -> TestResult {
    let s = b.plain().await?;
    for (labels, key) in [
        (&["a", "b"][..], "ab"),
        (&["a", "b", "c"], "abc"),
        (&["a", "bc"], "a_bc"),
        (&["a", "b-"], "a_b_dash"),
        (&["a"], "a"),
        (&["ab"], "ab_root"),
        (&["b"], "b"),
    ] {
        s.put(&ns(labels), key, obj(json!({}))).await?;
    }
    let mut found = keys(
        &s.search(SearchOp::new(ns(&["a", "b"])).page(100, 0))
            .await?,
    );
    found.sort();
    assert_eq!(found, ["ab", "abc"]);
    let mut found = keys(&s.search(SearchOp::new(ns(&["a"])).page(100, 0)).await?);
    found.sort();
    assert_eq!(found, ["a", "a_b_dash", "a_bc", "ab", "abc"]);
    assert!(s
        .search(SearchOp::new(ns(&["a", "b", "c", "d"])))
        .await?
        .is_empty());
    Ok(())
}

pub async fn root_prefix_searches_every_item(b: Backend) -> TestResult {
    let s = b.plain().await?;
    s.put(&ns(&["x"]), "1", obj(json!({}))).await?;
    s.put(&ns(&["y", "z"]), "2", obj(json!({}))).await?;
    let found = s.search(SearchOp::new(Namespace::root())).await?;
    assert_eq!(found.len(), 2);
    Ok(())
}

pub async fn without_a_query_the_newest_updated_come_first(b: Backend) -> TestResult {
    let s = b.plain().await?;
    let at = ns(&["a"]);
    for key in ["first", "second", "third"] {
        s.put(&at, key, obj(json!({"k": key}))).await?;
        s.clock.advance(secs(1));
    }
    s.put(&at, "first", obj(json!({"k": "again"}))).await?;
    let found = s.search(SearchOp::new(at.clone())).await?;
    assert_eq!(keys(&found), ["first", "third", "second"]);
    // Same time: ordered by namespace, then key.
    s.clock.advance(secs(1));
    s.put(&ns(&["a", "z"]), "b", obj(json!({}))).await?;
    s.put(&ns(&["a", "z"]), "a", obj(json!({}))).await?;
    s.put(&ns(&["a", "m"]), "z", obj(json!({}))).await?;
    let found = s.search(SearchOp::new(at).page(3, 0)).await?;
    assert_eq!(keys(&found), ["z", "a", "b"]);
    Ok(())
}

pub async fn search_pages_with_limit_and_offset(b: Backend) -> TestResult {
    let s = b.plain().await?;
    let at = ns(&["p"]);
    for n in 0..12 {
        s.put(&at, &format!("k{n:02}"), obj(json!({"n": n})))
            .await?;
        s.clock.advance(secs(1));
    }
    let page = |limit, offset| SearchOp::new(at.clone()).page(limit, offset);
    assert_eq!(keys(&s.search(page(3, 0)).await?), ["k11", "k10", "k09"]);
    assert_eq!(keys(&s.search(page(3, 3)).await?), ["k08", "k07", "k06"]);
    assert_eq!(keys(&s.search(page(5, 10)).await?), ["k01", "k00"]);
    assert!(s.search(page(5, 12)).await?.is_empty());
    assert!(s.search(page(0, 0)).await?.is_empty());
    assert_eq!(
        s.search(SearchOp::new(at.clone())).await?.len(),
        10,
        "default limit"
    );
    Ok(())
}

pub async fn search_applies_filter_and_prefix_together(b: Backend) -> TestResult {
    let s = b.plain().await?;
    s.put(&ns(&["u", "a"]), "1", obj(json!({"kind": "fact"})))
        .await?;
    s.put(&ns(&["u", "a"]), "2", obj(json!({"kind": "note"})))
        .await?;
    s.put(&ns(&["u", "b"]), "3", obj(json!({"kind": "fact"})))
        .await?;
    s.put(&ns(&["v"]), "4", obj(json!({"kind": "fact"})))
        .await?;
    let facts = Filter::from_json(&obj(json!({"kind": "fact"})))?;
    let mut found = keys(
        &s.search(SearchOp::new(ns(&["u"])).filter(facts.clone()))
            .await?,
    );
    found.sort();
    assert_eq!(found, ["1", "3"]);
    let found = s
        .search(SearchOp::new(ns(&["u", "a"])).filter(facts))
        .await?;
    assert_eq!(keys(&found), ["1"]);
    Ok(())
}

pub async fn a_search_without_query_returns_no_score(b: Backend) -> TestResult {
    let s = b.plain().await?;
    s.put(&ns(&["a"]), "k", obj(json!({"text": "tea"}))).await?;
    let found = s.search(SearchOp::new(ns(&["a"]))).await?;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].score, None);
    assert_eq!(found[0].item.value, obj(json!({"text": "tea"})));
    assert_eq!(found[0].item.namespace, ns(&["a"]));
    Ok(())
}

pub async fn ties_order_namespaces_by_their_joined_text(b: Backend) -> TestResult {
    let s = b.plain().await?;
    // "t.u-1" < "t.u.x" byte by byte ('-' < '.'), though label "u" < "u-1".
    s.put(&ns(&["t", "u", "x"]), "k", obj(json!({"text": "tea"})))
        .await?;
    s.put(&ns(&["t", "u-1"]), "k", obj(json!({"text": "tea"})))
        .await?;
    for op in [
        SearchOp::new(ns(&["t"])),
        SearchOp::new(ns(&["t"])).query("tea"),
    ] {
        let found = s.search(op).await?;
        let order: Vec<String> = found.iter().map(|f| f.item.namespace.to_string()).collect();
        assert_eq!(order, ["t.u-1", "t.u.x"]);
    }
    Ok(())
}

/// Puts `n` items on `stores` (namespaces `users.u0`…`users.u4`, `teams.t0`, and one item
/// in a hundred in `rare.r0`; two puts per millisecond so `updated_at` ties, keys reused so
/// items are overwritten).
async fn fill_wide(stores: &[&dyn Store], clock: &ManualClock, n: usize) -> TestResult {
    let mut ops = Vec::new();
    for i in 0..n {
        let ns = match (i % 100, i % 6) {
            (7, _) => Namespace::new(["rare", "r0"])?,
            (_, 5) => Namespace::new(["teams", "t0"])?,
            (_, u) => Namespace::new(["users".to_owned(), format!("u{u}")])?,
        };
        let kind = ["fact", "note", "todo"][i % 3];
        let value = obj(json!({"kind": kind, "score": i % 100, "tags": {"n": i % 2}}));
        ops.push(Op::Put(PutOp::new(ns, format!("k{}", i % 997), value)));
        if i % 2 == 1 {
            for store in stores {
                store.batch(ops.clone()).await?;
            }
            ops.clear();
            clock.advance(Duration::from_millis(1));
        }
    }
    Ok(())
}

/// Prefixes holding most items (`users`, the root: the backends walk an index newest
/// first), a sixth (`users.u1`) and a hundredth (`rare`: a walk finds too few, and they read
/// its range and sort it) page as the memory store does.
pub async fn a_search_without_a_query_pages_as_the_memory_store_under_wide_and_narrow_prefixes(
    b: Backend,
) -> TestResult {
    let s = b.plain().await?;
    let config = StoreConfig::default().clock(Arc::new(s.clock.clone()));
    let memory = MemoryStore::new(config);
    fill_wide(&[&*s.store, &memory], &s.clock, 3000).await?;
    let filters = [
        json!({}),
        json!({"kind": "fact", "score": {"$gte": 50}}),
        // Equality with an object is checked outside SQL on SQLite.
        json!({"kind": "note", "tags": {"$eq": {"n": 1}}}),
    ];
    let stamped = |found: Vec<SearchItem>| -> Vec<String> {
        found
            .into_iter()
            .map(|f| {
                format!(
                    "{}/{}@{}",
                    f.item.namespace, f.item.key, f.item.updated_at.0
                )
            })
            .collect()
    };
    let mut found = 0;
    for filter in filters {
        let filter = Filter::from_json(filter.as_object().ok_or("an object")?)?;
        for prefix in [&["users"][..], &["users", "u1"], &["rare"], &[]] {
            for (limit, offset) in [(10, 0), (7, 13), (50, 400)] {
                let op = SearchOp::new(ns(prefix))
                    .filter(filter.clone())
                    .page(limit, offset);
                let want = stamped(memory.search(op.clone()).await?);
                let got = stamped(s.search(op).await?);
                assert_eq!(got, want, "{prefix:?} {limit} {offset}");
                found += want.len();
            }
        }
    }
    assert!(found > 300, "{found}");
    Ok(())
}
