//! `stategraph accept-loss FILE`: go on from what a file that lost committed checkpoints
//! still holds (decision 0043): its high-water record is set to the file's newest row, so
//! the program and every command open it again. A file that lost nothing is left as it is.

use std::path::Path;

use serde_json::json;
use stategraph_checkpoints::{CheckpointError, SqliteOptions, SqliteSaver};

use crate::failure::Outcome;
use crate::file::{exists, file_error};
use crate::output::{emit, json_text, Output};

/// Accept the loss of `file`'s missing commits, if it has one.
pub(super) async fn run(out: Output, file: &Path) -> Outcome {
    exists(file)?;
    let lost = match SqliteSaver::open(file) {
        Ok(saver) => {
            saver.close().map_err(|e| file_error(file, e))?;
            None
        }
        Err(CheckpointError::LostCommits {
            thread,
            checkpoint,
            recorded,
            found,
            ..
        }) => Some((thread, checkpoint, recorded, found)),
        Err(e) => return Err(file_error(file, e)),
    };
    if lost.is_some() {
        let options = SqliteOptions {
            accept_lost_commits: true,
            ..SqliteOptions::default()
        };
        let saver = SqliteSaver::open_with(file, options).map_err(|e| file_error(file, e))?;
        saver.close().map_err(|e| file_error(file, e))?;
    }
    if out.json {
        let doc = match &lost {
            None => json!({ "file": file.display().to_string(), "lost": false }),
            Some((thread, checkpoint, recorded, found)) => json!({
                "file": file.display().to_string(),
                "lost": true,
                "thread": thread,
                "checkpoint": checkpoint,
                "recorded_row": recorded,
                "file_row": found,
            }),
        };
        return Ok(emit(&json_text(&doc))?);
    }
    Ok(emit(&match lost {
        None => format!(
            "{}: no committed checkpoint is missing; nothing to accept\n",
            file.display()
        ),
        Some((thread, checkpoint, recorded, found)) => format!(
            "{}: accepted the loss of rows {}..={recorded} (newest was checkpoint {checkpoint} \
             of thread {}); the file goes on from row {found}\n",
            file.display(),
            found + 1,
            thread.escape_debug()
        ),
    })?)
}
