//! Every filter operator, with the rules of `Filter::matches`.

use serde_json::{json, Value};
use stategraph_store::{Filter, SearchOp};

use crate::support::{ns, obj, Backend, BoxError, Fixture, TestResult};

/// Puts each `(key, value)` under `f`.
async fn seed(s: &Fixture, items: &[(&str, Value)]) -> TestResult {
    for (key, value) in items {
        s.put(&ns(&["f"]), key, obj(value.clone())).await?;
    }
    Ok(())
}

/// The keys `filter` finds under `f`, sorted.
async fn found(s: &Fixture, filter: Value) -> Result<Vec<String>, BoxError> {
    let filter = Filter::from_json(&obj(filter))?;
    let op = SearchOp::new(ns(&["f"])).filter(filter).page(1000, 0);
    let mut keys: Vec<String> = s
        .search(op)
        .await?
        .into_iter()
        .map(|i| i.item.key)
        .collect();
    keys.sort();
    Ok(keys)
}

pub async fn eq_compares_numbers_by_value_and_strings_exactly(b: Backend) -> TestResult {
    let s = b.plain().await?;
    seed(
        &s,
        &[
            ("int", json!({"a": 1})),
            ("float", json!({"a": 1.0})),
            ("half", json!({"a": 1.5})),
            ("str", json!({"a": "1"})),
            ("upper", json!({"a": "Tea"})),
            ("lower", json!({"a": "tea"})),
            ("none", json!({"b": 1})),
        ],
    )
    .await?;
    assert_eq!(found(&s, json!({"a": 1})).await?, ["float", "int"]);
    assert_eq!(
        found(&s, json!({"a": {"$eq": 1.0}})).await?,
        ["float", "int"]
    );
    assert_eq!(found(&s, json!({"a": 1.5})).await?, ["half"]);
    assert_eq!(found(&s, json!({"a": "1"})).await?, ["str"]);
    assert_eq!(found(&s, json!({"a": "tea"})).await?, ["lower"]);
    assert_eq!(found(&s, json!({"a": "te"})).await?, Vec::<String>::new());
    Ok(())
}

pub async fn eq_on_booleans_null_objects_and_arrays(b: Backend) -> TestResult {
    let s = b.plain().await?;
    seed(
        &s,
        &[
            ("t", json!({"a": true})),
            ("f", json!({"a": false})),
            ("one", json!({"a": 1})),
            ("zero", json!({"a": 0})),
            ("null", json!({"a": null})),
            ("missing", json!({})),
            ("obj", json!({"a": {"x": 1, "y": [1, 2]}})),
            ("obj_float", json!({"a": {"y": [1.0, 2], "x": 1.0}})),
            ("arr", json!({"a": [1, "b"]})),
            ("empty_str", json!({"a": ""})),
        ],
    )
    .await?;
    assert_eq!(found(&s, json!({"a": true})).await?, ["t"]);
    assert_eq!(found(&s, json!({"a": false})).await?, ["f"]);
    assert_eq!(found(&s, json!({"a": null})).await?, ["null"]);
    assert_eq!(
        found(&s, json!({"a": {"$eq": {"x": 1, "y": [1, 2]}}})).await?,
        ["obj", "obj_float"]
    );
    assert_eq!(found(&s, json!({"a": {"$eq": [1, "b"]}})).await?, ["arr"]);
    assert_eq!(
        found(&s, json!({"a": {"$eq": [1]}})).await?,
        Vec::<String>::new()
    );
    assert_eq!(found(&s, json!({"a": ""})).await?, ["empty_str"]);
    assert_eq!(
        found(&s, json!({"a": {"$ne": true}})).await?,
        [
            "arr",
            "empty_str",
            "f",
            "missing",
            "null",
            "obj",
            "obj_float",
            "one",
            "zero"
        ]
    );
    assert_eq!(
        found(&s, json!({"a": {"$ne": {"x": 1, "y": [1, 2]}}})).await?,
        [
            "arr",
            "empty_str",
            "f",
            "missing",
            "null",
            "one",
            "t",
            "zero"
        ]
    );
    Ok(())
}

