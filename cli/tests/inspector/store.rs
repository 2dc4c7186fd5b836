//! `store`: the long-term store of a checkpoint file — namespaces, an item, a search —
//! read without changing the file.

use std::time::Duration;

use serde_json::json;
use stategraph_store::{Namespace, PutOp, SqliteStore, Store, StoreConfig, Ttl};

use crate::support::*;

/// The fixture's checkpoint file with a store: alice's and bob's items.
fn fixture_with_store() -> (tempfile::TempDir, std::path::PathBuf) {
    let (dir, db) = fixture();
    runtime().block_on(async {
        let store = SqliteStore::open(&db, StoreConfig::default()).expect("store");
        let put = |ns: &[&str], key: &str, value: serde_json::Value| {
            let ns = Namespace::new(ns.iter().copied()).expect("namespace");
            let value = value.as_object().cloned().expect("object");
            stategraph_store::Op::Put(PutOp::new(ns, key, value))
        };
        store
            .batch(vec![
                put(
                    &["users", "alice"],
                    "tea",
                    json!({"text": "prefers green tea", "kind": "fact", "n": 3}),
                ),
                put(
                    &["users", "alice", "notes"],
                    "coffee",
                    json!({"text": "black coffee", "kind": "fact", "n": 1}),
                ),
                put(
                    &["users", "bob"],
                    "plan",
                    json!({"text": "pro plan", "kind": "account", "n": 5}),
                ),
            ])
            .await
            .expect("puts");
        let brief = PutOp::new(
            Namespace::new(["users", "bob"]).expect("ns"),
            "brief",
            serde_json::Map::new(),
        )
        .ttl(Ttl::After(Duration::from_secs(3600)));
        store
            .batch(vec![stategraph_store::Op::Put(brief)])
            .await
            .expect("ttl put");
        store.close();
    });
    (dir, db)
}

#[test]
fn store_ls_lists_namespaces_under_a_prefix_and_to_a_depth() {
    let (_dir, db) = fixture_with_store();
    let text = sg(&["store", p(&db), "ls"]).ok().stdout;
    assert_eq!(text, "users.alice\nusers.alice.notes\nusers.bob\n");
    let text = sg(&["store", p(&db), "ls", "users.alice"]).ok().stdout;
    assert_eq!(text, "users.alice\nusers.alice.notes\n");
    let list = sg(&["store", p(&db), "ls", "users", "--depth", "2", "--json"])
        .ok()
        .json();
    assert_eq!(
        list,
        json!({"namespaces": [["users", "alice"], ["users", "bob"]]})
    );
}

#[test]
fn store_get_shows_an_item_and_fails_on_a_missing_one() {
    let (_dir, db) = fixture_with_store();
    let text = sg(&["store", p(&db), "get", "users.alice", "tea"])
        .ok()
        .stdout;
    assert!(
        text.starts_with("namespace  users.alice\nkey        tea\n"),
        "{text}"
    );
    assert!(text.contains("\"prefers green tea\""), "{text}");
    let item = sg(&["store", p(&db), "get", "users.alice", "tea", "--json"])
        .ok()
        .json();
    assert_eq!(item["namespace"], json!(["users", "alice"]));
    assert_eq!(item["value"]["n"], 3);
    assert!(
        item["created_at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z')),
        "{item}"
    );
    let ran = sg(&["store", p(&db), "get", "users.alice", "nope"]).fails(1);
    assert!(ran.stderr.contains("users.alice/nope"), "{ran:#?}");
    let ran = sg(&["store", p(&db), "get", "users..alice", "tea"]).fails(2);
    assert!(ran.stderr.contains("users..alice"), "{ran:#?}");
}

#[test]
fn store_search_filters_ranks_by_a_query_and_limits() {
    let (_dir, db) = fixture_with_store();
    let found = sg(&[
        "store",
        p(&db),
        "search",
        "users",
        "--filter",
        r#"{"kind": "fact"}"#,
        "--json",
    ])
    .ok()
    .json();
    let mut keys: Vec<&str> = found["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["key"].as_str().expect("key"))
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["coffee", "tea"]);
    let found = sg(&[
        "store",
        p(&db),
        "search",
        "users",
        "--query",
        "coffee",
        "--json",
    ])
    .ok()
    .json();
    assert_eq!(found["items"][0]["key"], "coffee");
    assert!(
        found["items"][0]["score"].as_f64().is_some_and(|s| s > 0.0),
        "{found}"
    );
    let text = sg(&["store", p(&db), "search", "users", "-q", "coffee"])
        .ok()
        .stdout;
    assert!(text.starts_with("users.alice.notes/coffee  "), "{text}");
    assert!(text.contains("score "), "{text}");
    let found = sg(&["store", p(&db), "search", "", "--limit", "2", "--json"])
        .ok()
        .json();
    assert_eq!(found["items"].as_array().map(Vec::len), Some(2));
    let ran = sg(&[
        "store",
        p(&db),
        "search",
        "users",
        "--filter",
        r#"{"n": {"$in": [1]}}"#,
    ])
    .fails(2);
    assert!(ran.stderr.contains("$in"), "{ran:#?}");
}

#[test]
fn store_on_a_file_without_a_store_lists_nothing_and_adds_no_table() {
    let (_dir, db) = fixture();
    let text = sg(&["store", p(&db), "ls"]).ok().stdout;
    assert!(text.starts_with("no store namespaces in "), "{text}");
    sg(&["store", p(&db), "search", "users"]).ok();
    let conn = rusqlite::Connection::open(&db).expect("open");
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name LIKE 'sg_store%'",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(tables, 0);
    sg(&["store", "/no/such/file.db", "ls"]).fails(1);
}

#[test]
fn store_reads_refresh_no_ttl() {
    let (_dir, db) = fixture_with_store();
    let expiry = || -> i64 {
        let conn = rusqlite::Connection::open(&db).expect("open");
        conn.query_row(
            "SELECT expires_at FROM sg_store_items WHERE key = 'brief'",
            [],
            |r| r.get(0),
        )
        .expect("expiry")
    };
    let before = expiry();
    std::thread::sleep(Duration::from_millis(20));
    sg(&["store", p(&db), "get", "users.bob", "brief"]).ok();
    sg(&["store", p(&db), "search", "users"]).ok();
    assert_eq!(expiry(), before);
}
