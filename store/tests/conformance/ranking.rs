//! Ranked search: full-text without an index, vector similarity with one.

use serde_json::json;
use stategraph_store::{Filter, IndexFields, Op, PutOp, SearchItem, SearchOp};

use crate::support::{keys, ns, obj, Backend, Fixture, TestResult};

async fn texts(s: &Fixture, labels: &[&str], items: &[(&str, &str)]) -> TestResult {
    for (key, text) in items {
        s.put(&ns(labels), key, obj(json!({"text": text}))).await?;
    }
    Ok(())
}

fn assert_descending(found: &[SearchItem]) {
    let scores: Vec<f64> = found
        .iter()
        .map(|f| f.score.expect("a ranked score"))
        .collect();
    assert!(
        scores.windows(2).all(|w| w[0] >= w[1]),
        "scores not descending: {scores:?}"
    );
}

const TEAS: &[(&str, &str)] = &[
    ("all", "green tea with jasmine"),
    ("two", "green tea"),
    ("one", "tea"),
    ("c1", "black coffee"),
    ("c2", "coffee beans"),
    ("c3", "iced coffee"),
    ("c4", "coffee grinder"),
];

pub async fn full_text_ranks_items_holding_more_query_words_first(b: Backend) -> TestResult {
    let s = b.plain().await?;
    texts(&s, &["docs"], TEAS).await?;
    let found = s
        .search(SearchOp::new(ns(&["docs"])).query("jasmine green tea"))
        .await?;
    assert_eq!(keys(&found), ["all", "two", "one"]);
    assert_descending(&found);
    assert!(found.iter().all(|f| f.score.is_some_and(|s| s > 0.0)));
    Ok(())
}

pub async fn full_text_skips_items_without_any_query_word(b: Backend) -> TestResult {
    let s = b.plain().await?;
    texts(&s, &["docs"], TEAS).await?;
    let found = s
        .search(SearchOp::new(ns(&["docs"])).query("biscuits"))
        .await?;
    assert!(found.is_empty());
    let found = s.search(SearchOp::new(ns(&["docs"])).query("tea")).await?;
    let mut got = keys(&found);
    got.sort();
    assert_eq!(got, ["all", "one", "two"]);
    // Words are whole words: "te" is not "tea".
    assert!(s
        .search(SearchOp::new(ns(&["docs"])).query("te"))
        .await?
        .is_empty());
    Ok(())
}

pub async fn full_text_ignores_case_and_punctuation(b: Backend) -> TestResult {
    let s = b.plain().await?;
    let at = ns(&["docs"]);
    s.put(
        &at,
        "shout",
        obj(json!({"title": "GREEN-Tea!", "tags": ["x", "oolong"]})),
    )
    .await?;
    s.put(&at, "other", obj(json!({"title": "coffee", "n": 5})))
        .await?;
    let found = s.search(SearchOp::new(at.clone()).query("green")).await?;
    assert_eq!(keys(&found), ["shout"]);
    let found = s
        .search(SearchOp::new(at.clone()).query("\"tea\" AND (NOT x*)"))
        .await?;
    assert_eq!(
        keys(&found),
        ["shout"],
        "query syntax is words, not operators"
    );
    let found = s.search(SearchOp::new(at).query("OOLONG")).await?;
    assert_eq!(
        keys(&found),
        ["shout"],
        "strings inside arrays are searched"
    );
    Ok(())
}

pub async fn full_text_pages_and_filters(b: Backend) -> TestResult {
    let s = b.plain().await?;
    let at = ns(&["docs"]);
    for n in 0..6 {
        let value = json!({"text": "tea", "n": n});
        s.put(&at, &format!("k{n}"), obj(value)).await?;
    }
    s.put(
        &ns(&["elsewhere"]),
        "k9",
        obj(json!({"text": "tea", "n": 1})),
    )
    .await?;
    let filter = Filter::from_json(&obj(json!({"n": {"$gte": 2}})))?;
    let op = SearchOp::new(at).query("tea").filter(filter);
    let all = keys(&s.search(op.clone().page(10, 0)).await?);
    assert_eq!(all.len(), 4);
    let mut paged = keys(&s.search(op.clone().page(3, 0)).await?);
    paged.extend(keys(&s.search(op.page(3, 3)).await?));
    assert_eq!(paged, all, "pages are disjoint and in one order");
    Ok(())
}

pub async fn vector_search_returns_scores_best_first(b: Backend) -> TestResult {
    let s = b.indexed(&["text"]).await?;
    texts(&s, &["docs"], TEAS).await?;
    let found = s
        .search(SearchOp::new(ns(&["docs"])).query("green tea with jasmine"))
        .await?;
    assert_eq!(found.len(), TEAS.len(), "every indexed item is ranked");
    assert_eq!(keys(&found)[..3], ["all", "two", "one"]);
    assert_descending(&found);
    let best = found[0].score.expect("a score");
    assert!(
        (best - 1.0).abs() < 1e-5,
        "the same text scores 1, got {best}"
    );
    Ok(())
}

