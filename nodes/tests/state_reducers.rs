//! ThreadState reducers (deerflow-runtime.md §1), through real graph steps where two writers
//! matter and as functions where the rule is about one merge.

use std::collections::BTreeMap;
use std::sync::Arc;

use stategraph::reducers::{Promoted, SandboxState};
use stategraph::{BoxError, NodeContext, RunConfig, StateGraph, END, START};
use stategraph_nodes::state::*;
use stategraph_nodes::{Message, ThreadState};

type R = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// A graph whose two parallel nodes write `a` and `b` in one step.
async fn two_writers(a: ThreadStateUpdate, b: ThreadStateUpdate) -> Result<ThreadState, BoxError> {
    let a = Arc::new(a);
    let b = Arc::new(b);
    let g = StateGraph::<ThreadState>::new()
        .add_node("a", move |_s: Arc<ThreadState>, _c: NodeContext| {
            let a = (*a).clone();
            async move { Ok::<_, BoxError>(a) }
        })
        .add_node("b", move |_s: Arc<ThreadState>, _c: NodeContext| {
            let b = (*b).clone();
            async move { Ok::<_, BoxError>(b) }
        })
        .add_edge(START, "a")
        .add_edge(START, "b")
        .add_edge("a", END)
        .add_edge("b", END)
        .compile()?;
    let out = g.invoke(ThreadState::update(), &RunConfig::new()).await?;
    Ok((*out.state).clone())
}

fn sandbox(id: &str) -> SandboxState {
    SandboxState {
        sandbox_id: Some(id.to_owned()),
    }
}

#[tokio::test]
async fn sandbox_same_id_from_two_tools_in_one_step_is_accepted() -> R {
    let s = two_writers(
        ThreadState::update().sandbox(sandbox("sb-1")),
        ThreadState::update().sandbox(sandbox("sb-1")),
    )
    .await?;
    assert_eq!(s.sandbox, Some(sandbox("sb-1")));
    Ok(())
}

#[tokio::test]
async fn sandbox_different_ids_in_one_step_fail_closed_with_a_conflict() {
    let err = two_writers(
        ThreadState::update().sandbox(sandbox("sb-1")),
        ThreadState::update().sandbox(sandbox("sb-2")),
    )
    .await
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(err.contains("sandbox"), "{err}");
    assert!(err.contains("sb-1") && err.contains("sb-2"), "{err}");
}

#[tokio::test]
async fn artifacts_from_two_tools_are_unioned_in_order_without_duplicates() -> R {
    let s = two_writers(
        ThreadState::update().artifacts(vec!["a".into(), "b".into()]),
        ThreadState::update().artifacts(vec!["b".into(), "c".into()]),
    )
    .await?;
    assert_eq!(s.artifacts, ["a", "b", "c"]);
    Ok(())
}

#[tokio::test]
async fn artifacts_first_write_is_deduplicated_too() -> R {
    let s = two_writers(
        ThreadState::update().artifacts(vec!["a".into(), "a".into()]),
        ThreadState::update(),
    )
    .await?;
    assert_eq!(s.artifacts, ["a"]);
    Ok(())
}

#[tokio::test]
async fn last_value_fields_written_twice_in_one_step_are_a_typed_conflict() {
    let err = two_writers(
        ThreadState::update().title(Some("one".into())),
        ThreadState::update().title(Some("two".into())),
    )
    .await
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(err.contains("title"), "{err}");
}

#[tokio::test]
async fn messages_from_two_tools_are_both_kept_in_task_order() -> R {
    let s = two_writers(
        ThreadState::human_input("from a"),
        ThreadState::human_input("from b"),
    )
    .await?;
    let texts: Vec<&str> = s.messages.iter().map(Message::text).collect();
    assert_eq!(texts, ["from a", "from b"]);
    assert!(s
        .messages
        .iter()
        .all(|m| stategraph::reducers::Message::id(m).is_some()));
    Ok(())
}

#[tokio::test]
async fn promoted_under_a_new_hash_replaces_stale_names() -> R {
    let g = StateGraph::<ThreadState>::new()
        .add_node("p", |_s: Arc<ThreadState>, _c: NodeContext| async {
            Ok::<_, BoxError>(ThreadState::update().promoted(Promoted::new("new", ["y", "y"])))
        })
        .add_edge(START, "p")
        .add_edge("p", END)
        .compile()?;
    let out = g
        .invoke(
            ThreadState::update().promoted(Promoted::new("old", ["x"])),
            &RunConfig::new(),
        )
        .await?;
    assert_eq!(out.state.promoted, Some(Promoted::new("new", ["y"])));
    assert!(out.state.promoted_under("old").is_empty());
    Ok(())
}

fn todo(c: &str) -> Todo {
    Todo {
        content: c.into(),
        status: TodoStatus::Pending,
    }
}

#[test]
fn todos_untouched_by_a_write_are_kept_and_an_empty_list_clears() {
    let mut todos = Some(vec![todo("a")]);
    merge_todos(&mut todos, None);
    assert_eq!(todos, Some(vec![todo("a")]));
    merge_todos(&mut todos, Some(vec![]));
    assert_eq!(todos, Some(vec![]));
}

