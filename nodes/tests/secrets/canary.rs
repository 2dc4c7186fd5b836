//! R-30 (secrets): a canary declared for one tool reaches that tool only, and no byte of it
//! reaches the SQLite file (or its WAL), the capability trace, an error text or a log line.

use std::sync::{Arc, Mutex};

use serde_json::json;
use stategraph::checkpoints::SqliteSaver;
use stategraph_nodes::prelude::*;
use stategraph_nodes::sandbox_tools::{bash_with_secrets, write_file};
use stategraph_nodes::secret::MemorySecrets;

use crate::logs;
use crate::support::*;

const CANARY: &str = "CANARY_TOKEN";
const ROUNDS: usize = 25;

/// A tool that records what it saw (its secrets and its arguments) in `ledger`, outside the
/// database, declaring `declares`.
fn witness(name: &str, declares: &[&str], ledger: &Arc<Mutex<Vec<String>>>) -> FnTool {
    let ledger = Arc::clone(ledger);
    let spec = ToolSpec::new(name, "records what it sees", ToolSource::Config)
        .secrets(declares.iter().copied());
    FnTool::new(spec, move |call, cx| {
        let ledger = Arc::clone(&ledger);
        async move {
            let env = cx.secret_env();
            let seen: Vec<String> = env
                .iter()
                .map(|(n, v)| format!("{n}={}", v.expose()))
                .collect();
            if let Ok(mut ledger) = ledger.lock() {
                ledger.push(format!("{} env {seen:?} args {}", call.name, call.args));
            }
            Ok(ToolMessage::new(&call.id, &call.name, format!("{} secrets", env.len())).into())
        }
    })
}

fn bash_call(id: String, command: &str) -> ToolCall {
    ToolCall::new(id, "bash", json!({ "command": command }))
}

/// Rounds of calls: `bash` checks the canary's shape and prints it (redacted), fails with it
/// on stderr, gets bad arguments, times out once; the witnesses and `write_file` run beside
/// it.
fn script() -> Vec<AiMessage> {
    let mut turns = Vec::new();
    for i in 0..ROUNDS {
        turns.push(AiMessage::calls([
            bash_call(
                format!("shape{i}"),
                &format!("case \"${CANARY}\" in canary-*) echo present;; *) echo absent;; esac"),
            ),
            bash_call(format!("print{i}"), &format!("printenv {CANARY}")),
            ToolCall::new(format!("peek{i}"), "peek", json!({"look": CANARY})),
            ToolCall::new(format!("plain{i}"), "plain", json!({})),
        ]));
        let mut second = vec![
            bash_call(
                format!("fail{i}"),
                &format!("printenv {CANARY} >&2; exit 3"),
            ),
            ToolCall::new(format!("bad{i}"), "bash", json!({"cmd": 1})),
            ToolCall::new(
                format!("write{i}"),
                "write_file",
                json!({"path": "/mnt/user-data/workspace/n.txt", "content": "x"}),
            ),
        ];
        if i == 0 {
            second.push(ToolCall::new(
                "slow",
                "bash",
                json!({"command": "sleep 5", "timeout_secs": 1}),
            ));
        }
        turns.push(AiMessage::calls(second));
    }
    turns.push(AiMessage::text("done"));
    turns
}

/// Every file of the SQLite database (the main file, `-wal`, `-shm`), concatenated.
fn database_bytes(dir: &std::path::Path) -> Result<Vec<u8>, std::io::Error> {
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with("threads.db")
        {
            bytes.extend(std::fs::read(entry.path())?);
        }
    }
    Ok(bytes)
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test]
async fn a_canary_reaches_only_the_declaring_tool_and_no_blob_trace_error_or_log() -> R {
    assert!(logs::install(), "the log capture is not installed");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos();
    let canary = format!("canary-{nanos:x}-{}", std::process::id());
    let mut setup = Setup::all_met()?;
    setup.skills = LiveSkills::sales(&[CANARY, "OTHER_TOKEN"])?;
    setup.secrets = Arc::new(
        MemorySecrets::new()
            .with(CANARY, canary.clone())
            .with("OTHER_TOKEN", "other-value"),
    );
    let ledger = Arc::new(Mutex::new(Vec::new()));
    setup.tools = vec![
        Arc::new(bash_with_secrets([CANARY])),
        Arc::new(witness("peek", &["OTHER_TOKEN"], &ledger)),
        Arc::new(witness("plain", &[], &ledger)),
        Arc::new(write_file()),
    ];
    let db = tempfile::tempdir()?;
    let saver = Arc::new(SqliteSaver::open(db.path().join("threads.db"))?);
    let model = ScriptedModel::new("m", script());
    let agent = setup.agent(&model).await?.with_checkpointer(saver.clone());
    let out = agent.ask("go").await?;
    model.verify()?;

    // The declaring tool received the exact value; the others saw none of it.
    for i in 0..ROUNDS {
        assert_eq!(answer(&out.state, &format!("shape{i}"))?, "present");
        assert_eq!(
            answer(&out.state, &format!("print{i}"))?,
            format!("[secret {CANARY}]")
        );
        assert_eq!(answer(&out.state, &format!("peek{i}"))?, "1 secrets");
    }
    let ledger = ledger.lock().map_err(|_| "poisoned")?.clone();
    assert_eq!(ledger.len(), 2 * ROUNDS);
    assert!(ledger.iter().any(|l| l.contains("OTHER_TOKEN=other-value")));
    assert!(ledger.iter().all(|l| !l.contains(&canary)), "{ledger:?}");

    // No error text carries it.
    let messages: Vec<&ToolMessage> = out
        .state
        .messages
        .iter()
        .filter_map(Message::as_tool)
        .collect();
    let errors: Vec<&str> = messages
        .iter()
        .filter(|m| m.is_error())
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(
        errors.len(),
        ROUNDS + 1,
        "the bad arguments and the timeout"
    );
    assert!(errors.iter().all(|e| !e.contains(&canary)));
    let failed = answer(&out.state, "fail0")?;
    assert!(failed.contains(&format!("[secret {CANARY}]")), "{failed}");
    assert!(messages.iter().all(|m| !m.content.contains(&canary)));

    // Nor the trace, nor a log line (which does name the secrets given).
    let trace = serde_json::to_string(&agent.trace().entries())? + &agent.trace().render();
    assert!(trace.contains("bash"));
    assert!(!trace.contains(&canary));
    let logged = logs::text();
    assert!(logged.contains(CANARY), "the capture saw no grant");
    assert!(!logged.contains(&canary));

    // Nor any byte of the database, its WAL or its shared memory.
    drop(agent);
    saver.close()?;
    let bytes = database_bytes(db.path())?;
    assert!(contains(&bytes, "shape0"), "the database holds no message");
    assert!(
        !contains(&bytes, &canary),
        "the canary is in the SQLite file"
    );
    Ok(())
}
