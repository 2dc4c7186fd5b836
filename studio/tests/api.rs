//! The studio's JSON API over a real checkpoint file, through the real router (token check
//! included): every endpoint, and hostile inputs answered with a clear 4xx that leaves the
//! file as it was.
#![allow(
    missing_docs,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used
)]

mod support;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use stategraph_studio::{Studio, StudioOptions};
use support::*;
use tower::ServiceExt;

/// A studio over a fresh file with the counter and agent threads.
struct Fixture {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    studio: Studio,
}

async fn fixture(read_only: bool) -> Result<Fixture, E> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("threads.db");
    write_file(&path).await?;
    let studio = Studio::open(StudioOptions::new(&path).read_only(read_only))?;
    Ok(Fixture {
        _dir: dir,
        path,
        studio,
    })
}

impl Fixture {
    /// Send a request with the token as a cookie (or without it); status and JSON body.
    async fn send(
        &self,
        method: Method,
        uri: &str,
        body: Option<&str>,
        token: bool,
    ) -> Result<(StatusCode, Value), E> {
        let mut req = Request::builder().method(method).uri(uri);
        if token {
            req = req.header(header::COOKIE, format!("sg_studio={}", self.studio.token()));
        }
        let req = match body {
            Some(b) => req
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(b.to_owned()))?,
            None => req.body(Body::empty())?,
        };
        let res = self.studio.router().oneshot(req).await?;
        let status = res.status();
        let bytes = res.into_body().collect().await?.to_bytes();
        let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok((status, value))
    }

    async fn get(&self, uri: &str) -> Result<Value, E> {
        let (status, body) = self.send(Method::GET, uri, None, true).await?;
        assert_eq!(status, StatusCode::OK, "GET {uri}: {body}");
        Ok(body)
    }

    /// Every checkpoint id of a thread, walking the history pages of `limit`.
    async fn all_ids(&self, thread: &str, limit: usize) -> Result<Vec<String>, E> {
        let mut ids = Vec::new();
        let mut before: Option<String> = None;
        loop {
            let uri = match &before {
                Some(b) => format!("/api/threads/{thread}/history?limit={limit}&before={b}"),
                None => format!("/api/threads/{thread}/history?limit={limit}"),
            };
            let page = self.get(&uri).await?;
            let rows = page["rows"].as_array().ok_or("no rows")?;
            assert!(rows.len() <= limit);
            ids.extend(
                rows.iter()
                    .map(|r| r["id"].as_str().unwrap_or_default().to_owned()),
            );
            match page["older"].as_str() {
                Some(o) => before = Some(o.to_owned()),
                None => return Ok(ids),
            }
        }
    }
}

fn thread<'a>(threads: &'a Value, name: &str) -> Option<&'a Value> {
    threads.as_array()?.iter().find(|t| t["thread"] == name)
}

#[tokio::test]
async fn threads_are_listed_with_status_steps_update_time_and_runs() -> R {
    let f = fixture(true).await?;
    let threads = f.get("/api/threads").await?;
    let counter = thread(&threads, COUNTER).ok_or("no counter thread")?;
    assert_eq!(counter["status"], "done");
    assert!(
        counter["checkpoints"].as_u64().unwrap_or(0) >= 7,
        "{counter}"
    );
    assert!(counter["updated_at"]
        .as_str()
        .is_some_and(|s| s.ends_with('Z')));
    let agent = thread(&threads, AGENT).ok_or("no agent thread")?;
    assert_eq!(agent["runs"].as_array().map(Vec::len), Some(1), "{agent}");
    assert_eq!(agent["runs"][0]["status"], "success");
    Ok(())
}

#[tokio::test]
async fn runs_come_with_their_delivery_receipt_and_capability_trace() -> R {
    let f = fixture(true).await?;
    let runs = f.get(&format!("/api/threads/{AGENT}/runs")).await?;
    let run = &runs[0];
    assert!(run["receipt"].is_object(), "{run}");
    let trace = run["metadata"]["capability_trace"]
        .as_array()
        .ok_or("no trace")?;
    assert!(
        trace
            .iter()
            .any(|e| e["tool"] == "lookup" && e["stage"] == "executed"),
        "{trace:?}"
    );
    Ok(())
}

