//! The studio in a real headless Chromium, driven over WebDriver (chromedriver) from Rust:
//! the threads, a thread's graph and branch tree, a checkpoint's state and diff, a fork with
//! an edited value appearing as a new branch, an agent thread's conversation and capability
//! trace, the long-term store's namespaces, search and items, and a page opened without the
//! token refused. Each test saves a screenshot under
//! `target/studio-screenshots/` when it fails. With `STATEGRAPH_UPDATE_GOLDEN=1` the main
//! views are saved into `docs/images/` (the guide's screenshots).
//!
//! Needs Debian's `chromium` and `chromium-driver` (`.ci/browser.sh` installs them). Without
//! them the tests say how to install them and pass; under `CI=true` they fail.
#![allow(
    missing_docs,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used
)]

#[path = "support/browser.rs"]
mod harness;
mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use fantoccini::Locator;
use harness::{doc_shot, program, text_of, wait_for, PATIENCE};
use stategraph_studio::{Studio, StudioOptions};
use support::*;

/// A file with both threads, a studio serving it (forks allowed), and the tokened URL.
async fn serve(dir: &Path) -> Result<(PathBuf, String, tokio::task::JoinHandle<()>), E> {
    let path = dir.join("threads.db");
    write_file(&path).await?;
    let bound = Studio::open(StudioOptions::new(&path))?.bind().await?;
    let url = bound.url().to_owned();
    let server = tokio::spawn(async move {
        let _ = bound.serve().await;
    });
    Ok((path, url, server))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_threads_graph_state_and_diff_and_forks_a_new_branch() -> R {
    let dir = tempfile::tempdir()?;
    let (path, url, server) = serve(dir.path()).await?;
    let result = harness::in_browser(
        "studio-screenshots",
        "threads_graph_state_diff_fork",
        |c| async move {
            c.goto(&url).await?;
            text_of(&c, "#threads", COUNTER).await?;
            text_of(&c, "#threads", AGENT).await?;
            let counter = wait_for(&c, "li.thread[data-thread='counter']").await?;
            assert!(counter.text().await?.contains("done"));
            counter.click().await?;
            for node in ["plan", "act", "__start__", "__end__"] {
                wait_for(&c, &format!("#graph svg g[data-node='{node}']")).await?;
            }
            wait_for(&c, "#history .cp.on").await?;
            let rows = c.find_all(Locator::Css("#history .cp[data-id]")).await?;
            assert!(rows.len() >= 7, "{} rows", rows.len());
            // Pick a checkpoint in the middle of the run.
            let pick = &rows[4];
            let id = pick.attr("data-id").await?.ok_or("a row without an id")?;
            pick.click().await?;
            text_of(&c, "#cp-title", &id[id.len() - 8..]).await?;
            text_of(&c, "#state", "count").await?;
            wait_for(&c, "#graph svg g.ran").await?;
            wait_for(&c, "#graph svg g.on-path").await?;
            doc_shot(&c, "studio-thread").await?;
            c.find(Locator::Css("#tabs button[data-tab='diff']"))
                .await?
                .click()
                .await?;
            text_of(&c, "#diff", &format!("+++ {id}")).await?;
            text_of(&c, "#diff", "log").await?;
            doc_shot(&c, "studio-diff").await?;
            // Fork from here with an edited value.
            c.find(Locator::Css("#tabs button[data-tab='fork']"))
                .await?
                .click()
                .await?;
            c.find(Locator::Css("#fork-path"))
                .await?
                .send_keys("/count")
                .await?;
            c.find(Locator::Css("#fork-value"))
                .await?
                .send_keys("42")
                .await?;
            c.find(Locator::Css("#fork-go")).await?.click().await?;
            let said = text_of(&c, "#fork-result", "new branch").await?;
            let new = said
                .split_whitespace()
                .find(|w| w.len() == 32)
                .ok_or("no new checkpoint id in the result")?
                .to_owned();
            let row = wait_for(&c, &format!("#history .cp[data-id='{new}']")).await?;
            assert!(row.text().await?.contains("fork"));
            c.find(Locator::Css("#tabs button[data-tab='state']"))
                .await?
                .click()
                .await?;
            text_of(&c, "#state", "42").await?;
            Ok(())
        },
    )
    .await;
    server.abort();
    result?;
    // The fork is in the file.
    if program("STATEGRAPH_CHROMEDRIVER", "chromedriver").is_some() {
        let conn = rusqlite::Connection::open(&path)?;
        let forks: i64 = conn.query_row(
            "SELECT COUNT(*) FROM sg_checkpoints WHERE thread = 'counter' AND source = 'fork'",
            [],
            |r| r.get(0),
        )?;
        assert_eq!(forks, 1);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_thread_shows_its_conversation_tool_calls_and_capability_trace() -> R {
    let dir = tempfile::tempdir()?;
    let (_path, url, server) = serve(dir.path()).await?;
    let result = harness::in_browser(
        "studio-screenshots",
        "agent_conversation_trace",
        |c| async move {
            c.goto(&url).await?;
            wait_for(&c, "li.thread[data-thread='agent-1']")
                .await?
                .click()
                .await?;
            wait_for(&c, "#graph svg g.role-model[data-node='model']").await?;
            wait_for(&c, "#graph svg g.role-tools[data-node='tools']").await?;
            wait_for(&c, "#history .cp.on").await?;
            text_of(&c, "#runs", "success").await?;
            c.find(Locator::Css("#tabs button[data-tab='agent']"))
                .await?
                .click()
                .await?;
            text_of(&c, "#conversation", "What is the weather?").await?;
            text_of(&c, "#conversation", "lookup").await?;
            text_of(&c, "#conversation", "sunny, 21 C").await?;
            text_of(&c, "#conversation", "It is sunny.").await?;
            let trace = text_of(&c, "#trace", "executed").await?;
            assert!(
                trace.contains("lookup") && trace.contains("available"),
                "{trace}"
            );
            doc_shot(&c, "studio-agent").await?;
            Ok(())
        },
    )
    .await;
    server.abort();
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_list_shows_its_first_page_and_fetches_more_on_demand() -> R {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("long.db");
    run_long(&path).await?;
    let bound = Studio::open(StudioOptions::new(&path).read_only(true))?
        .bind()
        .await?;
    let url = bound.url().to_owned();
    let server = tokio::spawn(async move {
        let _ = bound.serve().await;
    });
    let result = harness::in_browser("studio-screenshots", "long_list", |c| async move {
        c.goto(&url).await?;
        text_of(&c, "#mode", "read-only").await?;
        wait_for(&c, "li.thread[data-thread='long']")
            .await?
            .click()
            .await?;
        wait_for(&c, "#history .cp.on").await?;
        text_of(&c, "#state", "[500 items]").await?;
        // A long list starts folded; unfold it.
        wait_for(&c, "#state > details > details > summary")
            .await?
            .click()
            .await?;
        let first = text_of(&c, "#state", "item 99").await?;
        assert!(!first.contains("item 100"), "more than a page was shown");
        let more = wait_for(&c, "#state button.more").await?;
        let label = more.text().await?;
        assert!(label.contains("400"), "{label}");
        more.click().await?;
        text_of(&c, "#state", "item 199").await?;
        // Forking is off in a read-only studio.
        c.find(Locator::Css("#tabs button[data-tab='fork']"))
            .await?
            .click()
            .await?;
        text_of(&c, "#fork-result", "read-only").await?;
        let go = c.find(Locator::Css("#fork-go")).await?;
        assert!(!go.is_enabled().await?);
        Ok(())
    })
    .await;
    server.abort();
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_opened_without_the_token_is_refused() -> R {
    let dir = tempfile::tempdir()?;
    let (_path, url, server) = serve(dir.path()).await?;
    let bare = url.split('?').next().unwrap_or_default().to_owned();
    let result = harness::in_browser("studio-screenshots", "no_token", |c| async move {
        c.goto(&bare).await?;
        text_of(&c, "body", "missing or wrong token").await?;
        c.goto(&format!("{bare}api/threads")).await?;
        text_of(&c, "body", "missing or wrong token").await?;
        assert!(c.find(Locator::Css("#threads")).await.is_err());
        Ok(())
    })
    .await;
    server.abort();
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subgraph_opens_from_the_step_that_ran_it_with_its_own_graph_and_steps() -> R {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("threads.db");
    run_nested(&path).await?;
    let bound = Studio::open(StudioOptions::new(&path))?.bind().await?;
    let url = bound.url().to_owned();
    let server = tokio::spawn(async move {
        let _ = bound.serve().await;
    });
    let result = harness::in_browser("studio-screenshots", "subgraph_steps", |c| async move {
        c.goto(&url).await?;
        wait_for(&c, &format!("li.thread[data-thread='{NESTED}']"))
            .await?
            .click()
            .await?;
        wait_for(&c, "#graph svg g[data-node='inner']").await?;
        let options = c.find_all(Locator::Css("#ns option")).await?;
        assert_eq!(
            options.len(),
            4,
            "the root graph and three subgraph histories"
        );
        // The step that ran `inner` links to its history.
        let link = wait_for(&c, "#history .cp button.sub[data-ns^='inner:']").await?;
        let ns = link
            .attr("data-ns")
            .await?
            .ok_or("a link without a namespace")?;
        let step_row = c
            .find(Locator::XPath(&format!(
                "//div[@data-id][button[@data-ns='{ns}']]"
            )))
            .await?;
        let step_id = step_row
            .attr("data-id")
            .await?
            .ok_or("a row without an id")?;
        link.click().await?;
        text_of(&c, "#thread-title", "› inner").await?;
        for node in ["double", "note"] {
            wait_for(&c, &format!("#graph svg g[data-node='{node}']")).await?;
        }
        text_of(&c, "#state", "doubled to 2").await?;
        let inner_rows = c
            .find_all(Locator::Css("#history .cp[data-id]"))
            .await?
            .len();
        assert!(
            inner_rows >= 3,
            "the subgraph's input, double and note: {inner_rows}"
        );
        text_of(&c, "#ns-path", "ran in step").await?;
        doc_shot(&c, "studio-subgraph").await?;
        // Back to the parent's step that ran it.
        c.find(Locator::Css("#ns-path button.up"))
            .await?
            .click()
            .await?;
        wait_for(&c, "#graph svg g[data-node='prep']").await?;
        wait_for(&c, &format!("#history .cp.on[data-id='{step_id}']")).await?;
        // The selector opens the subgraph that keeps one history across the steps.
        c.find(Locator::Css("#ns"))
            .await?
            .select_by_value("tally")
            .await?;
        text_of(&c, "#thread-title", "› tally").await?;
        wait_for(&c, "#graph svg g[data-node='double']").await?;
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let rows = c
                .find_all(Locator::Css("#history .cp[data-id]"))
                .await?
                .len();
            if rows == 2 * inner_rows {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(
                    format!("tally shows {rows} rows, not two runs' {}", 2 * inner_rows).into(),
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    })
    .await;
    server.abort();
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_page_lists_namespaces_searches_and_shows_an_items_json() -> R {
    let dir = tempfile::tempdir()?;
    let (path, url, server) = serve(dir.path()).await?;
    write_store(&path).await?;
    let result = harness::in_browser("studio-screenshots", "store", |c| async move {
        c.goto(&url).await?;
        text_of(&c, "#store-ns", "users.alice.notes").await?;
        // A namespace lists the items under it.
        wait_for(&c, "#store-ns li[data-ns='users.alice']")
            .await?
            .click()
            .await?;
        text_of(&c, "#store-items", "users.alice.notes / coffee").await?;
        text_of(&c, "#store-items", "users.alice / tea").await?;
        // A search by text, then by a filter.
        c.find(Locator::Css("#store-prefix")).await?.clear().await?;
        c.find(Locator::Css("#store-query"))
            .await?
            .send_keys("coffee")
            .await?;
        c.find(Locator::Css("#store-go")).await?.click().await?;
        text_of(&c, "#store-items", "score").await?;
        let items = c
            .find_all(Locator::Css("#store-items li.store-item"))
            .await?;
        assert_eq!(items.len(), 1);
        c.find(Locator::Css("#store-query")).await?.clear().await?;
        c.find(Locator::Css("#store-filter"))
            .await?
            .send_keys(r#"{"kind": "fact"}"#)
            .await?;
        c.find(Locator::Css("#store-go")).await?.click().await?;
        text_of(&c, "#store-items", "users.bob / plan").await?;
        // An item's JSON.
        wait_for(&c, "#store-items li[data-key='plan']")
            .await?
            .click()
            .await?;
        text_of(&c, "#store-title", "users.bob / plan").await?;
        text_of(&c, "#store-value", "pro plan").await?;
        text_of(&c, "#store-meta", "created ").await?;
        // A bad filter is shown, not thrown away.
        c.find(Locator::Css("#store-filter")).await?.clear().await?;
        c.find(Locator::Css("#store-filter"))
            .await?
            .send_keys(r#"{"n": {"$in": 1}}"#)
            .await?;
        c.find(Locator::Css("#store-go")).await?.click().await?;
        text_of(&c, "#error", "$in").await?;
        Ok(())
    })
    .await;
    server.abort();
    result
}