pub async fn a_later_put_of_a_key_in_one_batch_keeps_only_its_vectors(b: Backend) -> TestResult {
    let s = b.indexed(&["text"]).await?;
    let put = |text: &str| Op::Put(PutOp::new(ns(&["docs"]), "k", obj(json!({"text": text}))));
    s.batch(vec![put("green tea"), put("black coffee")]).await?;
    let score = |found: Vec<SearchItem>| found[0].score.expect("a ranked score");
    let coffee = score(
        s.search(SearchOp::new(ns(&["docs"])).query("black coffee"))
            .await?,
    );
    let tea = score(
        s.search(SearchOp::new(ns(&["docs"])).query("green tea"))
            .await?,
    );
    assert!(
        (coffee - 1.0).abs() < 1e-5,
        "the last text scores 1, got {coffee}"
    );
    assert!(
        tea < 0.9,
        "the first put's vector is gone, yet tea scores {tea}"
    );
    Ok(())
}

pub async fn vector_search_skips_items_indexed_off(b: Backend) -> TestResult {
    let s = b.indexed(&["text"]).await?;
    let at = ns(&["docs"]);
    let off =
        PutOp::new(at.clone(), "off", obj(json!({"text": "green tea"}))).index(IndexFields::Off);
    s.batch(vec![Op::Put(off)]).await?;
    s.put(&at, "on", obj(json!({"text": "coffee"}))).await?;
    s.put(&at, "no_field", obj(json!({"title": "green tea"})))
        .await?;
    let found = s
        .search(SearchOp::new(at.clone()).query("green tea"))
        .await?;
    assert_eq!(keys(&found), ["on"]);
    let mut all = keys(&s.search(SearchOp::new(at)).await?);
    all.sort();
    assert_eq!(all, ["no_field", "off", "on"], "found by filters still");
    Ok(())
}

pub async fn vector_search_uses_a_puts_field_override(b: Backend) -> TestResult {
    let s = b.indexed(&["text"]).await?;
    let at = ns(&["docs"]);
    let value = obj(json!({"text": "outboard boat engine", "title": "green tea"}));
    let by_title = PutOp::new(at.clone(), "by_title", value.clone())
        .index(IndexFields::Fields(vec!["title".to_owned()]));
    let by_text = PutOp::new(at.clone(), "by_text", value);
    s.batch(vec![Op::Put(by_title), Op::Put(by_text)]).await?;
    let found = s
        .search(SearchOp::new(at.clone()).query("green tea"))
        .await?;
    assert_eq!(keys(&found)[0], "by_title");
    assert!((found[0].score.expect("a score") - 1.0).abs() < 1e-5);
    let found = s
        .search(SearchOp::new(at).query("outboard boat engine"))
        .await?;
    assert_eq!(keys(&found)[0], "by_text");
    Ok(())
}

pub async fn vector_search_applies_filter_and_prefix_before_ranking(b: Backend) -> TestResult {
    let s = b.indexed(&["text"]).await?;
    for n in 0..20 {
        let value = json!({"text": "green tea", "kind": "other"});
        s.put(&ns(&["far"]), &format!("f{n}"), obj(value)).await?;
        let value = json!({"text": "green tea", "kind": "note"});
        s.put(&ns(&["near"]), &format!("n{n}"), obj(value)).await?;
    }
    s.put(
        &ns(&["near"]),
        "fact",
        obj(json!({"text": "tea", "kind": "fact"})),
    )
    .await?;
    let facts = Filter::from_json(&obj(json!({"kind": "fact"})))?;
    let op = SearchOp::new(ns(&["near"]))
        .query("green tea")
        .filter(facts)
        .page(1, 0);
    assert_eq!(keys(&s.search(op).await?), ["fact"]);
    let op = SearchOp::new(ns(&["near"])).query("green tea").page(100, 0);
    assert_eq!(s.search(op).await?.len(), 21);
    Ok(())
}

pub async fn vector_search_pages_deterministically(b: Backend) -> TestResult {
    let s = b.indexed(&["text"]).await?;
    texts(
        &s,
        &["v", "b"],
        &[("k3", "same words"), ("k1", "same words")],
    )
    .await?;
    texts(
        &s,
        &["v", "a"],
        &[("k2", "same words"), ("k0", "same words")],
    )
    .await?;
    texts(
        &s,
        &["v"],
        &[("best", "same words exactly"), ("k4", "same words")],
    )
    .await?;
    let op = SearchOp::new(ns(&["v"])).query("same words exactly");
    let mut paged = Vec::new();
    for offset in [0, 2, 4] {
        let page = s.search(op.clone().page(2, offset)).await?;
        paged.extend(
            page.into_iter()
                .map(|f| (f.item.namespace.to_string(), f.item.key)),
        );
    }
    let want = [
        ("v", "best"),
        ("v", "k4"),
        ("v.a", "k0"),
        ("v.a", "k2"),
        ("v.b", "k1"),
        ("v.b", "k3"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(n, k)| ((*n).to_owned(), (*k).to_owned()))
        .collect();
    assert_eq!(paged, want, "ties by namespace, then key");
    Ok(())
}

pub async fn a_limit_beyond_every_item_returns_them_all(b: Backend) -> TestResult {
    let s = b.indexed(&["text"]).await?;
    texts(&s, &["docs"], TEAS).await?;
    for limit in [usize::MAX, usize::MAX / 2, 1 << 20] {
        let op = SearchOp::new(ns(&["docs"]))
            .query("green tea")
            .page(limit, 0);
        let found = s.search(op).await?;
        assert_eq!(found.len(), TEAS.len(), "limit {limit}");
        assert_descending(&found);
    }
    let op = SearchOp::new(ns(&["docs"]))
        .query("green tea")
        .page(usize::MAX, usize::MAX);
    assert!(s.search(op).await?.is_empty());
    Ok(())
}
