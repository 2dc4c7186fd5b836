//! The clauses, each a behaviour every saver must have.

use stategraph_tests::writes::{header, tail, whole};
use std::collections::BTreeMap;
use std::sync::Arc;

use stategraph_checkpoints::{
    Checkpoint, CheckpointError, CheckpointId, FieldPart, FieldWrite, ListOptions,
    LoadedCheckpoint, Namespace, PendingSend, PendingWrite, PutCheckpoint, Retention, Saver,
    Source, TaskId, ThreadId, ThreadStatus, WriteKind,
};

use crate::{Subject, TestResult};

pub use crate::namespace_list::*;

fn thread(id: &str) -> ThreadId {
    ThreadId::new(id).expect("valid thread id")
}

/// Put a checkpoint with these writes after `parent`; returns its id.
pub(crate) async fn step(
    saver: &Arc<dyn Saver>,
    t: &ThreadId,
    ns: &Namespace,
    parent: Option<CheckpointId>,
    source: Source,
    writes: Vec<FieldWrite>,
) -> Result<CheckpointId, CheckpointError> {
    let step = match parent {
        Some(p) => saver
            .get(t, ns, Some(p))
            .await?
            .map_or(0, |l| l.checkpoint.step + 1),
        None => -1,
    };
    let checkpoint = header(parent, step, source);
    let id = checkpoint.id;
    saver
        .put(PutCheckpoint {
            thread: t.clone(),
            ns: ns.clone(),
            checkpoint,
            writes,
        })
        .await?;
    Ok(id)
}

/// A field's value as JSON: a whole part, followed by tails, concatenated as arrays.
fn value(loaded: &LoadedCheckpoint, field: &str) -> serde_json::Value {
    let Some(parts) = loaded.fields.get(field) else {
        return serde_json::Value::Null;
    };
    let mut items: Vec<serde_json::Value> = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        match p {
            FieldPart::Whole(b) => {
                let v: serde_json::Value = serde_json::from_slice(b).unwrap_or_default();
                match v {
                    serde_json::Value::Array(a) if parts.len() > 1 || i > 0 => items.extend(a),
                    other if parts.len() == 1 => return other,
                    serde_json::Value::Array(a) => items.extend(a),
                    other => return other,
                }
            }
            FieldPart::Tail(b) => {
                let v: Vec<serde_json::Value> = serde_json::from_slice(b).unwrap_or_default();
                items.extend(v);
            }
        }
    }
    serde_json::Value::Array(items)
}

async fn load(
    saver: &Arc<dyn Saver>,
    t: &ThreadId,
    id: CheckpointId,
) -> Result<LoadedCheckpoint, Box<dyn std::error::Error + Send + Sync>> {
    Ok(saver
        .get(t, &Namespace::root(), Some(id))
        .await?
        .ok_or("checkpoint missing")?)
}

pub async fn an_empty_thread_has_no_checkpoint(s: Subject) -> TestResult {
    assert!(s
        .saver
        .get(&thread("t"), &Namespace::root(), None)
        .await?
        .is_none());
    assert!(s
        .saver
        .list(&thread("t"), &Namespace::root(), ListOptions::default())
        .await?
        .is_empty());
    assert!(s
        .saver
        .head(&thread("t"), &Namespace::root())
        .await?
        .is_none());
    Ok(())
}

pub async fn an_unknown_checkpoint_id_is_not_found(s: Subject) -> TestResult {
    let t = thread("t");
    let id = step(
        &s.saver,
        &t,
        &Namespace::root(),
        None,
        Source::Input,
        vec![],
    )
    .await?;
    let other = thread("other");
    // An id that exists in another thread is not found either: no existence oracle.
    let err = s
        .saver
        .get(&other, &Namespace::root(), Some(id))
        .await
        .err()
        .ok_or("expected not found")?;
    assert!(matches!(err, CheckpointError::NotFound { .. }), "{err}");
    let err = s
        .saver
        .get(&t, &Namespace::root(), Some(CheckpointId::generate()))
        .await
        .err()
        .ok_or("expected not found")?;
    assert!(matches!(err, CheckpointError::NotFound { .. }), "{err}");
    Ok(())
}

pub async fn a_put_checkpoint_loads_back_with_its_fields_control_and_metadata(
    s: Subject,
) -> TestResult {
    let t = thread("t");
    let mut cp = header(None, -1, Source::Input);
    cp.control.versions.insert("count".into(), 3);
    cp.control.versions.insert("branch:to:a".into(), 3);
    cp.control
        .versions_seen
        .entry("a".into())
        .or_default()
        .insert("branch:to:a".into(), 2);
    cp.control.branches = vec!["branch:to:a".into()];
    cp.control
        .barriers
        .insert("join:a+b:c".into(), vec!["a".into()]);
    cp.control.sends = vec![PendingSend {
        node: "w".into(),
        arg: serde_json::json!({ "i": 1 }),
    }];
    cp.control.interrupt_seen.insert("*".into(), 2);
    cp.metadata.insert("run".into(), serde_json::json!("r1"));
    let id = cp.id;
    let expected = cp.clone();
    s.saver
        .put(PutCheckpoint {
            thread: t.clone(),
            ns: Namespace::root(),
            checkpoint: cp,
            writes: vec![whole("count", "3"), tail("log", "[\"a\"]")],
        })
        .await?;
    let got = load(&s.saver, &t, id).await?;
    assert_eq!(got.checkpoint, expected);
    assert_eq!(value(&got, "count"), serde_json::json!(3));
    assert_eq!(value(&got, "log"), serde_json::json!(["a"]));
    assert!(got.pending.is_empty());
    let head = s
        .saver
        .get(&t, &Namespace::root(), None)
        .await?
        .ok_or("no head")?;
    assert_eq!(head.checkpoint.id, id);
    Ok(())
}

