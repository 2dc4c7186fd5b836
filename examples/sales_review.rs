//! The job stategraph exists for: a sales-review agent. The user uploads `sales-notes.pdf` (a
//! real PDF, converted to text into the thread's uploads); the lead agent reads it, finds the
//! deferred `web_search` through `tool_search`, searches external evidence, is denied a
//! destructive `bash` call by a guardrail, delegates an industry-benchmark investigation to an
//! exploring subagent with `task`, writes `sales-review.md` into its outputs, presents it, and
//! the run is settled with a delivery receipt. A second run on the same thread asks a
//! follow-up question and finds the first run's report in the workspace.
//!
//! Every step of the thread is checkpointed in `sales-review-data/threads.db` (the sandbox
//! lives beside it); at the end the example prints the capability trace, the artifact, the
//! receipt, the thread's step count and the `stategraph` commands to inspect the file.
//!
//! Run with `cargo run --release --example sales_review [FOLDER]` (no network, no API key:
//! the model plays a script that reads its tool results, and `web_search` searches a local
//! corpus of industry news shipped in `sales_review/corpus/`). `-- --never-present FOLDER`
//! plays a model that writes the report and never presents it: the run ends in `error` and
//! its receipt says why. With the `live` feature and `OPENAI_MODEL` set, a real model plays
//! (see `sales_review/live.rs`).

#[cfg(feature = "live")]
#[path = "sales_review/http_search.rs"]
mod http_search;
#[cfg(feature = "live")]
#[path = "sales_review/live.rs"]
mod live;
#[path = "sales_review/playbook.rs"]
mod playbook;
#[path = "sales_review/progress.rs"]
mod progress;
#[path = "sales_review/report.rs"]
mod report;
#[path = "sales_review/script.rs"]
mod script;
#[path = "sales_review/search.rs"]
mod search;
#[path = "sales_review/summary.rs"]
mod summary;
#[path = "sales_review/upload.rs"]
mod upload;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use stategraph::checkpoints::{RunStatus, SqliteSaver};
use stategraph_nodes::prelude::*;
use stategraph_nodes::sandbox::{LocalSandboxProvider, SandboxOptions};
use stategraph_nodes::sandbox_tools::{self, sandbox_tools};
use stategraph_nodes::skill::SkillRegistry;
use stategraph_nodes::subagent::{DelegationReport, SubagentSpec, Subagents};
use stategraph_nodes::subagent_tools::{DelegationLog, TaskTool};
use stategraph_nodes::{
    AgentRunError, Authorization, GuardrailDecision, GuardrailProvider, GuardrailRequest,
    RoleTable, TraceEntry,
};

pub(crate) use script::Script;
#[allow(unused_imports)] // the HTTP provider's test names them
pub(crate) use search::{SearchError, SearchProvider};
pub(crate) use upload::UploadError;
#[cfg(feature = "live")]
#[allow(unused_imports)] // the `live` tests use them directly
pub(crate) use {http_search::HttpSearch, live::with_model as live_review};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The thread every run of the example continues.
pub(crate) const THREAD: &str = "sales-review";
const USER: &str = "ana";
const ROLE: &str = "analyst";
const SKILL: &str = "/mnt/skills/public/sales-review/SKILL.md";
/// The upload shipped with the example.
pub(crate) const PDF: &[u8] = include_bytes!("sales_review/sales-notes.pdf");

/// The text the upload step makes of the PDF `bytes`.
///
/// # Errors
/// [`UploadError`] for a PDF that cannot be read.
#[allow(dead_code)] // the tests compare the report with it
pub(crate) fn upload_text(bytes: &[u8]) -> Result<String, UploadError> {
    upload::pdf_to_text("sales-notes.pdf", bytes)
}

/// Where the example keeps its thread: the checkpoint file, the sandboxes beside it, and the
/// search corpus it reads.
#[derive(Debug)]
pub(crate) struct Workspace {
    /// The folder.
    pub(crate) folder: PathBuf,
    /// The SQLite checkpoint file.
    pub(crate) db: PathBuf,
    saver: Arc<SqliteSaver>,
    search: Arc<dyn search::SearchProvider>,
}

impl Workspace {
    /// Opens (or creates) the workspace in `folder`, searching the shipped corpus.
    ///
    /// # Errors
    /// The folder, the checkpoint file or the corpus cannot be opened.
    pub(crate) fn open(folder: &Path) -> Result<Self, Error> {
        let corpus_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sales_review/corpus");
        let corpus = search::CorpusSearch::load(&corpus_dir)?;
        println!(
            "web_search: {}, {} documents (offline)",
            search::SearchProvider::name(&corpus),
            corpus.len()
        );
        Self::open_with(folder, Arc::new(corpus))
    }

