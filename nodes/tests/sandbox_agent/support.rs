//! Shared helpers: a provider that counts acquisitions and releases, scripted calls.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::Value;
use stategraph_nodes::prelude::*;
use stategraph_nodes::sandbox::{
    LocalSandboxProvider, Sandbox, SandboxError, SandboxId, SandboxProvider,
};

pub(crate) type R = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// A local provider that counts its calls; with `distinct_ids`, every acquisition hands out a
/// new id (a provider bug the reducer must catch).
#[derive(Clone, Debug)]
pub(crate) struct Counting {
    pub(crate) inner: LocalSandboxProvider,
    pub(crate) acquired: Arc<AtomicUsize>,
    pub(crate) released: Arc<AtomicUsize>,
    pub(crate) distinct_ids: bool,
}

impl Counting {
    pub(crate) fn new(root: &std::path::Path) -> Self {
        Counting {
            inner: LocalSandboxProvider::new(root),
            acquired: Arc::new(AtomicUsize::new(0)),
            released: Arc::new(AtomicUsize::new(0)),
            distinct_ids: false,
        }
    }

    pub(crate) fn acquired(&self) -> usize {
        self.acquired.load(Ordering::SeqCst)
    }

    pub(crate) fn released(&self) -> usize {
        self.released.load(Ordering::SeqCst)
    }
}

impl SandboxProvider for Counting {
    fn acquire(
        &self,
        user: &str,
        thread: &str,
    ) -> BoxFuture<'static, Result<SandboxId, SandboxError>> {
        let n = self.acquired.fetch_add(1, Ordering::SeqCst);
        let inner = self.inner.acquire(user, thread);
        let distinct = self.distinct_ids;
        async move {
            let id = inner.await?;
            Ok(if distinct {
                SandboxId::new(format!("{id}#{n}"))
            } else {
                id
            })
        }
        .boxed()
    }

    fn get(&self, id: &SandboxId) -> BoxFuture<'static, Result<Option<Sandbox>, SandboxError>> {
        let plain = SandboxId::new(id.as_str().split('#').next().unwrap_or_default());
        self.inner.get(&plain)
    }

    fn locate(
        &self,
        user: &str,
        thread: &str,
    ) -> BoxFuture<'static, Result<Option<Sandbox>, SandboxError>> {
        self.inner.locate(user, thread)
    }

    fn release(&self, _id: &SandboxId) -> BoxFuture<'static, Result<(), SandboxError>> {
        self.released.fetch_add(1, Ordering::SeqCst);
        async { Ok(()) }.boxed()
    }

    fn destroy(&self, id: &SandboxId) -> BoxFuture<'static, Result<(), SandboxError>> {
        self.inner.destroy(id)
    }
}

pub(crate) fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall::new(id, name, args)
}

pub(crate) fn tool_messages(state: &ThreadState) -> Vec<&ToolMessage> {
    state.messages.iter().filter_map(Message::as_tool).collect()
}

/// The content of the tool message answering call `id`.
pub(crate) fn answer<'s>(state: &'s ThreadState, id: &str) -> Option<&'s ToolMessage> {
    tool_messages(state)
        .into_iter()
        .find(|m| m.tool_call_id == id)
}

pub(crate) fn sandbox_id(state: &ThreadState) -> Option<&str> {
    state.sandbox.as_ref().and_then(|s| s.sandbox_id.as_deref())
}
