//! The `multi_task` tool: several delegations run in parallel (each under the global limit),
//! answered with one tool message per delegation.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::message::ToolCall;
use crate::subagent::{DelegationRequest, Subagents, MULTI_TASK_TOOL};
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput, ToolSource, ToolSpec};

use super::task::describe;
use super::{delegate_all, delegation_command, DelegationLog};

/// The `multi_task` tool's arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MultiTaskArgs {
    /// The independent tasks, each run by its own subagent, in parallel.
    pub tasks: Vec<DelegationRequest>,
}

/// The `multi_task` tool over `subagents`' types.
#[derive(Debug)]
pub struct MultiTaskTool {
    subagents: Arc<Subagents>,
    spec: ToolSpec,
    log: DelegationLog,
}

impl MultiTaskTool {
    /// A `multi_task` tool delegating to `subagents`, logging into `log`.
    pub fn new(subagents: Arc<Subagents>, log: DelegationLog) -> Self {
        let description = describe(
            "Delegate several independent tasks at once; they run in parallel and each \
             result comes back as its own message.",
            &subagents,
        );
        let spec = ToolSpec::new(MULTI_TASK_TOOL, description, ToolSource::BuiltIn)
            .params_of::<MultiTaskArgs>();
        MultiTaskTool {
            subagents,
            spec,
            log,
        }
    }
}

impl Tool for MultiTaskTool {
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
            let args: MultiTaskArgs = call.args_as()?;
            let requests = args
                .tasks
                .into_iter()
                .enumerate()
                .map(|(i, request)| (format!("{}/{i}", call.id), request))
                .collect();
            let reports = delegate_all(&subagents, requests, &cx, &log).await;
            let command = delegation_command(&reports, call.reply_id(), MULTI_TASK_TOOL, &cx);
            for report in reports {
                log.push(report);
            }
            Ok(ToolOutput::Command(command))
        })
    }
}
