//! Non-text content: the images, audio and embedded blobs a tool returns reach the model's
//! request as attachments, within the server's limits.

use serde_json::json;
use stategraph_nodes::mcp::McpServer;
use stategraph_nodes::media::{Attachment, MediaKind};
use stategraph_nodes::prelude::*;

use super::{call, find, fixture};

#[tokio::test]
async fn an_image_result_reaches_the_next_model_request_as_an_image_part() {
    let model = ScriptedModel::new(
        "demo",
        [
            AiMessage::calls([ToolCall::new("c1", "picture", json!({}))]),
            AiMessage::text("a red dot"),
        ],
    );
    let agent = AgentBuilder::new(model.clone())
        .provider(McpServer::new(fixture("pictures")))
        .defer_tools(false)
        .assemble(RunContext::new("t1", "ana"))
        .await
        .expect("assemble");
    agent.ask("what is in the picture?").await.expect("run");
    let requests = model.requests();
    let answer = requests[1]
        .messages
        .iter()
        .find_map(Message::as_tool)
        .expect("the tool's answer in the second request");
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
    let model = ScriptedModel::new(
        "demo",
        [
            AiMessage::calls([ToolCall::new("c1", "media", json!({}))]),
            AiMessage::text("a beep"),
        ],
    );
    let agent = AgentBuilder::new(model.clone())
        .provider(McpServer::new(fixture("sounds")))
        .defer_tools(false)
        .assemble(RunContext::new("t1", "ana"))
        .await
        .expect("assemble");
    agent.ask("what did it return?").await.expect("run");
    let requests = model.requests();
    let answer = requests[1]
        .messages
        .iter()
        .find_map(Message::as_tool)
        .expect("the tool's answer in the second request");
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