pub async fn appended_parts_load_back_in_order(s: Subject) -> TestResult {
    let t = thread("t");
    let ns = Namespace::root();
    let mut parent = Some(
        step(
            &s.saver,
            &t,
            &ns,
            None,
            Source::Input,
            vec![whole("n", "0")],
        )
        .await?,
    );
    let mut ids = Vec::new();
    for i in 0..40 {
        let id = step(
            &s.saver,
            &t,
            &ns,
            parent,
            Source::Loop,
            vec![tail("log", format!("[{i}]"))],
        )
        .await?;
        ids.push(id);
        parent = Some(id);
    }
    let last = load(&s.saver, &t, ids[39]).await?;
    assert_eq!(
        value(&last, "log"),
        serde_json::Value::Array((0..40).map(|i| serde_json::json!(i)).collect())
    );
    assert_eq!(
        value(&last, "n"),
        serde_json::json!(0),
        "an unchanged field keeps its value"
    );
    // Any older checkpoint shows the list as it was then.
    let mid = load(&s.saver, &t, ids[9]).await?;
    assert_eq!(
        value(&mid, "log"),
        serde_json::Value::Array((0..10).map(|i| serde_json::json!(i)).collect())
    );
    Ok(())
}

pub async fn a_whole_value_resets_an_appended_list(s: Subject) -> TestResult {
    let t = thread("t");
    let ns = Namespace::root();
    let a = step(
        &s.saver,
        &t,
        &ns,
        None,
        Source::Input,
        vec![tail("log", "[1,2]")],
    )
    .await?;
    let b = step(
        &s.saver,
        &t,
        &ns,
        Some(a),
        Source::Loop,
        vec![whole("log", "[9]")],
    )
    .await?;
    let c = step(
        &s.saver,
        &t,
        &ns,
        Some(b),
        Source::Loop,
        vec![tail("log", "[10]")],
    )
    .await?;
    assert_eq!(
        value(&load(&s.saver, &t, b).await?, "log"),
        serde_json::json!([9])
    );
    assert_eq!(
        value(&load(&s.saver, &t, c).await?, "log"),
        serde_json::json!([9, 10])
    );
    assert_eq!(
        value(&load(&s.saver, &t, a).await?, "log"),
        serde_json::json!([1, 2])
    );
    Ok(())
}

pub(crate) async fn chain(
    s: &Subject,
    t: &ThreadId,
    n: usize,
) -> Result<Vec<CheckpointId>, CheckpointError> {
    let mut ids = Vec::new();
    let mut parent = None;
    for i in 0..n {
        let source = if i == 0 { Source::Input } else { Source::Loop };
        let id = step(
            &s.saver,
            t,
            &Namespace::root(),
            parent,
            source,
            vec![whole("i", i.to_string())],
        )
        .await?;
        ids.push(id);
        parent = Some(id);
    }
    Ok(ids)
}

pub async fn list_is_newest_first_with_limit_and_before(s: Subject) -> TestResult {
    let t = thread("t");
    let ids = chain(&s, &t, 6).await?;
    let all = s
        .saver
        .list(&t, &Namespace::root(), ListOptions::default())
        .await?;
    let listed: Vec<CheckpointId> = all.iter().map(|c| c.id).collect();
    let mut expected = ids.clone();
    expected.reverse();
    assert_eq!(listed, expected);
    let limited = s
        .saver
        .list(
            &t,
            &Namespace::root(),
            ListOptions {
                limit: Some(2),
                ..ListOptions::default()
            },
        )
        .await?;
    assert_eq!(
        limited.iter().map(|c| c.id).collect::<Vec<_>>(),
        expected[..2]
    );
    let before = s
        .saver
        .list(
            &t,
            &Namespace::root(),
            ListOptions {
                before: Some(ids[3]),
                ..ListOptions::default()
            },
        )
        .await?;
    assert_eq!(
        before.iter().map(|c| c.id).collect::<Vec<_>>(),
        [ids[2], ids[1], ids[0]]
    );
    Ok(())
}

pub async fn list_filters_on_metadata_source_and_step(s: Subject) -> TestResult {
    let t = thread("t");
    let ns = Namespace::root();
    let mut first = header(None, -1, Source::Input);
    first
        .metadata
        .insert("user".into(), serde_json::json!("ada"));
    first.metadata.insert("n".into(), serde_json::json!(1));
    let first_id = first.id;
    s.saver
        .put(PutCheckpoint {
            thread: t.clone(),
            ns: ns.clone(),
            checkpoint: first,
            writes: vec![],
        })
        .await?;
    let mut second = header(Some(first_id), 0, Source::Loop);
    second
        .metadata
        .insert("user".into(), serde_json::json!("bob"));
    second.metadata.insert("n".into(), serde_json::json!(2));
    let second_id = second.id;
    s.saver
        .put(PutCheckpoint {
            thread: t.clone(),
            ns: ns.clone(),
            checkpoint: second,
            writes: vec![],
        })
        .await?;
    let by = |k: &str, v: serde_json::Value| ListOptions {
        filter: BTreeMap::from([(k.to_owned(), v)]),
        ..ListOptions::default()
    };
    let ids = |v: Vec<Checkpoint>| v.into_iter().map(|c| c.id).collect::<Vec<_>>();
    assert_eq!(
        ids(s
            .saver
            .list(&t, &ns, by("user", serde_json::json!("bob")))
            .await?),
        [second_id]
    );
    assert_eq!(
        ids(s.saver.list(&t, &ns, by("n", serde_json::json!(1))).await?),
        [first_id]
    );
    assert_eq!(
        ids(s
            .saver
            .list(&t, &ns, by("source", serde_json::json!("input")))
            .await?),
        [first_id]
    );
    assert_eq!(
        ids(s
            .saver
            .list(&t, &ns, by("step", serde_json::json!(0)))
            .await?),
        [second_id]
    );
    assert!(s
        .saver
        .list(&t, &ns, by("user", serde_json::json!("eve")))
        .await?
        .is_empty());
    Ok(())
}

