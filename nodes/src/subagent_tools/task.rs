//! The `task` tool: hands one bounded piece of work to a named subagent type and answers the
//! call with the child's result (agents as tools: the lead keeps the conversation).

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::message::ToolCall;
use crate::subagent::{DelegationRequest, Subagents, TASK_TOOL};
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput, ToolSource, ToolSpec};

use super::{delegate_all, delegation_command, DelegationLog};

/// The `task` tool over `subagents`' types.
#[derive(Debug)]
pub struct TaskTool {
    subagents: Arc<Subagents>,
    spec: ToolSpec,
    log: DelegationLog,
}

/// The tool description: what delegation is, and the types to choose from.
pub(super) fn describe(intro: &str, subagents: &Subagents) -> String {
    let mut text = intro.to_owned();
    text.push_str(" The subagent sees only the prompt you give it. Available subagent types:");
    for spec in &subagents.specs {
        text.push_str(&format!("\n- {}: {}", spec.name, spec.description));
    }
    text
}

impl TaskTool {
    /// A `task` tool delegating to `subagents`, logging into `log`.
    pub fn new(subagents: Arc<Subagents>, log: DelegationLog) -> Self {
        let description = describe(
            "Delegate one bounded task to a subagent and get its result.",
            &subagents,
        );
        let spec = ToolSpec::new(TASK_TOOL, description, ToolSource::BuiltIn)
            .params_of::<DelegationRequest>();
        TaskTool {
            subagents,
            spec,
            log,
        }
    }
}

impl Tool for TaskTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(
        &self,
        call: ToolCall,
        cx: ToolContext,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        let subagents = Arc::clone(&self.subagents);
        let log = self.log.clone();
        Box::pin(async move {
            let request: DelegationRequest = call.args_as()?;
            let reports =
                delegate_all(&subagents, vec![(call.id.clone(), request)], &cx, &log).await;
            let command = delegation_command(&reports, call.reply_id(), TASK_TOOL, &cx);
            for report in reports {
                log.push(report);
            }
            Ok(ToolOutput::Command(command))
        })
    }
}
