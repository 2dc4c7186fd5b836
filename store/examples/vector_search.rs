//! Measures vector search in a `SqliteStore` at 100,000 items of 384 dimensions, and the raw
//! scan behind it with `simsimd` against the portable `vector::dot`.
//!
//! `cargo run --release -p stategraph-store --example vector_search [ITEMS] [DIMS]`

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::json;
use stategraph_store::mirror::VectorMirror;
use stategraph_store::{
    vector, EmbedError, Embedder, IndexConfig, Namespace, Op, PutOp, SearchOp, SqliteStore, Store,
    StoreConfig,
};

/// Pseudo-random unit vectors, the same for the same text.
#[derive(Debug)]
struct Random(usize);

impl Random {
    fn vector(&self, text: &str) -> Vec<f32> {
        let mut seed = text.bytes().fold(0x9e37_79b9_7f4a_7c15u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        let mut v: Vec<f32> = (0..self.0)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed % 2001) as f32 / 1000.0 - 1.0
            })
            .collect();
        vector::normalize(&mut v);
        v
    }
}

impl Embedder for Random {
    fn dims(&self) -> usize {
        self.0
    }
    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        let out = texts.iter().map(|t| self.vector(t)).collect();
        async move { Ok(out) }.boxed()
    }
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn raw_scan(n: usize, dims: usize) {
    let e = Random(dims);
    let mut mirror = VectorMirror::new(dims);
    let mut plain = Vec::with_capacity(n * dims);
    for i in 0..n {
        let v = e.vector(&format!("item {i}"));
        plain.extend_from_slice(&v);
        let _ = mirror.set(i, &[v]);
    }
    let q = e.vector("query");
    let (mut simd, mut portable) = (Vec::new(), Vec::new());
    for _ in 0..21 {
        let t = Instant::now();
        std::hint::black_box(mirror.rank(&q, |_| true, 10));
        simd.push(t.elapsed());
        let t = Instant::now();
        let scored: Vec<(f32, usize)> = plain
            .chunks_exact(dims)
            .enumerate()
            .map(|(i, v)| (vector::dot(&q, v), i))
            .collect();
        std::hint::black_box(vector::top_k(scored, 10));
        portable.push(t.elapsed());
    }
    println!(
        "scan+top10 of {n}x{dims}: simsimd median {:?} (min {:?}); vector::dot median {:?} (min {:?})",
        median(simd.clone()),
        simd.iter().min().copied().unwrap_or_default(),
        median(portable.clone()),
        portable.iter().min().copied().unwrap_or_default(),
    );
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(100_000);
    let dims = args.get(1).copied().unwrap_or(384);
    raw_scan(n, dims);

    let dir = tempfile::tempdir()?;
    let index = IndexConfig::new(Arc::new(Random(dims))).fields(["text"]);
    let store = SqliteStore::open(
        dir.path().join("bench.db"),
        StoreConfig::default().index(index),
    )?;
    let at = Namespace::new(["bench"])?;
    let t = Instant::now();
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let ops = chunk
            .iter()
            .map(|i| {
                let value = json!({"text": format!("item {i}"), "n": i % 100});
                let value = value.as_object().cloned().unwrap_or_default();
                Op::Put(PutOp::new(at.clone(), format!("k{i}"), value))
            })
            .collect();
        store.batch(ops).await?;
    }
    println!("put {n} items in batches of 1000: {:?}", t.elapsed());

    let reopened = SqliteStore::open(dir.path().join("bench.db"), store_config(dims))?;
    let t = Instant::now();
    reopened
        .search(SearchOp::new(at.clone()).query("warm").page(1, 0))
        .await?;
    println!(
        "first search of a new handle (loads the mirror): {:?}",
        t.elapsed()
    );

    let mut times = Vec::new();
    for q in 0..31 {
        let t = Instant::now();
        let found = reopened
            .search(SearchOp::new(at.clone()).query(format!("query {q}")))
            .await?;
        times.push(t.elapsed());
        assert_eq!(found.len(), 10);
    }
    println!(
        "vector search, top 10 of {n}x{dims}: median {:?}, min {:?}, max {:?}",
        median(times.clone()),
        times.iter().min().copied().unwrap_or_default(),
        times.iter().max().copied().unwrap_or_default()
    );
    let filter = stategraph_store::Filter::from_json(json!({"n": 7}).as_object().ok_or("object")?)?;
    let mut times = Vec::new();
    for q in 0..11 {
        let t = Instant::now();
        reopened
            .search(
                SearchOp::new(at.clone())
                    .query(format!("query {q}"))
                    .filter(filter.clone()),
            )
            .await?;
        times.push(t.elapsed());
    }
    println!(
        "vector search with a filter matching 1%: median {:?}",
        median(times)
    );
    Ok(())
}

fn store_config(dims: usize) -> StoreConfig {
    StoreConfig::default().index(IndexConfig::new(Arc::new(Random(dims))).fields(["text"]))
}
