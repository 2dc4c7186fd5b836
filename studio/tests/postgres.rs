//! The studio over a PostgreSQL saver's schema, opened from a `postgres://` URL as the
//! `stategraph` CLI opens one: threads, subgraph namespaces, states, a fork written through
//! the database, and a read-only studio that refuses one. Without `STATEGRAPH_PG_URL` each
//! test says how to start the server and skips (it fails under `CI=true`).
#![allow(
    missing_docs,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used
)]

mod support;

use std::sync::Arc;

use axum::http::{Method, StatusCode};
use serde_json::json;
use stategraph_checkpoints::{PostgresOptions, PostgresSaver};
use stategraph_studio::{Studio, StudioError, StudioOptions};
use support::*;

/// The server's URL; `None` (after saying how to start one) when unset, a failure under
/// `CI=true`.
fn url() -> Option<String> {
    let how = "start a throwaway server with: eval \"export $(.ci/postgres.sh | tail -n 1)\"";
    match std::env::var("STATEGRAPH_PG_URL") {
        Ok(value) if !value.is_empty() => Some(value),
        _ => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("STATEGRAPH_PG_URL is not set and CI=true: {how}");
            }
            eprintln!("skipped: STATEGRAPH_PG_URL is not set; {how}");
            None
        }
    }
}

/// A fresh schema holding the nested thread; dropped by [`Schema::drop_now`].
struct Schema {
    saver: PostgresSaver,
    url: String,
}

impl Schema {
    async fn new(base: &str, name: &str) -> Result<Self, E> {
        let schema = format!("studio_{name}_{}", std::process::id());
        let options = || PostgresOptions {
            schema: schema.clone(),
            pool_size: 2,
            ..PostgresOptions::default()
        };
        PostgresSaver::connect_with(base, options())
            .await?
            .drop_schema()
            .await?;
        let saver = PostgresSaver::connect_with(base, options()).await?;
        run_nested_on(Arc::new(saver.clone())).await?;
        Ok(Schema {
            saver,
            url: format!("{base}?schema={schema}"),
        })
    }

    async fn drop_now(self) -> R {
        self.saver.drop_schema().await?;
        Ok(())
    }
}

#[tokio::test]
async fn a_postgres_url_serves_the_schema_with_its_subgraphs_and_forks_through_it() -> R {
    let Some(base) = url() else { return Ok(()) };
    let schema = Schema::new(&base, "serve").await?;
    let studio = Studio::connect(StudioOptions::new(&schema.url)).await?;
    let result = async {
        let info = get(&studio, "/api/info").await?;
        assert_eq!(info["store"], "postgres");
        assert!(info["file"]
            .as_str()
            .is_some_and(|f| f.starts_with("postgres://")));
        let threads = get(&studio, "/api/threads").await?;
        assert_eq!(threads[0]["thread"], NESTED, "{threads}");
        let list = get(&studio, &format!("/api/threads/{NESTED}/namespaces")).await?;
        let namespaces = list["namespaces"].as_array().ok_or("no namespaces")?;
        assert_eq!(namespaces.len(), 4, "{list}");
        let inner = namespaces
            .iter()
            .find(|n| n["node"] == "inner")
            .ok_or("no inner")?;
        let ns = inner["ns"].as_str().unwrap_or_default().replace(':', "%3A");
        let page = get(&studio, &format!("/api/threads/{NESTED}/history?ns={ns}")).await?;
        assert_eq!(page["head"], inner["last"]);
        assert_eq!(page["parent_step"]["ns"], "");
        let head = page["head"].as_str().unwrap_or_default();
        let cp = get(
            &studio,
            &format!("/api/threads/{NESTED}/checkpoints/{head}?ns={ns}"),
        )
        .await?;
        assert_eq!(cp["state"]["notes"], json!(["doubled to 2"]));
        // Each root step names what it ran, as over a file.
        let root = get(&studio, &format!("/api/threads/{NESTED}/history")).await?;
        let ran: usize = root["rows"]
            .as_array()
            .ok_or("no rows")?
            .iter()
            .map(|r| r["subgraphs"].as_array().map_or(0, Vec::len))
            .sum();
        assert_eq!(ran, 4, "two inner runs and two tally runs: {root}");
        // A fork is written through the database.
        let at = root["rows"][1]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let body = json!({ "checkpoint": at, "set": [{ "path": "/count", "value": "7" }] });
        let (status, res) = send(
            &studio,
            Method::POST,
            &format!("/api/threads/{NESTED}/fork"),
            Some(body.to_string()),
        )
        .await?;
        assert_eq!(status, StatusCode::OK, "{res}");
        let new = res["checkpoint"].as_str().unwrap_or_default();
        let forked = get(&studio, &format!("/api/threads/{NESTED}/checkpoints/{new}")).await?;
        assert_eq!(forked["state"]["count"], 7);
        // Read-only: the same fork is refused.
        let read_only = Studio::connect(StudioOptions::new(&schema.url).read_only(true)).await?;
        let (status, _) = send(
            &read_only,
            Method::POST,
            &format!("/api/threads/{NESTED}/fork"),
            Some(body.to_string()),
        )
        .await?;
        assert_eq!(status, StatusCode::FORBIDDEN);
        Ok::<(), E>(())
    }
    .await;
    schema.drop_now().await?;
    result
}

#[tokio::test]
async fn a_url_naming_a_missing_schema_is_refused_and_nothing_is_created() -> R {
    let Some(base) = url() else { return Ok(()) };
    let name = format!("studio_missing_{}", std::process::id());
    let url = format!("{base}?schema={name}");
    match Studio::connect(StudioOptions::new(&url)).await {
        Err(StudioError::Open { file, source }) => {
            assert!(file.starts_with("postgres://"), "{file}");
            assert!(source.to_string().contains(&name), "{source}");
        }
        other => panic!("expected an open error, got {other:?}"),
    }
    // `Studio::open` takes files only, and says to connect.
    let e = Studio::open(StudioOptions::new(&url))
        .err()
        .map(|e| e.to_string());
    assert!(e.is_some_and(|e| e.contains("Studio::connect")));
    // No message shows the URL's password.
    let secret = url.replacen("://", "://someone:s3cret@", 1);
    let e = Studio::open(StudioOptions::new(&secret))
        .err()
        .map(|e| e.to_string());
    assert!(e.as_deref().is_some_and(|e| !e.contains("s3cret")), "{e:?}");
    Ok(())
}