#[tokio::test]
async fn history_pages_cover_the_thread_once_each_newest_first() -> R {
    let f = fixture(true).await?;
    let threads = f.get("/api/threads").await?;
    let total = thread(&threads, COUNTER)
        .and_then(|t| t["checkpoints"].as_u64())
        .ok_or("no count")?;
    let paged = f.all_ids(COUNTER, 2).await?;
    let whole = f.all_ids(COUNTER, 500).await?;
    assert_eq!(paged.len() as u64, total);
    let mut sorted = paged.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), paged.len(), "a checkpoint on two pages");
    let mut whole_sorted = whole.clone();
    whole_sorted.sort();
    assert_eq!(sorted, whole_sorted);
    let first = f.get(&format!("/api/threads/{COUNTER}/history")).await?;
    let head = first["head"].as_str().ok_or("no head")?;
    assert!(first["rows"]
        .as_array()
        .ok_or("rows")?
        .iter()
        .any(|r| r["id"] == head && r["head"] == true));
    Ok(())
}

#[tokio::test]
async fn the_graph_is_drawn_from_the_stored_shape_with_every_node() -> R {
    let f = fixture(true).await?;
    let g = f.get(&format!("/api/threads/{COUNTER}/graph")).await?;
    let svg = g["svg"].as_str().ok_or("no svg")?;
    for node in ["__start__", "plan", "act", "__end__"] {
        assert!(
            svg.contains(&format!("data-node=\"{node}\"")),
            "{node} missing: {svg}"
        );
    }
    let a = f.get(&format!("/api/threads/{AGENT}/graph")).await?;
    let svg = a["svg"].as_str().ok_or("no agent svg")?;
    assert!(
        svg.contains("class=\"node role-model\" data-node=\"model\""),
        "{svg}"
    );
    assert!(
        svg.contains("class=\"node role-tools\" data-node=\"tools\""),
        "{svg}"
    );
    Ok(())
}

#[tokio::test]
async fn a_checkpoint_shows_its_state_metadata_and_pending_writes() -> R {
    let f = fixture(true).await?;
    let page = f.get(&format!("/api/threads/{COUNTER}/history")).await?;
    let head = page["head"].as_str().ok_or("no head")?;
    let cp = f
        .get(&format!("/api/threads/{COUNTER}/checkpoints/{head}"))
        .await?;
    assert_eq!(cp["state"]["count"], 3);
    assert_eq!(cp["state"]["log"].as_array().map(Vec::len), Some(6));
    assert_eq!(cp["checkpoint"]["id"], head);
    assert!(cp["checkpoint"]["metadata"].is_object());
    assert!(cp["pending"].is_array() && cp["interrupts"].is_array());
    Ok(())
}

#[tokio::test]
async fn a_diff_is_against_the_parent_or_any_picked_checkpoint() -> R {
    let f = fixture(true).await?;
    let ids = f.all_ids(COUNTER, 500).await?;
    let page = f.get(&format!("/api/threads/{COUNTER}/history")).await?;
    let head = page["head"].as_str().ok_or("no head")?;
    let oldest = ids.iter().min().ok_or("no ids")?;
    let d = f
        .get(&format!("/api/threads/{COUNTER}/diff?to={head}"))
        .await?;
    assert!(d["text"].as_str().is_some_and(|t| t.contains("log")), "{d}");
    let parent = f
        .get(&format!("/api/threads/{COUNTER}/checkpoints/{head}"))
        .await?["checkpoint"]["parent"]
        .clone();
    assert_eq!(d["from"]["id"], parent);
    let far = f
        .get(&format!(
            "/api/threads/{COUNTER}/diff?from={oldest}&to={head}"
        ))
        .await?;
    assert_eq!(far["from"]["id"], oldest.as_str());
    assert!(
        far["text"].as_str().is_some_and(|t| t.contains("count")),
        "{far}"
    );
    Ok(())
}

