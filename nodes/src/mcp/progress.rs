//! Progress of long calls: each call carries a progress token of its own
//! (`_meta.progressToken`, set by the SDK); each notification the server sends under it
//! restarts the call timeout, up to the call's overall limit
//! ([`McpServerConfig::max_call_time`](super::McpServerConfig::max_call_time)) — the SDK's
//! request options do that — and is shown as a custom stream event of the call's task, routed
//! here from the session's notification handler.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{NumberOrString, ProgressNotificationParam, ProgressToken};
use tokio::sync::mpsc;

/// Where each open call's progress notifications go, by token.
#[derive(Default)]
pub(super) struct ProgressRoutes {
    routes: Mutex<HashMap<String, mpsc::UnboundedSender<ProgressNotificationParam>>>,
}

/// One call's route: the notifications sent under its token. Dropping it closes the route.
pub(super) struct Route {
    routes: Arc<ProgressRoutes>,
    key: String,
    updates: mpsc::UnboundedReceiver<ProgressNotificationParam>,
}

impl Drop for Route {
    fn drop(&mut self) {
        self.routes
            .routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.key);
    }
}

/// The key of a token (a server may echo a string token as is, or a number).
fn key(token: &ProgressToken) -> String {
    match &token.0 {
        NumberOrString::Number(n) => format!("n:{n}"),
        NumberOrString::String(s) => format!("s:{s}"),
    }
}

impl ProgressRoutes {
    /// A route for the call sent under `token`.
    pub(super) fn open(self: &Arc<Self>, token: &ProgressToken) -> Route {
        let (sender, updates) = mpsc::unbounded_channel();
        let key = key(token);
        self.routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.clone(), sender);
        Route {
            routes: Arc::clone(self),
            key,
            updates,
        }
    }

    /// Pass a notification to the call it belongs to (one for no open call is dropped).
    pub(super) fn deliver(&self, progress: ProgressNotificationParam) {
        let routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(sender) = routes.get(&key(&progress.progress_token)) {
            let _ = sender.send(progress);
        }
    }
}

/// Wait for `answer`, passing each progress update of `route` to `on_progress` meanwhile.
pub(super) async fn forward<T, P>(
    answer: impl Future<Output = T>,
    mut route: Route,
    mut on_progress: impl FnMut(ProgressNotificationParam) -> P,
) -> T
where
    P: Future<Output = ()>,
{
    tokio::pin!(answer);
    loop {
        tokio::select! {
            biased;
            out = &mut answer => return out,
            Some(update) = route.updates.recv() => on_progress(update).await,
        }
    }
}
