//! `bash`: a shell command in the thread's workspace directory, ON THE HOST.
//!
//! This is a host shell. It is not confined by the virtual paths: the command runs as the
//! agent's process user and can read and write anything that user can. Its only limits are a
//! working directory (the thread's workspace), a cleared environment (no variable of the
//! agent's process reaches it; only the secrets it declares and is granted, see
//! [`bash_with_secrets`]), a timeout and an output cap. It is a config tool of group
//! `bash`, so an agent admits it only with
//! [`AgentBuilder::allow_host_bash`](crate::AgentBuilder::allow_host_bash)`(true)`.

use std::process::Stdio;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::secret::SecretEnv;
use crate::tool::{FnTool, ToolContext, ToolSource, ToolSpec};
use crate::BoxError;

/// The timeout of a command without its own, and the longest allowed, in seconds.
pub const BASH_TIMEOUT_SECS: u64 = 60;

/// The most bytes of stdout and of stderr kept each; the rest is dropped (and said so).
pub const BASH_OUTPUT_CAP: usize = 64 * 1024;

/// `bash`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct BashArgs {
    /// The command, run by `/bin/sh -c` in the thread's workspace.
    pub command: String,
    /// Seconds before the command is killed (at most the default, 60).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

/// Why a command gave no result.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BashError {
    /// The command ran longer than its timeout and was killed.
    #[error("the command timed out after {0} s and was killed")]
    TimedOut(u64),
    /// The shell could not be started or its output read.
    #[error("the shell failed: {0}")]
    Io(#[from] std::io::Error),
}

/// The `bash` tool (group `bash`; see the module docs: a host shell), with an empty
/// environment.
pub fn bash() -> FnTool {
    bash_tool(spec(
        "Run a shell command ON THE HOST in the thread's workspace directory \
         (/mnt/user-data/workspace). Not confined to the virtual paths; the environment is \
         empty; output is capped and the command times out.",
    ))
}

/// The `bash` tool declaring the secrets `names`: its environment holds those of them the
/// call is granted at the moment it starts (see [`crate::secret::SecretGrant`]) and nothing
/// else. Any granted value the command prints is replaced by `[secret NAME]` in what the tool
/// returns, so it does not reach the state, the checkpoint or the trace.
///
/// ```
/// use stategraph_nodes::sandbox_tools::bash_with_secrets;
/// use stategraph_nodes::Tool;
///
/// let tool = bash_with_secrets(["SALES_API_TOKEN"]);
/// assert_eq!(tool.spec().secrets, vec!["SALES_API_TOKEN".to_string()]);
/// ```
pub fn bash_with_secrets(names: impl IntoIterator<Item = impl Into<String>>) -> FnTool {
    bash_tool(
        spec(
            "Run a shell command ON THE HOST in the thread's workspace directory \
             (/mnt/user-data/workspace). Not confined to the virtual paths; the environment \
             holds only the secrets the active skills grant; output is capped and the command \
             times out.",
        )
        .secrets(names),
    )
}

fn spec(description: &str) -> ToolSpec {
    ToolSpec::new("bash", description, ToolSource::Config)
        .group("bash")
        .read_only(false)
}

fn bash_tool(spec: ToolSpec) -> FnTool {
    FnTool::typed(spec, |args: BashArgs, cx: ToolContext| async move {
        let open = cx.sandbox().await?;
        let timeout = args
            .timeout_secs
            .unwrap_or(BASH_TIMEOUT_SECS)
            .clamp(1, BASH_TIMEOUT_SECS);
        let env = cx.secret_env();
        let text = run(&args.command, &open.sandbox.dirs.workspace, &env, timeout).await?;
        Ok::<_, BoxError>(open.fs.mounts().mask_host_paths(&env.redact(&text)))
    })
}

/// Runs `command` in `dir` with an environment of `env` only, killed after `timeout` seconds.
async fn run(
    command: &str,
    dir: &std::path::Path,
    env: &SecretEnv,
    timeout: u64,
) -> Result<String, BashError> {
    let mut child = tokio::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(command)
        .current_dir(dir)
        .env_clear()
        .envs(env.iter().map(|(name, value)| (name, value.expose())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let work = async {
        let (out, err) = tokio::try_join!(capped(stdout), capped(stderr))?;
        let status = child.wait().await?;
        Ok::<_, std::io::Error>((out, err, status))
    };
    let (out, err, status) = tokio::time::timeout(Duration::from_secs(timeout), work)
        .await
        .map_err(|_| BashError::TimedOut(timeout))??;
    let mut text = out;
    if !err.is_empty() {
        text.push_str("\n[stderr]\n");
        text.push_str(&err);
    }
    match status.code() {
        Some(0) => {}
        Some(code) => text.push_str(&format!("\n[exit code {code}]")),
        None => text.push_str("\n[killed by a signal]"),
    }
    Ok(text)
}

/// At most [`BASH_OUTPUT_CAP`] bytes of a stream (lossy UTF-8); the rest is read and dropped.
async fn capped(stream: Option<impl AsyncRead + Unpin>) -> std::io::Result<String> {
    let Some(mut stream) = stream else {
        return Ok(String::new());
    };
    let mut kept = Vec::new();
    (&mut stream)
        .take(BASH_OUTPUT_CAP as u64)
        .read_to_end(&mut kept)
        .await?;
    let dropped = tokio::io::copy(&mut stream, &mut tokio::io::sink()).await?;
    let mut text = String::from_utf8_lossy(&kept).into_owned();
    if dropped > 0 {
        text.push_str(&format!("\n[{dropped} more bytes dropped]"));
    }
    Ok(text)
}
