//! An MCP server's tools: their specs, calls over the shared connection, and results as tool
//! messages.

use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ContentBlock, ErrorCode,
    ProgressNotificationParam, ResourceContents, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use rmcp::ServiceError;
use serde_json::Value;

use crate::media::Attachment;
use crate::message::{ToolCall, ToolMessage};
use crate::tool::{
    Tool, ToolAnnotations, ToolContext, ToolError, ToolOutput, ToolSource, ToolSpec,
};

use super::config::{HintTrust, McpServerConfig, ToolOverride};
use super::connection::{Connection, Shared};
use super::progress;
use super::McpError;

/// The spec of a listed tool: its catalog name, every annotation as sent, and a read-only flag
/// from the configured override, else from the hint only if the server is trusted.
pub(super) fn spec_of(config: &McpServerConfig, tool: &rmcp::model::Tool) -> ToolSpec {
    let title = tool
        .title
        .clone()
        .or_else(|| tool.annotations.as_ref().and_then(|a| a.title.clone()));
    let description = tool
        .description
        .as_deref()
        .or(title.as_deref())
        .unwrap_or_default();
    let annotations = tool.annotations.as_ref().map(|a| ToolAnnotations {
        read_only: a.read_only_hint,
        destructive: a.destructive_hint,
        idempotent: a.idempotent_hint,
        open_world: a.open_world_hint,
    });
    let hinted = annotations.as_ref().and_then(|a| a.read_only) == Some(true);
    let read_only = match config.tool_overrides.get(tool.name.as_ref()) {
        Some(ToolOverride {
            read_only: Some(yes),
        }) => *yes,
        _ => config.trust == HintTrust::Trusted && hinted,
    };
    let mut spec = ToolSpec::new(config.tool_name(&tool.name), description, ToolSource::Mcp)
        .parameters(Value::Object(tool.input_schema.as_ref().clone()))
        .read_only(read_only)
        .group(&config.name)
        .deferrable(true);
    spec.title = title;
    spec.annotations = annotations;
    spec.output_schema = tool
        .output_schema
        .as_ref()
        .map(|s| Value::Object(s.as_ref().clone()));
    spec
}

/// One tool of an MCP server, called over the server's shared connection.
pub(super) struct McpTool {
    pub(super) spec: ToolSpec,
    /// Its name on the server (the catalog name may carry the server's prefix).
    pub(super) remote: String,
    pub(super) shared: Arc<Shared>,
}

impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(
        &self,
        call: ToolCall,
        cx: ToolContext,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        let shared = Arc::clone(&self.shared);
        let tool = self.spec.name.clone();
        let remote = self.remote.clone();
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
            let mut params = CallToolRequestParams::new(remote);
            if let Some(arguments) = arguments {
                params = params.with_arguments(arguments);
            }
            let shown = Shown {
                cx: &cx,
                tool: &tool,
                server: &server,
            };
            match send(&shared, &connection, params, &shown).await {
                Ok(result) => Ok(ToolOutput::Message(tool_message(
                    (&call.id, &tool),
                    &shared.config,
                    result,
                ))),
                Err(ServiceError::Timeout { .. }) => Err(ToolError::failed(
                    tool.clone(),
                    McpError::CallTimeout {
                        server,
                        tool,
                        timeout: shared.config.call_timeout,
                    },
                )),
                Err(e) => Err(call_error(e, &connection, server, tool)),
            }
        })
    }
}

/// Send one `tools/call` and wait for its result: at most the call timeout without progress,
/// at most the overall limit in all (the SDK cancels the request on the server when either
/// runs out), showing each progress update meanwhile.
async fn send(
    shared: &Shared,
    connection: &Connection,
    params: CallToolRequestParams,
    shown: &Shown<'_>,
) -> Result<CallToolResult, ServiceError> {
    let config = &shared.config;
    let mut options = PeerRequestOptions::with_timeout(config.call_timeout);
    options.reset_timeout_on_progress = true;
    options.max_total_timeout = Some(config.max_call_time.max(config.call_timeout));
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = connection
        .service
        .peer()
        .send_request_with_option(request, options)
        .await?;
    let route = shared.notices.progress.open(&handle.progress_token);
    let answer = progress::forward(handle.await_response(), route, |update| {
        shown.progress(update)
    })
    .await?;
    match answer {
        ServerResult::CallToolResult(result) => Ok(result),
        _ => Err(ServiceError::UnexpectedResponse),
    }
}

/// Where a call's progress is shown: a custom stream event of the call's task.
struct Shown<'a> {
    cx: &'a ToolContext,
    tool: &'a str,
    server: &'a str,
}

