//! Reading a server's resources on request: the `read_resource` tool an [`McpServer`] adds
//! when its config asks for it ([`McpServerConfig::read_resources`]) and the server offers
//! resources, so a model can follow the resource links a tool returned.
//!
//! [`McpServer`]: super::McpServer
//! [`McpServerConfig::read_resources`]: super::McpServerConfig::read_resources

use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, ContentBlock, ReadResourceRequestParams};
use serde_json::json;

use crate::message::ToolCall;
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput, ToolSource, ToolSpec};

use super::connection::Shared;
use super::tool::{call_error, tool_message};
use super::{McpError, McpServerConfig};

/// The tool's name on the server's side (the catalog name may carry the server's prefix).
pub(super) const READ_RESOURCE: &str = "read_resource";

/// The `read_resource` tool of one server.
pub(super) struct ResourceReader {
    spec: ToolSpec,
    shared: Arc<Shared>,
}

impl ResourceReader {
    pub(super) fn new(shared: Arc<Shared>) -> Self {
        let config: &McpServerConfig = &shared.config;
        let spec = ToolSpec::new(
            config.tool_name(READ_RESOURCE),
            format!(
                "Read a resource of the MCP server {:?} by its URI (as a resource link a tool \
                 returned names it).",
                config.name
            ),
            ToolSource::Mcp,
        )
        .parameters(json!({
            "type": "object",
            "properties": {"uri": {"type": "string", "description": "the resource's URI"}},
            "required": ["uri"]
        }))
        // resources/read only reads, by the protocol; this client defines the tool.
        .read_only(true)
        .group(&config.name)
        .deferrable(true);
        ResourceReader { spec, shared }
    }
}

impl Tool for ResourceReader {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(
        &self,
        call: ToolCall,
        _cx: ToolContext,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        let shared = Arc::clone(&self.shared);
        let tool = self.spec.name.clone();
        Box::pin(async move {
            let server = shared.config.name.clone();
            let Some(uri) = call.args.get("uri").and_then(serde_json::Value::as_str) else {
                return Err(ToolError::InvalidArgs {
                    tool,
                    message: "expected {\"uri\": string}".to_owned(),
                });
            };
            let Some(connection) = shared.live() else {
                return Err(ToolError::failed(
                    tool.clone(),
                    McpError::NotRunning { server, tool },
                ));
            };
            let timeout = shared.config.call_timeout;
            let read = connection
                .service
                .peer()
                .read_resource(ReadResourceRequestParams::new(uri));
            match tokio::time::timeout(timeout, read).await {
                Ok(Ok(result)) => {
                    let blocks = result
                        .contents
                        .into_iter()
                        .map(ContentBlock::resource)
                        .collect();
                    let result = CallToolResult::success(blocks);
                    let message = tool_message((&call.id, &tool), &shared.config, result);
                    Ok(ToolOutput::Message(message))
                }
                Ok(Err(e)) => Err(call_error(e, &connection, server, tool)),
                Err(_) => Err(ToolError::failed(
                    tool.clone(),
                    McpError::CallTimeout {
                        server,
                        tool,
                        timeout,
                    },
                )),
            }
        })
    }
}