#[test]
fn goal_none_keeps_and_some_replaces() {
    let g = Goal {
        objective: "ship".into(),
        ..Goal::default()
    };
    let mut goal = Some(g.clone());
    merge_goal(&mut goal, None);
    assert_eq!(goal.as_ref(), Some(&g));
    let g2 = Goal {
        objective: "rest".into(),
        ..Goal::default()
    };
    merge_goal(&mut goal, Some(g2.clone()));
    assert_eq!(goal, Some(g2));
}

fn image(path: &str) -> (String, ViewedImage) {
    (
        path.to_owned(),
        ViewedImage {
            mime_type: "image/png".into(),
            size: 1,
            actual_path: format!("/host{path}"),
        },
    )
}

#[test]
fn viewed_images_merge_shallowly_and_an_empty_map_clears() {
    let mut v: BTreeMap<String, ViewedImage> = [image("/a")].into();
    let mut newer = image("/a");
    newer.1.size = 9;
    merge_viewed_images(&mut v, [newer.clone(), image("/b")].into());
    assert_eq!(v.len(), 2);
    assert_eq!(v["/a"].size, 9);
    merge_viewed_images(&mut v, BTreeMap::new());
    assert!(v.is_empty());
}

fn delegation(id: &str, status: DelegationStatus) -> Delegation {
    Delegation {
        id: id.into(),
        status,
        ..Delegation::default()
    }
}

#[test]
fn delegations_upsert_by_id_in_first_seen_order() {
    let mut d = vec![
        delegation("t1", DelegationStatus::InProgress),
        delegation("t2", DelegationStatus::InProgress),
    ];
    merge_delegations(&mut d, vec![delegation("t1", DelegationStatus::Completed)]);
    let ids: Vec<(&str, DelegationStatus)> = d.iter().map(|e| (e.id.as_str(), e.status)).collect();
    assert_eq!(
        ids,
        [
            ("t1", DelegationStatus::Completed),
            ("t2", DelegationStatus::InProgress)
        ]
    );
}

#[test]
fn delegations_terminal_entry_never_regresses_to_in_progress() {
    let mut d = vec![delegation("t1", DelegationStatus::Failed)];
    merge_delegations(&mut d, vec![delegation("t1", DelegationStatus::InProgress)]);
    assert_eq!(d[0].status, DelegationStatus::Failed);
}

#[test]
fn delegations_replacement_keeps_created_at_and_run_id() {
    let mut first = delegation("t1", DelegationStatus::InProgress);
    first.created_at = 100;
    first.run_id = Some("run-1".into());
    let mut d = vec![first];
    let mut done = delegation("t1", DelegationStatus::Completed);
    done.created_at = 999;
    merge_delegations(&mut d, vec![done]);
    assert_eq!(
        (d[0].created_at, d[0].run_id.as_deref()),
        (100, Some("run-1"))
    );
    assert_eq!(d[0].status, DelegationStatus::Completed);
}

#[test]
fn delegations_keep_the_most_recent_fifty() {
    let mut d = Vec::new();
    merge_delegations(
        &mut d,
        (0..60)
            .map(|i| delegation(&format!("t{i}"), DelegationStatus::InProgress))
            .collect(),
    );
    assert_eq!(d.len(), MAX_DELEGATIONS);
    assert_eq!(d[0].id, "t10");
    assert_eq!(d[49].id, "t59");
}

fn skill(path: &str, description: &str) -> SkillRef {
    SkillRef {
        name: path.into(),
        path: path.into(),
        description: description.into(),
        loaded_at: 1,
    }
}

#[test]
fn skill_context_is_normalised_deduplicated_by_path_and_refreshed_to_the_end() {
    let mut s = vec![skill("/a", "first"), skill("/b", "second")];
    merge_skill_context(&mut s, vec![skill("/a", "  re\n read   ")]);
    let paths: Vec<&str> = s.iter().map(|k| k.path.as_str()).collect();
    assert_eq!(paths, ["/b", "/a"]);
    assert_eq!(s[1].description, "re read");
    merge_skill_context(&mut s, vec![skill("/c", &"x".repeat(600))]);
    assert_eq!(s[2].description.chars().count(), MAX_SKILL_DESCRIPTION);
}

#[test]
fn skill_context_keeps_the_eight_most_recent() {
    let mut s = Vec::new();
    merge_skill_context(
        &mut s,
        (0..10).map(|i| skill(&format!("/s{i}"), "d")).collect(),
    );
    assert_eq!(s.len(), MAX_SKILL_CONTEXT);
    assert_eq!(s[0].path, "/s2");
}

#[test]
fn thread_state_round_trips_through_json_and_tolerates_missing_fields() -> R {
    let s = ThreadState {
        title: Some("t".into()),
        artifacts: vec!["/mnt/user-data/outputs/a.md".into()],
        ..ThreadState::default()
    };
    let back: ThreadState = serde_json::from_value(serde_json::to_value(&s)?)?;
    assert_eq!(back, s);
    let partial: ThreadState = serde_json::from_str(r#"{"title":"only"}"#)?;
    assert_eq!(partial.title.as_deref(), Some("only"));
    Ok(())
}
