//! The SQLite backend's filters, pushed down to SQL, find exactly what `Filter::matches`
//! finds: every operator, on every path, with every kind of value, against items holding
//! every kind of value there.

#![allow(
    missing_docs,
    unreachable_pub,
    clippy::expect_used,
    clippy::unwrap_used
)]

use serde_json::{json, Map, Value};
use stategraph_store::{Cmp, Filter, Namespace, SearchOp, SqliteStore, Store, StoreConfig};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

fn kinds() -> Vec<Value> {
    vec![
        json!(-2),
        json!(0),
        json!(1),
        json!(1.0),
        json!(1.5),
        json!(9_007_199_254_740_993i64),
        json!(-1e300),
        json!(""),
        json!("1"),
        json!("B"),
        json!("a"),
        json!("ab"),
        json!("é"),
        json!(true),
        json!(false),
        json!(null),
        json!([1, "a"]),
        json!({"a": 1}),
        json!({"a": "a"}),
    ]
}

fn values() -> Vec<Map<String, Value>> {
    let mut out = vec![Map::new()];
    for v in kinds() {
        out.push(json!({"a": v.clone()}).as_object().cloned().unwrap());
        out.push(
            json!({"a": {"a": v.clone()}, "b": v})
                .as_object()
                .cloned()
                .unwrap(),
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_single_condition_finds_what_matches_finds() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = SqliteStore::open(dir.path().join("f.db"), StoreConfig::default())?;
    let ns = Namespace::new(["f"])?;
    let values = values();
    for (i, value) in values.iter().enumerate() {
        store.put(&ns, &format!("{i:03}"), value.clone()).await?;
    }
    let cmps = [Cmp::Eq, Cmp::Ne, Cmp::Gt, Cmp::Gte, Cmp::Lt, Cmp::Lte];
    let mut checked = 0;
    for path in ["a", "b", "a.a", "a.a.a", "c"] {
        for cmp in cmps {
            for want in kinds() {
                let Ok(filter) = Filter::default().and(path, cmp, want.clone()) else {
                    continue; // an ordering with a value that cannot order
                };
                let op = SearchOp::new(ns.clone())
                    .filter(filter.clone())
                    .page(1000, 0);
                let mut got: Vec<String> = store
                    .search(op)
                    .await?
                    .into_iter()
                    .map(|f| f.item.key)
                    .collect();
                got.sort();
                let expected: Vec<String> = values
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| filter.matches(v))
                    .map(|(i, _)| format!("{i:03}"))
                    .collect();
                assert_eq!(got, expected, "{path} {} {want}", cmp.as_str());
                checked += 1;
            }
        }
    }
    assert!(checked > 400, "{checked}");
    Ok(())
}
