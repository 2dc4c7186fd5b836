//! The memory backend answers from indexes: a search without a query walks its items newest
//! first (or sorts a narrow prefix's), and a vector search scans one matrix. Whatever path a
//! search takes, its page is the one a full scan and sort of every item gives.

#![allow(
    missing_docs,
    unreachable_pub,
    clippy::expect_used,
    clippy::unwrap_used
)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use stategraph_store::vector::{dot, normalize};
use stategraph_store::{
    Clock, Embedder, Filter, HashEmbedder, IndexConfig, ListNamespacesOp, ManualClock, MemoryStore,
    Namespace, Op, PutOp, SearchOp, Store, StoreConfig, Timestamp, Ttl, TtlConfig,
};

/// Namespaces by weight: `c.q` holds about one item in sixteen, so a search under it sorts,
/// while a search under `a` or the root walks the newest-first order.
const SPACES: [&[&str]; 16] = [
    &["a", "x"],
    &["a", "x"],
    &["a", "x"],
    &["a", "x"],
    &["a", "y"],
    &["a", "y"],
    &["a", "y"],
    &["a", "y", "z"],
    &["a", "y", "z"],
    &["b", "x"],
    &["b", "x"],
    &["b", "x"],
    &["b"],
    &["b"],
    &["b"],
    &["c", "q"],
];
const PREFIXES: [&[&str]; 7] = [
    &[],
    &["a"],
    &["a", "y"],
    &["b"],
    &["b", "x"],
    &["c"],
    &["c", "q"],
];
const WORDS: [&str; 6] = ["tea", "boat", "green", "red", "sea", "hill"];

/// One write: namespace, key, kind, words of its text, TTL, delete, time advance (ms).
type Write = (usize, u8, u8, (usize, usize), Option<u8>, bool, u8);

fn write() -> impl Strategy<Value = Write> {
    (
        0..SPACES.len(),
        0u8..12,
        0u8..3,
        (0..WORDS.len(), 0..WORDS.len()),
        prop::option::weighted(0.2, 1u8..6),
        prop::bool::weighted(0.1),
        0u8..3,
    )
}

fn ns(labels: &[&str]) -> Namespace {
    Namespace::new(labels.iter().copied()).unwrap()
}

/// What the model keeps of a live item.
#[derive(Debug, Clone)]
struct Kept {
    kind: u8,
    text: String,
    updated_at: i64,
    expires_at: Option<i64>,
}

type Model = BTreeMap<(String, String), Kept>;

fn value(kind: u8, text: &str) -> Map<String, Value> {
    json!({"kind": kind, "text": text})
        .as_object()
        .cloned()
        .unwrap()
}

/// Applies `writes` to `store` and to a model, one batch each; returns the model and the time.
async fn fill(store: &MemoryStore, clock: &ManualClock, writes: &[Write]) -> (Model, i64) {
    let mut model = Model::new();
    for &(space, key, kind, (w1, w2), ttl, delete, advance) in writes {
        clock.advance(Duration::from_millis(u64::from(advance)));
        let now = clock.now().0;
        let labels = SPACES[space];
        let (ns_text, key) = (labels.join("."), format!("k{key}"));
        let op = if delete {
            model.remove(&(ns_text, key.clone()));
            PutOp::delete(ns(labels), key)
        } else {
            let text = format!("{} {}", WORDS[w1], WORDS[w2]);
            let ttl_ms = ttl.map(i64::from);
            model.insert(
                (ns_text, key.clone()),
                Kept {
                    kind,
                    text: text.clone(),
                    updated_at: now,
                    expires_at: ttl_ms.map(|t| now + t),
                },
            );
            let put = PutOp::new(ns(labels), key, value(kind, &text));
            match ttl {
                Some(t) => put.ttl(Ttl::After(Duration::from_millis(u64::from(t)))),
                None => put.ttl(Ttl::Never),
            }
        };
        store.batch(vec![Op::Put(op)]).await.unwrap();
    }
    (model, clock.now().0)
}

fn under(ns_text: &str, prefix: &[&str]) -> bool {
    let prefix = prefix.join(".");
    prefix.is_empty() || ns_text == prefix || ns_text.starts_with(&format!("{prefix}."))
}

