//! Node timeouts: the run limit, the idle limit and what resets it (heartbeats, custom events,
//! message chunks), retries of a timed-out attempt, and graph-wide defaults. Compared with
//! `fixtures/langgraph/timeout_policy.json`. Every test runs on tokio's paused clock: the
//! times asserted are the clock's, exact, never wall-clock measurements.

use std::sync::Arc;
use std::time::Duration;

use stategraph::prelude::*;
use stategraph::timeout::NodeTimeout;
use stategraph::{MessagePart, RetryPolicy, RunError, Shared, TimeoutLimit, TimeoutPolicy};
use stategraph_tests::langgraph::recorded;

use crate::superstep_semantics::{Log, LogUpdate};
use crate::{Counter, TestResult};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// What a fixture case recorded: the limit that fired (`None`: the node finished) and the
/// attempts made.
fn case(name: &str) -> Result<(Option<TimeoutLimit>, u64), String> {
    let lg = recorded("timeout_policy")?;
    let c = lg
        .pointer(&format!("/cases/{name}"))
        .ok_or_else(|| format!("no case {name}"))?;
    let limit = match c.get("kind").and_then(|k| k.as_str()) {
        Some("run") => Some(TimeoutLimit::Run),
        Some("idle") => Some(TimeoutLimit::Idle),
        Some(other) => return Err(format!("unknown kind {other}")),
        None => None,
    };
    let attempts = c
        .get("attempts")
        .and_then(|a| a.as_u64())
        .ok_or("no attempts")?;
    Ok((limit, attempts))
}

/// How the probe's node spends its time: 500 ms asleep, or ten 50 ms naps each followed by
/// a sign of progress.
#[derive(Clone, Copy)]
enum Work {
    Sleeps,
    Heartbeats,
    CustomEvents,
    MessageChunks,
}

async fn work(how: Work, c: &NodeContext) {
    if let Work::Sleeps = how {
        tokio::time::sleep(ms(500)).await;
        return;
    }
    for i in 0..10 {
        tokio::time::sleep(ms(50)).await;
        match how {
            Work::Heartbeats => c.heartbeat(),
            Work::CustomEvents => c.emit(serde_json::json!({ "chunk": i })).await,
            Work::MessageChunks => {
                c.emit_message(MessagePart::Chunk, Shared::new(format!("{i}")))
                    .await;
            }
            Work::Sleeps => {}
        }
    }
}

/// Run the probe's one-node graph; the limit that fired (with the error) and the attempts.
async fn run(
    how: Work,
    options: NodeOptions,
) -> Result<(Option<RunError>, usize), Box<dyn std::error::Error + Send + Sync>> {
    let attempts = Counter::default();
    let count = attempts.clone();
    let g = StateGraph::<Log>::new()
        .add_node_with(
            "slow",
            move |_s: Arc<Log>, c: NodeContext| {
                count.hit();
                async move {
                    work(how, &c).await;
                    Ok::<LogUpdate, BoxError>(Log::update().log(vec!["done".to_owned()]))
                }
            },
            options,
        )
        .add_edge(START, "slow")
        .add_edge("slow", END)
        .compile()?;
    let err = g.invoke(Log::update(), &RunConfig::new()).await.err();
    Ok((err, attempts.get()))
}

fn limit_of(err: &Option<RunError>) -> Option<TimeoutLimit> {
    match err {
        Some(RunError::Timeout { limit, .. }) => Some(*limit),
        _ => None,
    }
}

