//! Parsing SKILL.md frontmatter and the registry of parse failures.

use stategraph_nodes::skill::{parse_skill_md, SkillParseErrorKind, SkillRegistry, SkillStore};

use crate::support::*;

#[test]
fn parses_flow_style_allowed_tools() -> TestResult {
    let s = parse_skill_md(
        &path("calc"),
        &skill_md("calc", "allowed-tools: [calc, \"read_file\", 'bash']\n"),
    )?;
    assert_eq!(s.name, "calc");
    assert_eq!(s.description, "The calc skill");
    assert_eq!(s.path, path("calc"));
    assert!(s.enabled);
    assert_eq!(
        s.allowed_tools,
        Some(vec!["calc".into(), "read_file".into(), "bash".into()])
    );
    Ok(())
}

#[test]
fn parses_block_style_allowed_tools() -> TestResult {
    let s = parse_skill_md(
        "p",
        &skill_md("calc", "allowed-tools:\n  - calc\n  - \"web_search\"\n"),
    )?;
    assert_eq!(
        s.allowed_tools,
        Some(vec!["calc".into(), "web_search".into()])
    );
    let s = parse_skill_md("p", &skill_md("calc", "allowed-tools:\n- calc\n"))?;
    assert_eq!(s.allowed_tools, Some(vec!["calc".into()]));
    Ok(())
}

#[test]
fn skill_without_allowed_tools_is_legacy() -> TestResult {
    let s = parse_skill_md(
        "p",
        &skill_md("old", "license: MIT\nmetadata:\n  author: someone\n"),
    )?;
    assert_eq!(s.allowed_tools, None);
    Ok(())
}

#[test]
fn explicit_empty_allowed_tools_is_an_empty_list() -> TestResult {
    let s = parse_skill_md("p", &skill_md("none", "allowed-tools: []\n"))?;
    assert_eq!(s.allowed_tools, Some(vec![]));
    Ok(())
}

#[test]
fn folded_and_quoted_descriptions_are_read() -> TestResult {
    let s = parse_skill_md(
        "p",
        "---\nname: \"x\"\ndescription: >\n  line one\n  line two\n---\n",
    )?;
    assert_eq!(s.name, "x");
    assert_eq!(s.description, "line one line two");
    Ok(())
}

#[test]
fn allowed_tools_that_is_not_a_list_is_a_parse_error() {
    for line in [
        "allowed-tools: calc\n",
        "allowed-tools: {a: b}\n",
        "allowed-tools:\n",
        "allowed-tools:\n  calc\n",
    ] {
        let err = parse_skill_md("/x/SKILL.md", &skill_md("s", line)).expect_err(line);
        assert!(
            matches!(err.kind, SkillParseErrorKind::AllowedToolsNotAList(_)),
            "{line:?}: {err}"
        );
        assert_eq!(err.path, "/x/SKILL.md");
    }
}

#[test]
fn allowed_tools_with_non_string_item_is_a_parse_error() {
    for line in [
        "allowed-tools: [calc, 3]\n",
        "allowed-tools: [calc, true]\n",
        "allowed-tools: [calc, [a]]\n",
        "allowed-tools:\n  - calc\n  - null\n",
        "allowed-tools:\n  - name: calc\n",
        "allowed-tools:\n  - - calc\n",
    ] {
        let err = parse_skill_md("p", &skill_md("s", line)).expect_err(line);
        assert!(
            matches!(err.kind, SkillParseErrorKind::BadAllowedTool { .. }),
            "{line:?}: {err}"
        );
    }
}

#[test]
fn allowed_tools_with_empty_item_is_a_parse_error() {
    for line in [
        "allowed-tools: [calc, ]\n",
        "allowed-tools: [calc, \"\"]\n",
        "allowed-tools:\n  - calc\n  -\n",
    ] {
        let err = parse_skill_md("p", &skill_md("s", line)).expect_err(line);
        assert!(
            matches!(err.kind, SkillParseErrorKind::BadAllowedTool { .. }),
            "{line:?}: {err}"
        );
    }
}

#[test]
fn quoted_number_is_a_string_item() -> TestResult {
    let s = parse_skill_md("p", &skill_md("s", "allowed-tools: [\"3\"]\n"))?;
    assert_eq!(s.allowed_tools, Some(vec!["3".into()]));
    Ok(())
}

#[test]
fn missing_frontmatter_name_or_description_is_a_parse_error() {
    let cases = [
        ("# no frontmatter\n", SkillParseErrorKind::NoFrontmatter),
        (
            "---\nname: x\ndescription: y\n",
            SkillParseErrorKind::Unclosed,
        ),
        (
            "---\ndescription: y\n---\n",
            SkillParseErrorKind::Missing("name"),
        ),
        (
            "---\nname: x\n---\n",
            SkillParseErrorKind::Missing("description"),
        ),
        (
            "---\nname: x\nname: y\ndescription: z\n---\n",
            SkillParseErrorKind::DuplicateKey("name".into()),
        ),
    ];
    for (text, kind) in cases {
        let err = parse_skill_md("/p/SKILL.md", text).expect_err(text);
        assert_eq!(err.kind, kind, "{text:?}");
        assert!(err.to_string().contains("/p/SKILL.md"), "{err}");
    }
}

#[test]
fn registry_records_parse_failures_separately() -> TestResult {
    let registry = SkillRegistry::from_skill_mds([
        (
            path("good"),
            skill_md("good", "allowed-tools: [calc]\n"),
            true,
        ),
        (path("off"), skill_md("off", ""), false),
        (path("bad"), skill_md("bad", "allowed-tools: calc\n"), true),
    ]);
    let loaded = registry.load_all()?;
    assert_eq!(
        loaded.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["good", "off"]
    );
    assert!(!loaded[1].enabled);
    assert_eq!(registry.failures().len(), 1);
    assert_eq!(registry.failures()[0].path, path("bad"));
    Ok(())
}

#[test]
fn frontmatter_that_is_not_yaml_is_a_typed_error_naming_the_file() {
    // The old line reader took a plain value holding `: ` or a tab-indented key as text; a
    // YAML reader refuses both, so such a skill is missing from the registry (fails closed).
    for text in [
        "---\nname: x\ndescription: Use when: asked\n---\n",
        "---\nname: x\n\tdescription: y\n---\n",
    ] {
        let err = parse_skill_md("/p/SKILL.md", text).expect_err(text);
        assert!(
            matches!(err.kind, SkillParseErrorKind::Syntax(_)),
            "{text:?}: {err}"
        );
        assert!(err.to_string().contains("/p/SKILL.md"), "{err}");
    }
    let err = parse_skill_md("/p/SKILL.md", "---\n- name\n---\n").expect_err("a list");
    assert_eq!(err.kind, SkillParseErrorKind::NotAMapping);
    let registry = SkillRegistry::from_skill_mds([(
        path("colon"),
        "---\nname: colon\ndescription: a: b\n---\n",
        true,
    )]);
    assert_eq!(registry.skills().len(), 0);
    assert_eq!(registry.failures()[0].path, path("colon"));
}