#[tokio::test]
async fn a_fork_with_an_edited_value_is_a_new_branch_in_the_file() -> R {
    let f = fixture(false).await?;
    let ids = f.all_ids(COUNTER, 500).await?;
    let before = fingerprint(&f.path)?;
    let at = &ids[2];
    let body =
        json!({ "checkpoint": at, "set": [{ "path": "/count", "value": "10" }] }).to_string();
    let (status, res) = f
        .send(
            Method::POST,
            &format!("/api/threads/{COUNTER}/fork"),
            Some(&body),
            true,
        )
        .await?;
    assert_eq!(status, StatusCode::OK, "{res}");
    let new = res["checkpoint"].as_str().ok_or("no new id")?;
    let cp = f
        .get(&format!("/api/threads/{COUNTER}/checkpoints/{new}"))
        .await?;
    assert_eq!(cp["state"]["count"], 10);
    assert_eq!(cp["checkpoint"]["parent"], at.as_str());
    assert_eq!(cp["checkpoint"]["source"], "fork");
    assert_ne!(fingerprint(&f.path)?, before);
    assert_eq!(f.all_ids(COUNTER, 500).await?.len(), ids.len() + 1);
    Ok(())
}

#[tokio::test]
async fn hostile_inputs_get_a_clear_4xx_and_leave_the_file_unchanged() -> R {
    let f = fixture(false).await?;
    let ids = f.all_ids(COUNTER, 500).await?;
    let at = ids[0].clone();
    let fork = format!("/api/threads/{COUNTER}/fork");
    let zero = "0".repeat(32);
    let before = fingerprint(&f.path)?;
    let cases: Vec<(Method, String, Option<String>, StatusCode)> = vec![
        (
            Method::GET,
            "/api/threads/nope/history".into(),
            None,
            StatusCode::NOT_FOUND,
        ),
        (
            Method::GET,
            "/api/threads/..%2F..%2Fetc%2Fpasswd/history".into(),
            None,
            StatusCode::NOT_FOUND,
        ),
        (
            Method::GET,
            "/api/threads/%00bad/history".into(),
            None,
            StatusCode::BAD_REQUEST,
        ),
        (
            Method::GET,
            format!("/api/threads/{COUNTER}/checkpoints/..%2F..%2Fsecret"),
            None,
            StatusCode::BAD_REQUEST,
        ),
        (
            Method::GET,
            format!("/api/threads/{COUNTER}/checkpoints/{zero}"),
            None,
            StatusCode::NOT_FOUND,
        ),
        (
            Method::GET,
            format!("/api/threads/{COUNTER}/history?limit=100000000"),
            None,
            StatusCode::BAD_REQUEST,
        ),
        (
            Method::GET,
            format!("/api/threads/{COUNTER}/history?limit=0"),
            None,
            StatusCode::BAD_REQUEST,
        ),
        (
            Method::GET,
            format!("/api/threads/{COUNTER}/history?limit=-1"),
            None,
            StatusCode::BAD_REQUEST,
        ),
        (
            Method::GET,
            format!("/api/threads/{COUNTER}/history?before=xyz"),
            None,
            StatusCode::BAD_REQUEST,
        ),
        (
            Method::GET,
            format!("/api/threads/{COUNTER}/diff"),
            None,
            StatusCode::BAD_REQUEST,
        ),
        (
            Method::GET,
            format!("/api/threads/{COUNTER}/diff?to={zero}"),
            None,
            StatusCode::NOT_FOUND,
        ),
        (
            Method::GET,
            format!("/api/threads/{COUNTER}/graph?checkpoint=../x"),
            None,
            StatusCode::BAD_REQUEST,
        ),
        (
            Method::GET,
            "/etc/passwd".into(),
            None,
            StatusCode::NOT_FOUND,
        ),
        (
            Method::GET,
            "/../Cargo.toml".into(),
            None,
            StatusCode::NOT_FOUND,
        ),
        (
            Method::POST,
            fork.clone(),
            Some("{not json".into()),
            StatusCode::BAD_REQUEST,
        ),
        (
            Method::POST,
            fork.clone(),
            Some(
                json!({ "checkpoint": at, "set": [{ "path": "/count", "value": "{oops" }] })
                    .to_string(),
            ),
            StatusCode::BAD_REQUEST,
        ),
        (
            Method::POST,
            fork.clone(),
            Some(
                json!({ "checkpoint": at, "set": [{ "path": "count", "value": "1" }] }).to_string(),
            ),
            StatusCode::BAD_REQUEST,
        ),
        (
            Method::POST,
            fork.clone(),
            Some(
                json!({ "checkpoint": at, "set": [{ "path": "/count", "value": "\"ten\"" }] })
                    .to_string(),
            ),
            StatusCode::CONFLICT,
        ),
        (
            Method::POST,
            fork.clone(),
            Some(json!({ "checkpoint": zero, "set": [] }).to_string()),
            StatusCode::NOT_FOUND,
        ),
        (
            Method::POST,
            fork.clone(),
            Some(json!({ "checkpoint": "../../x" }).to_string()),
            StatusCode::BAD_REQUEST,
        ),
        (
            Method::POST,
            fork.clone(),
            Some(json!({ "checkpoint": at, "path": "/tmp/x" }).to_string()),
            StatusCode::BAD_REQUEST,
        ),
        (
            Method::POST,
            "/api/threads/nope/fork".into(),
            Some(json!({ "checkpoint": at }).to_string()),
            StatusCode::NOT_FOUND,
        ),
        (
            Method::POST,
            fork.clone(),
            Some("x".repeat(2 << 20)),
            StatusCode::PAYLOAD_TOO_LARGE,
        ),
    ];
    for (method, uri, body, expected) in cases {
        let (status, res) = f.send(method.clone(), &uri, body.as_deref(), true).await?;
        assert_eq!(status, expected, "{method} {uri}: {res}");
        if status != StatusCode::PAYLOAD_TOO_LARGE {
            let msg = res["error"].as_str().unwrap_or_default();
            assert!(!msg.is_empty(), "{method} {uri}: no error message in {res}");
        }
    }
    assert_eq!(
        fingerprint(&f.path)?,
        before,
        "a refused request changed the file"
    );
    Ok(())
}

