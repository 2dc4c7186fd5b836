//! The `sales_review` example on a temp dir: what the lead could see, run and deliver (and
//! why not), the receipt, the thread's checkpoints, and a report whose figures come from the
//! PDF and whose evidence comes from the corpus; a run that never presents its report; a
//! damaged upload.

#[path = "../sales_review.rs"]
mod example;

use example::{Script, UploadError, Workspace, PDF, THREAD};
use stategraph::checkpoints::RunStatus;
use stategraph_nodes::subagent::{Exclusion, SubagentStatus};
use stategraph_nodes::{Stage, TraceEntry, Verdict};

type Error = Box<dyn std::error::Error + Send + Sync>;

const REPORT: &str = "/mnt/user-data/outputs/sales-review.md";

fn outputs(dir: &std::path::Path) -> std::path::PathBuf {
    dir.join("sandboxes/threads/sales-review/user-data/outputs")
}

/// The lead's own entries for `tool` at `stage`.
fn at<'t>(trace: &'t [TraceEntry], tool: &str, stage: Stage) -> Vec<&'t TraceEntry> {
    trace
        .iter()
        .filter(|e| e.is_own() && e.tool == tool && e.stage == stage)
        .collect()
}

fn passed(trace: &[TraceEntry], tool: &str, stage: Stage) -> bool {
    at(trace, tool, stage).iter().any(|e| e.passed())
}

/// Who stopped `tool` at `stage` (the first entry that did not pass), and why.
fn stopped(trace: &[TraceEntry], tool: &str, stage: Stage) -> Option<(String, String)> {
    at(trace, tool, stage)
        .iter()
        .find_map(|e| match &e.verdict {
            Verdict::Removed { by, reason } | Verdict::Denied { by, reason } => {
                Some((by.clone(), reason.clone()))
            }
            _ => None,
        })
}

#[tokio::test]
async fn the_review_delivers_a_report_from_the_pdf_and_the_corpus() -> Result<(), Error> {
    let tmp = tempfile::tempdir()?;
    let (first, second) = example::sales_review(tmp.path()).await?;
    let t = &first.trace;

    // Executed and returned, never delivered: the tools the review used.
    for tool in [
        "ls",
        "read_file",
        "tool_search",
        "web_search",
        "task",
        "write_file",
    ] {
        assert!(passed(t, tool, Stage::Returned), "{tool} returned");
        assert!(
            !passed(t, tool, Stage::Delivered),
            "{tool} delivered nothing"
        );
    }
    // Deferred: web_search was hidden until tool_search promoted it.
    let (by, reason) = stopped(t, "web_search", Stage::Visible).ok_or("never hidden")?;
    assert_eq!(by, "deferred_tool_filter");
    assert!(reason.contains("not promoted"), "{reason}");
    // Narrowed by the slash-activated skill: never shown, never run.
    for tool in ["str_replace", "glob", "grep"] {
        assert!(passed(t, tool, Stage::Authorized));
        assert!(!passed(t, tool, Stage::Visible));
        let (by, _) = stopped(t, tool, Stage::Visible).ok_or("not narrowed")?;
        assert_eq!(by, "skill_tool_policy");
    }
    // Not authorized for the analyst role.
    assert!(!passed(t, "email_report", Stage::Authorized));
    let (by, reason) = stopped(t, "email_report", Stage::Authorized).ok_or("authorized")?;
    assert_eq!(
        (by.as_str(), reason.contains("analyst")),
        ("authorization", true)
    );
    // Visible, called, denied by the guardrail: its handler never ran.
    assert!(passed(t, "bash", Stage::Visible));
    assert!(!passed(t, "bash", Stage::Executed));
    let (by, reason) = stopped(t, "bash", Stage::Executed).ok_or("bash not denied")?;
    assert!(by.contains("no-deletes"), "{by}");
    assert!(reason.contains("may not delete files"), "{reason}");
    // Delivered: the one presented path, matched to the produced file.
    let delivered = at(t, "present_files", Stage::Delivered);
    assert_eq!(delivered.len(), 1);
    assert!(delivered[0].passed());
    assert_eq!(delivered[0].path.as_deref(), Some(REPORT));

    assert_eq!(first.status, RunStatus::Success);
    assert_eq!(first.artifacts, [REPORT]);
    assert_eq!(first.receipt["verdict"]["stage"], "presented");
    assert_eq!(first.receipt["verdict"]["satisfied"], true);
    assert_eq!(
        first.receipt["verdict"]["matched_paths"],
        serde_json::json!([REPORT])
    );
    assert_eq!(
        first.receipt["verdict"]["produced_paths"],
        serde_json::json!([REPORT])
    );

    // The delegation: an exploring analyst with read-only tools only.
    assert_eq!(first.delegations.len(), 1);
    let d = &first.delegations[0];
    assert_eq!(d.outcome.status, SubagentStatus::Completed);
    let pool = d.pool.as_ref().ok_or("no pool")?;
    assert_eq!(
        pool.names(),
        ["read_file", "ls", "glob", "grep", "web_search"]
    );
    for tool in ["write_file", "str_replace", "present_files"] {
        assert_eq!(pool.why_not(tool), Some(Exclusion::NotReadOnly), "{tool}");
    }

    // Checkpoints: the lead's thread only (the subagent wrote none), 19 after the review
    // (the input and 18 steps), 7 more after the follow-up.
    let ws = Workspace::open(tmp.path())?;
    let rows = ws.checkpoint_rows()?;
    assert_eq!(rows, [(THREAD.to_owned(), String::new(), 26)]);
    assert_eq!((first.history, second.history), (19, 26));

    // The follow-up found the review's report in the workspace.
    assert_eq!(second.status, RunStatus::Success);
    assert!(second.answer.contains("Grow Iberia"), "{}", second.answer);
    assert_eq!(second.receipt["presented"], 0);
    assert!(second.delegations.is_empty());
    report_carries_the_sources(tmp.path())
}

