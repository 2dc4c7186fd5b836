//! Shared helpers: a skill store that can be changed while an agent runs, the sales skill,
//! and agents running `bash` with declared secrets over a local sandbox.

use std::sync::{Arc, RwLock};

use serde_json::json;
use stategraph_nodes::prelude::*;
use stategraph_nodes::sandbox::{LocalSandboxProvider, SandboxOptions};
use stategraph_nodes::secret::MemorySecrets;
use stategraph_nodes::skill::{parse_skill_md, Skill, SkillStore};
use stategraph_nodes::state::SkillRef;
use stategraph_nodes::{Agent, AgentError, BoxError};

pub(crate) type R = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// The secret the sales skill needs.
pub(crate) const TOKEN: &str = "SALES_API_TOKEN";
pub(crate) const SALES: &str = "/mnt/skills/public/sales/SKILL.md";
pub(crate) const OTHER: &str = "/mnt/skills/public/other/SKILL.md";

/// A skill store whose skills can be enabled and disabled while an agent runs.
#[derive(Debug, Default)]
pub(crate) struct LiveSkills(RwLock<Vec<Skill>>);

impl LiveSkills {
    /// The sales skill (declaring `secrets`) and the other skill (declaring none), enabled.
    pub(crate) fn sales(secrets: &[&str]) -> Result<Arc<Self>, BoxError> {
        let list = secrets.join(", ");
        let sales = parse_skill_md(
            SALES,
            &format!("---\nname: sales\ndescription: Sales reports\nsecrets: [{list}]\n---\n"),
        )?;
        let other = parse_skill_md(OTHER, "---\nname: other\ndescription: Other\n---\n")?;
        Ok(Arc::new(LiveSkills(RwLock::new(vec![sales, other]))))
    }

    pub(crate) fn set_enabled(&self, name: &str, enabled: bool) -> Result<(), BoxError> {
        let mut skills = self.0.write().map_err(|_| "poisoned")?;
        for s in skills.iter_mut().filter(|s| s.name == name) {
            s.enabled = enabled;
        }
        Ok(())
    }
}

impl SkillStore for LiveSkills {
    fn load_all(&self) -> Result<Vec<Skill>, BoxError> {
        Ok(self.0.read().map_err(|_| "poisoned")?.clone())
    }
}

/// A `bash` call that answers `present` or `absent` for `name`, never printing its value.
pub(crate) fn probe(id: &str, name: &str) -> ToolCall {
    ToolCall::new(
        id,
        "bash",
        json!({"command": format!("if [ -n \"${{{name}+x}}\" ]; then echo present; else echo absent; fi")}),
    )
}

/// What the agent is built from, with every condition met by default.
pub(crate) struct Setup {
    pub(crate) root: tempfile::TempDir,
    pub(crate) skills: Arc<LiveSkills>,
    pub(crate) secrets: Arc<MemorySecrets>,
    pub(crate) tools: Vec<Arc<dyn Tool>>,
    pub(crate) available: Option<Vec<String>>,
    pub(crate) run: RunContext,
    /// Skills the model has read (their paths go into `skill_context` with the input).
    pub(crate) read: Vec<&'static str>,
}

impl Setup {
    /// The sales skill declares [`TOKEN`], the store supplies it, `bash` declares it, the run
    /// slash-activates the sales skill and the agent restricts nothing.
    pub(crate) fn all_met() -> Result<Self, BoxError> {
        Ok(Setup {
            root: tempfile::tempdir()?,
            skills: LiveSkills::sales(&[TOKEN])?,
            secrets: Arc::new(MemorySecrets::new().with(TOKEN, "tok-value-1")),
            tools: vec![Arc::new(
                stategraph_nodes::sandbox_tools::bash_with_secrets([TOKEN]),
            )],
            available: None,
            run: RunContext::new("t1", "ana").slash_skill(SALES),
            read: Vec::new(),
        })
    }

    /// The same setup with no slash skill and both skills read: a condition that removes the
    /// sales skill then leaves the other (legacy) skill active, so `bash` stays allowed by the
    /// skill tool policy and the probe runs.
    pub(crate) fn both_read(mut self) -> Self {
        self.run = RunContext::new("t1", "ana");
        self.read = vec![SALES, OTHER];
        self
    }

    /// Run the agent on one human message with the read skills in `skill_context`.
    pub(crate) async fn ask(&self, agent: &Agent) -> Result<AgentOutcome, AgentRunError> {
        let read = self.read.iter().map(|path| SkillRef {
            name: String::new(),
            path: (*path).to_owned(),
            description: String::new(),
            loaded_at: 0,
        });
        let input = ThreadState::human_input("go").skill_context(read.collect());
        agent.invoke(input, &agent.run_config().thread("t1")).await
    }

    pub(crate) async fn agent(&self, model: &ScriptedModel) -> Result<Agent, AgentError> {
        let mut builder = AgentBuilder::new(model.clone())
            // The canary run makes two model turns per round, 50 rounds at most.
            .max_turns(101)
            .allow_host_bash(true)
            .skills(Arc::clone(&self.skills))
            .secrets(Arc::clone(&self.secrets))
            .sandbox(
                LocalSandboxProvider::new(self.root.path()),
                SandboxOptions::lazy(),
            );
        for tool in &self.tools {
            builder = builder.tool_arc(Arc::clone(tool));
        }
        if let Some(names) = &self.available {
            builder = builder.available_skills(names.clone());
        }
        builder.assemble(self.run.clone()).await
    }

    /// Run one probe of [`TOKEN`] through `bash`; what it answered.
    pub(crate) async fn probe_once(
        &self,
    ) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
        let model = ScriptedModel::new(
            "m",
            [
                AiMessage::calls([probe("c1", TOKEN)]),
                AiMessage::text("done"),
            ],
        );
        let out = self.ask(&self.agent(&model).await?).await?;
        model.verify()?;
        answer(&out.state, "c1")
    }
}

/// The content of the tool message answering call `id`.
pub(crate) fn answer(state: &ThreadState, id: &str) -> Result<String, BoxError> {
    state
        .messages
        .iter()
        .filter_map(Message::as_tool)
        .find(|m| m.tool_call_id == id)
        .map(|m| m.content.trim().to_owned())
        .ok_or_else(|| format!("no answer to {id}").into())
}
