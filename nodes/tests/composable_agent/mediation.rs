//! The tool node over a user's state keeps the call-time mediation: a call the model was not
//! shown — a tool a policy hides, or one the toolbox does not have — is refused before any
//! handler runs, with an error tool message the model reads.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use stategraph_nodes::prelude::*;
use stategraph_nodes::toolbox::Toolbox;
use stategraph_nodes::{Denial, ToolPolicy, Verdict};

use crate::support::{ask, call, counted, research_graph, tool_messages, R};

/// A policy that keeps `delete` from the model and refuses its calls.
struct NoDelete;

impl ToolPolicy for NoDelete {
    fn name(&self) -> &str {
        "no_delete"
    }

    fn visible(&self, tools: &[&ToolSpec], _: &ThreadState, _: &RunContext) -> Vec<Option<String>> {
        tools
            .iter()
            .map(|t| (t.name == "delete").then(|| "deleting is not allowed".to_owned()))
            .collect()
    }

    fn check_call(
        &self,
        call: &ToolCall,
        _: Option<&ToolSpec>,
        _: &ThreadState,
        _: &RunContext,
    ) -> Result<(), Denial> {
        if call.name == "delete" {
            return Err(Denial::new(
                "deleting is not allowed",
                "Error: delete is not allowed",
            ));
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_call_the_model_was_not_shown_is_refused_before_its_handler_runs() -> R {
    let searched = Arc::new(AtomicUsize::new(0));
    let deleted = Arc::new(AtomicUsize::new(0));
    // The model calls a hidden tool, a tool the toolbox does not have, and a visible one.
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([
                call("c1", "delete"),
                call("c2", "format_disk"),
                call("c3", "search"),
            ]),
            AiMessage::text("done"),
        ],
    );
    let tools = Toolbox::new()
        .tool(counted("search", false, &searched))
        .tool(counted("delete", false, &deleted))
        .policy(NoDelete);
    let out = research_graph(&model, &tools)?
        .invoke(ask("x", "clean up"), &Default::default())
        .await?;

    let shown: Vec<String> = model.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(shown, ["search"], "the policy hid delete from the model");
    assert_eq!(
        deleted.load(Ordering::SeqCst),
        0,
        "a refused call's handler never runs"
    );
    assert_eq!(searched.load(Ordering::SeqCst), 1);

    let replies = tool_messages(&out.state.chat);
    assert_eq!(replies.len(), 3, "every call is answered: {replies:?}");
    assert!(replies[0].is_error() && replies[0].content.contains("delete is not allowed"));
    assert!(replies[1].is_error() && replies[1].content.starts_with("Error:"));
    assert!(!replies[2].is_error());

    let trace = tools.trace();
    let why = trace
        .why_not("delete", Stage::Executed)
        .ok_or("delete has no denial")?;
    assert!(
        matches!(why.verdict, Verdict::Denied { ref by, .. } if by == "no_delete"),
        "{why:?}"
    );
    assert!(
        matches!(trace.why_not("delete", Stage::Visible).map(|e| e.verdict), Some(Verdict::Removed { by, .. }) if by == "no_delete")
    );
    let unknown = trace
        .why_not("format_disk", Stage::Executed)
        .ok_or("no denial")?;
    assert!(
        matches!(unknown.verdict, Verdict::Denied { ref by, .. } if by == "catalog"),
        "{unknown:?}"
    );
    assert!(trace.reached("search", Stage::Returned));
    assert!(!trace.reached("delete", Stage::Executed));
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn a_tool_command_writing_fields_the_user_state_lacks_fails_the_node() -> R {
    // Nothing is lost silently: a tool whose command writes ThreadState's `title` cannot be
    // translated into a user's state, and the node fails naming the tool and the field.
    let titled = FnTool::new(
        ToolSpec::new("titled", "sets a title", ToolSource::Config),
        |call, _cx| async move {
            let update = ThreadState::update()
                .title(Some("t".into()))
                .messages(Message::Tool(ToolMessage::new(&call.id, "titled", "ok")).into());
            Ok(stategraph::Command::new().update(update).into())
        },
    );
    let model = ScriptedModel::new("m", [AiMessage::calls([call("c1", "titled")])]);
    let tools = Toolbox::new().tool(titled);
    let err = research_graph(&model, &tools)?
        .invoke(ask("x", "go"), &Default::default())
        .await
        .err()
        .ok_or("the run should fail")?;
    let text = err.to_string();
    assert!(text.contains("titled") && text.contains("title"), "{text}");
    Ok(())
}