/// The report holds figures found only in the PDF and evidence found only in the corpus.
fn report_carries_the_sources(dir: &std::path::Path) -> Result<(), Error> {
    let report = std::fs::read_to_string(outputs(dir).join("sales-review.md"))?;
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut code = String::new();
    for file in [
        "sales_review.rs",
        "sales_review/script.rs",
        "sales_review/report.rs",
    ] {
        code.push_str(&std::fs::read_to_string(here.join(file))?);
    }
    let mut corpus = String::new();
    for entry in std::fs::read_dir(here.join("sales_review/corpus"))? {
        corpus.push_str(&std::fs::read_to_string(entry?.path())?);
    }
    let from_pdf = [
        "| Benelux | 746.3 | 781.9 | 702.4 | 688.1 | 2918.7 | -7.8% |",
        "| Iberia | 512.7 | 569.3 | 624.8 | 671.5 | 2378.3 | +31.0% |",
        "contract value 418,250 EUR",
        "| Lusitrans Rail | Iberia | qualified | 236,800 | 2027-Q3 |",
        "Open pipeline in all: 926,150 EUR.",
        "Grow Iberia: revenue rose +31.0% from Q1 to Q4 and 430,550 EUR",
    ];
    for figure in from_pdf {
        assert!(report.contains(figure), "report lacks {figure:?}");
    }
    for figure in ["746.3", "418,250", "236,800", "Lusitrans"] {
        assert!(
            !code.contains(figure) && !corpus.contains(figure),
            "{figure} is not PDF-only"
        );
    }
    let from_corpus = [
        "committed 290 M EUR through 2028",
        "source: Puerto Hoy, 2026-10-12, https://puertohoy.example/2026/10/automation-programme",
        "Benelux manufacturing output fell 3.1%",
        "- Iberia: ours +31.0%, market +11.2%",
        "- Benelux: ours -7.8%, market -2.4%",
    ];
    for evidence in from_corpus {
        assert!(report.contains(evidence), "report lacks {evidence:?}");
    }
    let pdf_text = example::upload_text(PDF)?;
    for evidence in ["290 M EUR", "puertohoy", "+11.2%", "3.1%"] {
        assert!(
            !code.contains(evidence) && !pdf_text.contains(evidence),
            "{evidence}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_report_never_presented_ends_the_run_in_error() -> Result<(), Error> {
    let tmp = tempfile::tempdir()?;
    let review = example::never_presented(tmp.path()).await?;
    assert_eq!(review.status, RunStatus::Error);
    let reason = review.reason.as_deref().unwrap_or_default();
    assert!(reason.contains("delivery incomplete"), "{reason}");
    assert_eq!(review.receipt["verdict"]["stage"], "not_started");
    assert_eq!(review.receipt["verdict"]["satisfied"], false);
    assert_eq!(
        review.receipt["verdict"]["produced_paths"],
        serde_json::json!([REPORT])
    );
    assert!(review.artifacts.is_empty());
    // The report was written, but no tool reached Delivered.
    assert!(outputs(tmp.path()).join("sales-review.md").is_file());
    assert!(review.trace.iter().all(|e| e.stage != Stage::Delivered));
    Ok(())
}

#[tokio::test]
async fn a_damaged_pdf_is_a_typed_error_not_an_empty_upload() -> Result<(), Error> {
    let tmp = tempfile::tempdir()?;
    let ws = Workspace::open(tmp.path())?;
    let truncated = &PDF[..PDF.len() / 2];
    for bytes in [truncated, b"%PDF-1.4 this is not a pdf".as_slice()] {
        match ws.upload("sales-notes.pdf", bytes).await {
            Err(UploadError::Unreadable { file, reason }) => {
                assert_eq!(file, "sales-notes.pdf");
                assert!(!reason.is_empty());
            }
            other => return Err(format!("expected Unreadable, got {other:?}").into()),
        }
    }
    // Damage anywhere: a conversion or a typed error, never a panic or an empty text.
    for at in (0..PDF.len()).step_by(97) {
        let mut damaged = PDF.to_vec();
        damaged[at] ^= 0x5a;
        match ws.upload("damaged.pdf", &damaged).await {
            Ok(path) => assert_eq!(path, "/mnt/user-data/uploads/damaged.md"),
            Err(UploadError::Unreadable { .. } | UploadError::NoText { .. }) => {}
            Err(other) => return Err(format!("byte {at}: {other}").into()),
        }
    }
    // A name that is a path is refused before anything is read.
    for name in ["../escape.pdf", "a/b.pdf", ".hidden.pdf"] {
        let result = ws.upload(name, PDF).await;
        assert!(
            matches!(result, Err(UploadError::BadName { .. })),
            "{name}: {result:?}"
        );
    }
    // Nothing was placed: no empty text for the agent to read.
    let uploads = tmp
        .path()
        .join("sandboxes/threads/sales-review/user-data/uploads");
    assert!(!uploads.join("sales-notes.md").exists());
    // The whole review stops at the upload with that error.
    let err = example::review(&ws, truncated, Script::Deliver)
        .await
        .err()
        .ok_or("a damaged upload was reviewed")?;
    assert!(err.downcast_ref::<UploadError>().is_some(), "{err}");
    Ok(())
}

#[tokio::test]
async fn running_the_example_again_continues_the_thread() -> Result<(), Error> {
    let tmp = tempfile::tempdir()?;
    let (_, first_follow_up) = example::sales_review(tmp.path()).await?;
    let (review, follow_up) = example::sales_review(tmp.path()).await?;
    // The same thread grows by the same steps; the rewritten report is a new output, so the
    // second review delivers it too.
    assert_eq!(first_follow_up.history, 26);
    assert_eq!((review.history, follow_up.history), (45, 52));
    assert_eq!(review.receipt["verdict"]["stage"], "presented");
    assert_eq!(follow_up.last_step, 2 * first_follow_up.last_step + 2);
    let report = std::fs::read_to_string(outputs(tmp.path()).join("sales-review.md"))?;
    assert!(report.contains("Review 2 of this thread"), "{report}");
    Ok(())
}
