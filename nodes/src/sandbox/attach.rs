//! The sandbox id a tool call acquired goes back into the state through the call's own update
//! ([`attach_sandbox`], applied by the [`SandboxUpdate`] tool layer).

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use stategraph::reducers::{MessagesUpdate, SandboxState};
use stategraph::Command;

use super::access::stored_id;
use super::provider::SandboxId;
use crate::message::Message;
use crate::middleware::{ToolInvocation, ToolLayer, ToolNext};
use crate::state::ThreadState;
use crate::tool::{ToolError, ToolOutput};

/// Adds `id` to a tool call's output as the `sandbox` field of its update.
///
/// - a plain tool message becomes a command whose update carries the message and the sandbox;
/// - a command keeps its update's other fields and its routing, and gains the sandbox field
///   (a command without an update gets one holding only the sandbox);
/// - a command whose update already writes `sandbox` is a shape this cannot merge: it is
///   returned untouched (never dropped), and the reducer decides.
pub fn attach_sandbox(output: ToolOutput, id: &SandboxId) -> ToolOutput {
    let sandbox = SandboxState::with_id(id.as_str());
    match output {
        ToolOutput::Message(m) => ToolOutput::Command(
            Command::new().update(
                ThreadState::update()
                    .messages(MessagesUpdate::from(Message::Tool(m)))
                    .sandbox(sandbox),
            ),
        ),
        ToolOutput::Command(c) => match c.update_ref() {
            Some(update) if update.sandbox.is_some() => ToolOutput::Command(c),
            Some(update) => {
                let merged = update.clone().sandbox(sandbox);
                ToolOutput::Command(c.update(merged))
            }
            None => ToolOutput::Command(c.update(ThreadState::update().sandbox(sandbox))),
        },
    }
}

/// The tool layer that attaches a sandbox id the call acquired to the call's update: when
/// the state had no id before the call and the call acquired one. An id present before leaves
/// the result untouched.
#[derive(Debug, Default, Clone, Copy)]
pub struct SandboxUpdate;

impl ToolLayer for SandboxUpdate {
    fn name(&self) -> &str {
        "sandbox_update"
    }

    fn call<'a>(
        &'a self,
        invocation: ToolInvocation,
        next: ToolNext<'a>,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        let had_id = stored_id(&invocation.cx.state).is_some();
        let access = invocation.cx.sandbox_access().map(Arc::clone);
        async move {
            let output = next.run(invocation).await?;
            match access.as_ref().and_then(|a| a.acquired()) {
                Some(id) if !had_id => Ok(attach_sandbox(output, id)),
                _ => Ok(output),
            }
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolMessage;
    use stategraph::END;

    fn id() -> SandboxId {
        SandboxId::new("local:u:t")
    }

    #[test]
    fn a_plain_message_becomes_an_update_with_the_message_and_the_sandbox() -> Result<(), String> {
        let out = attach_sandbox(ToolMessage::new("c1", "write_file", "ok").into(), &id());
        let ToolOutput::Command(c) = &out else {
            return Err(format!("not a command: {out:?}"));
        };
        let update = c.update_ref().ok_or("no update")?;
        assert_eq!(update.sandbox, Some(SandboxState::with_id("local:u:t")));
        assert_eq!(out.message().map(|m| m.content.as_str()), Some("ok"));
        Ok(())
    }

    #[test]
    fn a_command_keeps_its_keys_and_goto_and_gains_the_sandbox() -> Result<(), String> {
        let cmd = Command::new()
            .update(ThreadState::update().title(Some("T".to_owned())).messages(
                MessagesUpdate::from(Message::Tool(ToolMessage::new("c1", "x", "done"))),
            ))
            .goto(END);
        let out = attach_sandbox(cmd.into(), &id());
        let ToolOutput::Command(c) = &out else {
            return Err(format!("not a command: {out:?}"));
        };
        let update = c.update_ref().ok_or("no update")?;
        assert_eq!(update.title, Some(Some("T".to_owned())));
        assert_eq!(update.sandbox, Some(SandboxState::with_id("local:u:t")));
        assert_eq!(c.gotos().len(), 1);
        assert_eq!(out.message().map(|m| m.content.as_str()), Some("done"));
        Ok(())
    }

    #[test]
    fn an_update_already_writing_a_sandbox_is_left_untouched() -> Result<(), String> {
        let cmd = Command::new()
            .update(ThreadState::update().sandbox(SandboxState::with_id("other")))
            .goto(END);
        let out = attach_sandbox(cmd.into(), &id());
        let ToolOutput::Command(c) = &out else {
            return Err(format!("not a command: {out:?}"));
        };
        let update = c.update_ref().ok_or("no update")?;
        assert_eq!(update.sandbox, Some(SandboxState::with_id("other")));
        assert_eq!(c.gotos().len(), 1);
        Ok(())
    }
}