#[tokio::test]
async fn a_request_without_or_with_a_wrong_token_is_refused() -> R {
    let f = fixture(false).await?;
    let before = fingerprint(&f.path)?;
    let ids = f.all_ids(COUNTER, 500).await?;
    let body =
        json!({ "checkpoint": ids[0], "set": [{ "path": "/count", "value": "5" }] }).to_string();
    for uri in [
        "/",
        "/app.js",
        "/api/info",
        "/api/threads",
        "/api/threads/counter/history",
    ] {
        let (status, _) = f.send(Method::GET, uri, None, false).await?;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{uri}");
        let (status, _) = f
            .send(
                Method::GET,
                &format!("{uri}?token=0123456789abcdef0123456789abcdef"),
                None,
                false,
            )
            .await?;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{uri} with a wrong token");
    }
    let (status, res) = f
        .send(
            Method::POST,
            &format!("/api/threads/{COUNTER}/fork"),
            Some(&body),
            false,
        )
        .await?;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(res["error"].as_str().is_some_and(|e| e.contains("token")));
    assert_eq!(fingerprint(&f.path)?, before);
    Ok(())
}

#[tokio::test]
async fn the_tokened_url_sets_a_cookie_and_redirects_to_the_bare_page() -> R {
    let f = fixture(true).await?;
    let uri = format!("/?token={}", f.studio.token());
    let res = f
        .studio
        .router()
        .oneshot(Request::get(uri).body(Body::empty())?)
        .await?;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        res.headers()
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok()),
        Some("/")
    );
    let cookie = res
        .headers()
        .get(header::SET_COOKIE)
        .and_then(|v| v.to_str().ok())
        .ok_or("no cookie")?;
    assert!(
        cookie.starts_with(&format!("sg_studio={};", f.studio.token()))
            && cookie.contains("HttpOnly")
    );
    let page = f
        .studio
        .router()
        .oneshot(
            Request::get("/")
                .header(header::COOKIE, cookie.split(';').next().unwrap_or_default())
                .body(Body::empty())?,
        )
        .await?;
    assert_eq!(page.status(), StatusCode::OK);
    let csp = page
        .headers()
        .get(header::CONTENT_SECURITY_POLICY)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    assert!(csp.contains("default-src 'self'"), "{csp}");
    Ok(())
}

