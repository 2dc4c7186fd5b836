//! The diff law: applying `diff(a, b)` to `a` gives `b`, for any two states.
#![allow(missing_docs)]

use proptest::prelude::*;
use serde_json::{json, Value};
use stategraph_checkpoints::diff::diff_values;

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(|n| json!(n % 5)),
        "[a-c]{0,2}".prop_map(Value::String),
        Just(Value::Null)
    ]
}

fn message() -> impl Strategy<Value = Value> {
    (0u8..8, "[a-c]{0,2}").prop_map(|(id, t)| json!({ "id": id.to_string(), "t": t }))
}

/// A list of messages with unique ids (diffed by id).
fn messages() -> impl Strategy<Value = Value> {
    proptest::collection::vec(message(), 0..7).prop_map(|mut v| {
        let mut seen = std::collections::BTreeSet::new();
        v.retain(|m| seen.insert(m["id"].as_str().map(str::to_owned)));
        Value::Array(v)
    })
}

fn field() -> impl Strategy<Value = Value> {
    prop_oneof![
        leaf(),
        proptest::collection::vec(leaf(), 0..6).prop_map(Value::Array),
        messages()
    ]
}

fn state() -> impl Strategy<Value = Value> {
    proptest::collection::btree_map("[a-d]", field(), 0..4)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn applying_the_diff_of_a_and_b_to_a_gives_b(a in state(), b in state()) {
        let d = diff_values(&a, &b);
        prop_assert_eq!(d.apply(&a), b);
    }

    #[test]
    fn a_state_has_no_diff_with_itself(a in state()) {
        prop_assert!(diff_values(&a, &a).is_empty());
    }

    #[test]
    fn appending_to_a_list_is_one_appended_edit(items in proptest::collection::vec(leaf(), 0..5), more in proptest::collection::vec(leaf(), 1..5)) {
        let a = json!({ "log": items.clone() });
        let mut all = items.clone();
        all.extend(more.clone());
        let b = json!({ "log": all });
        let d = diff_values(&a, &b);
        prop_assert_eq!(d.to_string().lines().count(), more.len());
        prop_assert!(d.to_string().lines().all(|l| l.starts_with("+ log[")));
    }
}