pub async fn ne_matches_an_item_without_the_field(b: Backend) -> TestResult {
    let s = b.plain().await?;
    seed(
        &s,
        &[
            ("one", json!({"a": 1})),
            ("one_f", json!({"a": 1.0})),
            ("two", json!({"a": 2})),
            ("str", json!({"a": "1"})),
            ("missing", json!({"b": 1})),
            ("null", json!({"a": null})),
            ("deep_missing", json!({"u": {}})),
        ],
    )
    .await?;
    assert_eq!(
        found(&s, json!({"a": {"$ne": 1}})).await?,
        ["deep_missing", "missing", "null", "str", "two"]
    );
    assert_eq!(
        found(&s, json!({"u.plan": {"$ne": "pro"}})).await?,
        [
            "deep_missing",
            "missing",
            "null",
            "one",
            "one_f",
            "str",
            "two"
        ]
    );
    Ok(())
}

pub async fn ordering_operators_on_numbers(b: Backend) -> TestResult {
    let s = b.plain().await?;
    seed(
        &s,
        &[
            ("m1", json!({"n": -1})),
            ("z", json!({"n": 0})),
            ("one", json!({"n": 1})),
            ("one_half", json!({"n": 1.5})),
            ("two", json!({"n": 2.0})),
            ("big", json!({"n": 1e300})),
        ],
    )
    .await?;
    assert_eq!(
        found(&s, json!({"n": {"$gt": 1}})).await?,
        ["big", "one_half", "two"]
    );
    assert_eq!(
        found(&s, json!({"n": {"$gte": 1.0}})).await?,
        ["big", "one", "one_half", "two"]
    );
    assert_eq!(found(&s, json!({"n": {"$lt": 0.5}})).await?, ["m1", "z"]);
    assert_eq!(found(&s, json!({"n": {"$lte": 0}})).await?, ["m1", "z"]);
    assert_eq!(
        found(&s, json!({"n": {"$gt": 0, "$lte": 2}})).await?,
        ["one", "one_half", "two"]
    );
    Ok(())
}

pub async fn ordering_operators_on_strings_compare_bytes(b: Backend) -> TestResult {
    let s = b.plain().await?;
    seed(
        &s,
        &[
            ("upper_b", json!({"s": "B"})),
            ("lower_a", json!({"s": "a"})),
            ("lower_ab", json!({"s": "ab"})),
            ("e_acute", json!({"s": "é"})),
            ("empty", json!({"s": ""})),
        ],
    )
    .await?;
    // Bytes: "" < "B" (0x42) < "a" (0x61) < "ab" < "é" (0xC3 0xA9).
    assert_eq!(
        found(&s, json!({"s": {"$gt": "a"}})).await?,
        ["e_acute", "lower_ab"]
    );
    assert_eq!(
        found(&s, json!({"s": {"$gte": "a"}})).await?,
        ["e_acute", "lower_a", "lower_ab"]
    );
    assert_eq!(
        found(&s, json!({"s": {"$lt": "a"}})).await?,
        ["empty", "upper_b"]
    );
    assert_eq!(
        found(&s, json!({"s": {"$lte": "B"}})).await?,
        ["empty", "upper_b"]
    );
    assert_eq!(found(&s, json!({"s": {"$gt": "z"}})).await?, ["e_acute"]);
    Ok(())
}

pub async fn ordering_across_types_never_matches(b: Backend) -> TestResult {
    let s = b.plain().await?;
    seed(
        &s,
        &[
            ("num", json!({"a": 5})),
            ("str_num", json!({"a": "5"})),
            ("bool", json!({"a": true})),
            ("null", json!({"a": null})),
            ("arr", json!({"a": [9]})),
            ("obj", json!({"a": {"b": 9}})),
            ("missing", json!({})),
        ],
    )
    .await?;
    assert_eq!(found(&s, json!({"a": {"$gt": 1}})).await?, ["num"]);
    assert_eq!(found(&s, json!({"a": {"$lt": 100}})).await?, ["num"]);
    assert_eq!(found(&s, json!({"a": {"$gte": "0"}})).await?, ["str_num"]);
    assert_eq!(found(&s, json!({"a": {"$lte": "zzz"}})).await?, ["str_num"]);
    assert_eq!(found(&s, json!({"a": {"$gt": -1e300}})).await?, ["num"]);
    Ok(())
}

