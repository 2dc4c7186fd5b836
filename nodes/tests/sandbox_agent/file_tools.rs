//! The file tools and `bash`: their schemas and read-only flags, their rules over virtual
//! paths, and that what they return names no host path.

use std::sync::Arc;

use serde_json::{json, Value};
use stategraph_nodes::prelude::*;
use stategraph_nodes::sandbox::{LocalSandboxProvider, SandboxOptions};
use stategraph_nodes::sandbox_tools::{
    bash, glob, grep, ls, present_files, read_file, str_replace, write_file,
};
use stategraph_nodes::{Tool, ToolContext, ToolError};

use crate::support::*;

/// A detached context over a local sandbox under `root`, with one skill mounted read-only.
fn cx(root: &std::path::Path) -> Result<ToolContext, std::io::Error> {
    let skill = root.join("skill-src");
    std::fs::create_dir_all(&skill)?;
    std::fs::write(skill.join("SKILL.md"), "# Demo skill\n")?;
    let options = SandboxOptions::lazy().skill("/mnt/skills/public/demo", skill);
    Ok(
        ToolContext::detached(ThreadState::default(), RunContext::new("t1", "ana")).with_sandbox(
            Arc::new(LocalSandboxProvider::new(root.join("sb"))),
            options,
        ),
    )
}

/// The text of a call's answer, or the error's text.
async fn run(tool: &dyn Tool, cx: &ToolContext, args: Value) -> Result<String, String> {
    let name = tool.spec().name.clone();
    match tool.call(call("c", &name, args), cx.clone()).await {
        Ok(out) => out
            .message()
            .map(|m| m.content.clone())
            .ok_or_else(|| "no message".to_owned()),
        Err(e) => Err(e.to_string()),
    }
}

#[test]
fn each_tool_declares_its_schema_and_whether_it_only_reads() {
    let cases: [(FnTool, bool, &[&str]); 8] = [
        (read_file(), true, &["path", "offset", "limit"]),
        (write_file(), false, &["path", "content"]),
        (str_replace(), false, &["path", "old_str", "new_str"]),
        (ls(), true, &["path"]),
        (glob(), true, &["pattern", "path"]),
        (grep(), true, &["pattern", "path"]),
        (bash(), false, &["command", "timeout_secs"]),
        (present_files(), false, &["filepaths"]),
    ];
    for (tool, read_only, fields) in cases {
        let spec = tool.spec();
        assert_eq!(spec.read_only, read_only, "{}", spec.name);
        for field in fields {
            assert!(
                spec.parameters["properties"].get(field).is_some(),
                "{} lacks {field}: {}",
                spec.name,
                spec.parameters
            );
        }
    }
}

#[tokio::test]
async fn write_then_read_a_window_of_lines() -> R {
    let tmp = tempfile::tempdir()?;
    let cx = cx(tmp.path())?;
    let wrote = run(
        &write_file(),
        &cx,
        json!({"path": "/mnt/user-data/workspace/a.txt", "content": "one\ntwo\nthree\n"}),
    )
    .await?;
    assert_eq!(wrote, "Wrote 14 bytes to /mnt/user-data/workspace/a.txt");
    let window = run(
        &read_file(),
        &cx,
        json!({"path": "/mnt/user-data/workspace/a.txt", "offset": 1, "limit": 1}),
    )
    .await?;
    assert_eq!(window, "two\n");
    Ok(())
}

#[tokio::test]
async fn str_replace_edits_once_and_its_errors_name_the_virtual_path_only() -> R {
    let tmp = tempfile::tempdir()?;
    let cx = cx(tmp.path())?;
    let path = "/mnt/user-data/workspace/b.txt";
    run(
        &write_file(),
        &cx,
        json!({"path": path, "content": "a b a"}),
    )
    .await?;
    run(
        &str_replace(),
        &cx,
        json!({"path": path, "old_str": "b", "new_str": "c"}),
    )
    .await?;
    assert_eq!(
        run(&read_file(), &cx, json!({"path": path})).await?,
        "a c a"
    );
    let twice = run(
        &str_replace(),
        &cx,
        json!({"path": path, "old_str": "a", "new_str": "x"}),
    )
    .await
    .err()
    .ok_or("replaced an ambiguous text")?;
    assert!(twice.contains(path) && twice.contains("2 times"), "{twice}");
    let root = tmp.path().to_string_lossy().into_owned();
    assert!(!twice.contains(&root), "{twice}");
    Ok(())
}

#[tokio::test]
async fn skills_are_readable_and_a_write_into_them_is_refused() -> R {
    let tmp = tempfile::tempdir()?;
    let cx = cx(tmp.path())?;
    let skill = "/mnt/skills/public/demo/SKILL.md";
    assert_eq!(
        run(&read_file(), &cx, json!({"path": skill})).await?,
        "# Demo skill\n"
    );
    let refused = run(&write_file(), &cx, json!({"path": skill, "content": "x"}))
        .await
        .err()
        .ok_or("wrote into a skill")?;
    assert!(refused.contains(skill), "{refused}");
    assert!(
        !refused.contains(&*tmp.path().to_string_lossy()),
        "{refused}"
    );
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("skill-src/SKILL.md"))?,
        "# Demo skill\n"
    );
    Ok(())
}

