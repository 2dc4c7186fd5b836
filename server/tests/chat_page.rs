//! The chat page (`stategraph serve --ui`: LangGraph's `useStream` hook on React, bundled by
//! `.ci/chat-page.sh`) in a real headless Chromium, against a server on a fresh file: an
//! answer shows as it is written, an interrupt is approved with a button, a run is stopped, an
//! earlier message is edited and the answer regenerated from the checkpoint before it, and the
//! thread list opens a thread. Each test saves a screenshot under `target/chat-page-screenshots/`
//! when it fails; with `STATEGRAPH_UPDATE_GOLDEN=1` the guide's screenshots are saved into
//! `docs/images/`.
//!
//! Needs the built page (`.ci/chat-page.sh`, which needs npm) and Debian's chromium and
//! chromium-driver (`.ci/browser.sh`). Without them the tests say so and pass; under
//! `CI=true` they fail.
#![allow(
    missing_docs,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used
)]

mod common;
#[path = "../../studio/tests/support/browser.rs"]
mod harness;

use std::path::PathBuf;
use std::time::Duration;

use common::Served;
use fantoccini::{Client, Locator};
use harness::{doc_shot, in_browser, text_of, wait_for, E, PATIENCE, R};
use serde_json::Value;

const SHOTS: &str = "chat-page-screenshots";

/// The built page, or `None` (after saying how to build it) when there is none outside CI.
fn page_dir() -> Result<Option<PathBuf>, E> {
    let dir = std::env::var_os("STATEGRAPH_CHAT_PAGE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/chat-page/dist")
        });
    if dir.join("chat.js").is_file() {
        return Ok(Some(dir));
    }
    let how = format!(
        "the chat page tests need the page built into {}: run .ci/chat-page.sh",
        dir.display()
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        return Err(how.into());
    }
    eprintln!("skipped: {how}");
    Ok(None)
}

/// A server with the page, and the page's URL.
async fn serve() -> Result<Option<(Served, String)>, E> {
    let Some(dir) = page_dir()? else {
        return Ok(None);
    };
    let served = Served::start_with(|b| b.ui(dir))
        .await
        .map_err(|e| e.to_string())?;
    let url = format!("{}/ui/", served.server.url());
    Ok(Some((served, url)))
}

