//! What the SDK's tool model drops: the server's stdout is read through [`Sniffer`], which
//! notes the tools a `tools/list` answer marks `execution.taskSupport: "required"` before the
//! SDK parses the answer (and loses that field).
//!
//! Such a tool can only be called as a task (task augmentation), which this client does not
//! do: every plain call of it fails, so the provider leaves it out of its list.

use std::collections::HashSet;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// The longest line looked at (a longer one is passed through unread).
const MAX_LINE: usize = 16 << 20;

/// The names of the tools a server said require task augmentation.
#[derive(Clone, Default)]
pub(super) struct TaskOnly(Arc<Mutex<HashSet<String>>>);

impl TaskOnly {
    /// Whether the server's tool `name` requires task augmentation.
    pub(super) fn contains(&self, name: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(name)
    }

    /// Forget every name (before listing anew: the new answer decides).
    pub(super) fn clear(&self) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// The names, sorted.
    pub(super) fn names(&self) -> Vec<String> {
        let names = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut names: Vec<String> = names.iter().cloned().collect();
        names.sort();
        names
    }

    /// Note the task-only tools of one JSON-RPC message (a line of the server's stdout).
    fn note(&self, line: &[u8]) {
        // Only a line that names the field is parsed.
        if !line.windows(11).any(|w| w == b"taskSupport") {
            return;
        }
        let Ok(message) = serde_json::from_slice::<serde_json::Value>(line) else {
            return;
        };
        let Some(tools) = message
            .get("result")
            .and_then(|r| r.get("tools"))
            .and_then(serde_json::Value::as_array)
        else {
            return;
        };
        let mut names = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        for tool in tools {
            let support = tool
                .get("execution")
                .and_then(|e| e.get("taskSupport"))
                .and_then(serde_json::Value::as_str);
            if let (Some("required"), Some(name)) = (
                support,
                tool.get("name").and_then(serde_json::Value::as_str),
            ) {
                names.insert(name.to_owned());
            }
        }
    }
}

/// A reader passing a server's stdout through unchanged while noting task-only tools.
pub(super) struct Sniffer<R> {
    inner: R,
    line: Vec<u8>,
    /// The current line outgrew [`MAX_LINE`]: skip to its end.
    skipping: bool,
    found: TaskOnly,
}

impl<R> Sniffer<R> {
    pub(super) fn new(inner: R, found: TaskOnly) -> Self {
        Sniffer {
            inner,
            line: Vec::new(),
            skipping: false,
            found,
        }
    }

    /// Look at bytes just read.
    fn scan(&mut self, mut bytes: &[u8]) {
        while let Some(end) = bytes.iter().position(|&b| b == b'\n') {
            if !self.skipping {
                self.line.extend_from_slice(&bytes[..end]);
                self.found.note(&self.line);
            }
            self.line.clear();
            self.skipping = false;
            bytes = &bytes[end + 1..];
        }
        if !self.skipping {
            if self.line.len() + bytes.len() > MAX_LINE {
                self.line.clear();
                self.skipping = true;
            } else {
                self.line.extend_from_slice(bytes);
            }
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Sniffer<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let filled = buf.filled();
            let fresh = filled.get(before..).unwrap_or_default().to_vec();
            this.scan(&fresh);
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;
    use tokio::io::AsyncReadExt;

    /// A reader yielding its chunks one per read, as a pipe may.
    struct Chunks(VecDeque<Vec<u8>>);

    impl AsyncRead for Chunks {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            if let Some(chunk) = self.0.pop_front() {
                buf.put_slice(&chunk);
            }
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn notes_task_only_tools_across_split_reads_and_passes_bytes_through() {
        let mut stream = br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"plain","inputSchema":{}},{"name":"research","execution":{"taskSupport":"required"},"inputSchema":{}},{"name":"maybe","execution":{"taskSupport":"optional"},"inputSchema":{}}]}}"#.to_vec();
        stream.push(b'\n');
        let found = TaskOnly::default();
        let chunks = Chunks(stream.chunks(7).map(<[u8]>::to_vec).collect());
        let mut sniffer = Sniffer::new(chunks, found.clone());
        let mut out = Vec::new();
        sniffer.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, stream);
        assert!(found.contains("research"));
        assert!(!found.contains("plain"));
        assert!(!found.contains("maybe"));
    }
}