pub async fn an_invalid_filter_key_is_rejected(s: Subject) -> TestResult {
    let t = thread("t");
    chain(&s, &t, 1).await?;
    for key in ["x') OR 1=1 --", "", "a\"b", "$.x", "a b", &"k".repeat(65)] {
        let options = ListOptions {
            filter: BTreeMap::from([(key.to_owned(), serde_json::json!(1))]),
            ..ListOptions::default()
        };
        let err = s
            .saver
            .list(&t, &Namespace::root(), options)
            .await
            .err()
            .ok_or("expected an error")?;
        assert!(
            matches!(err, CheckpointError::InvalidFilterKey { .. }),
            "{key:?}: {err}"
        );
    }
    Ok(())
}

pub async fn a_second_child_of_the_same_head_is_a_stale_parent(s: Subject) -> TestResult {
    let t = thread("t");
    let ids = chain(&s, &t, 2).await?;
    step(
        &s.saver,
        &t,
        &Namespace::root(),
        Some(ids[1]),
        Source::Loop,
        vec![whole("i", "2")],
    )
    .await?;
    let err = step(
        &s.saver,
        &t,
        &Namespace::root(),
        Some(ids[1]),
        Source::Loop,
        vec![whole("i", "99")],
    )
    .await
    .err();
    assert!(
        matches!(err, Some(CheckpointError::StaleParent { .. })),
        "{err:?}"
    );
    // A new thread's first checkpoint must have no parent, and only one may be first.
    let err = step(
        &s.saver,
        &t,
        &Namespace::root(),
        None,
        Source::Input,
        vec![],
    )
    .await
    .err();
    assert!(
        matches!(err, Some(CheckpointError::StaleParent { .. })),
        "{err:?}"
    );
    assert_eq!(
        s.saver
            .list(&t, &Namespace::root(), ListOptions::default())
            .await?
            .len(),
        3
    );
    Ok(())
}

pub async fn a_fork_from_an_older_checkpoint_keeps_both_branches(s: Subject) -> TestResult {
    let t = thread("t");
    let ids = chain(&s, &t, 4).await?;
    let fork = step(
        &s.saver,
        &t,
        &Namespace::root(),
        Some(ids[1]),
        Source::Fork,
        vec![],
    )
    .await?;
    let after = step(
        &s.saver,
        &t,
        &Namespace::root(),
        Some(fork),
        Source::Loop,
        vec![whole("i", "100")],
    )
    .await?;
    let head = s
        .saver
        .get(&t, &Namespace::root(), None)
        .await?
        .ok_or("no head")?;
    assert_eq!(head.checkpoint.id, after);
    assert_eq!(value(&head, "i"), serde_json::json!(100));
    assert_eq!(
        value(&load(&s.saver, &t, ids[3]).await?, "i"),
        serde_json::json!(3),
        "the old branch is intact"
    );
    assert_eq!(
        load(&s.saver, &t, fork).await?.checkpoint.parent,
        Some(ids[1])
    );
    Ok(())
}

pub async fn appends_on_two_branches_do_not_mix(s: Subject) -> TestResult {
    let t = thread("t");
    let ns = Namespace::root();
    let a = step(
        &s.saver,
        &t,
        &ns,
        None,
        Source::Input,
        vec![tail("log", "[\"a\"]")],
    )
    .await?;
    let b = step(
        &s.saver,
        &t,
        &ns,
        Some(a),
        Source::Loop,
        vec![tail("log", "[\"b\"]")],
    )
    .await?;
    let x = step(
        &s.saver,
        &t,
        &ns,
        Some(a),
        Source::Fork,
        vec![tail("log", "[\"x\"]")],
    )
    .await?;
    let y = step(
        &s.saver,
        &t,
        &ns,
        Some(x),
        Source::Loop,
        vec![tail("log", "[\"y\"]")],
    )
    .await?;
    let b2 = step(
        &s.saver,
        &t,
        &ns,
        Some(b),
        Source::Update,
        vec![tail("log", "[\"c\"]")],
    )
    .await?;
    assert_eq!(
        value(&load(&s.saver, &t, b).await?, "log"),
        serde_json::json!(["a", "b"])
    );
    assert_eq!(
        value(&load(&s.saver, &t, y).await?, "log"),
        serde_json::json!(["a", "x", "y"])
    );
    assert_eq!(
        value(&load(&s.saver, &t, b2).await?, "log"),
        serde_json::json!(["a", "b", "c"])
    );
    assert_eq!(
        value(&load(&s.saver, &t, a).await?, "log"),
        serde_json::json!(["a"])
    );
    Ok(())
}

fn task(n: u8) -> TaskId {
    TaskId::derive(&[&[n]])
}

