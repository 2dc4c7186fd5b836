//! TTL: expiry, refresh on read, the sweep; all on a clock the test moves.

use serde_json::json;
use stategraph_store::{GetOp, ListNamespacesOp, Op, OpResult, PutOp, SearchOp, Ttl, TtlConfig};

use crate::support::{keys, ns, obj, secs, Backend, BoxError, Fixture, TestResult, T0};

fn ttl(refresh_on_read: bool) -> TtlConfig {
    TtlConfig {
        default_ttl: None,
        refresh_on_read,
    }
}

async fn put_for(s: &Fixture, key: &str, seconds: u64) -> TestResult {
    let op =
        PutOp::new(ns(&["t"]), key, obj(json!({"text": "tea"}))).ttl(Ttl::After(secs(seconds)));
    s.batch(vec![Op::Put(op)]).await?;
    Ok(())
}

async fn get_without_refresh(s: &Fixture, key: &str) -> Result<bool, BoxError> {
    let mut get = GetOp::new(ns(&["t"]), key);
    get.refresh_ttl = false;
    match s.batch(vec![Op::Get(get)]).await?.pop() {
        Some(OpResult::Item(item)) => Ok(item.is_some()),
        other => Err(format!("get returned {other:?}").into()),
    }
}

pub async fn an_item_expires_after_its_ttl_for_every_read(b: Backend) -> TestResult {
    let s = b.with_ttl(ttl(true)).await?;
    put_for(&s, "k", 10).await?;
    s.clock.advance(secs(9));
    assert!(get_without_refresh(&s, "k").await?);
    s.clock.advance(secs(1));
    assert!(
        s.get(&ns(&["t"]), "k").await?.is_none(),
        "expired at exactly its ttl"
    );
    assert!(s.search(SearchOp::new(ns(&["t"]))).await?.is_empty());
    assert!(s
        .search(SearchOp::new(ns(&["t"])).query("tea"))
        .await?
        .is_empty());
    assert!(s.list_namespaces(ListNamespacesOp::new()).await?.is_empty());
    Ok(())
}

pub async fn a_get_refreshes_the_ttl(b: Backend) -> TestResult {
    let s = b.with_ttl(ttl(true)).await?;
    put_for(&s, "k", 10).await?;
    s.clock.advance(secs(6));
    assert!(s.get(&ns(&["t"]), "k").await?.is_some());
    s.clock.advance(secs(6));
    assert!(
        get_without_refresh(&s, "k").await?,
        "the get at 6s restarted the ttl"
    );
    s.clock.advance(secs(4));
    assert!(!get_without_refresh(&s, "k").await?);
    Ok(())
}

pub async fn no_refresh_when_the_read_does_not_ask(b: Backend) -> TestResult {
    let s = b.with_ttl(ttl(true)).await?;
    put_for(&s, "k", 10).await?;
    s.clock.advance(secs(6));
    assert!(get_without_refresh(&s, "k").await?);
    let mut search = SearchOp::new(ns(&["t"]));
    search.refresh_ttl = false;
    assert_eq!(s.search(search).await?.len(), 1);
    s.clock.advance(secs(6));
    assert!(!get_without_refresh(&s, "k").await?);
    Ok(())
}

pub async fn no_refresh_when_the_store_refreshes_never(b: Backend) -> TestResult {
    let s = b.with_ttl(ttl(false)).await?;
    put_for(&s, "k", 10).await?;
    s.clock.advance(secs(6));
    assert!(s.get(&ns(&["t"]), "k").await?.is_some());
    assert_eq!(s.search(SearchOp::new(ns(&["t"]))).await?.len(), 1);
    s.clock.advance(secs(6));
    assert!(s.get(&ns(&["t"]), "k").await?.is_none());
    Ok(())
}

