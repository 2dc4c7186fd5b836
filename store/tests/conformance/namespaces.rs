//! Listing namespaces: prefix, suffix, `*`, max depth, pages.

use serde_json::json;
use stategraph_store::{ListNamespacesOp, MatchCondition, Namespace};

use crate::support::{ns, obj, Backend, BoxError, Fixture, TestResult};

async fn seed(s: &Fixture) -> TestResult {
    for labels in [
        &["users", "alice", "facts"][..],
        &["users", "alice", "prefs"],
        &["users", "bob", "facts"],
        &["users", "bob"],
        &["docs", "manuals"],
        &["docs"],
        &["users-archive", "carol", "facts"],
    ] {
        let at = ns(labels);
        s.put(&at, "k1", obj(json!({"v": 1}))).await?;
        s.put(&at, "k2", obj(json!({"v": 2}))).await?;
    }
    Ok(())
}

async fn list(s: &Fixture, op: ListNamespacesOp) -> Result<Vec<Vec<String>>, BoxError> {
    Ok(s.list_namespaces(op)
        .await?
        .into_iter()
        .map(Vec::from)
        .collect())
}

fn v(rows: &[&[&str]]) -> Vec<Vec<String>> {
    rows.iter()
        .map(|r| r.iter().map(|l| (*l).to_owned()).collect())
        .collect()
}

pub async fn listing_is_sorted_and_distinct(b: Backend) -> TestResult {
    let s = b.plain().await?;
    seed(&s).await?;
    assert_eq!(
        list(&s, ListNamespacesOp::new()).await?,
        v(&[
            &["docs"],
            &["docs", "manuals"],
            &["users", "alice", "facts"],
            &["users", "alice", "prefs"],
            &["users", "bob"],
            &["users", "bob", "facts"],
            &["users-archive", "carol", "facts"],
        ])
    );
    s.delete(&ns(&["docs"]), "k1").await?;
    s.delete(&ns(&["docs"]), "k2").await?;
    let after = s.list_namespaces(ListNamespacesOp::new()).await?;
    assert!(
        !after.contains(&ns(&["docs"])),
        "an empty namespace is not listed"
    );
    Ok(())
}

pub async fn listing_by_prefix_and_suffix(b: Backend) -> TestResult {
    let s = b.plain().await?;
    seed(&s).await?;
    let users = ListNamespacesOp::new().condition(MatchCondition::prefix(["users"]));
    assert_eq!(
        list(&s, users).await?,
        v(&[
            &["users", "alice", "facts"],
            &["users", "alice", "prefs"],
            &["users", "bob"],
            &["users", "bob", "facts"],
        ])
    );
    let facts = ListNamespacesOp::new().condition(MatchCondition::suffix(["facts"]));
    assert_eq!(
        list(&s, facts).await?,
        v(&[
            &["users", "alice", "facts"],
            &["users", "bob", "facts"],
            &["users-archive", "carol", "facts"],
        ])
    );
    let both = ListNamespacesOp::new()
        .condition(MatchCondition::prefix(["users"]))
        .condition(MatchCondition::suffix(["bob"]));
    assert_eq!(list(&s, both).await?, v(&[&["users", "bob"]]));
    let none = ListNamespacesOp::new().condition(MatchCondition::prefix(["use"]));
    assert!(list(&s, none).await?.is_empty());
    Ok(())
}

pub async fn a_star_label_matches_any_label(b: Backend) -> TestResult {
    let s = b.plain().await?;
    seed(&s).await?;
    let op = ListNamespacesOp::new().condition(MatchCondition::prefix(["*", "alice"]));
    assert_eq!(
        list(&s, op).await?,
        v(&[&["users", "alice", "facts"], &["users", "alice", "prefs"]])
    );
    let op = ListNamespacesOp::new().condition(MatchCondition::suffix(["*", "facts"]));
    assert_eq!(
        list(&s, op).await?,
        v(&[
            &["users", "alice", "facts"],
            &["users", "bob", "facts"],
            &["users-archive", "carol", "facts"],
        ])
    );
    let op = ListNamespacesOp::new().condition(MatchCondition::prefix(["*", "*", "*"]));
    assert_eq!(list(&s, op).await?.len(), 4);
    Ok(())
}

pub async fn max_depth_cuts_and_dedups(b: Backend) -> TestResult {
    let s = b.plain().await?;
    seed(&s).await?;
    assert_eq!(
        list(&s, ListNamespacesOp::new().max_depth(1)).await?,
        v(&[&["docs"], &["users"], &["users-archive"]])
    );
    let op = ListNamespacesOp::new()
        .condition(MatchCondition::prefix(["users"]))
        .max_depth(2);
    assert_eq!(
        list(&s, op).await?,
        v(&[&["users", "alice"], &["users", "bob"]])
    );
    Ok(())
}

pub async fn listing_pages_with_limit_and_offset(b: Backend) -> TestResult {
    let s = b.plain().await?;
    seed(&s).await?;
    let all: Vec<Namespace> = s.list_namespaces(ListNamespacesOp::new()).await?;
    let mut op = ListNamespacesOp::new();
    op.limit = 2;
    op.offset = 3;
    assert_eq!(s.list_namespaces(op.clone()).await?, all[3..5].to_vec());
    op.offset = 6;
    assert_eq!(s.list_namespaces(op.clone()).await?, all[6..].to_vec());
    op.offset = 99;
    assert!(s.list_namespaces(op.clone()).await?.is_empty());
    op.offset = 0;
    op.limit = 0;
    assert!(s.list_namespaces(op).await?.is_empty());
    Ok(())
}
