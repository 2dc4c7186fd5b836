//! A secret reaches `bash` only when all five conditions hold, each checked on every call.

use std::sync::Arc;

use serde_json::json;
use stategraph_nodes::prelude::*;
use stategraph_nodes::sandbox_tools::{bash, bash_with_secrets};

use crate::support::*;

#[tokio::test]
async fn with_all_five_conditions_met_bash_receives_the_secret() -> R {
    let setup = Setup::all_met()?;
    assert_eq!(setup.probe_once().await?, "present");
    Ok(())
}

#[tokio::test]
async fn a_skill_read_into_skill_context_is_active_and_grants_its_secret() -> R {
    let setup = Setup::all_met()?.both_read();
    assert_eq!(setup.probe_once().await?, "present");
    Ok(())
}

#[tokio::test]
async fn a_disabled_skill_grants_no_secret() -> R {
    let setup = Setup::all_met()?.both_read();
    setup.skills.set_enabled("sales", false)?;
    assert_eq!(setup.probe_once().await?, "absent");
    Ok(())
}

#[tokio::test]
async fn a_skill_outside_the_agents_available_skills_grants_no_secret() -> R {
    let mut setup = Setup::all_met()?.both_read();
    setup.available = Some(vec!["other".into()]);
    assert_eq!(setup.probe_once().await?, "absent");
    setup.available = Some(vec!["other".into(), "sales".into()]);
    assert_eq!(setup.probe_once().await?, "present");
    Ok(())
}

#[tokio::test]
async fn an_enabled_skill_that_is_not_active_grants_no_secret() -> R {
    let mut setup = Setup::all_met()?;
    setup.run = RunContext::new("t1", "ana");
    assert_eq!(setup.probe_once().await?, "absent", "passive");
    setup.run = RunContext::new("t1", "ana").slash_skill(OTHER);
    assert_eq!(
        setup.probe_once().await?,
        "absent",
        "another skill is active"
    );
    Ok(())
}

#[tokio::test]
async fn a_slash_skill_dominates_a_read_skill_that_declares_the_secret() -> R {
    let mut setup = Setup::all_met()?.both_read();
    setup.run = RunContext::new("t1", "ana").slash_skill(OTHER);
    assert_eq!(setup.probe_once().await?, "absent");
    Ok(())
}

#[tokio::test]
async fn a_secret_the_store_does_not_supply_is_not_given() -> R {
    let setup = Setup::all_met()?;
    assert!(setup.secrets.revoke(TOKEN));
    assert_eq!(setup.probe_once().await?, "absent");
    Ok(())
}

#[tokio::test]
async fn a_tool_that_does_not_declare_the_secret_does_not_receive_it() -> R {
    let mut setup = Setup::all_met()?;
    setup.tools = vec![Arc::new(bash())];
    assert_eq!(setup.probe_once().await?, "absent", "declares nothing");
    setup.tools = vec![Arc::new(bash_with_secrets(["OTHER_TOKEN"]))];
    setup.secrets.insert("OTHER_TOKEN", "other-value");
    assert_eq!(setup.probe_once().await?, "absent", "declares another name");
    Ok(())
}

#[tokio::test]
async fn a_secret_the_skill_does_not_declare_is_not_given_even_if_the_tool_declares_it() -> R {
    let mut setup = Setup::all_met()?;
    setup.tools = vec![Arc::new(bash_with_secrets([TOKEN, "EXTRA"]))];
    setup.secrets.insert("EXTRA", "extra-value");
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([probe("c1", TOKEN), probe("c2", "EXTRA")]),
            AiMessage::text("done"),
        ],
    );
    let out = setup.agent(&model).await?.ask("go").await?;
    assert_eq!(answer(&out.state, "c1")?, "present");
    assert_eq!(answer(&out.state, "c2")?, "absent");
    model.verify()?;
    Ok(())
}

/// A tool that runs `change` when called: the application acting between two calls.
fn between(name: &str, change: impl Fn() + Send + Sync + 'static) -> FnTool {
    let change = Arc::new(change);
    FnTool::new(
        ToolSpec::new(name, "changes the stores", ToolSource::Config),
        move |call, _cx| {
            let change = Arc::clone(&change);
            async move {
                change();
                Ok(ToolMessage::new(&call.id, &call.name, "changed").into())
            }
        },
    )
}

#[tokio::test]
async fn a_secret_revoked_between_two_calls_is_gone_on_the_second() -> R {
    let mut setup = Setup::all_met()?;
    let secrets = Arc::clone(&setup.secrets);
    setup.tools.push(Arc::new(between("revoke", move || {
        secrets.revoke(TOKEN);
    })));
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([probe("c1", TOKEN)]),
            AiMessage::calls([ToolCall::new("c2", "revoke", json!({}))]),
            AiMessage::calls([probe("c3", TOKEN)]),
            AiMessage::text("done"),
        ],
    );
    let out = setup.agent(&model).await?.ask("go").await?;
    assert_eq!(answer(&out.state, "c1")?, "present");
    assert_eq!(answer(&out.state, "c3")?, "absent");
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn a_skill_disabled_between_two_calls_grants_nothing_on_the_second() -> R {
    let mut setup = Setup::all_met()?.both_read();
    let skills = Arc::clone(&setup.skills);
    setup.tools.push(Arc::new(between("disable", move || {
        let _ = skills.set_enabled("sales", false);
    })));
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([probe("c1", TOKEN)]),
            AiMessage::calls([ToolCall::new("c2", "disable", json!({}))]),
            AiMessage::calls([probe("c3", TOKEN)]),
            AiMessage::text("done"),
        ],
    );
    let out = setup.ask(&setup.agent(&model).await?).await?;
    assert_eq!(answer(&out.state, "c1")?, "present");
    assert_eq!(answer(&out.state, "c3")?, "absent");
    model.verify()?;
    Ok(())
}

#[tokio::test]
async fn a_secret_bash_prints_is_replaced_by_its_name_in_the_result() -> R {
    let setup = Setup::all_met()?;
    let model = ScriptedModel::new(
        "m",
        [
            AiMessage::calls([ToolCall::new(
                "c1",
                "bash",
                json!({"command": format!("printenv {TOKEN}; env | grep -c {TOKEN}")}),
            )]),
            AiMessage::text("done"),
        ],
    );
    let out = setup.agent(&model).await?.ask("go").await?;
    assert_eq!(
        answer(&out.state, "c1")?,
        format!("[secret {TOKEN}]\n1"),
        "the value was not printed exactly, or not redacted"
    );
    model.verify()?;
    Ok(())
}
