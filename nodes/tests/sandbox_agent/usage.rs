//! A run's token usage in its settlement and its stored run record: summed over its model
//! calls, zero tokens for a model that reports none, and kept for a run that failed.

use stategraph::checkpoints::{RunStatus, Saver, SqliteSaver, ThreadId};
use stategraph_nodes::prelude::*;

use crate::settlement::{present, script, write, Setup, THREAD};
use crate::support::*;

/// `reply` as a model's answer that reported `usage`.
fn with_usage(mut reply: AiMessage, input: u64, output: u64) -> AiMessage {
    reply.usage = Some(stategraph_nodes::Usage {
        input_tokens: input,
        output_tokens: output,
        total_tokens: input + output,
    });
    reply
}

#[tokio::test]
async fn an_agent_run_stores_its_summed_token_usage_in_its_run_record() -> R {
    let setup = Setup::new()?;
    let model = ScriptedModel::new(
        "m",
        [
            with_usage(write("w", "/mnt/user-data/outputs/a.md"), 100, 10),
            with_usage(present("p", &["/mnt/user-data/outputs/a.md"]), 15, 12),
            with_usage(AiMessage::text("done"), 5, 8),
        ],
    );
    let agent = setup.agent(&model, vec![]).await?;
    let out = agent.ask("go").await?;
    let expected = stategraph::TokenUsage {
        input_tokens: 120,
        output_tokens: 30,
        total_tokens: 150,
        model_calls: 3,
    };
    assert_eq!(out.settlement.usage, expected);
    assert_eq!(
        setup.stored(&out.settlement.run_id).await?.usage,
        Some(expected)
    );
    // Read back from the file after reopening it.
    let reopened = SqliteSaver::open(setup.tmp.path().join("threads.db"))?;
    let stored = reopened
        .get_run(Some(&ThreadId::new(THREAD)?), &out.settlement.run_id)
        .await?
        .ok_or("the run was not stored")?;
    assert_eq!(stored.usage, Some(expected));
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn a_run_on_a_model_without_usage_stores_zero_tokens_and_its_calls() -> R {
    let setup = Setup::new()?;
    let model = script(vec![
        write("w", "/mnt/user-data/outputs/a.md"),
        present("p", &["/mnt/user-data/outputs/a.md"]),
    ]);
    let agent = setup.agent(&model, vec![]).await?;
    let out = agent.ask("go").await?;
    let stored = setup.stored(&out.settlement.run_id).await?;
    let usage = stored.usage.ok_or("no usage stored")?;
    assert_eq!((usage.total_tokens, usage.model_calls), (0, 3));
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn a_failed_run_stores_the_usage_of_the_calls_it_made() -> R {
    let setup = Setup::new()?;
    // The script ends after the write: the second model call fails.
    let model = ScriptedModel::new(
        "m",
        [with_usage(write("w", "/mnt/user-data/outputs/a.md"), 7, 3)],
    );
    let agent = setup.agent(&model, vec![]).await?;
    let err = agent.ask("go").await.err().ok_or("the run succeeded")?;
    let settled = err.settlement().ok_or("no settlement")?;
    let stored = setup.stored(&settled.run_id).await?;
    assert_eq!(stored.status, RunStatus::Error);
    assert_eq!(
        stored.usage,
        Some(stategraph::TokenUsage::of_call(7, 3, 10))
    );
    model.clear();
    Ok(())
}