impl Shown<'_> {
    /// Show one progress update (`{"mcp_progress": {tool, server, progress, total, message}}`).
    async fn progress(&self, update: ProgressNotificationParam) {
        tracing::debug!(server = %self.server, tool = %self.tool, progress = update.progress, "MCP progress");
        if let Some(node) = &self.cx.node {
            node.emit(serde_json::json!({"mcp_progress": {
                "tool": self.tool,
                "server": self.server,
                "progress": update.progress,
                "total": update.total,
                "message": update.message,
            }}))
            .await;
        }
    }
}

/// A failed call, as the tool node sees it.
pub(super) fn call_error(
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
/// media (images, audio, embedded blobs) within the server's limits attached, structured
/// content kept in the metadata; `isError` makes it an error message.
pub(super) fn tool_message(
    (call_id, tool): (&str, &str),
    config: &McpServerConfig,
    result: CallToolResult,
) -> ToolMessage {
    let mut attachments = Vec::new();
    let mut parts: Vec<String> = Vec::with_capacity(result.content.len());
    for block in &result.content {
        let mut text = describe_block(block);
        if let Some(attachment) = attachment_of(block) {
            match refusal(&attachment, attachments.len(), config) {
                None => attachments.push(attachment),
                Some(why) => {
                    text.pop();
                    text.push_str(&format!("; not passed on: {why}]"));
                }
            }
        }
        parts.push(text);
    }
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
    message.attachments = attachments;
    message
        .metadata
        .insert("mcp_server".to_owned(), Value::String(config.name.clone()));
    if let Some(structured) = result.structured_content {
        message
            .metadata
            .insert("structured_content".to_owned(), structured);
    }
    message
}

/// The media of an image or audio block, or of an embedded resource's blob (named by the last
/// segment of its URI; `application/octet-stream` when the server gave no media type).
fn attachment_of(block: &ContentBlock) -> Option<Attachment> {
    match block {
        ContentBlock::Image(image) => Some(Attachment::new(&image.mime_type, &image.data)),
        ContentBlock::Audio(audio) => Some(Attachment::new(&audio.mime_type, &audio.data)),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => {
                let mime_type = mime_type.as_deref().unwrap_or("application/octet-stream");
                let attachment = Attachment::new(mime_type, blob);
                Some(match file_name(uri) {
                    Some(name) => attachment.named(name),
                    None => attachment,
                })
            }
            _ => None,
        },
        _ => None,
    }
}

/// The last path segment of `uri`, if it has a non-empty one.
fn file_name(uri: &str) -> Option<&str> {
    let path = uri.split(['?', '#']).next().unwrap_or_default();
    let (_, last) = path.rsplit_once('/')?;
    (!last.is_empty()).then_some(last)
}

