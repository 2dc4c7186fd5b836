//! The built-in subagent types, ready to register: [`SubagentSpec::general_purpose`] and
//! [`SubagentSpec::bash`], with DeerFlow's limits and deny lists.

use super::spec::SubagentSpec;

/// The name of the general-purpose type.
pub const GENERAL_PURPOSE: &str = "general-purpose";
/// The name of the shell type.
pub const BASH: &str = "bash";

/// The tools no built-in type may use: delegation (depth is one), asking the user (a child
/// has no user), and presenting files (only the lead delivers).
pub const BUILTIN_DENIED: [&str; 4] = ["task", "multi_task", "ask_clarification", "present_files"];

/// The general-purpose type's most model turns.
pub const GENERAL_PURPOSE_MAX_TURNS: usize = 150;
/// The shell type's most model turns.
pub const BASH_MAX_TURNS: usize = 60;
/// The tools the shell type may use: the shell and the file tools that go with it.
pub const BASH_TOOLS: [&str; 5] = ["bash", "ls", "read_file", "write_file", "str_replace"];

const GENERAL_PURPOSE_PROMPT: &str = "You are a subagent working on one delegated task. \
    Work it through on your own with the tools you have: explore, act, and check what you did. \
    You cannot ask the user anything and you cannot delegate further. When you are done, \
    answer with what you found or did, the paths of any files you wrote, and anything left \
    open, concisely: your answer is all the delegating agent sees.";

const BASH_PROMPT: &str = "You are a subagent that runs shell commands for one delegated \
    task. Run the commands the task needs, one step at a time, read their output, and fix \
    what fails. You cannot ask the user anything and you cannot delegate further. Answer with \
    the commands that mattered, their results, and the paths of any files you wrote: your \
    answer is all the delegating agent sees.";

impl SubagentSpec {
    /// The general-purpose type (`general-purpose`): every tool of the pool except
    /// [`BUILTIN_DENIED`], [`GENERAL_PURPOSE_MAX_TURNS`] turns, the inherited model.
    ///
    /// ```
    /// use stategraph_nodes::subagent::SubagentSpec;
    ///
    /// let spec = SubagentSpec::general_purpose();
    /// assert_eq!(spec.name, "general-purpose");
    /// assert!(spec.capabilities.disallowed_tools.contains(&"present_files".to_owned()));
    /// ```
    pub fn general_purpose() -> Self {
        SubagentSpec::new(
            GENERAL_PURPOSE,
            "A capable agent for a complex, multi-step task that needs both exploring and \
             acting (reading, searching, writing files). Use it for work that would take many \
             steps of your own.",
            GENERAL_PURPOSE_PROMPT,
        )
        .max_turns(GENERAL_PURPOSE_MAX_TURNS)
        .deny(BUILTIN_DENIED)
    }

    /// The shell type (`bash`): only [`BASH_TOOLS`] (an allow list over the built-in tools)
    /// without [`BUILTIN_DENIED`], [`BASH_MAX_TURNS`] turns. It needs host bash: a delegation
    /// to it fails, saying so, unless the runtime allows it
    /// ([`Subagents::allow_host_bash`](super::Subagents::allow_host_bash)).
    ///
    /// ```
    /// use stategraph_nodes::subagent::SubagentSpec;
    ///
    /// let spec = SubagentSpec::bash();
    /// assert!(spec.needs_host_bash);
    /// assert_eq!(spec.max_turns, 60);
    /// ```
    pub fn bash() -> Self {
        let mut spec = SubagentSpec::new(
            BASH,
            "A shell specialist: runs a series of shell commands (builds, scripts, git, \
             file processing) and reports their results.",
            BASH_PROMPT,
        )
        .max_turns(BASH_MAX_TURNS)
        .allow(BASH_TOOLS)
        .deny(BUILTIN_DENIED);
        spec.needs_host_bash = true;
        spec
    }
}
