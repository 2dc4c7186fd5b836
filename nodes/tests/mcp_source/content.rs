//! Non-text content: the images, audio and embedded blobs a tool returns reach the model's
//! request as attachments, within the server's limits.

use serde_json::json;
use stategraph_nodes::mcp::McpServer;
use stategraph_nodes::media::{Attachment, MediaKind};
use stategraph_nodes::prelude::*;

use super::{call, find, fixture};

/// The answer to one call of the fixture's `tool` (from a server named `server`), as the
/// agent's next model request carries it.
async fn next_request_answer(
    tool: &str,
    server: &str,
) -> Result<ToolMessage, Box<dyn std::error::Error + Send + Sync>> {
    let model = ScriptedModel::new(
        "demo",
        [
            AiMessage::calls([ToolCall::new("c1", tool, json!({}))]),
            AiMessage::text("seen"),
        ],
    );
    let agent = AgentBuilder::new(model.clone())
        .provider(McpServer::new(fixture(server)))
        .defer_tools(false)
        .assemble(RunContext::new("t1", "ana"))
        .await?;
    agent.ask("what did it return?").await?;
    let requests = model.requests();
    let answer = requests
        .get(1)
        .and_then(|r| r.messages.iter().find_map(Message::as_tool))
        .ok_or("no tool answer in the second request")?;
    Ok(answer.clone())
}

#[tokio::test]
async fn an_image_result_reaches_the_next_model_request_as_an_image_part() {
    let answer = next_request_answer("picture", "pictures")
        .await
        .expect("the picture's answer");
    assert_eq!(
        answer.attachments,
        [Attachment::new("image/png", "iVBORw0KGgo=")]
    );
    // Models that take no images still read what it was.
    assert_eq!(
        answer.content,
        "a red dot\n[image: image/png, 12 bytes of base64]"
    );
}

#[tokio::test]
async fn an_image_over_the_servers_limit_is_only_described() {
    let server = McpServer::new(fixture("small").attachment_limits(4, 4));
    let tools = server.tools().await.expect("list");
    let message = call(&find(&tools, "picture").expect("picture"), json!({}))
        .await
        .expect("picture");
    assert!(message.attachments.is_empty());
    assert_eq!(
        message.content,
        "a red dot\n[image: image/png, 12 bytes of base64; not passed on: about 9 bytes, over the limit of 4]"
    );
}

#[tokio::test]
async fn audio_and_embedded_blobs_reach_the_next_model_request_as_attachments() {
    let answer = next_request_answer("media", "sounds")
        .await
        .expect("the media's answer");
    assert_eq!(
        answer.attachments,
        [
            Attachment::new("audio/wav", "UklGRiQAAABXQVZF"),
            Attachment::new("application/pdf", "JVBERi0xLjQK").named("q3.pdf"),
            Attachment::new("application/gzip", "H4sIAAAAAAAA").named("all.gz"),
        ]
    );
    let kinds: Vec<MediaKind> = answer.attachments.iter().map(Attachment::kind).collect();
    assert_eq!(kinds, [MediaKind::Audio, MediaKind::File, MediaKind::File]);
    // A model that takes none of them still reads what each was.
    assert_eq!(
        answer.content,
        "a beep and the report\n\
         [audio: audio/wav, 16 bytes of base64]\n\
         [resource file:///reports/q3.pdf: application/pdf, 12 bytes of base64]\n\
         [resource file:///dumps/all.gz: application/gzip, 12 bytes of base64]"
    );
}