/// Why `attachment` is not passed on when `kept` already are (`None`: it is).
fn refusal(attachment: &Attachment, kept: usize, config: &McpServerConfig) -> Option<String> {
    let bytes = attachment.approx_bytes();
    if bytes > config.max_attachment_bytes {
        Some(format!(
            "about {bytes} bytes, over the limit of {}",
            config.max_attachment_bytes
        ))
    } else if kept >= config.max_attachments {
        Some(format!("more than {} attachments", config.max_attachments))
    } else {
        None
    }
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
        let message = tool_message(("c1", "t"), &McpServerConfig::new("srv", "x"), result);
        assert_eq!(
            message.content,
            "one\n[image: image/png, 4 bytes of base64]\ntwo"
        );
        assert_eq!(message.attachments, [Attachment::new("image/png", "AAAA")]);
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
    fn embedded_blobs_are_attached_named_by_their_uri_whatever_their_kind() {
        let blob = |uri: &str, mime: &str| {
            serde_json::from_value::<ContentBlock>(serde_json::json!({
                "type": "resource",
                "resource": {"uri": uri, "mimeType": mime, "blob": "AAAA"}
            }))
            .unwrap()
        };
        let result = CallToolResult::success(vec![
            blob("file:///chart.png", "image/png"),
            blob("file:///docs/report.pdf?v=2", "application/pdf"),
            blob("file:///data.gz", "application/gzip"),
        ]);
        let message = tool_message(("c1", "t"), &McpServerConfig::new("srv", "x"), result);
        assert_eq!(
            message.attachments,
            [
                Attachment::new("image/png", "AAAA").named("chart.png"),
                Attachment::new("application/pdf", "AAAA").named("report.pdf"),
                Attachment::new("application/gzip", "AAAA").named("data.gz"),
            ]
        );
        assert_eq!(
            message.content,
            "[resource file:///chart.png: image/png, 4 bytes of base64]\n\
             [resource file:///docs/report.pdf?v=2: application/pdf, 4 bytes of base64]\n\
             [resource file:///data.gz: application/gzip, 4 bytes of base64]"
        );
    }

    #[test]
    fn an_audio_block_is_attached_as_audio() {
        let result = CallToolResult::success(vec![ContentBlock::audio("UklG", "audio/wav")]);
        let message = tool_message(("c1", "t"), &McpServerConfig::new("srv", "x"), result);
        assert_eq!(message.attachments, [Attachment::new("audio/wav", "UklG")]);
        assert_eq!(
            message.attachments[0].kind(),
            crate::media::MediaKind::Audio
        );
        assert_eq!(message.content, "[audio: audio/wav, 4 bytes of base64]");
    }

    #[test]
    fn attachments_past_the_count_or_size_limit_are_only_described() {
        let result = CallToolResult::success(vec![
            ContentBlock::image("AAAA", "image/png"),
            ContentBlock::image("BBBB", "image/gif"),
        ]);
        let config = McpServerConfig::new("srv", "x").attachment_limits(1 << 20, 1);
        let message = tool_message(("c1", "t"), &config, result);
        assert_eq!(message.attachments, [Attachment::new("image/png", "AAAA")]);
        assert_eq!(
            message.content,
            "[image: image/png, 4 bytes of base64]\n\
             [image: image/gif, 4 bytes of base64; not passed on: more than 1 attachments]"
        );
        let big = CallToolResult::success(vec![ContentBlock::image("AAAAAAAA", "image/png")]);
        let config = McpServerConfig::new("srv", "x").attachment_limits(4, 4);
        let message = tool_message(("c1", "t"), &config, big);
        assert!(message.attachments.is_empty());
        assert!(message
            .content
            .ends_with("not passed on: about 6 bytes, over the limit of 4]"));
    }

    #[test]
    fn error_results_become_error_messages_and_empty_text_falls_back_to_structured() {
        let config = McpServerConfig::new("srv", "x");
        let message = tool_message(
            ("c1", "t"),
            &config,
            CallToolResult::error(vec![ContentBlock::text("bad")]),
        );
        assert!(message.is_error());
        assert_eq!(message.content, "bad");

        let mut result = CallToolResult::success(Vec::new());
        result.structured_content = Some(serde_json::json!({"sum": 3}));
        let message = tool_message(("c2", "t"), &config, result);
        assert_eq!(message.content, r#"{"sum":3}"#);
    }

    fn hinted_tool() -> rmcp::model::Tool {
        let mut schema = serde_json::Map::new();
        schema.insert("type".into(), Value::String("object".into()));
        let mut tool = rmcp::model::Tool::new("look", "Look around", schema).annotate(
            rmcp::model::ToolAnnotations::new()
                .read_only(true)
                .destructive(true)
                .idempotent(false)
                .open_world(true),
        );
        tool.title = Some("Look".to_owned());
        let mut out = serde_json::Map::new();
        out.insert("type".into(), Value::String("object".into()));
        tool.output_schema = Some(Arc::new(out));
        tool
    }

    #[test]
    fn spec_keeps_every_annotation_schema_title_and_group() {
        let spec = spec_of(&McpServerConfig::new("srv", "x"), &hinted_tool());
        assert_eq!(spec.name, "look");
        assert_eq!(spec.description, "Look around");
        assert_eq!(spec.title.as_deref(), Some("Look"));
        assert_eq!(spec.parameters, serde_json::json!({"type": "object"}));
        assert_eq!(
            spec.output_schema,
            Some(serde_json::json!({"type": "object"}))
        );
        assert_eq!(
            spec.annotations,
            Some(ToolAnnotations {
                read_only: Some(true),
                destructive: Some(true),
                idempotent: Some(false),
                open_world: Some(true),
            })
        );
        assert!(spec.deferrable);
        assert_eq!(spec.source, ToolSource::Mcp);
        assert_eq!(spec.group.as_deref(), Some("srv"));
    }

    #[test]
    fn a_read_only_hint_counts_only_from_a_trusted_server_or_an_override() {
        let tool = hinted_tool();
        let untrusted = McpServerConfig::new("srv", "x");
        assert!(!spec_of(&untrusted, &tool).read_only);
        let trusted = untrusted.clone().trust(HintTrust::Trusted);
        assert!(spec_of(&trusted, &tool).read_only);
        let vouched = untrusted.tool_override("look", ToolOverride::read_only(true));
        assert!(spec_of(&vouched, &tool).read_only);
        let overruled = trusted.tool_override("look", ToolOverride::read_only(false));
        assert!(!spec_of(&overruled, &tool).read_only);
    }

    #[test]
    fn a_prefixed_server_names_its_tools_server_underscore_underscore_tool() {
        let config = McpServerConfig::new("srv", "x").prefix(super::super::ToolPrefix::Server);
        assert_eq!(spec_of(&config, &hinted_tool()).name, "srv__look");
    }
}
