//! `stategraph prune FILE -t THREAD --keep N`: delete a thread's older checkpoints, keeping
//! the newest N of each namespace.

use std::path::Path;

use serde_json::json;
use stategraph_checkpoints::{ListOptions, Namespace, Retention};

use crate::failure::Outcome;
use crate::file::{headers, open, thread_id};
use crate::output::{emit, json_text, Output};

/// Prune `thread` to its newest `keep` checkpoints.
pub(super) async fn run(out: Output, file: &Path, thread: &str, keep: u64) -> Outcome {
    let saver = open(file).await?;
    let thread = thread_id(thread)?;
    let root = Namespace::root();
    let before = headers(&*saver, file, &thread, &root).await?.len();
    let keep = usize::try_from(keep).unwrap_or(usize::MAX);
    let deleted = saver.prune(&thread, Retention::KeepLast(keep)).await?;
    let left = saver
        .list(&thread, &root, ListOptions::default())
        .await?
        .len();
    saver.close()?;
    if out.json {
        let doc = json!({
            "thread": thread.as_str(),
            "deleted": deleted,
            "before": before,
            "kept": left,
        });
        return Ok(emit(&json_text(&doc))?);
    }
    Ok(emit(&format!(
        "pruned thread {thread}: deleted {deleted} checkpoint(s) (all namespaces); {left} of {before} left in its root namespace\n"
    ))?)
}