/// What the page shows now: whether a run streams, the thread, and each message's kind and
/// text, read in one round trip.
async fn snapshot(c: &Client) -> Result<(bool, String, Vec<(String, String)>), E> {
    let v = c
        .execute(
            r##"const s = document.getElementById("status");
               return {
                 loading: s ? s.dataset.loading === "true" : false,
                 thread: s ? s.dataset.thread : "",
                 messages: [...document.querySelectorAll("#messages .message")].map(m => [
                   m.classList.contains("human") ? "human" : m.classList.contains("ai") ? "ai" : "other",
                   (m.querySelector(".text") || m).textContent,
                 ]),
               };"##,
            vec![],
        )
        .await?;
    let messages = v["messages"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|m| {
                    (
                        m[0].as_str().unwrap_or_default().to_owned(),
                        m[1].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    Ok((
        v["loading"].as_bool().unwrap_or(false),
        v["thread"].as_str().unwrap_or_default().to_owned(),
        messages,
    ))
}

/// Wait until the page shows exactly `want` (kind, text) and no run streams.
async fn shows(c: &Client, want: &[(&str, &str)]) -> Result<String, E> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let mut last = Vec::new();
    while tokio::time::Instant::now() < deadline {
        let (loading, thread, messages) = snapshot(c).await?;
        let same = messages.len() == want.len()
            && messages
                .iter()
                .zip(want)
                .all(|(m, w)| m.0 == w.0 && m.1 == w.1);
        if same && !loading {
            return Ok(thread);
        }
        last = messages;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!("the page never showed {want:?}; it showed {last:?}").into())
}

/// Type `text` into the message box and send it.
async fn send(c: &Client, text: &str) -> R {
    let input = wait_for(c, "#input").await?;
    input.send_keys(text).await?;
    wait_for(c, "#send").await?.click().await?;
    Ok(())
}

/// The thread's state as the server has it.
async fn values(served: &Served, thread: &str) -> Value {
    served
        .api()
        .get(&format!("/threads/{thread}/state"))
        .await
        .json()["values"]
        .clone()
}

fn texts(values: &Value) -> Vec<(String, String)> {
    values["messages"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|m| {
                    (
                        m["type"].as_str().unwrap_or_default().to_owned(),
                        m["content"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_needs_no_key_but_its_calls_do_and_only_its_files_are_served() -> R {
    let Some(dir) = page_dir()? else {
        return Ok(());
    };
    let served = Served::start_with(|b| b.ui(dir).api_key("k3y"))
        .await
        .map_err(|e| e.to_string())?;
    let api = served.api();
    let page = api.get("/ui/").await;
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(page.body.contains("chat.js"));
    let script = api.get("/ui/chat.js").await;
    assert_eq!(
        script.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    let bare = api.get("/ui?assistant=chat").await;
    assert_eq!(bare.status, 308);
    assert_eq!(bare.header("location"), Some("/ui/?assistant=chat"));
    for other in ["/ui/package.json", "/ui/..%2Fserver.db", "/ui/chat.jsx"] {
        assert_eq!(api.get(other).await.status, 404, "{other}");
    }
    assert_eq!(
        api.get("/threads/search").await.status,
        401,
        "the API still needs the key"
    );
    let missing = stategraph_server::Server::builder()
        .ui(served.dir.path())
        .file(served.dir.path().join("other.db"))
        .addr("127.0.0.1:0".parse()?)
        .start()
        .await;
    let err = missing.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        err.contains("index.html") && err.contains(".ci/chat-page.sh"),
        "{err}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_given_the_key_in_its_fragment_talks_to_a_server_that_needs_one() -> R {
    let Some(dir) = page_dir()? else {
        return Ok(());
    };
    let served = Served::start_with(|b| b.ui(dir).api_key("k3y"))
        .await
        .map_err(|e| e.to_string())?;
    let url = format!("{}/ui/?assistant=chat#key=k3y", served.server.url());
    in_browser(SHOTS, "keyed", |c| async move {
        c.goto(&url).await?;
        send(&c, "with a key").await?;
        shows(
            &c,
            &[("human", "with a key"), ("ai", "You said: with a key")],
        )
        .await?;
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_message_is_answered_in_several_increments_before_the_run_ends() -> R {
    let Some((served, url)) = serve().await? else {
        return Ok(());
    };
    in_browser(SHOTS, "answer_streams", |c| async move {
        c.goto(&url).await?;
        send(&c, "tell me how the tokens arrive one at a time").await?;
        let answer = "You said: tell me how the tokens arrive one at a time";
        // Every text the answer showed while its run still streamed.
        let mut partials: Vec<String> = Vec::new();
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let mut started = false;
        loop {
            let (loading, _, messages) = snapshot(&c).await?;
            started |= loading;
            let ai = messages
                .iter()
                .rev()
                .find(|m| m.0 == "ai")
                .map(|m| m.1.clone());
            if let (true, Some(text)) = (loading, &ai) {
                if !text.is_empty() && partials.last() != Some(text) {
                    partials.push(text.clone());
                }
            }
            if started && !loading && ai.as_deref() == Some(answer) {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!("no whole answer; saw {partials:?} then {messages:?}").into());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            partials.len() >= 3,
            "the answer grew in at least three steps while streaming: {partials:?}"
        );
        for p in &partials {
            assert!(
                answer.starts_with(p.as_str()),
                "{p:?} is a beginning of the answer"
            );
        }
        assert!(
            partials[0].len() < answer.len(),
            "it began before it was whole"
        );
        let thread = shows(
            &c,
            &[
                ("human", "tell me how the tokens arrive one at a time"),
                ("ai", answer),
            ],
        )
        .await?;
        assert_eq!(
            texts(&values(&served, &thread).await),
            [
                (
                    "human".to_owned(),
                    "tell me how the tokens arrive one at a time".to_owned()
                ),
                ("ai".to_owned(), answer.to_owned())
            ],
            "the thread keeps what the page shows"
        );
        doc_shot(&c, "chat-page").await?;
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approving_an_interrupt_with_its_button_resumes_the_run() -> R {
    let Some((served, url)) = serve().await? else {
        return Ok(());
    };
    in_browser(SHOTS, "approve", |c| async move {
        c.goto(&url).await?;
        send(&c, "please approve the refund").await?;
        text_of(&c, "#interrupt .question", "Approve this request?").await?;
        doc_shot(&c, "chat-page-interrupt").await?;
        let (_, thread, _) = snapshot(&c).await?;
        let status = served.api().get(&format!("/threads/{thread}")).await.json();
        assert_eq!(status["status"], "interrupted");
        wait_for(&c, "#approve").await?.click().await?;
        shows(
            &c,
            &[
                ("human", "please approve the refund"),
                ("ai", "You said: please approve the refund"),
            ],
        )
        .await?;
        assert!(
            c.find(Locator::Css("#interrupt")).await.is_err(),
            "the question is gone"
        );
        let status = served.api().get(&format!("/threads/{thread}")).await.json();
        assert_eq!(status["status"], "idle");
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_cancels_the_streaming_run_and_the_answer_stops_growing() -> R {
    let Some((served, url)) = serve().await? else {
        return Ok(());
    };
    in_browser(SHOTS, "stop", |c| async move {
        c.goto(&url).await?;
        let long = "word ".repeat(60);
        send(&c, long.trim()).await?;
        // Stop once the answer has begun.
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let (loading, _, messages) = snapshot(&c).await?;
            let begun = messages
                .iter()
                .any(|m| m.0 == "ai" && m.1.len() > "You said: ".len());
            if loading && begun {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!("the answer never began: {messages:?}").into());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        wait_for(&c, "#stop").await?.click().await?;
        let (_, thread, _) = snapshot(&c).await?;
        // The run ends as stopped, not as a success.
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let run = loop {
            let runs = served
                .api()
                .get(&format!("/threads/{thread}/runs"))
                .await
                .json();
            let run = runs[0].clone();
            if run["status"] != "pending" && run["status"] != "running" {
                break run;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!("the run never stopped: {runs}").into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(run["status"], "interrupted", "{run}");
        let (loading, _, before) = snapshot(&c).await?;
        assert!(!loading);
        tokio::time::sleep(Duration::from_millis(600)).await;
        let (_, _, after) = snapshot(&c).await?;
        assert_eq!(before, after, "nothing more arrives");
        let ai = after
            .iter()
            .find(|m| m.0 == "ai")
            .map(|m| m.1.clone())
            .unwrap_or_default();
        assert!(
            ai.len() < format!("You said: {}", long.trim()).len(),
            "the answer stayed partial: {ai:?}"
        );
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editing_an_earlier_message_regenerates_from_the_checkpoint_before_it() -> R {
    let Some((served, url)) = serve().await? else {
        return Ok(());
    };
    in_browser(SHOTS, "edit", |c| async move {
        c.goto(&url).await?;
        send(&c, "first question").await?;
        shows(
            &c,
            &[
                ("human", "first question"),
                ("ai", "You said: first question"),
            ],
        )
        .await?;
        send(&c, "second question").await?;
        let thread = shows(
            &c,
            &[
                ("human", "first question"),
                ("ai", "You said: first question"),
                ("human", "second question"),
                ("ai", "You said: second question"),
            ],
        )
        .await?;
        let first_edit = c.find_all(Locator::Css(".message.human .edit")).await?;
        first_edit[0].click().await?;
        let input = wait_for(&c, ".edit-input").await?;
        input.clear().await?;
        input.send_keys("edited question").await?;
        wait_for(&c, ".edit-send").await?.click().await?;
        shows(
            &c,
            &[
                ("human", "edited question"),
                ("ai", "You said: edited question"),
            ],
        )
        .await?;
        assert_eq!(
            texts(&values(&served, &thread).await),
            [
                ("human".to_owned(), "edited question".to_owned()),
                ("ai".to_owned(), "You said: edited question".to_owned())
            ],
            "the thread's head is the regenerated branch"
        );
        let history = served
            .api()
            .post(
                &format!("/threads/{thread}/history"),
                serde_json::json!({"limit": 50}),
            )
            .await
            .json();
        let kept_old = history.as_array().is_some_and(|h| {
            h.iter().any(|s| {
                texts(&s["values"])
                    .iter()
                    .any(|m| m.1 == "You said: second question")
            })
        });
        assert!(kept_old, "the first branch stays in the history");
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_thread_list_shows_the_threads_and_opens_one() -> R {
    let Some((_served, url)) = serve().await? else {
        return Ok(());
    };
    in_browser(SHOTS, "threads", |c| async move {
        c.goto(&url).await?;
        send(&c, "thread one").await?;
        let one = shows(
            &c,
            &[("human", "thread one"), ("ai", "You said: thread one")],
        )
        .await?;
        wait_for(&c, "#new-thread").await?.click().await?;
        shows(&c, &[]).await?;
        send(&c, "thread two").await?;
        let two = shows(
            &c,
            &[("human", "thread two"), ("ai", "You said: thread two")],
        )
        .await?;
        assert_ne!(one, two);
        let css = format!(".thread[data-thread=\"{one}\"]");
        text_of(&c, &css, &one[..8]).await?;
        text_of(&c, &format!(".thread[data-thread=\"{two}\"]"), &two[..8]).await?;
        c.find(Locator::Css(&css)).await?.click().await?;
        let opened = shows(
            &c,
            &[("human", "thread one"), ("ai", "You said: thread one")],
        )
        .await?;
        assert_eq!(opened, one);
        Ok(())
    })
    .await
}
