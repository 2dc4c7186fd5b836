//! Every log event of the test process, as text (a minimal `tracing` subscriber installed
//! once), so a test can check that no secret reached a log line.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

#[derive(Clone, Default)]
struct Capture {
    text: Arc<Mutex<String>>,
    next_id: Arc<AtomicU64>,
}

struct Line<'a>(&'a mut String);

impl Visit for Line<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, "{}={:?} ", field.name(), value);
    }
}

impl Capture {
    fn push(&self, f: impl FnOnce(&mut String)) {
        if let Ok(mut text) = self.text.lock() {
            f(&mut text);
            text.push('\n');
        }
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        self.push(|t| span.record(&mut Line(t)));
        Id::from_u64(self.next_id.fetch_add(1, Ordering::Relaxed) + 1)
    }

    fn record(&self, _: &Id, values: &Record<'_>) {
        self.push(|t| values.record(&mut Line(t)));
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        self.push(|t| {
            let _ = write!(t, "{} ", event.metadata().level());
            event.record(&mut Line(t));
        });
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

static CAPTURE: OnceLock<Option<Capture>> = OnceLock::new();

/// Start capturing (idempotent); whether the capture is installed.
pub(crate) fn install() -> bool {
    CAPTURE
        .get_or_init(|| {
            let capture = Capture::default();
            tracing::subscriber::set_global_default(capture.clone())
                .ok()
                .map(|()| capture)
        })
        .is_some()
}

/// Everything logged so far.
pub(crate) fn text() -> String {
    CAPTURE
        .get()
        .and_then(Option::as_ref)
        .and_then(|c| c.text.lock().ok().map(|t| t.clone()))
        .unwrap_or_default()
}