#[tokio::test]
async fn a_read_only_studio_refuses_a_fork_and_writes_nothing() -> R {
    let f = fixture(true).await?;
    let before = fingerprint(&f.path)?;
    let ids = f.all_ids(COUNTER, 500).await?;
    let body =
        json!({ "checkpoint": ids[0], "set": [{ "path": "/count", "value": "5" }] }).to_string();
    let (status, res) = f
        .send(
            Method::POST,
            &format!("/api/threads/{COUNTER}/fork"),
            Some(&body),
            true,
        )
        .await?;
    assert_eq!(status, StatusCode::FORBIDDEN, "{res}");
    assert_eq!(f.get("/api/info").await?["read_only"], true);
    assert_eq!(fingerprint(&f.path)?, before);
    Ok(())
}

#[tokio::test]
async fn a_thread_written_by_another_writer_shows_its_new_head() -> R {
    let f = fixture(true).await?;
    let head = f.get(&format!("/api/threads/{COUNTER}/head")).await?["head"].clone();
    // Another writer runs the thread again while the studio has the file open.
    run_counter(&f.path).await?;
    let now = f.get(&format!("/api/threads/{COUNTER}/head")).await?["head"].clone();
    assert_ne!(head, now);
    let page = f
        .get(&format!("/api/threads/{COUNTER}/history?limit=1"))
        .await?;
    assert_eq!(page["rows"][0]["id"], now);
    Ok(())
}

#[tokio::test]
async fn a_file_from_before_graph_shapes_opens_with_a_note_instead_of_a_graph() -> R {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("old.db");
    run_counter(&path).await?;
    rusqlite::Connection::open(&path)?
        .execute_batch("DROP TABLE sg_graphs; DROP TABLE sg_thread_graphs;")?;
    let studio = Studio::open(StudioOptions::new(&path).read_only(true))?;
    let f = Fixture {
        _dir: dir,
        path,
        studio,
    };
    let g = f.get(&format!("/api/threads/{COUNTER}/graph")).await?;
    assert!(g["svg"].is_null());
    assert!(g["note"]
        .as_str()
        .is_some_and(|n| n.contains("older build")));
    Ok(())
}

#[tokio::test]
async fn a_long_list_comes_cut_to_a_page_and_the_rest_page_by_page() -> R {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("long.db");
    run_long(&path).await?;
    let studio = Studio::open(StudioOptions::new(&path).read_only(true))?;
    let f = Fixture {
        _dir: dir,
        path,
        studio,
    };
    let head = f.get("/api/threads/long/head").await?["head"]
        .as_str()
        .ok_or("no head")?
        .to_owned();
    let cp = f
        .get(&format!("/api/threads/long/checkpoints/{head}"))
        .await?;
    assert_eq!(cp["state"]["log"].as_array().map(Vec::len), Some(100));
    assert_eq!(cp["cut_lists"], json!([{ "path": "/log", "len": 500 }]));
    let base = format!("/api/threads/long/checkpoints/{head}/list");
    let page = f
        .get(&format!("{base}?path=/log&offset=200&limit=100"))
        .await?;
    assert_eq!(page["len"], 500);
    assert_eq!(page["items"].as_array().map(Vec::len), Some(100));
    assert_eq!(page["items"][0], "item 200");
    for (uri, expected) in [
        (
            format!("{base}?path=/log&limit=100000"),
            StatusCode::BAD_REQUEST,
        ),
        (
            format!("{base}?path=/log&offset=-3"),
            StatusCode::BAD_REQUEST,
        ),
        (format!("{base}?path=/count"), StatusCode::NOT_FOUND),
        (format!("{base}?path=/nope"), StatusCode::NOT_FOUND),
        (base.clone(), StatusCode::BAD_REQUEST),
    ] {
        let (status, res) = f.send(Method::GET, &uri, None, true).await?;
        assert_eq!(status, expected, "{uri}: {res}");
    }
    // The step only appended: its diff against the parent (rebuilt, not loaded) is the
    // appended items.
    let d = f.get(&format!("/api/threads/long/diff?to={head}")).await?;
    assert_eq!(d["from"], json!({ "id": cp["checkpoint"]["parent"] }));
    let patch = d["patch"].to_string();
    assert!(
        patch.contains("item 499") && patch.contains("/log/-"),
        "{patch}"
    );
    assert!(!patch.contains("item 249"), "{patch}");
    Ok(())
}
