//! `prune`: the newest N checkpoints are kept and the file stays valid.

use serde_json::Value;

use crate::support::*;

#[test]
fn prune_keeps_the_newest_n_checkpoints_and_the_file_stays_valid() {
    let (_dir, db) = fixture();
    let before = history(&db, "main");
    let head_state = sg(&["show", p(&db), "-t", "main", "--json"]).ok().json()["state"].clone();
    let ran = sg(&["prune", p(&db), "--thread", "main", "--keep", "3", "--json"])
        .ok()
        .json();
    assert_eq!(ran["kept"], 3);
    assert_eq!(ran["before"].as_u64(), Some(before.len() as u64));
    assert!(ran["deleted"].as_u64().unwrap() >= before.len() as u64 - 3);
    let after = history(&db, "main");
    assert_eq!(after.len(), 3);
    let ids = |l: &[Value]| l.iter().map(|c| c["id"].clone()).collect::<Vec<_>>();
    assert_eq!(ids(&after), ids(&before[..3]));
    assert_eq!(after[2]["parent"], Value::Null, "the oldest kept is a root");
    let state = sg(&["show", p(&db), "-t", "main", "--json"]).ok().json()["state"].clone();
    assert_eq!(state, head_state);
    assert_eq!(history(&db, "paused").len(), {
        let t = sg(&["threads", p(&db), "--json"]).ok().json();
        t.as_array()
            .unwrap()
            .iter()
            .find(|t| t["thread"] == "paused")
            .unwrap()["checkpoints"]
            .as_u64()
            .unwrap() as usize
    });
    sg(&["verify", p(&db)]).ok();
    let text = sg(&["prune", p(&db), "-t", "main", "--keep", "1"])
        .ok()
        .stdout;
    assert!(text.contains("1 of 3 left"), "{text}");
    assert_eq!(history(&db, "main").len(), 1);
    sg(&["prune", p(&db), "-t", "main", "--keep", "0"]).fails(2);
    sg(&["prune", p(&db), "-t", "ghost", "--keep", "1"]).fails(1);
}