/// The live items of the model under `prefix` whose kind is `kind` (any when `None`).
fn candidates<'m>(
    model: &'m Model,
    now: i64,
    prefix: &[&str],
    kind: Option<u8>,
) -> Vec<(&'m (String, String), &'m Kept)> {
    model
        .iter()
        .filter(|((ns_text, _), kept)| {
            under(ns_text, prefix)
                && kept.expires_at.is_none_or(|at| at > now)
                && kind.is_none_or(|k| k == kept.kind)
        })
        .collect()
}

fn op(prefix: &[&str], kind: Option<u8>, limit: usize, offset: usize) -> SearchOp {
    let mut op = SearchOp::new(ns(prefix)).page(limit, offset);
    if let Some(kind) = kind {
        op = op.filter(Filter::from_json(json!({"kind": kind}).as_object().unwrap()).unwrap());
    }
    op
}

fn found(items: Vec<stategraph_store::SearchItem>) -> Vec<(String, String)> {
    items
        .into_iter()
        .map(|f| (f.item.namespace.to_string(), f.item.key))
        .collect()
}

fn config(clock: &ManualClock) -> StoreConfig {
    let ttl = TtlConfig {
        refresh_on_read: false,
        ..TtlConfig::default()
    };
    StoreConfig::default()
        .clock(Arc::new(clock.clone()))
        .ttl(ttl)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn a_search_without_query_pages_as_a_full_sort_does_under_wide_and_narrow_prefixes(
        writes in prop::collection::vec(write(), 1..160),
        later in 0u8..4,
    ) {
        runtime().block_on(async {
            let clock = ManualClock::at(Timestamp(1_000));
            let store = MemoryStore::new(config(&clock));
            let (model, _) = fill(&store, &clock, &writes).await;
            clock.advance(Duration::from_millis(u64::from(later)));
            let now = clock.now().0;
            for prefix in PREFIXES {
                for kind in [None, Some(1)] {
                    for (limit, offset) in [(1, 0), (5, 0), (5, 3), (1000, 0)] {
                        let mut expected = candidates(&model, now, prefix, kind);
                        expected.sort_by(|(a, x), (b, y)| {
                            y.updated_at.cmp(&x.updated_at).then_with(|| a.cmp(b))
                        });
                        let expected: Vec<(String, String)> = expected
                            .into_iter()
                            .skip(offset)
                            .take(limit)
                            .map(|(id, _)| id.clone())
                            .collect();
                        let got = store.search(op(prefix, kind, limit, offset)).await.unwrap();
                        prop_assert_eq!(found(got), expected, "under {:?} kind {:?}", prefix, kind);
                    }
                }
            }
            Ok(())
        })?;
    }

    #[test]
    fn a_vector_search_ranks_as_a_full_scan_of_cosines_does(
        writes in prop::collection::vec(write(), 1..120),
        query in (0..WORDS.len(), 0..WORDS.len()),
    ) {
        runtime().block_on(async {
            let clock = ManualClock::at(Timestamp(1_000));
            let embedder = HashEmbedder::new(16);
            let index = IndexConfig::new(Arc::new(embedder)).fields(["text"]);
            let store = MemoryStore::new(config(&clock).index(index));
            let (model, now) = fill(&store, &clock, &writes).await;
            let query = format!("{} {}", WORDS[query.0], WORDS[query.1]);
            let unit = |text: &str| {
                let text = text.to_owned();
                async move {
                    let mut v = embedder.embed(&[text]).await.unwrap().remove(0);
                    normalize(&mut v);
                    v
                }
            };
            let q = unit(&query).await;
            for prefix in PREFIXES {
                for kind in [None, Some(2)] {
                    let mut expected = Vec::new();
                    for (id, kept) in candidates(&model, now, prefix, kind) {
                        expected.push((dot(&q, &unit(&kept.text).await), id.clone()));
                    }
                    expected.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
                    expected.truncate(4);
                    let got = store.search(op(prefix, kind, 4, 0).query(query.clone())).await.unwrap();
                    prop_assert_eq!(got.len(), expected.len(), "under {:?}", prefix);
                    for (g, (score, _)) in got.iter().zip(&expected) {
                        let gs = g.score.unwrap();
                        prop_assert!((gs - f64::from(*score)).abs() < 1e-4, "{} vs {}", gs, score);
                    }
                    // Items of equal score may go in either order only if their scores differ
                    // by rounding; the distinct-score prefix must match exactly.
                    let ids: Vec<_> = found(got);
                    for (i, (score, id)) in expected.iter().enumerate() {
                        let unique = expected.iter().filter(|(s, _)| (s - score).abs() < 1e-5).count() == 1;
                        if unique {
                            prop_assert_eq!(&ids[i], id);
                        }
                    }
                }
            }
            Ok(())
        })?;
    }
}