/// A step's tasks record their writes one call each, as they finish (a workflow's subtasks
/// do the same): read back, they keep the order they were written in, a replaced task's
/// writes moving to the end.
pub async fn pending_writes_written_one_by_one_keep_their_order(s: Subject) -> TestResult {
    let t = thread("t");
    let ns = Namespace::root();
    let ids = chain(&s, &t, 1).await?;
    let one = |n: u8| PendingWrite {
        task_id: task(n),
        node: format!("n{n}"),
        kind: WriteKind::Output(serde_json::json!({ "n": n })),
    };
    for n in 0..40u8 {
        s.saver.put_writes(&t, &ns, ids[0], vec![one(n)]).await?;
    }
    // Task 5 written again: its write replaces the earlier one and comes last.
    s.saver.put_writes(&t, &ns, ids[0], vec![one(5)]).await?;
    let got: Vec<String> = load(&s.saver, &t, ids[0])
        .await?
        .pending
        .into_iter()
        .map(|w| w.node)
        .collect();
    let mut want: Vec<String> = (0..40u8)
        .filter(|n| *n != 5)
        .map(|n| format!("n{n}"))
        .collect();
    want.push("n5".to_owned());
    assert_eq!(got, want);
    Ok(())
}

pub async fn pending_writes_replace_per_task_and_keep_order(s: Subject) -> TestResult {
    let t = thread("t");
    let ns = Namespace::root();
    let ids = chain(&s, &t, 1).await?;
    let w = |task_id: TaskId, node: &str, kind: WriteKind| PendingWrite {
        task_id,
        node: node.to_owned(),
        kind,
    };
    s.saver
        .put_writes(
            &t,
            &ns,
            ids[0],
            vec![
                w(
                    task(1),
                    "a",
                    WriteKind::Output(serde_json::json!({ "updates": [] })),
                ),
                w(
                    task(2),
                    "b",
                    WriteKind::Interrupt {
                        id: "i2".into(),
                        value: serde_json::json!("?"),
                    },
                ),
                w(task(3), "c", WriteKind::Error("boom".into())),
            ],
        )
        .await?;
    // Task 2 resumed and interrupted again: its writes replace what it had.
    s.saver
        .put_writes(
            &t,
            &ns,
            ids[0],
            vec![
                w(
                    task(2),
                    "b",
                    WriteKind::Resume(vec![serde_json::json!("yes")]),
                ),
                w(
                    task(2),
                    "b",
                    WriteKind::Interrupt {
                        id: "i2".into(),
                        value: serde_json::json!("again?"),
                    },
                ),
            ],
        )
        .await?;
    let got = load(&s.saver, &t, ids[0]).await?.pending;
    let summary: Vec<(&str, &WriteKind)> = got.iter().map(|p| (p.node.as_str(), &p.kind)).collect();
    assert_eq!(summary.len(), 4, "{summary:?}");
    assert_eq!(summary[0].0, "a");
    assert_eq!(summary[1], ("c", &WriteKind::Error("boom".into())));
    assert_eq!(
        summary[2],
        ("b", &WriteKind::Resume(vec![serde_json::json!("yes")]))
    );
    assert_eq!(
        summary[3],
        (
            "b",
            &WriteKind::Interrupt {
                id: "i2".into(),
                value: serde_json::json!("again?")
            }
        )
    );
    // The head reads the same writes in the same order, with its header.
    let head = s.saver.head(&t, &ns).await?.ok_or("no head")?;
    assert_eq!(head.checkpoint.id, ids[0]);
    assert_eq!(head.pending, got);
    Ok(())
}

pub async fn a_steps_checkpoint_drops_the_outputs_recorded_while_it_ran(s: Subject) -> TestResult {
    let ns = Namespace::root();
    let w = |n: u8, kind: WriteKind| PendingWrite {
        task_id: task(n),
        node: format!("n{n}"),
        kind,
    };
    // Tasks 1 and 2 finished while the step ran; an earlier attempt's task 3 failed and
    // task 4 was answered.
    let record = |t: ThreadId, at: CheckpointId| {
        let saver = Arc::clone(&s.saver);
        async move {
            saver
                .put_writes(
                    &t,
                    &Namespace::root(),
                    at,
                    vec![
                        w(3, WriteKind::Error("boom".into())),
                        w(4, WriteKind::Resume(vec![serde_json::json!("yes")])),
                    ],
                )
                .await?;
            for n in [1, 2] {
                let out = WriteKind::Output(serde_json::json!({ "updates": [n] }));
                saver
                    .put_writes(&t, &Namespace::root(), at, vec![w(n, out)])
                    .await?;
            }
            Ok::<_, CheckpointError>(())
        }
    };
    let kinds =
        |l: LoadedCheckpoint| -> Vec<WriteKind> { l.pending.into_iter().map(|p| p.kind).collect() };

    // The step's checkpoint (a loop child) drops the outputs, and keeps the rest.
    let t = thread("t");
    let ids = chain(&s, &t, 1).await?;
    record(t.clone(), ids[0]).await?;
    assert_eq!(load(&s.saver, &t, ids[0]).await?.pending.len(), 4);
    step(
        &s.saver,
        &t,
        &ns,
        Some(ids[0]),
        Source::Loop,
        vec![whole("x", "1")],
    )
    .await?;
    assert_eq!(
        kinds(load(&s.saver, &t, ids[0]).await?),
        [
            WriteKind::Error("boom".into()),
            WriteKind::Resume(vec![serde_json::json!("yes")])
        ]
    );

    // An edit branching from the checkpoint settles nothing.
    let u = thread("u");
    let ids = chain(&s, &u, 1).await?;
    record(u.clone(), ids[0]).await?;
    step(
        &s.saver,
        &u,
        &ns,
        Some(ids[0]),
        Source::Update,
        vec![whole("x", "2")],
    )
    .await?;
    assert_eq!(load(&s.saver, &u, ids[0]).await?.pending.len(), 4);
    Ok(())
}