#[tokio::test(start_paused = true)]
async fn a_run_timeout_fails_the_attempt_naming_the_limit_and_the_time_elapsed() -> TestResult {
    let policy = TimeoutPolicy::run(ms(100));
    let (err, attempts) = run(Work::Sleeps, NodeOptions::new().timeout_policy(policy)).await?;
    assert_eq!(
        (limit_of(&err), attempts as u64),
        case("run_timeout_fires")?
    );
    let err = err.ok_or("no error")?;
    assert!(
        matches!(&err, RunError::Timeout { node, after, elapsed, .. }
            if node == "slow" && *after == ms(100) && *elapsed == ms(100)),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "node \"slow\" exceeded its run timeout of 100ms at step 1 (elapsed: 100ms)"
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn an_idle_timeout_fires_when_the_node_shows_no_progress() -> TestResult {
    let policy = TimeoutPolicy::idle_only(ms(100));
    let (err, attempts) = run(Work::Sleeps, NodeOptions::new().timeout_policy(policy)).await?;
    assert_eq!(
        (limit_of(&err), attempts as u64),
        case("idle_timeout_fires")?
    );
    assert!(
        matches!(&err, Some(RunError::Timeout { after, elapsed, .. }) if *after == ms(100) && *elapsed == ms(100)),
        "{err:?}"
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn heartbeats_reset_the_idle_clock() -> TestResult {
    let policy = TimeoutPolicy::idle_only(ms(200));
    let (err, attempts) = run(Work::Heartbeats, NodeOptions::new().timeout_policy(policy)).await?;
    assert_eq!(
        (limit_of(&err), attempts as u64),
        case("heartbeat_refreshes_idle")?
    );
    assert!(err.is_none(), "{err:?}");
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn custom_events_reset_the_idle_clock_even_when_nobody_streams() -> TestResult {
    let policy = TimeoutPolicy::idle_only(ms(200));
    let (err, attempts) = run(
        Work::CustomEvents,
        NodeOptions::new().timeout_policy(policy),
    )
    .await?;
    assert_eq!(
        (limit_of(&err), attempts as u64),
        case("custom_events_refresh_idle")?
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn message_chunks_reset_the_idle_clock() -> TestResult {
    let policy = TimeoutPolicy::idle_only(ms(200));
    let (err, _) = run(
        Work::MessageChunks,
        NodeOptions::new().timeout_policy(policy),
    )
    .await?;
    assert!(err.is_none(), "{err:?}");
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn heartbeats_never_extend_the_run_timeout() -> TestResult {
    let policy = TimeoutPolicy::run(ms(200)).idle(ms(200));
    let (err, attempts) = run(Work::Heartbeats, NodeOptions::new().timeout_policy(policy)).await?;
    assert_eq!(
        (limit_of(&err), attempts as u64),
        case("heartbeat_does_not_refresh_run")?
    );
    assert!(
        matches!(&err, Some(RunError::Timeout { elapsed, .. }) if *elapsed == ms(200)),
        "{err:?}"
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn node_options_timeout_is_the_run_limit() -> TestResult {
    let (err, attempts) = run(Work::Sleeps, NodeOptions::new().timeout(ms(100))).await?;
    assert_eq!(
        (limit_of(&err), attempts as u64),
        case("float_is_run_timeout")?
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_timed_out_attempt_is_retried_like_any_failure() -> TestResult {
    let retry = RetryPolicy::attempts(2)
        .initial_interval(Duration::ZERO)
        .jitter(false);
    let options = NodeOptions::new().timeout(ms(100)).retry(retry);
    let (err, attempts) = run(Work::Sleeps, options).await?;
    assert_eq!(
        (limit_of(&err), attempts as u64),
        case("timed_out_attempt_is_retried")?
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_retry_predicate_can_tell_a_timeout_from_other_failures() -> TestResult {
    let only_timeouts = RetryPolicy::attempts(3)
        .initial_interval(Duration::ZERO)
        .jitter(false)
        .retry_on(|e: &BoxError| e.is::<NodeTimeout>());
    let options = NodeOptions::new().timeout(ms(100)).retry(only_timeouts);
    let (_, attempts) = run(Work::Sleeps, options).await?;
    assert_eq!(attempts, 3, "timeouts are retried");
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_default_timeout_applies_where_a_node_sets_none_and_its_own_wins() -> TestResult {
    let attempts = Counter::default();
    let count = attempts.clone();
    let sleeper = move |_s: Arc<Log>, _c: NodeContext| {
        count.hit();
        async {
            tokio::time::sleep(ms(500)).await;
            Ok::<LogUpdate, BoxError>(Log::update().log(vec!["done".to_owned()]))
        }
    };
    let g = StateGraph::<Log>::new()
        .set_node_defaults(NodeOptions::new().timeout(ms(100)))
        .add_node("defaulted", sleeper.clone())
        .add_node_with("own", sleeper, NodeOptions::new().timeout(ms(1000)))
        .add_edge(START, "defaulted")
        .add_edge(START, "own")
        .add_edge("defaulted", END)
        .add_edge("own", END)
        .compile()?;
    let err = g.invoke(Log::update(), &RunConfig::new()).await.err();
    assert!(
        matches!(&err, Some(RunError::Timeout { node, after, .. }) if node == "defaulted" && *after == ms(100)),
        "{err:?}"
    );
    let g = StateGraph::<Log>::new()
        .set_node_defaults(NodeOptions::new().timeout(ms(100)))
        .add_node_with(
            "own",
            |_s: Arc<Log>, _c: NodeContext| async {
                tokio::time::sleep(ms(500)).await;
                Ok::<LogUpdate, BoxError>(Log::update().log(vec!["done".to_owned()]))
            },
            NodeOptions::new().timeout(ms(1000)),
        )
        .add_edge(START, "own")
        .add_edge("own", END)
        .compile()?;
    let out = g.invoke(Log::update(), &RunConfig::new()).await?;
    assert_eq!(
        out.state.log,
        ["done"],
        "its own 1 s limit, not the default's"
    );
    assert_eq!(attempts.get(), 2);
    Ok(())
}
