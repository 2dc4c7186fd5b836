//! A run's log as a server-sent event stream, framed as the SDKs parse it: `event:`, `data:`,
//! and `id:` when the run is resumable; a `: heartbeat` comment when nothing was sent for a
//! while; the stream closes when the run has ended.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::header::{CACHE_CONTROL, CONTENT_LOCATION, CONTENT_TYPE, LOCATION};
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use futures::stream;

use crate::runs::{Frame, Next, RunLog, StopAction};
use crate::Shared;

/// One frame as text.
fn encode(frame: &Frame, id: Option<&str>) -> String {
    let mut out = String::with_capacity(frame.data.len() + frame.event.len() + 32);
    out.push_str("event: ");
    out.push_str(&frame.event);
    out.push_str("\r\ndata: ");
    out.push_str(&frame.data);
    out.push_str("\r\n");
    if let Some(id) = id {
        out.push_str("id: ");
        out.push_str(id);
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    out
}

/// Cancels the run if the client goes away before it ends (`on_disconnect: cancel`).
struct Watch {
    shared: Arc<Shared>,
    run: String,
    log: Arc<RunLog>,
    cancel_on_drop: bool,
}

impl Drop for Watch {
    fn drop(&mut self) {
        if self.cancel_on_drop && !self.log.is_done() {
            self.shared.stop_soon(&self.run, StopAction::Interrupt);
        }
    }
}

struct Reader {
    watch: Watch,
    next: u64,
}

/// The response streaming `run`'s log from frame `from` on.
pub(crate) fn stream_response(
    shared: Arc<Shared>,
    thread: &str,
    run: &str,
    log: Arc<RunLog>,
    from: u64,
    cancel_on_disconnect: bool,
) -> Response {
    let with_id = log.resumable;
    let heartbeat = shared.options.heartbeat;
    let reader = Reader {
        watch: Watch {
            shared,
            run: run.to_owned(),
            log,
            cancel_on_drop: cancel_on_disconnect,
        },
        next: from,
    };
    let body = stream::unfold(reader, move |mut r| async move {
        let log = r.watch.log.clone();
        match tokio::time::timeout(heartbeat, log.read_from(r.next)).await {
            Err(_) => Some((
                Ok::<_, std::convert::Infallible>(Bytes::from_static(b": heartbeat\r\n\r\n")),
                r,
            )),
            Ok(Next::End) => None,
            Ok(Next::Frames(frames)) => {
                let mut text = String::new();
                for f in &frames {
                    let id = with_id.then(|| r.watch.log.id_of(f));
                    text.push_str(&encode(f, id.as_deref()));
                }
                r.next = frames.last().map_or(r.next, |f| f.seq + 1);
                Some((Ok(Bytes::from(text)), r))
            }
        }
    });
    let mut resp = Response::new(Body::from_stream(body));
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // No proxy in front may buffer the stream.
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    let location = format!("/threads/{thread}/runs/{run}");
    if let Ok(v) = HeaderValue::from_str(&location) {
        h.insert(CONTENT_LOCATION, v);
    }
    if let Ok(v) = HeaderValue::from_str(&format!("{location}/stream")) {
        h.insert(LOCATION, v);
    }
    resp
}
