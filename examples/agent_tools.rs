//! An agent with a capability lifecycle you can read: a scripted model, config tools, deferred
//! MCP-style tools found through `tool_search`, an authorization table, a slash-activated
//! skill whose policy narrows the tools, and a guardrail that denies one call. The thread is
//! checkpointed in a SQLite file; at the end the capability trace says why each tool was or
//! was not shown and run.
//!
//! Run with `cargo run --release --example agent_tools` (no network, no API key).

use std::sync::Arc;

use serde_json::json;
use stategraph::checkpoints::SqliteSaver;
use stategraph_nodes::prelude::*;
use stategraph_nodes::skill::SkillRegistry;
use stategraph_nodes::{Agent, AgentError};
use stategraph_nodes::{
    AllowlistProvider, Authorization, Guardrail, RoleTable, Stage, TOOL_SEARCH,
};

const SALES_SKILL: &str = "/mnt/skills/public/sales-review/SKILL.md";

/// A tool that answers from a fixed table.
fn canned(spec: ToolSpec, answer: &'static str) -> FnTool {
    let name = spec.name.clone();
    FnTool::new(spec, move |call, _cx| {
        let name = name.clone();
        async move { Ok(ToolMessage::new(call.id, name, answer).into()) }
    })
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Sum {
    /// Numbers to add.
    values: Vec<f64>,
}

fn call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall::new(id, name, args)
}

/// The model's side of the conversation, scripted.
fn script() -> ScriptedModel {
    ScriptedModel::new(
        "scripted-sales",
        [
            AiMessage::calls([call(
                "c1",
                TOOL_SEARCH,
                json!({"query": "select:crm_lookup,crm_delete"}),
            )]),
            AiMessage::calls([
                call("c2", "crm_lookup", json!({"account": "ACME"})),
                call("c3", "crm_delete", json!({"account": "ACME"})),
                call("c4", "web_search", json!({"q": "ACME news"})),
            ]),
            AiMessage::calls([call(
                "c5",
                "calc",
                json!({"values": [120000.0, 80000.0, 45500.0]}),
            )]),
            AiMessage::text(
                "ACME: 3 open deals worth 245,500 in total. I did not delete anything.",
            ),
        ],
    )
}

/// The agent: tools from every source, an authorization table, a guardrail and a
/// slash-activated skill, assembled for an analyst's run.
async fn assemble(model: ScriptedModel) -> Result<Agent, AgentError> {
    // Available: config tools, a built-in, and MCP-style tools (deferred behind tool_search).
    let calc = FnTool::typed(
        ToolSpec::new("calc", "Add numbers", ToolSource::Config).read_only(true),
        |args: Sum, _cx| async move {
            Ok::<_, stategraph::BoxError>(args.values.iter().sum::<f64>().to_string())
        },
    );
    let skills = SkillRegistry::from_skill_mds([(
        SALES_SKILL,
        "---\nname: sales-review\ndescription: Review a customer's pipeline\nallowed-tools: [calc, crm_lookup, crm_delete]\n---\nLook up the account, sum the open deals.\n",
        true,
    )]);
    AgentBuilder::new(model)
        .system_prompt("You review sales pipelines.")
        .tool(calc)
        .tool(canned(
            ToolSpec::new("web_search", "Search the web", ToolSource::Config),
            "(web results)",
        ))
        .tool(canned(
            ToolSpec::new("read_file", "Read a file", ToolSource::BuiltIn).read_only(true),
            "",
        ))
        .tool(canned(
            ToolSpec::new(
                "crm_lookup",
                "Look up a CRM account and its open deals",
                ToolSource::Mcp,
            )
            .read_only(true),
            "ACME: deals 120000, 80000, 45500 (open)",
        ))
        .tool(canned(
            ToolSpec::new("crm_delete", "Delete a CRM account", ToolSource::Mcp),
            "deleted",
        ))
        .tool(canned(
            ToolSpec::new("jira_create", "Create a Jira issue", ToolSource::Mcp),
            "created",
        ))
        // Authorized: analysts may not create Jira issues.
        .authorization(Authorization::new(RoleTable::new().allow(
            "analyst",
            [
                "calc",
                "web_search",
                "read_file",
                "crm_lookup",
                "crm_delete",
            ],
        )))
        // Executed: a guardrail refuses destructive CRM calls.
        .guardrail(Guardrail::new(
            AllowlistProvider::allow_all().deny(["crm_delete"]),
        ))
        // Visible: the slash-activated skill allows only its declared tools.
        .skills(skills)
        .assemble(
            RunContext::new("sales-acme", "ana")
                .role("analyst")
                .run("run-1")
                .slash_skill(SALES_SKILL),
        )
        .await
}

/// Print the conversation, what the model saw, the trace and why each tool did not return.
fn report(
    agent: &Agent,
    model: &ScriptedModel,
    out: &ThreadState,
    checkpoints: usize,
    db: &std::path::Path,
) {
    println!(
        "== conversation ({checkpoints} checkpoints in {})",
        db.display()
    );
    for m in &out.messages {
        match m {
            Message::Ai(ai) if !ai.tool_calls.is_empty() => {
                let calls: Vec<&str> = ai.tool_calls.iter().map(|c| c.name.as_str()).collect();
                println!("ai    calls {calls:?}");
            }
            Message::Tool(t) => println!(
                "tool  {:<12} {}{}",
                t.name,
                if t.is_error() { "ERROR " } else { "" },
                first_line(&t.content)
            ),
            other => println!("{:<5} {}", kind(other), first_line(other.text())),
        }
    }

    println!("\n== what the model saw");
    for (i, req) in model.requests().iter().enumerate() {
        println!("call {}: {:?}", i + 1, req.tool_names());
    }

    println!("\n== capability trace");
    print!("{}", agent.trace().render());

    println!("\n== why not?");
    for tool in ["jira_create", "web_search", "crm_delete", "crm_lookup"] {
        match agent.trace().why_not(tool, Stage::Returned) {
            Some(e) => println!("{tool}: {e}"),
            None => println!("{tool}: returned a result"),
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let model = script();
    let agent = assemble(model.clone()).await?;
    let dir = std::env::temp_dir().join(format!("stategraph-agent-tools-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let db = dir.join("threads.db");
    let graph = agent
        .graph()
        .with_checkpointer(Arc::new(SqliteSaver::open(&db)?));
    let config = agent.run_config().thread("sales-acme");
    let out = graph
        .invoke(
            ThreadState::human_input("/sales-review How is ACME doing?"),
            &config,
        )
        .await?;
    model.verify()?;

    let checkpoints = graph
        .get_state_history("sales-acme", Default::default())
        .await?
        .len();
    report(&agent, &model, &out.state, checkpoints, &db);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

fn kind(m: &Message) -> &'static str {
    match m {
        Message::System { .. } => "sys",
        Message::Human { .. } => "human",
        Message::Ai(_) => "ai",
        Message::Tool(_) => "tool",
    }
}
