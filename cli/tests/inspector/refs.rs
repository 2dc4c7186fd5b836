//! Checkpoint references every command takes: a unique start or end of an id (history prints
//! the shortest unique end), `step:N` on the newest branch or on the branch of a checkpoint,
//! and ambiguity as an error that lists the candidates.

use std::collections::HashSet;

use stategraph::checkpoints::CheckpointId;

use crate::support::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// The id of every checkpoint of `thread`, newest first.
fn ids(db: &std::path::Path, thread: &str) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    history(db, thread)
        .iter()
        .map(|c| Ok(c["id"].as_str().ok_or("id")?.to_owned()))
        .collect()
}

#[test]
fn history_prints_unique_id_ends_that_every_command_accepts() -> TestResult {
    let (_dir, db) = fixture();
    let ids = ids(&db, "main")?;
    let text = sg(&["history", p(&db), "-t", "main"]).ok().stdout;
    let shown: Vec<&str> = text
        .lines()
        .map(|l| l.split_whitespace().next().unwrap_or(""))
        .collect();
    assert_eq!(shown.len(), ids.len(), "{text}");
    let distinct: HashSet<&str> = shown.iter().copied().collect();
    assert_eq!(distinct.len(), shown.len(), "short ids repeat:\n{text}");
    for (short, id) in shown.iter().zip(&ids) {
        assert!(short.len() >= 6 && id.ends_with(short), "{short} of {id}");
        let at = sg(&["show", p(&db), "-t", "main", "-c", short, "--json"])
            .ok()
            .json();
        assert_eq!(at["checkpoint"]["id"], id.as_str(), "{short}");
    }
    Ok(())
}

#[test]
fn an_ambiguous_reference_is_a_usage_error_listing_every_candidate() -> TestResult {
    let (_dir, db) = fixture();
    let ids = ids(&db, "main")?;
    // Ids made in one run share their first digits (they are time-ordered).
    let start = &ids[0][..6];
    let candidates: Vec<&String> = ids
        .iter()
        .filter(|id| id.starts_with(start) || id.ends_with(start))
        .collect();
    assert!(candidates.len() >= 2, "{ids:?}");
    let ran = sg(&["show", p(&db), "-t", "main", "-c", start]).fails(2);
    assert!(ran.stderr.contains("is ambiguous"), "{ran:#?}");
    assert!(
        ran.stderr
            .contains(&format!("{} checkpoints match", candidates.len())),
        "{ran:#?}"
    );
    for id in candidates {
        assert!(
            ran.stderr.contains(id.as_str()),
            "{id} not listed: {ran:#?}"
        );
    }
    Ok(())
}

#[test]
fn step_n_names_a_step_on_the_newest_branch_or_on_the_branch_of_a_checkpoint() -> TestResult {
    let (_dir, db) = fixture();
    let before = history(&db, "main");
    let old_head = before[0]["id"].as_str().ok_or("id")?.to_owned();
    let step_of = |c: &serde_json::Value| c["step"].as_i64().unwrap_or(i64::MIN);
    let first_write = before
        .iter()
        .find(|c| {
            c["writes"]
                .as_array()
                .is_some_and(|w| w.iter().any(|w| w["field"] == "count" && w["value"] == 1))
        })
        .ok_or("the first write")?;
    let fork_step = step_of(first_write);
    let fork_at: CheckpointId = first_write["id"].as_str().ok_or("id")?.parse()?;

    // One branch so far: step:N is that step's checkpoint.
    let at = sg(&[
        "show",
        p(&db),
        "-t",
        "main",
        "-c",
        &format!("step:{fork_step}"),
        "--json",
    ])
    .ok()
    .json();
    assert_eq!(at["checkpoint"]["id"], first_write["id"]);

    // A second branch from the first write: the newest branch now ends at the edit.
    let edit = runtime().block_on(async {
        doc_graph(&db)
            .update_state("main", Some(fork_at), Doc::update().count(10), "write")
            .await
    })?;
    let next = fork_step + 1;
    let on_newest = sg(&[
        "show",
        p(&db),
        "-t",
        "main",
        "-c",
        &format!("step:{next}"),
        "--json",
    ])
    .ok()
    .json();
    assert_eq!(on_newest["checkpoint"]["id"], edit.to_string());
    assert_eq!(on_newest["state"]["count"], 10);

    let old_end = &old_head[old_head.len() - 8..];
    let on_old = sg(&[
        "show",
        p(&db),
        "-t",
        "main",
        "-c",
        &format!("step:{next}@{old_end}"),
        "--json",
    ])
    .ok()
    .json();
    let recorded = before
        .iter()
        .find(|c| step_of(c) == next)
        .ok_or("the old branch's next step")?;
    assert_eq!(on_old["checkpoint"]["id"], recorded["id"]);
    assert_ne!(on_old["checkpoint"]["id"], edit.to_string());

    let ran = sg(&["show", p(&db), "-t", "main", "-c", "step:99"]).fails(1);
    assert!(ran.stderr.contains("no checkpoint of step 99"), "{ran:#?}");
    sg(&["show", p(&db), "-t", "main", "-c", "step:x"]).fails(2);
    Ok(())
}
