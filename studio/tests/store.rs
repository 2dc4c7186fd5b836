//! The studio's store views over a real file: namespaces, an item, a search with a filter
//! and a query; a bad filter is a 400 naming it; a file without a store shows none and
//! gets no store tables.
#![allow(
    missing_docs,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used
)]

mod support;

use axum::http::{Method, StatusCode};
use serde_json::json;
use stategraph_studio::{Studio, StudioOptions};
use support::*;

async fn studio_with_store(
    dir: &std::path::Path,
    store: bool,
) -> Result<(Studio, std::path::PathBuf), E> {
    let path = dir.join("threads.db");
    write_file(&path).await?;
    if store {
        write_store(&path).await?;
    }
    Ok((Studio::open(StudioOptions::new(&path))?, path))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_api_lists_namespaces_shows_an_item_and_searches() -> R {
    let dir = tempfile::tempdir()?;
    let (studio, _path) = studio_with_store(dir.path(), true).await?;
    let list = get(&studio, "/api/store/namespaces").await?;
    assert_eq!(
        list,
        json!({"namespaces": [["users", "alice"], ["users", "alice", "notes"], ["users", "bob"]]})
    );
    let list = get(&studio, "/api/store/namespaces?prefix=users&depth=2").await?;
    assert_eq!(
        list,
        json!({"namespaces": [["users", "alice"], ["users", "bob"]]})
    );
    let item = get(&studio, "/api/store/items?namespace=users.alice&key=tea").await?;
    assert_eq!(item["value"]["text"], "prefers green tea");
    assert_eq!(item["score"], json!(null));
    let found = get(
        &studio,
        "/api/store/search?prefix=users&filter=%7B%22kind%22%3A%22fact%22%7D",
    )
    .await?;
    let mut keys: Vec<&str> = found["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["key"].as_str().unwrap())
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["plan", "tea"]);
    let found = get(&studio, "/api/store/search?prefix=users.alice&query=coffee").await?;
    assert_eq!(found["items"][0]["key"], "coffee");
    assert!(
        found["items"][0]["score"].as_f64().is_some_and(|s| s > 0.0),
        "{found}"
    );

    let (status, body) = send(
        &studio,
        Method::GET,
        "/api/store/items?namespace=users.alice&key=nope",
        None,
    )
    .await?;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, body) = send(
        &studio,
        Method::GET,
        "/api/store/search?filter=%7B%22n%22%3A%7B%22%24in%22%3A1%7D%7D",
        None,
    )
    .await?;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["error"].as_str().unwrap().contains("$in"), "{body}");
    let (status, _) = send(
        &studio,
        Method::GET,
        "/api/store/namespaces?prefix=a..b",
        None,
    )
    .await?;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_without_a_store_shows_none_and_gets_no_store_tables() -> R {
    let dir = tempfile::tempdir()?;
    let (studio, path) = studio_with_store(dir.path(), false).await?;
    assert_eq!(
        get(&studio, "/api/store/namespaces").await?,
        json!({"namespaces": []})
    );
    assert_eq!(
        get(&studio, "/api/store/search").await?,
        json!({"items": []})
    );
    let conn = rusqlite::Connection::open(&path)?;
    let tables: i64 = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE name LIKE 'sg_store%'",
        [],
        |r| r.get(0),
    )?;
    assert_eq!(tables, 0);
    Ok(())
}
