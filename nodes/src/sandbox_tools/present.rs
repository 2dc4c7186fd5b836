//! `present_files`: hands files in the thread's outputs to the user as artifacts, all or
//! nothing, without reading them.

use schemars::JsonSchema;
use serde::Deserialize;
use stategraph::reducers::MessagesUpdate;
use stategraph::Command;

use crate::delivery::normalize_presented;
use crate::message::{Message, ToolCall, ToolMessage};
use crate::state::ThreadState;
use crate::tool::{schema_of, FnTool, ToolContext, ToolError, ToolOutput, ToolSource, ToolSpec};

/// The tool message of a successful `present_files` call.
pub const PRESENTED_MESSAGE: &str = "Successfully presented files";

/// `present_files`' arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct PresentFilesArgs {
    /// The files (or directories) to present, under `/mnt/user-data/outputs`.
    pub filepaths: Vec<String>,
}

/// `present_files`: every path normalised to `/mnt/user-data/outputs/...` (a host path inside
/// the thread's outputs is accepted); one refused path gives one error tool message starting
/// with [`PRESENT_ERROR_PREFIX`](crate::delivery::PRESENT_ERROR_PREFIX) and no artifacts
/// update; success is a command adding the paths to `artifacts` with the message
/// [`PRESENTED_MESSAGE`]. No file is read.
pub fn present_files() -> FnTool {
    let spec = ToolSpec::new(
        "present_files",
        "Present files you wrote under /mnt/user-data/outputs to the user.",
        ToolSource::BuiltIn,
    )
    .parameters(schema_of::<PresentFilesArgs>())
    .read_only(false);
    FnTool::new(spec, |call: ToolCall, cx: ToolContext| async move {
        let args: PresentFilesArgs = call.args_as()?;
        let open = cx
            .sandbox()
            .await
            .map_err(|e| ToolError::failed(call.name.clone(), e))?;
        Ok(presented(call, &args.filepaths, &open.sandbox.dirs.outputs))
    })
}

/// The output of a `present_files` call over `paths`.
fn presented(call: ToolCall, paths: &[String], outputs_host: &std::path::Path) -> ToolOutput {
    match normalize_presented(paths, outputs_host) {
        Err(e) => ToolMessage::error(call.id, call.name, e.to_string()).into(),
        Ok(artifacts) => {
            let message = ToolMessage::new(call.id, call.name, PRESENTED_MESSAGE);
            Command::new()
                .update(
                    ThreadState::update()
                        .artifacts(artifacts)
                        .messages(MessagesUpdate::from(Message::Tool(message))),
                )
                .into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::PRESENT_ERROR_PREFIX;
    use std::path::Path;

    fn call() -> ToolCall {
        ToolCall::new("c1", "present_files", serde_json::json!({}))
    }

    #[test]
    fn one_bad_path_refuses_the_whole_call() -> Result<(), String> {
        let paths = [
            "/mnt/user-data/outputs/a.md".to_owned(),
            "/etc/passwd".to_owned(),
        ];
        let out = presented(call(), &paths, Path::new("/srv/t/outputs"));
        let ToolOutput::Message(m) = &out else {
            return Err(format!("not a message: {out:?}"));
        };
        assert!(m.is_error());
        assert!(m.content.starts_with(PRESENT_ERROR_PREFIX), "{}", m.content);
        Ok(())
    }

    #[test]
    fn good_paths_become_an_artifacts_update() -> Result<(), String> {
        let paths = ["/srv/t/outputs/a.md".to_owned()];
        let out = presented(call(), &paths, Path::new("/srv/t/outputs"));
        let ToolOutput::Command(c) = &out else {
            return Err(format!("not a command: {out:?}"));
        };
        let update = c.update_ref().ok_or("no update")?;
        assert_eq!(
            update.artifacts,
            Some(vec!["/mnt/user-data/outputs/a.md".to_owned()])
        );
        assert_eq!(
            out.message().map(|m| m.content.as_str()),
            Some(PRESENTED_MESSAGE)
        );
        Ok(())
    }
}