    /// Opens (or creates) the workspace in `folder`, searching with `search`.
    ///
    /// # Errors
    /// The folder or the checkpoint file cannot be opened.
    pub(crate) fn open_with(
        folder: &Path,
        search: Arc<dyn search::SearchProvider>,
    ) -> Result<Self, Error> {
        std::fs::create_dir_all(folder)?;
        let db = folder.join("threads.db");
        Ok(Workspace {
            folder: folder.to_owned(),
            saver: Arc::new(SqliteSaver::open(&db)?),
            db,
            search,
        })
    }

    fn sandboxes(&self) -> LocalSandboxProvider {
        LocalSandboxProvider::new(self.folder.join("sandboxes"))
    }

    /// Converts the PDF `bytes` into the thread's uploads as `file` (and its `.md` text).
    ///
    /// # Errors
    /// [`UploadError`]: an unreadable PDF, or the uploads could not be written.
    pub(crate) async fn upload(&self, file: &str, bytes: &[u8]) -> Result<String, UploadError> {
        upload::place_pdf(&self.sandboxes(), USER, THREAD, file, bytes).await
    }

    /// How many checkpoint rows the file holds per (thread, namespace).
    ///
    /// # Errors
    /// The file cannot be read.
    pub(crate) fn checkpoint_rows(&self) -> Result<Vec<(String, String, i64)>, Error> {
        let db = rusqlite::Connection::open(&self.db)?;
        let mut q = db.prepare(
            "SELECT thread, ns, COUNT(*) FROM sg_checkpoints GROUP BY thread, ns ORDER BY thread",
        )?;
        let rows = q
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }
}

/// Refuses shell commands that delete or move files; lets every other call through.
#[derive(Debug)]
struct NoDeletes;

impl GuardrailProvider for NoDeletes {
    fn name(&self) -> &str {
        "no-deletes"
    }

    fn evaluate<'a>(
        &'a self,
        request: &'a GuardrailRequest,
    ) -> BoxFuture<'a, Result<GuardrailDecision, stategraph::BoxError>> {
        let command = request.tool_args["command"].as_str().unwrap_or_default();
        let destructive = ["rm ", "rmdir", "unlink", "shred", "mv ", "truncate"]
            .iter()
            .any(|p| command.contains(p));
        let decision = if request.tool_name == "bash" && destructive {
            GuardrailDecision::deny(
                "sales.no_deletes",
                format!("shell commands may not delete files ({command:?})"),
            )
        } else {
            GuardrailDecision::allow()
        };
        Box::pin(async move { Ok(decision) })
    }
}

/// What the analyst role may use: everything but emailing reports out.
fn authorization() -> Authorization {
    Authorization::new(RoleTable::new().allow(
        ROLE,
        [
            "ls",
            "read_file",
            "write_file",
            "str_replace",
            "glob",
            "grep",
            "present_files",
            "bash",
            "web_search",
            "task",
        ],
    ))
}

/// The exploring industry analyst: read-only tools, no checkpointer; its own model when
/// `analyst` is given, the lead's otherwise.
fn subagents(
    ws: &Workspace,
    lead: Arc<dyn ChatModel>,
    analyst: Option<playbook::Playbook>,
) -> Subagents {
    let mut spec = SubagentSpec::new(
        script::ANALYST,
        "Investigates industry data; reads, never writes",
        "You compare our figures (in /mnt/user-data/uploads/sales-notes.md) with industry \
         benchmarks found with web_search, and answer with the numbers and their sources. \
         You only look.",
    )
    .max_turns(6)
    .exploring(true)
    .custom_tool(search::web_search(ws.search.clone(), false));
    if let Some(model) = analyst {
        spec = spec.model(model);
    }
    let mut subagents = Subagents::new(lead)
        .sandbox(Arc::new(ws.sandboxes()), SandboxOptions::lazy())
        .authorization(authorization())
        .register(spec);
    for tool in sandbox_tools() {
        subagents = subagents.builtin(tool);
    }
    subagents
}

/// What the lead is told (a real model needs it; the scripted one follows it anyway).
const SYSTEM_PROMPT: &str = "You review sales material and deliver reports. The user's upload \
is converted to text in /mnt/user-data/uploads/sales-notes.md. Read it; find web_search with \
tool_search and search evidence on the regions that moved most; delegate the industry \
benchmark comparison to the industry-analyst subagent with task; write the report to \
/mnt/user-data/outputs/sales-review.md (figures, evidence with sources, the analyst's \
findings, a recommendation) and present it with present_files. Never delete files.";

