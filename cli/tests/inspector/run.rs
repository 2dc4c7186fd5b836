//! `run`: one run with its delivery receipt.

use crate::support::*;

#[test]
fn run_shows_a_run_with_its_receipt() {
    let (_dir, db) = fixture_with_runs();
    let text = sg(&["run", p(&db), "r-old"]).ok().stdout;
    assert!(text.starts_with("run r-old\n"), "{text}");
    assert!(text.contains("  thread       main\n"), "{text}");
    assert!(text.contains("  status       success\n"), "{text}");
    assert!(text.contains("delivery receipt\n"), "{text}");
    assert!(text.contains("\"/mnt/user-data/outputs/a.md\""), "{text}");

    let doc = sg(&["run", p(&db), "r-old", "--json"]).ok().json();
    assert_eq!(doc["run"]["run_id"], "r-old");
    assert_eq!(doc["run"]["receipt"], true);
    assert_eq!(doc["receipt"]["presented"], 1);
}

#[test]
fn run_without_a_receipt_says_so() {
    let (_dir, db) = fixture_with_runs();
    let text = sg(&["run", p(&db), "r-new"]).ok().stdout;
    assert!(text.contains("  status       error\n"), "{text}");
    assert!(text.contains("  stop reason  loop_capped\n"), "{text}");
    assert!(text.contains("no delivery receipt"), "{text}");
    let doc = sg(&["run", p(&db), "r-new", "--json"]).ok().json();
    assert_eq!(doc["receipt"], serde_json::Value::Null);
    assert_eq!(
        doc["run"]["reason"],
        "Artifact delivery incomplete: no produced output artifact was presented"
    );
}

#[test]
fn an_unknown_run_is_a_problem_and_a_bad_id_a_usage_error() {
    let (_dir, db) = fixture_with_runs();
    let ran = sg(&["run", p(&db), "ghost"]).fails(1);
    assert!(ran.stderr.contains("no run ghost in"), "{ran:#?}");
    sg(&["run", p(&db), "ghost", "--json"]).fails(1);
    sg(&["run", p(&db), "a\tb"]).fails(2);
    sg(&["run", p(&db)]).fails(2);
}

#[test]
fn run_shows_the_runs_token_usage_in_text_and_json() {
    let (_dir, db) = fixture_with_runs();
    let text = sg(&["run", p(&db), "r-old"]).ok().stdout;
    assert!(
        text.contains("  usage        in 120 / out 30 / total 150 tokens, 3 model calls\n"),
        "{text}"
    );
    let doc = sg(&["run", p(&db), "r-old", "--json"]).ok().json();
    assert_eq!(
        doc["run"]["usage"],
        serde_json::json!({"input_tokens": 120, "output_tokens": 30, "total_tokens": 150,
                           "model_calls": 3})
    );
    // A run stored without usage says so.
    let text = sg(&["run", p(&db), "r-new"]).ok().stdout;
    assert!(text.contains("  usage        -\n"), "{text}");
    let doc = sg(&["run", p(&db), "r-new", "--json"]).ok().json();
    assert_eq!(doc["run"]["usage"], serde_json::Value::Null);
}
