//! `show`: the state with its header, or one value.

use serde_json::{json, Value};

use crate::support::*;

#[test]
fn show_prints_the_state_with_its_header_or_one_value() {
    let (_dir, db) = fixture();
    let text = sg(&["show", p(&db), "--thread", "main"]).ok().stdout;
    let list = history(&db, "main");
    let head = list[0]["id"].as_str().unwrap();
    assert!(text.starts_with(&format!("checkpoint  {head}\n")), "{text}");
    for key in ["parent", "step", "source", "created", "next"] {
        assert!(
            text.lines().any(|l| l.starts_with(key)),
            "{key} missing:\n{text}"
        );
    }
    let created = text.lines().find(|l| l.starts_with("created")).unwrap();
    assert!(
        created.trim_end().ends_with('Z') && created.contains('T'),
        "{created}"
    );
    let body = &text[text.find("\n{").expect("state JSON")..];
    let state: Value = serde_json::from_str(body).expect("state is JSON");
    assert_eq!(
        state,
        json!({ "count": 3, "log": ["w0", "w1", "w2", "prep cats", "yes"], "topic": "cats", "brief": BRIEF })
    );

    let doc = sg(&["show", p(&db), "-t", "main", "--json"]).ok().json();
    assert_eq!(doc["state"], state);
    assert_eq!(doc["checkpoint"]["id"], head);
    assert_eq!(doc["checkpoint"]["next"], json!([]));

    let count = sg(&["show", p(&db), "-t", "main", "--field", "count"]).ok();
    assert_eq!(count.stdout.trim(), "3");
    let first = sg(&["show", p(&db), "-t", "main", "--path", "/log/3"]).ok();
    assert_eq!(first.stdout.trim(), "\"prep cats\"");

    // An older checkpoint by unique prefix: after the first write step.
    let older = list
        .iter()
        .find(|c| {
            c["writes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|w| w["field"] == "count" && w["value"] == 1)
        })
        .expect("first write");
    let id = older["id"].as_str().unwrap();
    let prefix = &id[..20];
    let at = sg(&["show", p(&db), "-t", "main", "-c", prefix, "--json"])
        .ok()
        .json();
    assert_eq!(at["checkpoint"]["id"], id);
    assert_eq!(at["state"]["log"], json!(["w0"]));
    assert_eq!(at["checkpoint"]["next"], json!(["write"]));

    // The paused thread shows its pending interrupt in the header.
    let paused = sg(&["show", p(&db), "-t", "paused"]).ok().stdout;
    let line = paused
        .lines()
        .find(|l| l.starts_with("interrupt"))
        .unwrap_or_else(|| panic!("no interrupt line:\n{paused}"));
    assert!(line.contains("\"approve?\""), "{line}");

    // Asking for what is not there.
    let missing = sg(&["show", p(&db), "-t", "main", "--field", "nope"]).fails(1);
    assert!(missing.stderr.contains("field nope has no"), "{missing:#?}");
    sg(&["show", p(&db), "-t", "main", "--path", "/log/99"]).fails(1);
    sg(&["show", p(&db), "-t", "main", "--path", "log"]).fails(2);
    sg(&["show", p(&db), "-t", "main", "--field", "a", "--path", "/b"]).fails(2);
}

#[test]
fn show_lists_every_field_with_the_never_written_ones_marked(
) -> Result<(), Box<dyn std::error::Error>> {
    let (_dir, db) = fixture();
    let all = ["brief", "count", "log", "topic"];
    // Thread `paused` never wrote `brief`.
    let doc = sg(&["show", p(&db), "-t", "paused", "--json"]).ok().json();
    assert_eq!(doc["unwritten"], json!(["brief"]), "{doc:#}");
    assert!(doc["state"].get("brief").is_none(), "{doc:#}");
    let text = sg(&["show", p(&db), "-t", "paused"]).ok().stdout;
    let line = text
        .lines()
        .find(|l| l.starts_with("unwritten"))
        .ok_or_else(|| format!("no unwritten line:\n{text}"))?;
    assert!(
        line.contains("brief") && line.contains("never written"),
        "{line}"
    );
    let asked = sg(&["show", p(&db), "-t", "paused", "--field", "brief"]).fails(1);
    assert!(
        asked.stderr.contains("field brief has never been written"),
        "{asked:#?}"
    );

    // At every checkpoint, the stored fields and the unwritten ones are the whole state.
    for cp in history(&db, "main") {
        let id = cp["id"].as_str().ok_or("id")?;
        let doc = sg(&["show", p(&db), "-t", "main", "-c", id, "--json"])
            .ok()
            .json();
        let mut fields: Vec<String> = doc["state"]
            .as_object()
            .ok_or("state")?
            .keys()
            .cloned()
            .collect();
        for f in doc["unwritten"].as_array().ok_or("unwritten")? {
            fields.push(f.as_str().ok_or("name")?.to_owned());
        }
        fields.sort();
        assert_eq!(fields, all, "{doc:#}");
    }
    Ok(())
}
