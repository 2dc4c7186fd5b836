//! What every inspector test shares: the graphs that write the checkpoint file, the fixture
//! file, running the binary, and reading rows straight from SQLite.

use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::sync::Arc;

use rusqlite::Connection;
use serde_json::Value;
use stategraph::checkpoints::{Saver, SqliteSaver};
use stategraph::prelude::*;

#[derive(State, Clone, Default, Debug, PartialEq)]
pub(crate) struct Doc {
    #[reduce(append)]
    pub(crate) log: Vec<String>,
    pub(crate) count: u64,
    pub(crate) topic: String,
    /// Long enough to be stored in `sg_blobs` (small values are kept in the records), so the
    /// fixture has value rows to damage.
    pub(crate) brief: String,
}

/// The `brief` of thread `main`.
pub(crate) const BRIEF: &str =
    "a brief of more than sixty-four bytes, so that it is stored as a value row of its own";

#[derive(State, Clone, Default, Debug, PartialEq)]
struct Review {
    #[reduce(append)]
    notes: Vec<String>,
    topic: String,
}

fn review_graph() -> CompiledGraph<Review> {
    StateGraph::<Review>::new()
        .add_node("prep", |s: Arc<Review>, _c: NodeContext| async move {
            Ok::<_, BoxError>(Review::update().notes(vec![format!("prep {}", s.topic)]))
        })
        .add_node("ask", |_s: Arc<Review>, c: NodeContext| async move {
            let answer: String = c.interrupt("approve?")?;
            Ok::<_, BoxError>(Review::update().notes(vec![answer]))
        })
        .add_edge(START, "prep")
        .add_edge("prep", "ask")
        .add_edge("ask", END)
        .compile()
        .expect("review graph compiles")
}

/// `write` three times (appending to `log`, counting in `count`), then the `review`
/// subgraph, which asks for approval.
pub(crate) fn doc_graph(db: &Path) -> CompiledGraph<Doc> {
    doc_graph_on(Arc::new(
        SqliteSaver::open(db).expect("open checkpoint file"),
    ))
}

/// [`doc_graph`] on any saver.
pub(crate) fn doc_graph_on(saver: Arc<dyn Saver>) -> CompiledGraph<Doc> {
    StateGraph::<Doc>::new()
        .add_node("write", |s: Arc<Doc>, _c: NodeContext| async move {
            Ok::<_, BoxError>(
                Doc::update()
                    .log(vec![format!("w{}", s.count)])
                    .count(s.count + 1),
            )
        })
        .add_subgraph(
            "review",
            review_graph(),
            Checkpointing::Inherit,
            |d: &Doc| Review::update().topic(d.topic.clone()),
            |r: &Review| Doc::update().log(r.notes.clone()),
        )
        .add_edge(START, "write")
        .add_conditional_edges(
            "write",
            |s: &Doc| if s.count < 3 { "write" } else { "review" },
            ["write", "review"],
        )
        .add_edge("review", END)
        .compile()
        .expect("doc graph compiles")
        .with_checkpointer(saver)
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// A checkpoint file with thread `main` (finished: interrupted in the subgraph, then resumed)
/// and thread `paused` (still waiting for approval).
pub(crate) fn fixture() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("threads.db");
    write_fixture(doc_graph(&db));
    (dir, db)
}

/// Run the fixture's threads `main` and `paused` on `g`.
pub(crate) fn write_fixture(g: CompiledGraph<Doc>) {
    runtime().block_on(async {
        let main = RunConfig::new().thread("main");
        let paused = g
            .invoke(
                Doc::update()
                    .topic("cats".to_owned())
                    .brief(BRIEF.to_owned()),
                &main,
            )
            .await
            .expect("first run");
        assert_eq!(paused.interrupts.len(), 1);
        let done = g
            .invoke(Command::resume(Resume::value("yes")), &main)
            .await
            .expect("resumed run");
        assert!(!done.is_interrupted());
        assert_eq!(done.state.log, ["w0", "w1", "w2", "prep cats", "yes"]);
        let other = RunConfig::new().thread("paused");
        let waiting = g
            .invoke(Doc::update().topic("dogs".to_owned()), &other)
            .await
            .expect("paused run");
        assert!(waiting.is_interrupted());
    });
}