/// Who plays the lead and the analyst.
pub(crate) enum Models {
    /// The offline playbooks: the lead's turns and the analyst's.
    Scripted(Vec<playbook::Turn>, Vec<playbook::Turn>),
    /// One real model for both (the analyst inherits the lead's).
    #[cfg_attr(not(feature = "live"), allow(dead_code))]
    Live(Arc<dyn ChatModel>),
}

/// The lead agent for one run, with `model` and `analyst` playing their scripts.
async fn lead(
    ws: &Workspace,
    model: Arc<dyn ChatModel>,
    analyst: Option<playbook::Playbook>,
    log: &DelegationLog,
) -> Result<stategraph_nodes::Agent, Error> {
    let skills = SkillRegistry::from_skill_mds([(
        SKILL,
        include_str!("sales_review/skills/sales-review/SKILL.md"),
        true,
    )]);
    let progress = progress::Progress::new();
    let subagents = Arc::new(subagents(ws, Arc::clone(&model), analyst));
    let mut builder = AgentBuilder::with_model(model)
        .system_prompt(SYSTEM_PROMPT)
        .sandbox(ws.sandboxes(), SandboxOptions::lazy())
        .allow_host_bash(true)
        .tool(sandbox_tools::bash())
        .tool(search::web_search(ws.search.clone(), true))
        .tool(TaskTool::new(subagents, log.clone()))
        .tool(email_report())
        .authorization(authorization())
        .tool_layer(progress.clone())
        .model_layer(progress)
        .guardrail(stategraph_nodes::Guardrail::new(NoDeletes))
        .skills(skills);
    for tool in sandbox_tools() {
        builder = builder.tool_arc(tool);
    }
    let agent = builder
        .assemble(RunContext::new(THREAD, USER).role(ROLE).slash_skill(SKILL))
        .await?;
    Ok(agent.with_checkpointer(ws.saver.clone()))
}

/// A tool the analyst role is not authorized for.
fn email_report() -> FnTool {
    FnTool::new(
        ToolSpec::new(
            "email_report",
            "Email a file to a customer",
            ToolSource::Config,
        ),
        |call, _cx| async move { Ok(ToolMessage::new(call.id, "email_report", "sent").into()) },
    )
}

/// How one run ended: its settlement, what it left in the state, its trace and delegations.
#[derive(Debug)]
pub(crate) struct Review {
    /// The run.
    pub(crate) run_id: String,
    /// Its terminal status.
    pub(crate) status: RunStatus,
    /// Why it ended so, if said.
    pub(crate) reason: Option<String>,
    /// The delivery receipt, as stored.
    pub(crate) receipt: serde_json::Value,
    /// The thread's artifacts after the run.
    pub(crate) artifacts: Vec<String>,
    /// The lead's answer.
    pub(crate) answer: String,
    /// The run's capability trace (the assembly's entries first).
    pub(crate) trace: Vec<TraceEntry>,
    /// The run's delegations.
    pub(crate) delegations: Vec<DelegationReport>,
    /// Checkpoints in the thread's history after the run.
    pub(crate) history: usize,
    /// The step of the thread's newest checkpoint.
    pub(crate) last_step: i64,
    /// The newest step that presented the report, if one did.
    pub(crate) presented_step: Option<i64>,
}

/// One run of the lead on the thread, asking `question`, played by `models`.
async fn run(ws: &Workspace, question: &str, models: Models) -> Result<Review, Error> {
    let (model, playbooks): (Arc<dyn ChatModel>, _) = match models {
        Models::Scripted(lead, analyst) => {
            let lead = playbook::Playbook::new("scripted-sales-lead", lead);
            let analyst = playbook::Playbook::new("scripted-industry-analyst", analyst);
            (Arc::new(lead.clone()), Some((lead, analyst)))
        }
        Models::Live(model) => (model, None),
    };
    let log = DelegationLog::new();
    let analyst = playbooks.as_ref().map(|(_, a)| a.clone());
    let agent = lead(ws, model, analyst, &log).await?;
    let config = agent.run_config().thread(THREAD);
    let (settlement, state) = match agent
        .invoke(ThreadState::human_input(question), &config)
        .await
    {
        Ok(out) => (out.settlement, Some(out.state)),
        Err(AgentRunError::Delivery { outcome, .. }) => (outcome.settlement, Some(outcome.state)),
        Err(e) => return Err(e.into()),
    };
    if let Some((lead, analyst)) = &playbooks {
        lead.verify()?;
        analyst.verify()?;
    }
    let history = agent
        .graph()
        .get_state_history(THREAD, Default::default())
        .await?;
    let presented_step = history
        .iter()
        .find(|snap| {
            matches!(snap.values.messages.iter().next_back(),
                Some(Message::Tool(t)) if t.name == "present_files" && !t.is_error())
        })
        .map(|snap| snap.checkpoint.step);
    Ok(Review {
        run_id: settlement.run_id.to_string(),
        status: settlement.status,
        reason: settlement.reason.clone(),
        receipt: settlement.receipt.to_json(),
        artifacts: state
            .as_ref()
            .map(|s| s.artifacts.clone())
            .unwrap_or_default(),
        answer: state
            .as_ref()
            .and_then(|s| s.last_ai())
            .map(|a| a.content.clone())
            .unwrap_or_default(),
        trace: agent.run_trace(&settlement.run_id),
        delegations: log.reports(),
        history: history.len(),
        last_step: history.first().map_or(-1, |s| s.checkpoint.step),
        presented_step,
    })
}