pub async fn pending_writes_on_an_unknown_checkpoint_are_rejected(s: Subject) -> TestResult {
    let t = thread("t");
    let err = s
        .saver
        .put_writes(
            &t,
            &Namespace::root(),
            CheckpointId::generate(),
            vec![PendingWrite {
                task_id: task(1),
                node: "a".into(),
                kind: WriteKind::Error("x".into()),
            }],
        )
        .await
        .err();
    assert!(
        matches!(err, Some(CheckpointError::NotFound { .. })),
        "{err:?}"
    );
    Ok(())
}

pub async fn namespaces_keep_separate_chains(s: Subject) -> TestResult {
    let t = thread("t");
    let root = Namespace::root();
    let child = root.child("sub:1");
    let a = step(
        &s.saver,
        &t,
        &root,
        None,
        Source::Input,
        vec![whole("v", "1")],
    )
    .await?;
    let b = step(
        &s.saver,
        &t,
        &child,
        None,
        Source::Input,
        vec![whole("v", "2")],
    )
    .await?;
    assert_eq!(
        s.saver.get(&t, &root, None).await?.map(|l| l.checkpoint.id),
        Some(a)
    );
    assert_eq!(
        s.saver
            .get(&t, &child, None)
            .await?
            .map(|l| l.checkpoint.id),
        Some(b)
    );
    assert!(matches!(
        s.saver.get(&t, &root, Some(b)).await,
        Err(CheckpointError::NotFound { .. })
    ));
    Ok(())
}

pub async fn delete_thread_removes_every_namespace_and_nothing_else(s: Subject) -> TestResult {
    let (t, keep) = (thread("t"), thread("keep"));
    let root = Namespace::root();
    step(
        &s.saver,
        &t,
        &root,
        None,
        Source::Input,
        vec![tail("log", "[1]")],
    )
    .await?;
    step(
        &s.saver,
        &t,
        &root.child("sub"),
        None,
        Source::Input,
        vec![],
    )
    .await?;
    let kept = step(
        &s.saver,
        &keep,
        &root,
        None,
        Source::Input,
        vec![tail("log", "[2]"), whole("w", "\"same\"")],
    )
    .await?;
    step(
        &s.saver,
        &t,
        &root,
        s.saver.get(&t, &root, None).await?.map(|l| l.checkpoint.id),
        Source::Loop,
        vec![whole("w", "\"same\"")],
    )
    .await?;
    s.saver.delete_thread(&t).await?;
    assert!(s.saver.get(&t, &root, None).await?.is_none());
    assert!(s.saver.get(&t, &root.child("sub"), None).await?.is_none());
    let other = load(&s.saver, &keep, kept).await?;
    assert_eq!(value(&other, "log"), serde_json::json!([2]));
    assert_eq!(
        value(&other, "w"),
        serde_json::json!("same"),
        "a value shared with the deleted thread survives"
    );
    Ok(())
}

pub async fn list_threads_reports_counts_steps_and_status(s: Subject) -> TestResult {
    let root = Namespace::root();
    let done = thread("done");
    chain(&s, &done, 3).await?;
    let paused = thread("paused");
    let ids = chain(&s, &paused, 1).await?;
    s.saver
        .put_writes(
            &paused,
            &root,
            ids[0],
            vec![PendingWrite {
                task_id: task(1),
                node: "ask".into(),
                kind: WriteKind::Interrupt {
                    id: "i".into(),
                    value: serde_json::json!(null),
                },
            }],
        )
        .await?;
    let failed = thread("failed");
    let ids = chain(&s, &failed, 2).await?;
    s.saver
        .put_writes(
            &failed,
            &root,
            ids[1],
            vec![PendingWrite {
                task_id: task(1),
                node: "n".into(),
                kind: WriteKind::Error("x".into()),
            }],
        )
        .await?;
    let threads = s.saver.list_threads().await?;
    let summary: Vec<(&str, usize, i64, ThreadStatus)> = threads
        .iter()
        .map(|i| (i.thread.as_str(), i.checkpoints, i.last_step, i.status))
        .collect();
    assert_eq!(
        summary,
        [
            ("done", 3, 1, ThreadStatus::Done),
            ("failed", 2, 0, ThreadStatus::Error),
            ("paused", 1, -1, ThreadStatus::Interrupted)
        ]
    );
    Ok(())
}

pub async fn a_copied_thread_has_the_same_history_and_diverges_independently(
    s: Subject,
) -> TestResult {
    let (from, to) = (thread("from"), thread("to"));
    let root = Namespace::root();
    let a = step(
        &s.saver,
        &from,
        &root,
        None,
        Source::Input,
        vec![tail("log", "[1]")],
    )
    .await?;
    let b = step(
        &s.saver,
        &from,
        &root,
        Some(a),
        Source::Loop,
        vec![tail("log", "[2]")],
    )
    .await?;
    s.saver.copy_thread(&from, &to).await?;
    let copy_head = s
        .saver
        .get(&to, &root, None)
        .await?
        .ok_or("copy has no head")?;
    assert_eq!(copy_head.checkpoint.id, b);
    assert_eq!(value(&copy_head, "log"), serde_json::json!([1, 2]));
    let c = step(
        &s.saver,
        &to,
        &root,
        Some(b),
        Source::Loop,
        vec![tail("log", "[3]")],
    )
    .await?;
    let d = step(
        &s.saver,
        &from,
        &root,
        Some(b),
        Source::Loop,
        vec![tail("log", "[4]")],
    )
    .await?;
    assert_eq!(
        value(&s.saver.get(&to, &root, Some(c)).await?.ok_or("c")?, "log"),
        serde_json::json!([1, 2, 3])
    );
    assert_eq!(
        value(
            &s.saver.get(&from, &root, Some(d)).await?.ok_or("d")?,
            "log"
        ),
        serde_json::json!([1, 2, 4])
    );
    Ok(())
}

