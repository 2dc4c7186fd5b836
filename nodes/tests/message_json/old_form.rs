//! Messages stored before they were LangChain dicts (`fixtures/messages/old_form.json`, and a
//! SQLite checkpoint file holding a conversation, both written by the code of that time)
//! still read, unchanged in meaning.

use std::sync::Arc;

use serde_json::json;
use stategraph::checkpoints::SqliteSaver;
use stategraph::{BoxError, NodeContext, RunConfig, StateGraph, END, START};
use stategraph_nodes::media::Attachment;
use stategraph_nodes::{Message, ThreadState};

use crate::samples::every_kind;
use crate::{fixture, R};

#[test]
fn every_kind_of_message_in_the_old_stored_form_reads_unchanged() -> R {
    let stored: Vec<Message> = serde_json::from_value(fixture("messages/old_form.json")?)?;
    let want = every_kind();
    assert_eq!(stored.len(), want.len());
    for (read, want) in stored.iter().zip(&want) {
        assert_eq!(read, want);
    }
    Ok(())
}

#[test]
fn an_old_stored_message_is_written_again_in_the_langchain_form() -> R {
    let stored: Vec<Message> = serde_json::from_value(fixture("messages/old_form.json")?)?;
    let ai = serde_json::to_value(&stored[2])?;
    assert_eq!(
        ai["response_metadata"],
        json!({"finish_reason": "tool_calls"})
    );
    assert_eq!(ai["usage_metadata"]["total_tokens"], 150);
    assert_eq!(ai["tool_calls"][0]["type"], "tool_call");
    assert!(ai.get("finish_reason").is_none() && ai.get("usage").is_none());
    let other = serde_json::to_value(&stored[8])?;
    assert_eq!(other["response_metadata"]["finish_reason"], "end_turn");
    let tool = serde_json::to_value(&stored[3])?;
    assert_eq!(tool["additional_kwargs"], json!({"rows": 7}));
    assert!(tool.get("metadata").is_none() && tool.get("status").is_none());
    Ok(())
}

#[test]
fn a_stored_tool_message_with_an_images_list_reads_into_attachments() -> R {
    // Stored before audio and files were kept: the list was named `images`.
    let old = json!({
        "type": "tool", "tool_call_id": "c1", "name": "chart", "content": "[image]",
        "status": "success", "images": [{"mime_type": "image/png", "data": "iVBORw0KGgo="}]
    });
    let message: Message = serde_json::from_value(old)?;
    assert_eq!(
        message.attachments(),
        [Attachment::new("image/png", "iVBORw0KGgo=")]
    );
    Ok(())
}

/// The golden checkpoint file: thread `golden` of a one-node `ThreadState` graph, run once
/// with [`every_kind`] as input, written before messages were LangChain dicts.
fn golden_copy(dir: &tempfile::TempDir) -> Result<std::path::PathBuf, BoxError> {
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/checkpoints/thread_messages_old_form.db");
    let copy = dir.path().join("copy.db");
    std::fs::copy(&golden, &copy)?;
    Ok(copy)
}

#[tokio::test]
async fn a_checkpoint_file_written_in_the_old_form_loads_the_same_messages_and_resumes() -> R {
    let dir = tempfile::tempdir()?;
    let store = Arc::new(SqliteSaver::open(golden_copy(&dir)?)?);
    let graph = StateGraph::<ThreadState>::new()
        .add_node("noop", |_s: Arc<ThreadState>, _c: NodeContext| async move {
            Ok::<_, BoxError>(ThreadState::update())
        })
        .add_edge(START, "noop")
        .add_edge("noop", END)
        .compile()?
        .with_checkpointer(store);
    let snap = graph
        .get_state("golden", None)
        .await?
        .ok_or("no state in the fixture")?;
    assert_eq!(
        snap.values.messages.iter().cloned().collect::<Vec<_>>(),
        every_kind()
    );
    let config = RunConfig::new().thread("golden");
    graph
        .invoke(ThreadState::human_input("and now?"), &config)
        .await?;
    let again = graph.get_state("golden", None).await?.ok_or("no state")?;
    let texts: Vec<&str> = again.values.messages.iter().map(Message::text).collect();
    assert_eq!(texts.len(), every_kind().len() + 1);
    assert_eq!(texts.last(), Some(&"and now?"));
    Ok(())
}
