//! Operating servers: the whole process group stops with the server, a failed server is
//! backed off and shown in the trace, a changed tool list is listed again.

use std::time::{Duration, Instant};

use serde_json::json;
use stategraph_nodes::mcp::{McpError, McpServer, McpServerConfig};
use stategraph_nodes::prelude::*;
use stategraph_nodes::{BoxError, Verdict};

use super::{call, find, fixture, FIXTURE};

/// Whether `pid` is a live (not zombie) process.
#[cfg(target_os = "linux")]
pub(crate) fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Wait up to ten seconds for `pid` to end.
#[cfg(target_os = "linux")]
pub(crate) async fn gone(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    !alive(pid)
}

/// The fixture behind `sh -c` (not exec'd: the shell waits for it), staying alive after its
/// input closes; its own pid, from its `pid` tool.
#[cfg(target_os = "linux")]
async fn behind_a_shell(name: &str) -> Result<(McpServer, u32, u32), BoxError> {
    let script = format!("'{FIXTURE}' --linger; true");
    let server = McpServer::new(
        McpServerConfig::new(name, "sh")
            .args(["-c", &script])
            .startup_timeout(Duration::from_secs(20)),
    );
    let tools = server.tools().await?;
    let shell = server.process_id().ok_or("not running")?;
    let pid = call(&find(&tools, "pid").ok_or("no pid tool")?, json!({}))
        .await?
        .content
        .parse()?;
    Ok((server, shell, pid))
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_server_behind_sh_c_is_gone_after_shutdown_and_after_drop() {
    let (server, shell, pid) = behind_a_shell("wrapped").await.expect("started");
    assert_ne!(pid, shell, "the server is the shell's child");
    server.shutdown().await;
    assert!(gone(shell).await, "the shell {shell} still runs");
    assert!(gone(pid).await, "the server {pid} outlived its wrapper");

    let (server, shell, pid) = behind_a_shell("dropped").await.expect("started");
    drop(server);
    assert!(gone(shell).await, "the shell {shell} still runs");
    assert!(gone(pid).await, "the server {pid} outlived its wrapper");
}

#[tokio::test]
async fn a_server_that_failed_to_start_is_backed_off_and_reports_why() {
    let server = McpServer::new(
        fixture("stalls")
            .arg("--stall-at-start")
            .startup_timeout(Duration::from_millis(300))
            .restart_backoff(Duration::from_secs(60)),
    );
    let Err(first) = server.tools().await else {
        panic!("a stalled server cannot list");
    };
    assert!(matches!(first, McpError::StartupTimeout { .. }), "{first}");

    // The next assembly does not wait the startup timeout again.
    let started = Instant::now();
    let Err(second) = server.tools().await else {
        panic!("still backing off");
    };
    assert!(
        started.elapsed() < Duration::from_millis(250),
        "{:?}",
        started.elapsed()
    );
    match &second {
        McpError::BackingOff {
            server,
            failures,
            last_error,
            retry_in,
        } => {
            assert_eq!(server, "stalls");
            assert_eq!(*failures, 1);
            assert!(last_error.contains("startup timeout"), "{last_error}");
            assert!(*retry_in <= Duration::from_secs(60));
        }
        other => panic!("expected a back-off, got {other}"),
    }
}

#[tokio::test]
async fn a_restart_is_tried_again_once_the_back_off_ends() {
    let server = McpServer::new(
        McpServerConfig::new("missing", "/nonexistent/stategraph-no-such-mcp-server")
            .restart_backoff(Duration::from_millis(100)),
    );
    assert!(matches!(server.tools().await, Err(McpError::Spawn { .. })));
    assert!(matches!(
        server.tools().await,
        Err(McpError::BackingOff { .. })
    ));
    tokio::time::sleep(Duration::from_millis(150)).await;
    // Tried again (and failed again), and the next back-off is longer.
    assert!(matches!(server.tools().await, Err(McpError::Spawn { .. })));
    match server.tools().await {
        Err(McpError::BackingOff {
            failures, retry_in, ..
        }) => {
            assert_eq!(failures, 2);
            assert!(retry_in > Duration::from_millis(100), "{retry_in:?}");
        }
        Err(other) => panic!("expected a back-off, got {other}"),
        Ok(_) => panic!("a missing server cannot list"),
    }
}

#[tokio::test]
async fn a_failed_server_is_an_available_stage_failure_in_the_capability_trace() {
    let model = ScriptedModel::new("demo", [AiMessage::text("no tools needed")]);
    let agent = AgentBuilder::new(model)
        .provider(McpServer::new(McpServerConfig::new(
            "gone",
            "/nonexistent/stategraph-no-such-mcp-server",
        )))
        .assemble(RunContext::new("t1", "ana"))
        .await
        .expect("a failed source is not fatal");
    let entry = agent
        .trace()
        .why_not("gone/*", Stage::Available)
        .expect("the failed server is in the trace");
    match &entry.verdict {
        Verdict::Removed { by, reason } => {
            assert_eq!(by, "tool_source");
            assert!(
                reason.contains("\"gone\"") && reason.contains("cannot start"),
                "{reason}"
            );
        }
        other => panic!("expected a removal, got {other:?}"),
    }
    assert!(agent.trace().render().contains("gone/*"));
}

#[tokio::test]
async fn a_list_changed_notification_makes_the_next_list_fetch_the_new_tools() {
    let server = McpServer::new(fixture("growing"));
    let before = server.tools().await.expect("list");
    assert!(find(&before, "grown").is_none());
    let pid = server.process_id();
    let grow = find(&before, "grow").expect("grow");
    assert_eq!(call(&grow, json!({})).await.expect("grow").content, "grown");

    // The notification arrives on its own; the next list sees the new tool.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let tools = server.tools().await.expect("list");
        if find(&tools, "grown").is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "the list never changed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(server.process_id(), pid, "listed again on the same server");
    // Without a further change the cache is used again.
    let a = server.tools().await.expect("list");
    let b = server.tools().await.expect("list");
    assert!(std::sync::Arc::ptr_eq(&a[0], &b[0]));
}

#[tokio::test]
async fn progress_notifications_extend_the_call_timeout_up_to_the_overall_limit() {
    let server = McpServer::new(
        fixture("progress")
            .call_timeout(Duration::from_millis(400))
            .max_call_time(Duration::from_secs(20)),
    );
    let tools = server.tools().await.expect("list");
    let slow = find(&tools, "slow").expect("slow");

    // Three times the call timeout, with progress every 100 ms: the call goes through.
    let message = call(&slow, json!({"ms": 1200, "progress_ms": 100}))
        .await
        .expect("progress kept the call alive");
    assert_eq!(message.content, "slept 1200 ms");

    // The same wait without progress times out.
    let error = call(&slow, json!({"ms": 1200}))
        .await
        .expect_err("no progress, no extension");
    assert!(error.to_string().contains("call timeout"), "{error}");

    // Progress never extends a call past the overall limit.
    let capped = McpServer::new(
        fixture("capped")
            .call_timeout(Duration::from_millis(400))
            .max_call_time(Duration::from_millis(800)),
    );
    let tools = capped.tools().await.expect("list");
    let slow = find(&tools, "slow").expect("slow");
    let started = Instant::now();
    let error = call(&slow, json!({"ms": 5000, "progress_ms": 100}))
        .await
        .expect_err("past the overall limit");
    assert!(error.to_string().contains("call timeout"), "{error}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn progress_updates_are_streamed_as_custom_events_of_the_call() {
    use futures::StreamExt;
    use stategraph_nodes::stategraph::{EventKind, StreamMode};

    let model = ScriptedModel::new(
        "demo",
        [
            AiMessage::calls([ToolCall::new(
                "c1",
                "slow",
                json!({"ms": 300, "progress_ms": 100}),
            )]),
            AiMessage::text("done"),
        ],
    );
    let agent = AgentBuilder::new(model)
        .provider(McpServer::new(fixture("progress")))
        .defer_tools(false)
        .assemble(RunContext::new("t1", "ana"))
        .await
        .expect("assemble");
    let mut stream = agent.graph().stream(
        ThreadState::human_input("wait"),
        &agent.run_config(),
        StreamMode::default(),
    );
    let mut progress = Vec::new();
    while let Some(event) = stream.next().await {
        if let EventKind::Custom { payload, .. } = event.kind {
            if let Some(update) = payload.get("mcp_progress") {
                progress.push(update.clone());
            }
        }
    }
    // Three were sent; the last may cross the answer on the way.
    assert!((2..=3).contains(&progress.len()), "{progress:?}");
    assert_eq!(progress[0]["tool"], json!("slow"));
    assert_eq!(progress[0]["server"], json!("progress"));
    assert_eq!(progress[0]["progress"], json!(100.0));
    assert_eq!(progress[1]["progress"], json!(200.0));
}
