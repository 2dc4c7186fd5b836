//! Waiting on a queue's notifications, however they arrive (in the process, or relayed from
//! PostgreSQL's `LISTEN`): the one loop both kinds of wake-ups share.

use std::sync::Arc;

use tokio::sync::broadcast;
use tokio::time::Instant;

/// Wait on `seen` until a payload `wanted` accepts arrives, or so many came that some were
/// dropped (either: `true`), or `deadline` passes (`false`). A closed channel brings no more
/// notifications: the wait then sleeps to `deadline` and answers `false`.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use stategraph_checkpoints::queue::wait_for_notice;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let (tx, mut seen) = tokio::sync::broadcast::channel::<Arc<str>>(8);
/// tx.send(Arc::from("other")).unwrap();
/// tx.send(Arc::from("r1")).unwrap();
/// let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
/// assert!(wait_for_notice(&mut seen, deadline, |run| run == "r1").await);
/// let soon = tokio::time::Instant::now() + Duration::from_millis(10);
/// assert!(!wait_for_notice(&mut seen, soon, |run| run == "r1").await);
/// # });
/// ```
pub async fn wait_for_notice(
    seen: &mut broadcast::Receiver<Arc<str>>,
    deadline: Instant,
    wanted: impl Fn(&str) -> bool,
) -> bool {
    loop {
        match tokio::time::timeout_at(deadline, seen.recv()).await {
            Ok(Ok(named)) if wanted(&named) => return true,
            Ok(Ok(_)) => {}
            Ok(Err(broadcast::error::RecvError::Lagged(_))) => return true,
            Ok(Err(broadcast::error::RecvError::Closed)) => {
                tokio::time::sleep_until(deadline).await;
                return false;
            }
            Err(_) => return false,
        }
    }
}
