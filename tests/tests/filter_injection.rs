//! Metadata filters under hostile keys and values (reliability.md R-16), as a differential
//! property test: the SQLite saver answers every filter exactly as the memory saver (the
//! reference) does — same checkpoints in the same order, or the same `InvalidFilterKey` — never
//! a row of another thread, never a raw SQL error, and the schema is unchanged afterwards.
#![allow(
    missing_docs,
    unreachable_pub,
    clippy::expect_used,
    clippy::unwrap_used
)]

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{json, Value};
use stategraph_checkpoints::{
    Checkpoint, CheckpointError, CheckpointId, Control, FieldPart, FieldWrite, ListOptions,
    MemorySaver, Namespace, PutCheckpoint, Saver, Source, SqliteSaver, ThreadId,
};

/// Metadata the stored checkpoints carry: every JSON type, including look-alikes (1 and 1.0,
/// true and 1, null and a missing key, quotes and SQL in strings).
fn metadata_pool() -> Vec<BTreeMap<String, Value>> {
    let raw = [
        json!({"k": "v", "n": 1, "flag": true}),
        json!({"k": "v2", "n": 1.0, "flag": 1}),
        json!({"k": null, "n": 2, "nested": {"a": [1, 2]}}),
        json!({"n": 0, "flag": false, "q": "it's \"quoted\""}),
        json!({"k": "' OR 1=1 --", "nested": {"a": [1, 2]}, "q": ""}),
        json!({}),
        json!({"k.x": "dotted", "k-y": 3, "_z": [null]}),
    ];
    raw.into_iter()
        .map(|v| serde_json::from_value(v).unwrap())
        .collect()
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "k", "n", "flag", "nested", "q", "missing", "k.x", "k-y", "_z", "source", "step",
        ])
        .prop_map(String::from),
        2 => "[a-zA-Z_][a-zA-Z0-9_.-]{0,70}",
        3 => prop::sample::select(vec![
            "", "1k", "k\"", "k'", "k]", "$.k", "k; DROP TABLE sg_checkpoints", "k\u{0}",
            "ключ", "k k", "\"k\"",
        ])
        .prop_map(String::from),
        1 => any::<String>(),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => prop::sample::select(vec![
            json!("v"), json!("v2"), json!(1), json!(1.0), json!(2), json!(0), json!(true),
            json!(false), json!(null), json!({"a": [1, 2]}), json!([null]), json!(3),
            json!("dotted"), json!("' OR 1=1 --"), json!("it's \"quoted\""), json!(""),
            json!("loop"), json!("input"), json!(-1), json!(4),
        ]),
        1 => any::<String>().prop_map(Value::String),
        1 => any::<i64>().prop_map(|n| json!(n)),
    ]
}

/// Both savers with the same two threads: `victim` (a checkpoint per metadata of the pool) and
/// `other` (the same metadata, which a filter on `victim` must never return).
async fn fill(saver: &Arc<dyn Saver>) -> Vec<CheckpointId> {
    let mut victim_ids = Vec::new();
    for thread in ["victim", "other"] {
        let t = ThreadId::new(thread).unwrap();
        let mut parent = None;
        for (i, metadata) in metadata_pool().into_iter().enumerate() {
            let id = CheckpointId::generate();
            let checkpoint = Checkpoint {
                id,
                parent,
                step: i as i64 - 1,
                source: if i == 0 { Source::Input } else { Source::Loop },
                created_at_ms: id.created_at_ms(),
                control: Control::default(),
                metadata,
            };
            saver
                .put(PutCheckpoint {
                    thread: t.clone(),
                    ns: Namespace::root(),
                    checkpoint,
                    writes: vec![FieldWrite {
                        field: "x".into(),
                        part: FieldPart::Whole(format!("{i}").into_bytes()),
                    }],
                })
                .await
                .unwrap();
            if thread == "victim" {
                victim_ids.push(id);
            }
            parent = Some(id);
        }
    }
    victim_ids
}

fn schema(path: &std::path::Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT sql FROM sqlite_master ORDER BY name")
        .unwrap();
    stmt.query_map([], |r| r.get::<_, Option<String>>(0))
        .unwrap()
        .map(|r| r.unwrap().unwrap_or_default())
        .collect()
}

#[test]
fn sqlite_filters_answer_exactly_as_the_reference_under_hostile_input() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("filters.db");
    let sqlite: Arc<dyn Saver> = Arc::new(SqliteSaver::open(&path).unwrap());
    let memory: Arc<dyn Saver> = Arc::new(MemorySaver::new());
    let victim = rt.block_on(fill(&sqlite));
    let victim_mem = rt.block_on(fill(&memory));
    let before = schema(&path);
    let t = ThreadId::new("victim").unwrap();
    let cases = std::env::var("STATEGRAPH_FILTER_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(cases));
    runner
        .run(
            &prop::collection::btree_map(key(), value(), 1..3),
            |filter| {
                let options = ListOptions {
                    filter: filter.clone(),
                    ..Default::default()
                };
                let got = rt.block_on(sqlite.list(&t, &Namespace::root(), options.clone()));
                let want = rt.block_on(memory.list(&t, &Namespace::root(), options));
                match (got, want) {
                    (Ok(got), Ok(want)) => {
                        // Same positions in the pool (ids differ between the two savers).
                        let pos = |ids: &[CheckpointId], list: &[Checkpoint]| -> Vec<usize> {
                            list.iter()
                                .map(|c| ids.iter().position(|i| *i == c.id).unwrap_or(usize::MAX))
                                .collect()
                        };
                        let g = pos(&victim, &got);
                        prop_assert!(
                            !g.contains(&usize::MAX),
                            "a row of another thread: {filter:?}"
                        );
                        prop_assert_eq!(g, pos(&victim_mem, &want), "filter {:?}", filter);
                    }
                    (
                        Err(CheckpointError::InvalidFilterKey { .. }),
                        Err(CheckpointError::InvalidFilterKey { .. }),
                    ) => {}
                    (got, want) => prop_assert!(
                        false,
                        "filter {:?}: sqlite {:?} but memory {:?}",
                        filter,
                        got.map(|l| l.len()),
                        want.map(|l| l.len())
                    ),
                }
                Ok(())
            },
        )
        .unwrap();
    assert_eq!(schema(&path), before, "the schema changed");
}