/// The review run: upload the PDF, then the lead plays `script`.
///
/// # Errors
/// An unreadable PDF ([`UploadError`]), a storage or assembly error, or a run that failed
/// (a run that finished but did not deliver is a [`Review`] with status `error`).
pub(crate) async fn review(ws: &Workspace, pdf: &[u8], script: Script) -> Result<Review, Error> {
    review_with(
        ws,
        pdf,
        Models::Scripted(script::review(script), script::analyst()),
    )
    .await
}

/// The review run with `models`: upload the PDF, then ask for the review.
///
/// # Errors
/// As [`review`].
pub(crate) async fn review_with(
    ws: &Workspace,
    pdf: &[u8],
    models: Models,
) -> Result<Review, Error> {
    ws.upload("sales-notes.pdf", pdf).await?;
    run(ws, REVIEW_QUESTION, models).await
}

/// The lead as `examples/serve.rs` serves it: the PDF uploaded into the thread's sandbox, the
/// scripted model ready to play one review on thread [`THREAD`].
///
/// # Errors
/// As [`review`], before anything runs.
#[allow(dead_code)] // only the serve example uses it
pub(crate) async fn served_lead(ws: &Workspace) -> Result<stategraph_nodes::Agent, Error> {
    ws.upload("sales-notes.pdf", PDF).await?;
    let lead_script =
        playbook::Playbook::new("scripted-sales-lead", script::review(Script::Deliver));
    let analyst = playbook::Playbook::new("scripted-industry-analyst", script::analyst());
    lead(
        ws,
        Arc::new(lead_script),
        Some(analyst),
        &DelegationLog::new(),
    )
    .await
}

/// The review's question (the slash command activates the skill).
pub(crate) const REVIEW_QUESTION: &str =
    "/sales-review Review FY2026 sales from sales-notes.pdf against industry evidence.";
/// The follow-up's question.
const FOLLOW_UP_QUESTION: &str = "/sales-review What did we recommend, and for which regions?";

/// The follow-up run on the same thread: it reads the report the review left.
///
/// # Errors
/// As [`review`].
pub(crate) async fn follow_up(ws: &Workspace) -> Result<Review, Error> {
    follow_up_with(ws, Models::Scripted(script::follow_up(), Vec::new())).await
}

/// The follow-up run with `models`.
///
/// # Errors
/// As [`review`].
pub(crate) async fn follow_up_with(ws: &Workspace, models: Models) -> Result<Review, Error> {
    run(ws, FOLLOW_UP_QUESTION, models).await
}

/// The whole example in `folder`: the review, then the follow-up, each summarised.
///
/// # Errors
/// As [`review`].
pub(crate) async fn sales_review(folder: &Path) -> Result<(Review, Review), Error> {
    let ws = Workspace::open(folder)?;
    println!("== run 1: the review (one line per step)");
    let first = review(&ws, PDF, Script::Deliver).await?;
    summary::print_run(&ws, &first)?;
    println!("\n== run 2: a follow-up on the same thread");
    let second = follow_up(&ws).await?;
    summary::print_run(&ws, &second)?;
    summary::print_commands(&ws, &first)?;
    Ok((first, second))
}

/// The review by a model that writes the report and never presents it: the run ends in
/// `error`, and its receipt (`not_started`) says why.
///
/// # Errors
/// As [`review`].
pub(crate) async fn never_presented(folder: &Path) -> Result<Review, Error> {
    let ws = Workspace::open(folder)?;
    println!("== a review whose model never presents the report");
    let review = review(&ws, PDF, Script::NeverPresent).await?;
    summary::print_run(&ws, &review)?;
    Ok(review)
}

#[allow(dead_code)] // a test includes this file as a module and calls its entries
#[tokio::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let folder = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .map_or_else(|| PathBuf::from("sales-review-data"), Into::into);
    if args.iter().any(|a| a == "--never-present") {
        return never_presented(&folder).await.map(|_| ());
    }
    #[cfg(feature = "live")]
    if std::env::var_os("OPENAI_MODEL").is_some() {
        return live::sales_review(&folder).await;
    }
    sales_review(&folder).await.map(|_| ())
}
