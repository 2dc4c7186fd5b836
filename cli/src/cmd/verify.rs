//! `stategraph verify FILE`: every blob's hash, every parent link, SQLite's integrity check,
//! and that every checkpoint loads. For a PostgreSQL URL: every value's hash, every parent
//! link, and that every checkpoint loads.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::json;
use stategraph_checkpoints::inspect::{self, VerifyReport};

use crate::failure::{Failure, Outcome};
use crate::file::{exists, file_error, is_url, open_database};
use crate::output::{emit, json_text, Output, Style};

/// Check `file`; any problem found is a run-time failure (exit code 1) after the report.
pub(super) async fn run(out: Output, file: &Path) -> Outcome {
    let database = is_url(file);
    let report = if database {
        let saver = open_database(file).await?;
        saver.verify().await.map_err(|e| file_error(file, e))?
    } else {
        exists(file)?;
        inspect::verify(file)
            .await
            .map_err(|e| file_error(file, e))?
    };
    if out.json {
        let doc = json!({
            "file": file.display().to_string(),
            "ok": report.is_ok(),
            "counts": report.counts,
            "problems": report.problems,
        });
        emit(&json_text(&doc))?;
    } else {
        emit(&report_text(file, &report, out.style, database))?;
    }
    match report.problems.first() {
        None => Ok(()),
        Some(first) => Err(Failure::runtime(format!(
            "{}: {} problem(s) found; first: {} {}: {}",
            file.display(),
            report.problems.len(),
            first.table,
            first.key,
            first.detail
        ))),
    }
}

fn report_text(file: &Path, report: &VerifyReport, s: Style, database: bool) -> String {
    let c = &report.counts;
    let mut text = String::new();
    let _ = writeln!(text, "{}", s.bold(&format!("verified {}", file.display())));
    if database {
        let _ = writeln!(text, "  values                  {}", c.blobs);
    } else {
        let _ = writeln!(
            text,
            "  sqlite integrity_check  {}",
            if c.sqlite_ok {
                s.green("ok")
            } else {
                s.red("FAILED")
            }
        );
        let _ = writeln!(text, "  blobs                   {}", c.blobs);
        let _ = writeln!(
            text,
            "  logs                    {} ({} parts)",
            c.logs, c.log_parts
        );
    }
    let _ = writeln!(
        text,
        "  checkpoints             {} in {} thread/namespace pair(s), {} loaded whole",
        c.checkpoints, c.namespaces, c.loaded
    );
    let _ = writeln!(text, "  pending writes          {}", c.writes);
    let _ = writeln!(
        text,
        "  runs                    {} ({} delivery receipts)",
        c.runs, c.receipts
    );
    if report.is_ok() {
        let _ = writeln!(text, "{}", s.green("ok: no problems found"));
    } else {
        let n = report.problems.len();
        let _ = writeln!(text, "{}", s.red(&format!("{n} problem(s):")));
        for p in &report.problems {
            let _ = writeln!(text, "  {}  {}: {}", s.red(&p.table), p.key, p.detail);
        }
    }
    text
}
