//! A small MCP server over stdio, for the tests of the MCP tool source.
//!
//! Tools:
//! - `echo {text}`: returns the text (read-only hint set); prefixed by `$MCP_FIXTURE_PREFIX`
//!   when that is set.
//! - `add {a, b}`: the sum as text, and `{"sum": ...}` as structured content.
//! - `fail {message}`: a result with `isError: true`.
//! - `slow {ms, progress_ms?}`: sleeps that long, then answers; with `progress_ms`, reports
//!   progress that often meanwhile (when the request carries a progress token).
//! - `picture`: a text block and an image block.
//! - `media`: a text block, an audio block (`audio/wav`), an embedded PDF resource
//!   (`file:///reports/q3.pdf`) and an embedded `application/gzip` resource.
//! - `crash`: the server exits without answering.
//! - `env {name}`: the value of the server's environment variable `name`, or `(unset)`
//!   (read-only hint set).
//! - `wipe`: claims to be read-only (`readOnlyHint`) and destructive (`destructiveHint`), with
//!   every other annotation, a title and an output schema: a server whose hints lie.
//! - `pid`: the server's process id.
//! - `grow`: adds a tool `grown` to the list and sends `notifications/tools/list_changed`.
//!
//! The list is served two tools per page, so a client has to follow the cursor.
//!
//! Options: `--exit-at-start` (exit before reading anything), `--stall-at-start` (read the
//! initialize request and never answer), `--linger` (stay alive an hour after the client
//! closes the connection, as a server that ignores the end of its input would).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ResourceContents,
    ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};

const PAGE: usize = 2;

struct Fixture {
    tools: Mutex<Vec<Tool>>,
}

fn schema(value: Value) -> Arc<JsonObject> {
    Arc::new(match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    })
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "echo",
            "Repeat the text",
            schema(json!({
                "type": "object",
                "properties": {"text": {"type": "string", "description": "what to repeat"}},
                "required": ["text"]
            })),
        )
        .annotate(ToolAnnotations::new().read_only(true)),
        Tool::new(
            "add",
            "Add two numbers",
            schema(json!({
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"]
            })),
        )
        .annotate(ToolAnnotations::new().read_only(false)),
        Tool::new(
            "fail",
            "Always reports an error",
            schema(json!({"type": "object", "properties": {"message": {"type": "string"}}})),
        ),
        Tool::new(
            "slow",
            "Sleep, then answer",
            schema(json!({
                "type": "object",
                "properties": {
                    "ms": {"type": "integer", "minimum": 0},
                    "progress_ms": {"type": "integer", "minimum": 0}
                },
                "required": ["ms"]
            })),
        ),
        Tool::new(
            "picture",
            "A caption and an image",
            schema(json!({"type": "object", "properties": {}})),
        ),
        Tool::new(
            "media",
            "A caption, a sound, a report and an archive",
            schema(json!({"type": "object", "properties": {}})),
        ),
        Tool::new(
            "crash",
            "Exit the server without answering",
            schema(json!({"type": "object", "properties": {}})),
        ),
        Tool::new(
            "env",
            "Read one of the server's environment variables",
            schema(json!({
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"]
            })),
        )
        .annotate(ToolAnnotations::new().read_only(true)),
        wipe(),
        Tool::new(
            "pid",
            "The server's process id",
            schema(json!({"type": "object", "properties": {}})),
        ),
        Tool::new(
            "grow",
            "Add a tool to the list",
            schema(json!({"type": "object", "properties": {}})),
        ),
    ]
}

/// A destructive tool whose hints say it only reads.
fn wipe() -> Tool {
    let mut tool = Tool::new(
        "wipe",
        "Delete every record",
        schema(json!({"type": "object", "properties": {}})),
    )
    .annotate(
        ToolAnnotations::new()
            .read_only(true)
            .destructive(true)
            .idempotent(true)
            .open_world(false),
    );
    tool.title = Some("Wipe".to_owned());
    tool.output_schema = Some(schema(json!({
        "type": "object",
        "properties": {"deleted": {"type": "integer"}}
    })));
    tool
}

/// `media`: a caption, then audio, a PDF and an archive (base64 of a few bytes each).
fn media() -> Vec<ContentBlock> {
    let blob = |uri: &str, mime_type: &str, blob: &str| {
        ContentBlock::resource(ResourceContents::blob(blob, uri).with_mime_type(mime_type))
    };
    vec![
        ContentBlock::text("a beep and the report"),
        ContentBlock::audio("UklGRiQAAABXQVZF", "audio/wav"),
        blob("file:///reports/q3.pdf", "application/pdf", "JVBERi0xLjQK"),
        blob("file:///dumps/all.gz", "application/gzip", "H4sIAAAAAAAA"),
    ]
}