#[tokio::test]
async fn paths_that_leave_the_roots_are_refused_by_name() -> R {
    let tmp = tempfile::tempdir()?;
    let cx = cx(tmp.path())?;
    for path in [
        "/mnt/user-data/outputs/../../../etc/passwd",
        "/etc/passwd",
        "relative.txt",
    ] {
        let err = run(&read_file(), &cx, json!({"path": path}))
            .await
            .err()
            .ok_or(format!("read {path}"))?;
        assert!(err.contains(path), "{err}");
    }
    Ok(())
}

#[tokio::test]
async fn listings_and_searches_print_virtual_paths_and_no_host_path() -> R {
    let tmp = tempfile::tempdir()?;
    let cx = cx(tmp.path())?;
    let host_workspace = tmp.path().join("sb/threads/t1/user-data/workspace");
    let content = format!("see {}/notes.md\nnothing here\n", host_workspace.display());
    run(
        &write_file(),
        &cx,
        json!({"path": "/mnt/user-data/outputs/r.md", "content": content}),
    )
    .await?;
    let listed = run(&ls(), &cx, json!({"path": "/mnt/user-data"})).await?;
    assert!(listed.contains("/mnt/user-data/outputs/"), "{listed}");
    let found = run(&glob(), &cx, json!({"pattern": "**/*.md"})).await?;
    assert_eq!(found, "/mnt/user-data/outputs/r.md");
    let matched = run(&grep(), &cx, json!({"pattern": "see"})).await?;
    assert_eq!(
        matched,
        "/mnt/user-data/outputs/r.md:1: see /mnt/user-data/workspace/notes.md"
    );
    let read = run(
        &read_file(),
        &cx,
        json!({"path": "/mnt/user-data/outputs/r.md"}),
    )
    .await?;
    let root = tmp.path().to_string_lossy().into_owned();
    for text in [&listed, &found, &matched, &read] {
        assert!(!text.contains(&root), "{text}");
    }
    Ok(())
}

#[tokio::test]
async fn bash_is_not_admitted_unless_host_bash_is_allowed() -> R {
    let tmp = tempfile::tempdir()?;
    let model = ScriptedModel::new("m", Vec::<AiMessage>::new());
    let agent = AgentBuilder::new(model.clone())
        .tool(bash())
        .sandbox(
            LocalSandboxProvider::new(tmp.path()),
            SandboxOptions::lazy(),
        )
        .assemble(RunContext::new("t1", "ana"))
        .await?;
    assert!(!agent.tool_names().contains(&"bash".to_owned()));
    let allowed = AgentBuilder::new(model)
        .tool(bash())
        .allow_host_bash(true)
        .sandbox(
            LocalSandboxProvider::new(tmp.path()),
            SandboxOptions::lazy(),
        )
        .assemble(RunContext::new("t1", "ana"))
        .await?;
    assert!(allowed.tool_names().contains(&"bash".to_owned()));
    Ok(())
}

#[tokio::test]
async fn bash_runs_in_the_workspace_with_an_empty_environment() -> R {
    let tmp = tempfile::tempdir()?;
    let cx = cx(tmp.path())?;
    let out = run(
        &bash(),
        &cx,
        json!({"command": "pwd; echo \"home=$HOME\"; env | wc -l"}),
    )
    .await?;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.first(), Some(&"/mnt/user-data/workspace"), "{out}");
    assert_eq!(lines.get(1), Some(&"home="), "{out}");
    // `sh` itself may export PWD, SHLVL, `_`; nothing of the agent's environment.
    assert!(!out.contains(&*tmp.path().to_string_lossy()), "{out}");
    Ok(())
}

#[tokio::test]
async fn bash_is_killed_at_its_timeout_and_its_output_is_capped() -> R {
    let tmp = tempfile::tempdir()?;
    let cx = cx(tmp.path())?;
    let slow = run(
        &bash(),
        &cx,
        json!({"command": "sleep 5", "timeout_secs": 1}),
    )
    .await
    .err()
    .ok_or("the command was not killed")?;
    assert!(slow.contains("timed out"), "{slow}");
    let big = run(
        &bash(),
        &cx,
        json!({"command": "head -c 200000 /dev/zero | tr '\\0' a"}),
    )
    .await?;
    assert!(big.len() < 70_000, "{}", big.len());
    assert!(
        big.contains("more bytes dropped"),
        "{}",
        &big[big.len() - 60..]
    );
    let failed = run(&bash(), &cx, json!({"command": "exit 3"})).await?;
    assert!(failed.contains("[exit code 3]"), "{failed}");
    Ok(())
}

#[tokio::test]
async fn a_tool_without_a_sandbox_fails_typed() -> R {
    let cx = ToolContext::detached(ThreadState::default(), RunContext::new("t1", "ana"));
    let err = read_file()
        .call(
            call("c", "read_file", json!({"path": "/mnt/user-data/x"})),
            cx,
        )
        .await
        .err()
        .ok_or("read without a sandbox")?;
    assert!(matches!(err, ToolError::Failed { .. }), "{err}");
    assert!(err.to_string().contains("no sandbox"), "{err}");
    Ok(())
}