pub async fn copy_into_a_thread_that_has_checkpoints_is_refused(s: Subject) -> TestResult {
    let (from, to) = (thread("from"), thread("to"));
    chain(&s, &from, 1).await?;
    chain(&s, &to, 1).await?;
    let err = s.saver.copy_thread(&from, &to).await.err();
    assert!(
        matches!(err, Some(CheckpointError::StaleParent { .. })),
        "{err:?}"
    );
    assert_eq!(
        s.saver
            .list(&to, &Namespace::root(), ListOptions::default())
            .await?
            .len(),
        1
    );
    Ok(())
}

pub async fn copying_a_branch_copies_that_branch_only(s: Subject) -> TestResult {
    let (from, to) = (thread("from"), thread("to"));
    let root = Namespace::root();
    // a → b → c, and b → d (a second branch), with a pending write on d and one on c.
    let a = step(
        &s.saver,
        &from,
        &root,
        None,
        Source::Input,
        vec![tail("log", "[1]")],
    )
    .await?;
    let b = step(
        &s.saver,
        &from,
        &root,
        Some(a),
        Source::Loop,
        vec![tail("log", "[2]")],
    )
    .await?;
    let c = step(
        &s.saver,
        &from,
        &root,
        Some(b),
        Source::Loop,
        vec![tail("log", "[3]")],
    )
    .await?;
    let d = step(
        &s.saver,
        &from,
        &root,
        Some(b),
        Source::Fork,
        vec![whole("i", "7")],
    )
    .await?;
    let pending = |node: &str| PendingWrite {
        task_id: TaskId::derive(&[node.as_bytes()]),
        node: node.to_owned(),
        kind: WriteKind::Error("boom".to_owned()),
    };
    s.saver
        .put_writes(&from, &root, d, vec![pending("on-d")])
        .await?;
    s.saver
        .put_writes(&from, &root, c, vec![pending("on-c")])
        .await?;
    s.saver.copy_branch(&from, &to, d).await?;
    let ids: Vec<CheckpointId> = s
        .saver
        .list(&to, &root, ListOptions::default())
        .await?
        .iter()
        .map(|h| h.id)
        .collect();
    assert_eq!(ids, [d, b, a], "the branch ending at d, not c");
    let head = s
        .saver
        .get(&to, &root, None)
        .await?
        .ok_or("copy has no head")?;
    assert_eq!(head.checkpoint.parent, Some(b));
    assert_eq!(value(&head, "log"), serde_json::json!([1, 2]));
    assert_eq!(value(&head, "i"), serde_json::json!(7));
    let nodes: Vec<&str> = head.pending.iter().map(|w| w.node.as_str()).collect();
    assert_eq!(nodes, ["on-d"]);
    // The copy goes on by itself; the original keeps both branches.
    let e = step(
        &s.saver,
        &to,
        &root,
        Some(d),
        Source::Loop,
        vec![tail("log", "[9]")],
    )
    .await?;
    let copied = s.saver.get(&to, &root, Some(e)).await?.ok_or("e")?;
    assert_eq!(value(&copied, "log"), serde_json::json!([1, 2, 9]));
    let original = s.saver.get(&from, &root, Some(c)).await?.ok_or("c")?;
    assert_eq!(value(&original, "log"), serde_json::json!([1, 2, 3]));
    // An unknown head is not found, and an existing target is refused.
    let unknown = CheckpointId::generate();
    let err = s
        .saver
        .copy_branch(&from, &thread("other"), unknown)
        .await
        .err();
    assert!(
        matches!(err, Some(CheckpointError::NotFound { id, .. }) if id == unknown),
        "{err:?}"
    );
    let err = s.saver.copy_branch(&from, &to, c).await.err();
    assert!(
        matches!(err, Some(CheckpointError::StaleParent { .. })),
        "{err:?}"
    );
    Ok(())
}

pub async fn prune_keeps_the_last_n_loadable_and_resumable(s: Subject) -> TestResult {
    let t = thread("t");
    let root = Namespace::root();
    let mut parent = None;
    let mut ids = Vec::new();
    for i in 0..40 {
        let source = if i == 0 { Source::Input } else { Source::Loop };
        let writes = vec![tail("log", format!("[{i}]")), whole("i", i.to_string())];
        let id = step(&s.saver, &t, &root, parent, source, writes).await?;
        ids.push(id);
        parent = Some(id);
    }
    let before: Vec<serde_json::Value> = {
        let mut v = Vec::new();
        for id in &ids[35..] {
            v.push(value(&load(&s.saver, &t, *id).await?, "log"));
        }
        v
    };
    let deleted = s.saver.prune(&t, Retention::KeepLast(5)).await?;
    assert_eq!(deleted, 35);
    let left = s.saver.list(&t, &root, ListOptions::default()).await?;
    assert_eq!(
        left.iter().map(|c| c.id).rev().collect::<Vec<_>>(),
        ids[35..]
    );
    for (id, expected) in ids[35..].iter().zip(&before) {
        assert_eq!(
            &value(&load(&s.saver, &t, *id).await?, "log"),
            expected,
            "a kept checkpoint loads as before"
        );
    }
    assert_eq!(
        load(&s.saver, &t, ids[35]).await?.checkpoint.parent,
        None,
        "the oldest kept is a root now"
    );
    assert!(matches!(
        s.saver.get(&t, &root, Some(ids[0])).await,
        Err(CheckpointError::NotFound { .. })
    ));
    // The thread goes on from its head.
    let next = step(
        &s.saver,
        &t,
        &root,
        Some(ids[39]),
        Source::Loop,
        vec![tail("log", "[40]")],
    )
    .await?;
    let head = load(&s.saver, &t, next).await?;
    assert_eq!(
        value(&head, "log"),
        serde_json::Value::Array((0..41).map(|i| serde_json::json!(i)).collect())
    );
    Ok(())
}