pub async fn nested_paths_reach_into_objects_only(b: Backend) -> TestResult {
    let s = b.plain().await?;
    seed(
        &s,
        &[
            ("pro", json!({"user": {"plan": "pro", "seats": 3}})),
            ("free", json!({"user": {"plan": "free", "seats": 1}})),
            ("deep", json!({"user": {"plan": {"tier": "pro"}}})),
            ("array", json!({"user": [{"plan": "pro"}]})),
            ("flat", json!({"user.plan": "pro"})),
            ("scalar", json!({"user": "pro"})),
        ],
    )
    .await?;
    assert_eq!(found(&s, json!({"user.plan": "pro"})).await?, ["pro"]);
    assert_eq!(found(&s, json!({"user.plan.tier": "pro"})).await?, ["deep"]);
    assert_eq!(
        found(&s, json!({"user.seats": {"$gte": 2}})).await?,
        ["pro"]
    );
    assert_eq!(
        found(&s, json!({"user.plan": {"$ne": "pro"}})).await?,
        ["array", "deep", "flat", "free", "scalar"]
    );
    Ok(())
}

pub async fn a_numeric_path_segment_names_a_key_not_an_array_index(b: Backend) -> TestResult {
    let s = b.plain().await?;
    seed(
        &s,
        &[
            ("list", json!({"tags": ["x", "y"]})),
            ("keyed", json!({"tags": {"0": "x", "-1": "y"}})),
        ],
    )
    .await?;
    assert_eq!(found(&s, json!({"tags.0": "x"})).await?, ["keyed"]);
    assert_eq!(found(&s, json!({"tags.-1": "y"})).await?, ["keyed"]);
    assert_eq!(
        found(&s, json!({"tags.0": {"$gte": "a"}})).await?,
        ["keyed"]
    );
    assert_eq!(found(&s, json!({"tags.0": {"$ne": "x"}})).await?, ["list"]);
    Ok(())
}

pub async fn every_condition_must_hold(b: Backend) -> TestResult {
    let s = b.plain().await?;
    seed(
        &s,
        &[
            ("a", json!({"kind": "fact", "n": 1})),
            ("b", json!({"kind": "fact", "n": 5})),
            ("c", json!({"kind": "note", "n": 5})),
        ],
    )
    .await?;
    assert_eq!(
        found(&s, json!({"kind": "fact", "n": {"$gt": 2}})).await?,
        ["b"]
    );
    assert_eq!(found(&s, json!({})).await?, ["a", "b", "c"]);
    assert_eq!(
        found(&s, json!({"kind": {"$ne": "fact"}, "n": 1})).await?,
        Vec::<String>::new()
    );
    Ok(())
}

pub async fn odd_keys_are_values_not_syntax(b: Backend) -> TestResult {
    let s = b.plain().await?;
    seed(
        &s,
        &[
            ("quote", json!({"we\"ird": {"k'ey": "x"}})),
            ("dollar", json!({"$a": 1, "[0]": 2})),
            ("space", json!({"a b": "x' OR 1=1 --"})),
        ],
    )
    .await?;
    assert_eq!(found(&s, json!({"we\"ird.k'ey": "x"})).await?, ["quote"]);
    assert_eq!(found(&s, json!({"$a": 1})).await?, ["dollar"]);
    assert_eq!(found(&s, json!({"[0]": 2})).await?, ["dollar"]);
    assert_eq!(found(&s, json!({"a b": "x' OR 1=1 --"})).await?, ["space"]);
    assert_eq!(found(&s, json!({"a b": "x"})).await?, Vec::<String>::new());
    Ok(())
}