/// The inspector binary cargo built for these tests.
fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_stategraph"))
}

/// What one run of the inspector did.
#[derive(Debug)]
pub(crate) struct Ran {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Ran {
    pub(crate) fn ok(self) -> Self {
        assert_eq!(self.code, 0, "expected success: {self:#?}");
        self
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.stdout))
    }

    /// A failure with `code` and a one-line message on stderr that starts `stategraph: `.
    pub(crate) fn fails(self, code: i32) -> Self {
        assert_eq!(self.code, code, "{self:#?}");
        assert!(
            self.stderr.starts_with("stategraph: ") || self.stderr.starts_with("error: "),
            "{self:#?}"
        );
        self
    }
}

pub(crate) fn sg(args: &[&str]) -> Ran {
    let out = Process::new(binary())
        .args(args)
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .output()
        .expect("run stategraph");
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub(crate) fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The thread's checkpoints as `history --json` lists them (newest first).
pub(crate) fn history(db: &Path, thread: &str) -> Vec<Value> {
    let ran = sg(&["history", p(db), "--thread", thread, "--json"]).ok();
    ran.json().as_array().cloned().expect("an array")
}

/// Every stored column of a thread's checkpoint rows and pending writes, in order.
pub(crate) fn rows_of(db: &Path, thread: &str) -> Vec<String> {
    let conn = Connection::open(db).expect("open");
    let mut out = Vec::new();
    for sql in [
        "SELECT * FROM sg_checkpoints WHERE thread = ?1 ORDER BY seq",
        "SELECT * FROM sg_writes WHERE thread = ?1 ORDER BY ns, checkpoint, ord, idx",
    ] {
        let mut stmt = conn.prepare(sql).expect("prepare");
        let n = stmt.column_count();
        let rows = stmt
            .query_map([thread], |r| {
                (0..n)
                    .map(|i| {
                        r.get::<_, rusqlite::types::Value>(i)
                            .map(|v| format!("{v:?}"))
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .expect("query");
        for row in rows {
            out.push(row.expect("row").join("|"));
        }
    }
    out
}

pub(crate) fn count_rows(db: &Path, table: &str) -> i64 {
    let conn = Connection::open(db).expect("open");
    conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .expect("count")
}

/// The fixture with runs stored against it: on thread `main`, `r-old` (success, with a
/// receipt) and `r-new` (error with a reason and a stop reason, no receipt); on `paused`,
/// `r-paused` (running).
pub(crate) fn fixture_with_runs() -> (tempfile::TempDir, PathBuf) {
    use stategraph::checkpoints::{DeliveryReceipt, RunId, RunRecord, RunStatus, Saver, ThreadId};
    let (dir, db) = fixture();
    runtime().block_on(async {
        let saver = SqliteSaver::open(&db).expect("open");
        let run = |id: &str, thread: &str, status, at| {
            RunRecord::new(
                RunId::new(id).expect("run id"),
                ThreadId::new(thread).expect("thread id"),
                status,
                at,
            )
        };
        let mut old = run("r-old", "main", RunStatus::Success, 1_000);
        old.usage = Some(stategraph::TokenUsage {
            input_tokens: 120,
            output_tokens: 30,
            total_tokens: 150,
            model_calls: 3,
        });
        saver.put_run(old).await.expect("put r-old");
        let mut failed = run("r-new", "main", RunStatus::Error, 2_000);
        failed.reason =
            Some("Artifact delivery incomplete: no produced output artifact was presented".into());
        failed.stop_reason = Some("loop_capped".into());
        saver.put_run(failed).await.expect("put r-new");
        saver
            .put_run(run("r-paused", "paused", RunStatus::Running, 3_000))
            .await
            .expect("put r-paused");
        let receipt = DeliveryReceipt::new(serde_json::json!({
            "presented": 1, "paths": ["/mnt/user-data/outputs/a.md"], "by_tool": {}
        }));
        let stored = saver
            .put_receipt_if_absent(&RunId::new("r-old").expect("run id"), receipt)
            .await
            .expect("put receipt");
        assert!(stored);
        saver.close().expect("close");
    });
    (dir, db)
}