pub async fn a_search_refreshes_what_it_returns(b: Backend) -> TestResult {
    let s = b.with_ttl(ttl(true)).await?;
    put_for(&s, "a", 10).await?;
    s.clock.advance(secs(1));
    put_for(&s, "b", 10).await?;
    s.clock.advance(secs(6));
    // Newest first, one per page: only "b" is returned, so only "b" is refreshed.
    let found = s.search(SearchOp::new(ns(&["t"])).page(1, 0)).await?;
    assert_eq!(keys(&found), ["b"]);
    s.clock.advance(secs(6));
    assert!(!get_without_refresh(&s, "a").await?);
    assert!(get_without_refresh(&s, "b").await?);
    Ok(())
}

pub async fn default_ttl_applies_and_never_overrides_it(b: Backend) -> TestResult {
    let s = b
        .with_ttl(TtlConfig {
            default_ttl: Some(secs(10)),
            refresh_on_read: true,
        })
        .await?;
    let at = ns(&["t"]);
    s.put(&at, "default", obj(json!({}))).await?;
    let never = PutOp::new(at.clone(), "never", obj(json!({}))).ttl(Ttl::Never);
    let longer = PutOp::new(at.clone(), "longer", obj(json!({}))).ttl(Ttl::After(secs(100)));
    s.batch(vec![Op::Put(never), Op::Put(longer)]).await?;
    s.clock.advance(secs(50));
    assert!(!get_without_refresh(&s, "default").await?);
    assert!(get_without_refresh(&s, "never").await?);
    assert!(get_without_refresh(&s, "longer").await?);
    s.clock.advance(secs(1_000_000));
    assert!(get_without_refresh(&s, "never").await?);
    assert!(!get_without_refresh(&s, "longer").await?);
    Ok(())
}

pub async fn sweep_counts_and_removes_expired_items(b: Backend) -> TestResult {
    let s = b.with_ttl(ttl(true)).await?;
    put_for(&s, "short1", 5).await?;
    put_for(&s, "short2", 5).await?;
    put_for(&s, "long", 50).await?;
    s.put(&ns(&["t"]), "forever", obj(json!({}))).await?;
    assert_eq!(s.sweep().await?, 0);
    s.clock.advance(secs(5));
    assert_eq!(s.sweep().await?, 2);
    assert_eq!(s.sweep().await?, 0);
    let found = s.search(SearchOp::new(ns(&["t"]))).await?;
    let mut found = keys(&found);
    found.sort();
    assert_eq!(found, ["forever", "long"]);
    s.clock.advance(secs(100));
    assert_eq!(s.sweep().await?, 1);
    Ok(())
}

pub async fn a_put_over_an_expired_item_starts_it_anew(b: Backend) -> TestResult {
    let s = b.with_ttl(ttl(true)).await?;
    put_for(&s, "k", 5).await?;
    s.clock.advance(secs(10));
    put_for(&s, "k", 5).await?;
    let item = s.get(&ns(&["t"]), "k").await?.expect("the new item");
    assert_eq!(item.created_at, T0.plus(secs(10)));
    assert_eq!(item.updated_at, T0.plus(secs(10)));
    Ok(())
}

pub async fn vector_search_skips_expired_items_and_fills_the_page(b: Backend) -> TestResult {
    let index = stategraph_store::IndexConfig::new(std::sync::Arc::new(
        stategraph_store::HashEmbedder::new(64),
    ))
    .fields(["text"]);
    let s = b
        .open(
            stategraph_store::StoreConfig::default()
                .ttl(ttl(true))
                .index(index),
        )
        .await?;
    let at = ns(&["t"]);
    let short = |key: &str, text: &str| {
        let value = obj(json!({"text": text}));
        Op::Put(PutOp::new(at.clone(), key, value).ttl(Ttl::After(secs(5))))
    };
    s.batch(vec![
        short("best", "green tea jasmine"),
        short("second", "green tea"),
        short("third", "green tea jasmine leaves"),
    ])
    .await?;
    for (key, text) in [("live1", "tea"), ("live2", "jasmine"), ("live3", "coffee")] {
        s.put(&at, key, obj(json!({"text": text}))).await?;
    }
    s.clock.advance(secs(5));
    let found = s
        .search(SearchOp::new(at).query("green tea jasmine").page(2, 0))
        .await?;
    let mut got = keys(&found);
    got.sort();
    assert_eq!(got, ["live1", "live2"]);
    Ok(())
}