pub async fn prune_keeps_checkpoints_newer_than_a_time(s: Subject) -> TestResult {
    let t = thread("t");
    let ids = chain(&s, &t, 3).await?;
    let cutoff = load(&s.saver, &t, ids[2]).await?.checkpoint.created_at_ms + 1;
    // Nothing is newer than the cutoff: the newest checkpoint is kept anyway.
    let deleted = s.saver.prune(&t, Retention::NewerThan(cutoff)).await?;
    assert_eq!(deleted, 2);
    let left = s
        .saver
        .list(&t, &Namespace::root(), ListOptions::default())
        .await?;
    assert_eq!(left.iter().map(|c| c.id).collect::<Vec<_>>(), [ids[2]]);
    Ok(())
}

pub async fn many_threads_written_concurrently_all_land(s: Subject) -> TestResult {
    let mut tasks = Vec::new();
    for w in 0..8 {
        let saver = s.saver.clone();
        tasks.push(tokio::spawn(async move {
            let t = thread(&format!("w{w}"));
            let mut parent = None;
            for i in 0..50 {
                let source = if i == 0 { Source::Input } else { Source::Loop };
                parent = Some(
                    step(
                        &saver,
                        &t,
                        &Namespace::root(),
                        parent,
                        source,
                        vec![tail("log", format!("[{i}]"))],
                    )
                    .await?,
                );
            }
            Ok::<_, CheckpointError>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    for w in 0..8 {
        let t = thread(&format!("w{w}"));
        let list = s
            .saver
            .list(&t, &Namespace::root(), ListOptions::default())
            .await?;
        assert_eq!(list.len(), 50);
        let head = s
            .saver
            .get(&t, &Namespace::root(), None)
            .await?
            .ok_or("no head")?;
        assert_eq!(
            value(&head, "log"),
            serde_json::Value::Array((0..50).map(|i| serde_json::json!(i)).collect())
        );
    }
    Ok(())
}

pub async fn two_writers_on_one_thread_commit_exactly_one_child(s: Subject) -> TestResult {
    let t = thread("t");
    let ids = chain(&s, &t, 1).await?;
    for round in 0..20 {
        let head = s
            .saver
            .get(&t, &Namespace::root(), None)
            .await?
            .ok_or("no head")?
            .checkpoint
            .id;
        let (a, b) = (s.saver.clone(), s.saver.clone());
        let (ta, tb) = (t.clone(), t.clone());
        let ra = tokio::spawn(async move {
            step(
                &a,
                &ta,
                &Namespace::root(),
                Some(head),
                Source::Loop,
                vec![whole("w", "\"a\"")],
            )
            .await
        });
        let rb = tokio::spawn(async move {
            step(
                &b,
                &tb,
                &Namespace::root(),
                Some(head),
                Source::Loop,
                vec![whole("w", "\"b\"")],
            )
            .await
        });
        let results = [ra.await?, rb.await?];
        let ok = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(ok, 1, "round {round}: {results:?}");
        assert!(results
            .iter()
            .any(|r| matches!(r, Err(CheckpointError::StaleParent { .. }))));
    }
    // One linear chain: every checkpoint's parent is the one before it.
    let list = s
        .saver
        .list(&t, &Namespace::root(), ListOptions::default())
        .await?;
    assert_eq!(list.len(), 21);
    for pair in list.windows(2) {
        assert_eq!(pair[0].parent, Some(pair[1].id));
    }
    assert_eq!(list.last().map(|c| c.id), Some(ids[0]));
    Ok(())
}

/// A long list: every step's changes are exactly its appended items, however the saver
/// stores or merges the list's parts, and the list loads whole at every checkpoint.
pub async fn changes_of_a_long_list_are_each_steps_tail(s: Subject) -> TestResult {
    let t = thread("long");
    let ns = Namespace::root();
    let mut ids = Vec::new();
    let mut parent = None;
    for i in 0..200 {
        let id = step(
            &s.saver,
            &t,
            &ns,
            parent,
            if i == 0 { Source::Input } else { Source::Loop },
            vec![tail("log", format!("[{i}]"))],
        )
        .await?;
        ids.push(id);
        parent = Some(id);
    }
    let changes = s.saver.changes_many(&t, &ns, ids[1..].to_vec()).await?;
    for (i, c) in changes.iter().enumerate() {
        let expected = format!("[{}]", i + 1);
        assert_eq!(
            c.fields,
            [(
                "log".to_owned(),
                vec![FieldPart::Tail(expected.into_bytes())]
            )],
            "step {}",
            i + 1
        );
    }
    for (i, id) in ids.iter().enumerate().step_by(37) {
        let loaded = s.saver.get(&t, &ns, Some(*id)).await?.ok_or("missing")?;
        let mut items: Vec<u32> = Vec::new();
        for part in &loaded.fields["log"] {
            let (FieldPart::Whole(b) | FieldPart::Tail(b)) = part;
            items.extend(serde_json::from_slice::<Vec<u32>>(b)?);
        }
        assert_eq!(items, (0..=i as u32).collect::<Vec<_>>(), "checkpoint {i}");
    }
    Ok(())
}

pub async fn changes_report_what_each_step_wrote(s: Subject) -> TestResult {
    let t = thread("t");
    let ns = Namespace::root();
    let a = step(
        &s.saver,
        &t,
        &ns,
        None,
        Source::Input,
        vec![tail("log", "[1]"), whole("n", "1")],
    )
    .await?;
    let b = step(
        &s.saver,
        &t,
        &ns,
        Some(a),
        Source::Loop,
        vec![tail("log", "[2]")],
    )
    .await?;
    let c = step(
        &s.saver,
        &t,
        &ns,
        Some(b),
        Source::Loop,
        vec![whole("log", "[7]"), whole("n", "2")],
    )
    .await?;
    let f = step(
        &s.saver,
        &t,
        &ns,
        Some(a),
        Source::Fork,
        vec![tail("log", "[3]")],
    )
    .await?;
    let root = s.saver.changes(&t, &ns, a).await?;
    assert_eq!(root.fields.len(), 2, "a root reports every field: {root:?}");
    let appended = s.saver.changes(&t, &ns, b).await?;
    assert_eq!(
        appended.fields,
        [("log".to_owned(), vec![FieldPart::Tail(b"[2]".to_vec())])]
    );
    let replaced = s.saver.changes(&t, &ns, c).await?;
    assert_eq!(
        replaced.fields,
        [
            ("log".to_owned(), vec![FieldPart::Whole(b"[7]".to_vec())]),
            ("n".to_owned(), vec![FieldPart::Whole(b"2".to_vec())])
        ]
    );
    let forked = s.saver.changes(&t, &ns, f).await?;
    assert_eq!(
        forked.fields,
        [("log".to_owned(), vec![FieldPart::Tail(b"[3]".to_vec())])]
    );
    Ok(())
}

/// A batch whose second checkpoint is stale keeps the first: the failure is that put's alone.
pub(crate) async fn a_failed_put_in_a_batch_keeps_the_puts_before_it(s: Subject) -> TestResult {
    let t = thread("batch-partial");
    let root = Namespace::root();
    let head = step(
        &s.saver,
        &t,
        &root,
        None,
        Source::Input,
        vec![whole("i", "0")],
    )
    .await?;
    let first = header(Some(head), 0, Source::Loop);
    let stale = header(Some(head), 0, Source::Loop);
    let first_id = first.id;
    let put = |checkpoint: Checkpoint, v: &str| PutCheckpoint {
        thread: t.clone(),
        ns: root.clone(),
        checkpoint,
        writes: vec![whole("i", v)],
    };
    let err = s
        .saver
        .put_many(vec![put(first, "1"), put(stale, "2")])
        .await
        .err();
    assert!(
        matches!(err, Some(CheckpointError::StaleParent { .. })),
        "{err:?}"
    );
    let ids: Vec<CheckpointId> = s
        .saver
        .list(&t, &root, ListOptions::default())
        .await?
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(ids, [first_id, head]);
    let loaded = s.saver.get(&t, &root, None).await?.ok_or("no head")?;
    assert_eq!(value(&loaded, "i"), serde_json::json!(1));
    Ok(())
}

/// Checkpoints handed over one at a time with "more follow" (as a run under `async` does) all
/// land, in order, once flushed; a stale one among them (another thread's second child of one
/// head) fails alone, and the ones around it are kept.
pub(crate) async fn checkpoints_handed_over_with_more_following_land_and_a_stale_one_fails_alone(
    s: Subject,
) -> TestResult {
    let root = Namespace::root();
    let (a, b) = (thread("stream-a"), thread("stream-b"));
    let a_head = step(
        &s.saver,
        &a,
        &root,
        None,
        Source::Input,
        vec![tail("xs", "[0]")],
    )
    .await?;
    let b_head = step(
        &s.saver,
        &b,
        &root,
        None,
        Source::Input,
        vec![whole("i", "0")],
    )
    .await?;
    let put = |t: &ThreadId, checkpoint: Checkpoint, w: FieldWrite| PutCheckpoint {
        thread: t.clone(),
        ns: root.clone(),
        checkpoint,
        writes: vec![w],
    };
    let mut replies = Vec::new();
    let mut parent = a_head;
    let mut a_ids = vec![a_head];
    for i in 1..=6 {
        let cp = header(Some(parent), i - 1, Source::Loop);
        parent = cp.id;
        a_ids.push(cp.id);
        replies.push(
            s.saver
                .put_streamed(vec![put(&a, cp, tail("xs", format!("[{i}]")))]),
        );
        if i == 3 {
            let kept = header(Some(b_head), 0, Source::Loop);
            let stale = header(Some(b_head), 0, Source::Loop);
            replies.push(s.saver.put_streamed(vec![put(&b, kept, whole("i", "1"))]));
            replies.push(s.saver.put_streamed(vec![put(&b, stale, whole("i", "2"))]));
        }
    }
    s.saver.flush().await?;
    let mut outcomes = Vec::new();
    for r in replies {
        outcomes.push(r.await);
    }
    let failed: Vec<usize> = (0..outcomes.len())
        .filter(|i| outcomes[*i].is_err())
        .collect();
    assert_eq!(failed, [4], "{outcomes:?}");
    assert!(
        matches!(outcomes[4], Err(CheckpointError::StaleParent { .. })),
        "{:?}",
        outcomes[4]
    );
    let listed: Vec<CheckpointId> = s
        .saver
        .list(&a, &root, ListOptions::default())
        .await?
        .into_iter()
        .map(|c| c.id)
        .collect();
    a_ids.reverse();
    assert_eq!(listed, a_ids);
    let loaded = s.saver.get(&a, &root, None).await?.ok_or("no head")?;
    assert_eq!(
        value(&loaded, "xs"),
        serde_json::json!([0, 1, 2, 3, 4, 5, 6])
    );
    let b_loaded = s.saver.get(&b, &root, None).await?.ok_or("no head")?;
    assert_eq!(value(&b_loaded, "i"), serde_json::json!(1));
    // Nothing pending: a flush has nothing to do.
    s.saver.flush().await?;
    Ok(())
}