fn number(args: &JsonObject, key: &str) -> Result<f64, ErrorData> {
    args.get(key)
        .and_then(Value::as_f64)
        .ok_or_else(|| ErrorData::invalid_params(format!("`{key}` must be a number"), None))
}

impl Fixture {
    async fn call(&self, name: &str, args: JsonObject) -> Result<CallToolResult, ErrorData> {
        match name {
            "echo" => {
                let text = args
                    .get("text")
                    .and_then(Value::as_str)
                    .ok_or_else(|| ErrorData::invalid_params("`text` must be a string", None))?;
                let prefix = std::env::var("MCP_FIXTURE_PREFIX").unwrap_or_default();
                Ok(CallToolResult::success(vec![ContentBlock::text(format!(
                    "{prefix}{text}"
                ))]))
            }
            "add" => {
                let sum = number(&args, "a")? + number(&args, "b")?;
                let mut result = CallToolResult::success(vec![ContentBlock::text(sum.to_string())]);
                result.structured_content = Some(json!({ "sum": sum }));
                Ok(result)
            }
            "fail" => {
                let message = args
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("it failed");
                Ok(CallToolResult::error(vec![ContentBlock::text(message)]))
            }
            "picture" => Ok(CallToolResult::success(vec![
                ContentBlock::text("a red dot"),
                ContentBlock::image("iVBORw0KGgo=", "image/png"),
            ])),
            "media" => Ok(CallToolResult::success(media())),
            "crash" => std::process::exit(3),
            "env" => {
                let name = args
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| ErrorData::invalid_params("`name` must be a string", None))?;
                let value = std::env::var(name).unwrap_or_else(|_| "(unset)".to_owned());
                Ok(CallToolResult::success(vec![ContentBlock::text(value)]))
            }
            "wipe" => Ok(CallToolResult::success(vec![ContentBlock::text(
                "deleted 0 records",
            )])),
            "pid" => Ok(CallToolResult::success(vec![ContentBlock::text(
                std::process::id().to_string(),
            )])),
            other => Err(ErrorData::invalid_params(
                format!("no tool named {other:?}"),
                None,
            )),
        }
    }
}

/// `slow`: sleep `ms`, reporting progress every `progress_ms` if asked to and given a token.
async fn slow_with_progress(
    args: &JsonObject,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResult, ErrorData> {
    let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(0);
    let every = args.get("progress_ms").and_then(Value::as_u64);
    let token = context.meta.get_progress_token();
    match (every, token) {
        (Some(every), Some(token)) if every > 0 => {
            let mut slept = 0;
            while slept < ms {
                let step = every.min(ms - slept);
                tokio::time::sleep(Duration::from_millis(step)).await;
                slept += step;
                let _ = context
                    .peer
                    .notify_progress(ProgressNotificationParam::new(token.clone(), slept as f64))
                    .await;
            }
        }
        _ => tokio::time::sleep(Duration::from_millis(ms)).await,
    }
    Ok(CallToolResult::success(vec![ContentBlock::text(format!(
        "slept {ms} ms"
    ))]))
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_instructions("stategraph MCP test fixture")
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .map_err(|_| ErrorData::invalid_params("bad cursor", None))?,
        };
        let tools = self.tools.lock().unwrap_or_else(PoisonError::into_inner);
        let end = (start + PAGE).min(tools.len());
        let page = tools.get(start..end).unwrap_or_default().to_vec();
        let mut result = ListToolsResult::with_all_items(page);
        if end < tools.len() {
            result.next_cursor = Some(end.to_string());
        }
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name == "slow" {
            let args = request.arguments.unwrap_or_default();
            return slow_with_progress(&args, &context).await.map(Into::into);
        }
        if request.name == "grow" {
            self.tools
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Tool::new(
                    "grown",
                    "Added by grow",
                    schema(json!({"type": "object", "properties": {}})),
                ));
            context
                .peer
                .notify_tool_list_changed()
                .await
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
            return Ok(CallToolResult::success(vec![ContentBlock::text("grown")]).into());
        }
        let args = request.arguments.unwrap_or_default();
        self.call(&request.name, args).await.map(Into::into)
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let options: Vec<String> = std::env::args().skip(1).collect();
    if options.iter().any(|o| o == "--exit-at-start") {
        std::process::exit(2);
    }
    if options.iter().any(|o| o == "--stall-at-start") {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        return Ok(());
    }
    let server = Fixture {
        tools: Mutex::new(tools()),
    }
    .serve(rmcp::transport::stdio())
    .await?;
    let _ = server.waiting().await;
    if options.iter().any(|o| o == "--linger") {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
    Ok(())
}
