//! Non-text content: an image a tool returns reaches the model's request as an image part,
//! within the server's limits.

use serde_json::json;
use stategraph_nodes::mcp::McpServer;
use stategraph_nodes::prelude::*;
use stategraph_nodes::ImagePart;

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
    assert_eq!(answer.images, [ImagePart::new("image/png", "iVBORw0KGgo=")]);
    // Models that take no images still read what it was.
    assert_eq!(
        answer.content,
        "a red dot\n[image: image/png, 12 bytes of base64]"
    );
}

#[tokio::test]
async fn an_image_over_the_servers_limit_is_only_described() {
    let server = McpServer::new(fixture("small").image_limits(4, 4));
    let tools = server.tools().await.expect("list");
    let message = call(&find(&tools, "picture").expect("picture"), json!({}))
        .await
        .expect("picture");
    assert!(message.images.is_empty());
    assert_eq!(
        message.content,
        "a red dot\n[image: image/png, 12 bytes of base64; not passed on: about 9 bytes, over the limit of 4]"
    );
}