/// A namespace emptied by deletes gives up its table, which the next new namespace takes:
/// neither sees the other's items, and the first, put again, starts afresh.
#[test]
fn a_namespace_emptied_by_deletes_shares_nothing_with_the_next_new_one() {
    runtime().block_on(async {
        let store = MemoryStore::default();
        let (a, b) = (ns(&["a"]), ns(&["b", "c"]));
        store.put(&a, "k", value(1, "alpha")).await.unwrap();
        store.delete(&a, "k").await.unwrap();
        store.put(&b, "k", value(2, "beta")).await.unwrap();
        store.put(&b, "j", value(2, "gamma")).await.unwrap();
        assert!(store.get(&a, "k").await.unwrap().is_none());
        let got = store.get(&b, "k").await.unwrap().unwrap();
        assert_eq!((got.namespace, got.value), (b.clone(), value(2, "beta")));
        let listed = store
            .list_namespaces(ListNamespacesOp::new())
            .await
            .unwrap();
        assert_eq!(listed, vec![b.clone()]);
        assert!(store
            .search(SearchOp::new(a.clone()))
            .await
            .unwrap()
            .is_empty());
        let text = SearchOp::new(Namespace::root()).query("alpha beta");
        assert_eq!(
            found(store.search(text).await.unwrap()),
            [("b.c".to_owned(), "k".to_owned())]
        );
        store.put(&a, "k", value(3, "delta")).await.unwrap();
        let again = store.get(&a, "k").await.unwrap().unwrap();
        assert_eq!(
            (again.namespace, again.value),
            (a.clone(), value(3, "delta"))
        );
        let all = store
            .search(SearchOp::new(Namespace::root()))
            .await
            .unwrap();
        assert_eq!(all.len(), 3);
    });
}

/// Answers every text with a vector one number short of its `dims`.
#[derive(Debug)]
struct Short;

impl Embedder for Short {
    fn dims(&self) -> usize {
        4
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> futures::future::BoxFuture<'a, Result<Vec<Vec<f32>>, stategraph_store::EmbedError>> {
        let out = texts.iter().map(|_| vec![1.0; 3]).collect();
        Box::pin(async move { Ok(out) })
    }
}

/// A single put or delete is checked and embedded as a batch of it is: a put the index cannot
/// embed fails and changes nothing, and one with an empty key is refused.
#[test]
fn a_single_put_the_index_cannot_embed_fails_and_changes_nothing() {
    runtime().block_on(async {
        let index = IndexConfig::new(Arc::new(Short)).fields(["text"]);
        let store = MemoryStore::new(StoreConfig::default().index(index));
        let a = ns(&["a"]);
        store
            .put(&a, "plain", json!({"n": 1}).as_object().cloned().unwrap())
            .await
            .unwrap();
        assert!(store.put(&a, "k", value(1, "alpha")).await.is_err());
        assert!(store.put(&a, "plain", value(1, "alpha")).await.is_err());
        assert!(store
            .put(&a, "", json!({}).as_object().cloned().unwrap())
            .await
            .is_err());
        assert!(store.delete(&Namespace::root(), "plain").await.is_err());
        assert!(store.get(&a, "k").await.unwrap().is_none());
        let plain = store.get(&a, "plain").await.unwrap().unwrap();
        assert_eq!(plain.value, json!({"n": 1}).as_object().cloned().unwrap());
        let all = store
            .search(SearchOp::new(Namespace::root()))
            .await
            .unwrap();
        assert_eq!(found(all), [("a".to_owned(), "plain".to_owned())]);
        store.delete(&a, "plain").await.unwrap();
        assert!(store.get(&a, "plain").await.unwrap().is_none());
    });
}
