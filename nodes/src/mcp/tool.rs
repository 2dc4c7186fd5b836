//! An MCP server's tools: their specs, calls over the shared connection, and results as tool
//! messages.

use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, ErrorCode, ResourceContents,
};
use rmcp::ServiceError;
use serde_json::Value;

use crate::message::{ToolCall, ToolMessage};
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput, ToolSource, ToolSpec};

use super::connection::{Connection, Shared};
use super::McpError;

/// The spec of a listed tool.
pub(super) fn spec_of(server: &str, tool: &rmcp::model::Tool) -> ToolSpec {
    let description = tool
        .description
        .as_deref()
        .or(tool.title.as_deref())
        .unwrap_or_default();
    let read_only = tool
        .annotations
        .as_ref()
        .and_then(|a| a.read_only_hint)
        .unwrap_or(false);
    ToolSpec::new(tool.name.to_string(), description, ToolSource::Mcp)
        .parameters(Value::Object(tool.input_schema.as_ref().clone()))
        .read_only(read_only)
        .group(server)
        .deferrable(true)
}

/// One tool of an MCP server, called over the server's shared connection.
pub(super) struct McpTool {
    pub(super) spec: ToolSpec,
    pub(super) shared: Arc<Shared>,
}

impl Tool for McpTool {
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
            let arguments = match call.args {
                Value::Object(map) => Some(map),
                Value::Null => None,
                other => {
                    return Err(ToolError::InvalidArgs {
                        tool,
                        message: format!("arguments must be a JSON object, not {other}"),
                    })
                }
            };
            let Some(connection) = shared.live() else {
                return Err(ToolError::failed(
                    tool.clone(),
                    McpError::NotRunning { server, tool },
                ));
            };
            let mut params = CallToolRequestParams::new(tool.clone());
            if let Some(arguments) = arguments {
                params = params.with_arguments(arguments);
            }
            let timeout = shared.config.call_timeout;
            let answer =
                tokio::time::timeout(timeout, connection.service.peer().call_tool(params)).await;
            match answer {
                Ok(Ok(result)) => Ok(ToolOutput::Message(tool_message(
                    &call.id, &tool, &server, result,
                ))),
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

/// A failed call, as the tool node sees it.
fn call_error(
    error: ServiceError,
    connection: &Connection,
    server: String,
    tool: String,
) -> ToolError {
    let mcp = match error {
        ServiceError::McpError(data) if data.code == ErrorCode::INVALID_PARAMS => {
            return ToolError::InvalidArgs {
                tool,
                message: format!("MCP server {server:?}: {}", data.message),
            };
        }
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => McpError::NotRunning {
            server,
            tool: tool.clone(),
        },
        _ if !connection.is_alive() => McpError::NotRunning {
            server,
            tool: tool.clone(),
        },
        other => McpError::Call {
            server,
            tool: tool.clone(),
            message: other.to_string(),
        },
    };
    ToolError::failed(tool, mcp)
}

/// The tool message for a call's result: its text blocks joined, other blocks summarised,
/// structured content kept in the metadata; `isError` makes it an error message.
fn tool_message(call_id: &str, tool: &str, server: &str, result: CallToolResult) -> ToolMessage {
    let mut parts: Vec<String> = result.content.iter().map(describe_block).collect();
    if parts.is_empty() {
        if let Some(structured) = &result.structured_content {
            parts.push(structured.to_string());
        }
    }
    let content = parts.join("\n");
    let mut message = if result.is_error == Some(true) {
        ToolMessage::error(call_id, tool, content)
    } else {
        ToolMessage::new(call_id, tool, content)
    };
    message
        .metadata
        .insert("mcp_server".to_owned(), Value::String(server.to_owned()));
    if let Some(structured) = result.structured_content {
        message
            .metadata
            .insert("structured_content".to_owned(), structured);
    }
    message
}

/// One content block as text for the model.
fn describe_block(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => format!(
            "[image: {}, {} bytes of base64]",
            image.mime_type,
            image.data.len()
        ),
        ContentBlock::Audio(audio) => format!(
            "[audio: {}, {} bytes of base64]",
            audio.mime_type,
            audio.data.len()
        ),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                format!("[resource {uri}]\n{text}")
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => format!(
                "[resource {uri}: {}, {} bytes of base64]",
                mime_type.as_deref().unwrap_or("binary"),
                blob.len()
            ),
            _ => "[resource]".to_owned(),
        },
        ContentBlock::ResourceLink(link) => {
            format!("[resource link: {} ({})]", link.uri, link.name)
        }
        _ => "[unsupported content]".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_summarised_and_structured_content_kept() {
        let mut result = CallToolResult::success(vec![
            ContentBlock::text("one"),
            ContentBlock::image("AAAA", "image/png"),
            ContentBlock::text("two"),
        ]);
        result.structured_content = Some(serde_json::json!({"n": 1}));
        let message = tool_message("c1", "t", "srv", result);
        assert_eq!(
            message.content,
            "one\n[image: image/png, 4 bytes of base64]\ntwo"
        );
        assert!(!message.is_error());
        assert_eq!(
            message.metadata.get("structured_content"),
            Some(&serde_json::json!({"n": 1}))
        );
        assert_eq!(
            message.metadata.get("mcp_server"),
            Some(&serde_json::json!("srv"))
        );
    }

    #[test]
    fn error_results_become_error_messages_and_empty_text_falls_back_to_structured() {
        let message = tool_message(
            "c1",
            "t",
            "srv",
            CallToolResult::error(vec![ContentBlock::text("bad")]),
        );
        assert!(message.is_error());
        assert_eq!(message.content, "bad");

        let mut result = CallToolResult::success(Vec::new());
        result.structured_content = Some(serde_json::json!({"sum": 3}));
        let message = tool_message("c2", "t", "srv", result);
        assert_eq!(message.content, r#"{"sum":3}"#);
    }

    #[test]
    fn spec_takes_schema_hint_and_group() {
        let mut schema = serde_json::Map::new();
        schema.insert("type".into(), Value::String("object".into()));
        let tool = rmcp::model::Tool::new("look", "Look around", schema)
            .annotate(rmcp::model::ToolAnnotations::new().read_only(true));
        let spec = spec_of("srv", &tool);
        assert_eq!(spec.name, "look");
        assert_eq!(spec.description, "Look around");
        assert_eq!(spec.parameters, serde_json::json!({"type": "object"}));
        assert!(spec.read_only);
        assert!(spec.deferrable);
        assert_eq!(spec.source, ToolSource::Mcp);
        assert_eq!(spec.group.as_deref(), Some("srv"));
    }
}
