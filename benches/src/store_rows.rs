//! The `store` workload: the long-term store side by side with LangGraph's stores.
//!
//! Per backend (`--store-backends memory,sqlite,postgres`) and size (`--store-items
//! 10000,100000`): a store is filled with that many items in batches of 1,000 (namespace
//! `("users", "u{i % 100}")`, key `k{i}`, value `{"text": "v{i}", "kind": one of four,
//! "score": i % 100}`, the `text` field indexed by 384-dimensional vectors), then each
//! operation runs until its count or its time budget is spent:
//!
//! - `put`: single puts of new keys (each its own batch), up to 5,000 or 3 s;
//! - `get`: single gets of existing keys, up to 50,000 or 3 s;
//! - `search_filtered`: `search(("users",), filter={"kind": "fact", "score": {"$gte": s}},
//!   limit=10)`, up to 2,000 or 3 s;
//! - `search_vector`: `search(("users",), query="q{j}", limit=10)`, up to 500 or 6 s, with
//!   each search's latency (p50, p99).
//!
//! The vectors are made here (a seeded generator, the same every run) and written to a file
//! LangGraph's side reads (`benches/store/store_lg.py`, run with `--lg-python`): item `i`'s
//! text is `v{i}` and query `j`'s `q{j}`, and both sides' embedders look the vector up, so
//! what is timed is the store, not a model. One JSON row per backend, size and operation:
//! ours, LangGraph's, and the ratio. The put and get rows also carry the floor: the same
//! loops with nothing of a store around them (a bare map in memory, the bare driver on SQLite
//! and PostgreSQL; see `store_floor`), ours over it, and it over LangGraph's, the most any
//! store could show.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::{json, Value};
use stategraph::BoxError;
use stategraph_store::{
    EmbedError, Embedder, Filter, IndexConfig, Namespace, Op, PutOp, SearchOp, Store,
};

use crate::report::{round, Record};
use crate::store_floor::Floor;
use crate::{Args, ENGINE};

/// The vectors' length.
pub(crate) const DIMS: usize = 384;
/// Query vectors after the items' (`q0` … `q63`).
const QUERIES: usize = 64;
/// Items per fill batch.
pub(crate) const FILL_BATCH: usize = 1000;
/// Namespaces the items spread over.
const USERS: usize = 100;
const KINDS: [&str; 4] = ["fact", "preference", "note", "todo"];
/// Each operation's count and time budget (the same in `store_lg.py`).
pub(crate) const PUTS: (usize, f64) = (5_000, 3.0);
pub(crate) const GETS: (usize, f64) = (50_000, 3.0);
const FILTERED: (usize, f64) = (2_000, 3.0);
const VECTORS: (usize, f64) = (500, 6.0);
/// The targets: ≥ 20× LangGraph per row; vector search at 100,000 × 384 under 20 ms.
const TARGET_RATIO: f64 = 20.0;
const TARGET_VECTOR_MS: f64 = 20.0;

/// What one side measured on one backend and size.
#[derive(Debug, Default)]
pub(crate) struct Rates {
    pub(crate) fill_s: f64,
    pub(crate) put: f64,
    pub(crate) get: f64,
    pub(crate) filtered: f64,
    /// Rate, p50 ms, p99 ms, searches.
    pub(crate) vector: Option<(f64, f64, f64, usize)>,
}

/// Looks each text's vector up: `v{i}` is item `i`'s, `q{j}` query `j`'s.
#[derive(Debug)]
pub(crate) struct Lookup {
    items: usize,
    vectors: Arc<Vec<f32>>,
}

impl Lookup {
    fn row(&self, text: &str) -> Option<&[f32]> {
        let (kind, n) = text.split_at_checked(1)?;
        let n: usize = n.parse().ok()?;
        let row = match kind {
            "v" if n < self.items => n,
            "q" if n < QUERIES => self.items + n,
            _ => return None,
        };
        self.vectors.get(row * DIMS..(row + 1) * DIMS)
    }
}

impl Embedder for Lookup {
    fn dims(&self) -> usize {
        DIMS
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        let out = texts
            .iter()
            .map(|t| {
                self.row(t)
                    .map(<[f32]>::to_vec)
                    .ok_or_else(|| EmbedError::Service(format!("no vector for {t:?}")))
            })
            .collect();
        async move { out }.boxed()
    }
}

/// `count` vectors of [`DIMS`] numbers in [-1, 1), the same every run (splitmix64).
fn make_vectors(count: usize) -> Vec<f32> {
    let mut state = 0x5eed_u64;
    (0..count * DIMS)
        .map(|_| {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            ((z >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn write_vectors(path: &Path, vectors: &[f32]) -> Result<(), BoxError> {
    let bytes: Vec<u8> = vectors.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(path, bytes)?;
    Ok(())
}

pub(crate) fn namespace(i: usize) -> Result<Namespace, BoxError> {
    Ok(Namespace::new([
        "users".to_owned(),
        format!("u{}", i % USERS),
    ])?)
}

pub(crate) fn value(i: usize, text_of: usize) -> serde_json::Map<String, Value> {
    let mut v = serde_json::Map::new();
    v.insert("text".to_owned(), json!(format!("v{text_of}")));
    v.insert("kind".to_owned(), json!(KINDS[i % KINDS.len()]));
    v.insert("score".to_owned(), json!(i % 100));
    v
}

pub(crate) async fn run_store(args: &Args) -> Result<(), BoxError> {
    for &items in &args.store_items {
        let vectors = Arc::new(make_vectors(items + QUERIES));
        let file = args.workdir.join(format!("store-vectors-{items}.f32"));
        write_vectors(&file, &vectors)?;
        for backend in &args.store_backends {
            let lookup = Arc::new(Lookup {
                items,
                vectors: vectors.clone(),
            });
            let ours = ours(backend, items, lookup, args).await?;
            let theirs = langgraph(args, backend, items, &file).await?;
            let floor = crate::store_floor::measure(backend, items, args).await?;
            eprintln!("# store: the floor on {backend} at {items}: {floor:?}");
            emit(backend, items, &ours, theirs.as_ref(), floor);
        }
        std::fs::remove_file(&file)?;
    }
    Ok(())
}

/// Our side on `backend`: its rates, and for PostgreSQL the vector row from a second, indexed
/// store (the first, like LangGraph's, has no index).
async fn ours(
    backend: &str,
    items: usize,
    lookup: Arc<Lookup>,
    args: &Args,
) -> Result<Rates, BoxError> {
    let index = IndexConfig::new(lookup).fields(["text"]);
    let opened = crate::store_backends::open(backend, Some(index), args).await?;
    let mut rates = measure(opened.store.as_ref(), items, true).await?;
    opened.close().await?;
    eprintln!("# store: ours on {backend} at {items}: {rates:?}");
    if crate::store_backends::langgraph_has_no_index(backend) {
        // LangGraph's Postgres row has no index, so ours is timed without one as well.
        let plain = crate::store_backends::open(backend, None, args).await?;
        let vector = rates.vector.take();
        rates = measure(plain.store.as_ref(), items, false).await?;
        plain.close().await?;
        rates.vector = vector;
    }
    Ok(rates)
}

/// Fills `store` and times each operation.
async fn measure(store: &dyn Store, items: usize, indexed: bool) -> Result<Rates, BoxError> {
    let t0 = Instant::now();
    for start in (0..items).step_by(FILL_BATCH) {
        let ops = (start..items.min(start + FILL_BATCH))
            .map(|i| {
                Ok(Op::Put(PutOp::new(
                    namespace(i)?,
                    format!("k{i}"),
                    value(i, i),
                )))
            })
            .collect::<Result<Vec<_>, BoxError>>()?;
        store.batch(ops).await?;
    }
    let fill_s = t0.elapsed().as_secs_f64();
    let put = timed(PUTS, 3, |j| async move {
        store
            .put(&namespace(j)?, &format!("n{j}"), value(j, j % items))
            .await?;
        Ok(())
    })
    .await?
    .0;
    let get = timed(GETS, 3, |j| async move {
        let key = (j * 7919) % items;
        match store.get(&namespace(key)?, &format!("k{key}")).await? {
            Some(_) => Ok(()),
            None => Err(format!("store: k{key} is missing").into()),
        }
    })
    .await?
    .0;
    let users = Namespace::new(["users"])?;
    let filtered = timed(FILTERED, 3, |j| {
        let users = users.clone();
        async move {
            let filter = json!({"kind": "fact", "score": {"$gte": (j * 7) % 90}});
            let filter = Filter::from_json(filter.as_object().ok_or("filter")?)?;
            let found = store
                .search(SearchOp::new(users).filter(filter).page(10, 0))
                .await?;
            if found.is_empty() {
                return Err("store: a filtered search found nothing".into());
            }
            Ok(())
        }
    })
    .await?
    .0;
    let vector = if indexed {
        Some(vector_rates(store, &users).await?)
    } else {
        None
    };
    Ok(Rates {
        fill_s,
        put,
        get,
        filtered,
        vector,
    })
}

async fn vector_rates(
    store: &dyn Store,
    users: &Namespace,
) -> Result<(f64, f64, f64, usize), BoxError> {
    let search = |j: usize| {
        let users = users.clone();
        async move {
            let op = SearchOp::new(users)
                .query(format!("q{}", j % QUERIES))
                .page(10, 0);
            let found = store.search(op).await?;
            if found.len() != 10 || found[0].score.is_none() {
                return Err(format!("store: a vector search found {} items", found.len()).into());
            }
            Ok::<_, BoxError>(())
        }
    };
    search(0).await?; // warm-up
    let (rate, mut each) = timed(VECTORS, 3, search).await?;
    each.sort_by(f64::total_cmp);
    let at = |q: f64| each[((q * each.len() as f64) as usize).min(each.len() - 1)] * 1e3;
    Ok((rate, at(0.5), at(0.99), each.len()))
}

/// Runs `op(j)` for j = 0.. until `count` runs or `budget` seconds (at least `min` runs):
/// the rate per second and each run's seconds.
pub(crate) async fn timed<F, Fut>(
    (count, budget): (usize, f64),
    min: usize,
    mut op: F,
) -> Result<(f64, Vec<f64>), BoxError>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = Result<(), BoxError>>,
{
    let budget = Duration::from_secs_f64(budget);
    let mut each = Vec::new();
    let start = Instant::now();
    for j in 0..count {
        let t0 = Instant::now();
        op(j).await?;
        each.push(t0.elapsed().as_secs_f64());
        if j + 1 >= min && start.elapsed() > budget {
            break;
        }
    }
    Ok((each.len() as f64 / start.elapsed().as_secs_f64(), each))
}

/// LangGraph's side, when `--lg-python` is given.
async fn langgraph(
    args: &Args,
    backend: &str,
    items: usize,
    vectors: &Path,
) -> Result<Option<Rates>, BoxError> {
    let Some(python) = &args.lg_python else {
        eprintln!("# store: LangGraph's side not run (give --lg-python)");
        return Ok(None);
    };
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("store/store_lg.py");
    let mut cmd = tokio::process::Command::new(python);
    cmd.arg(&script)
        .args(["--backend", backend, "--items", &items.to_string()])
        .args([
            "--dims",
            &DIMS.to_string(),
            "--queries",
            &QUERIES.to_string(),
        ])
        .arg("--vectors")
        .arg(vectors)
        .arg("--workdir")
        .arg(&args.workdir);
    if crate::store_backends::langgraph_has_no_index(backend) {
        cmd.args(["--index", "off"]);
    }
    if let Some(url) = &args.pg_url {
        cmd.args(["--pg-url", url]);
    }
    let out = cmd.output().await?;
    if !out.status.success() {
        return Err(format!(
            "store_lg.py on {backend} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let line: Value = serde_json::from_slice(&out.stdout)?;
    eprintln!("# store: LangGraph on {backend} at {items}: {line}");
    let num = |k: &str| line[k].as_f64().unwrap_or(f64::NAN);
    Ok(Some(Rates {
        fill_s: num("fill_s"),
        put: num("put_per_s"),
        get: num("get_per_s"),
        filtered: num("search_filtered_per_s"),
        vector: line["search_vector_per_s"].as_f64().map(|rate| {
            (
                rate,
                num("vector_p50_ms"),
                num("vector_p99_ms"),
                line["vector_searches"].as_u64().unwrap_or(0) as usize,
            )
        }),
    }))
}

/// One row per operation; the put and get rows with the floor's rate (`store_floor`), ours
/// over it, and it over LangGraph's.
fn emit(backend: &str, items: usize, ours: &Rates, theirs: Option<&Rates>, floor: Option<Floor>) {
    let row = |op: &str, per_s: f64, lg: Option<f64>| {
        let lg = lg.filter(|x| x.is_finite());
        Record::new()
            .kv("engine", ENGINE)
            .kv("workload", "store")
            .kv("backend", backend)
            .kv("items", items)
            .kv("dims", DIMS)
            .kv("op", op)
            .kv("per_s", round(per_s, 1))
            .kv("langgraph_per_s", lg.map(|x| round(x, 1)))
            .kv("vs_langgraph", lg.map(|x| round(per_s / x, 1)))
            .kv("target_vs_langgraph", TARGET_RATIO)
    };
    let with_floor = |rec: Record, per_s: f64, at: Option<f64>, lg: Option<f64>| match at {
        Some(at) => rec
            .kv("floor_per_s", round(at, 1))
            .kv("vs_floor", round(per_s / at, 2))
            .kv(
                "floor_vs_langgraph",
                lg.filter(|x| x.is_finite()).map(|lg| round(at / lg, 1)),
            ),
        None => rec,
    };
    let lg_put = theirs.map(|t| t.put);
    let put = row("put", ours.put, lg_put)
        .kv("fill_s", round(ours.fill_s, 3))
        .kv("langgraph_fill_s", theirs.map(|t| round(t.fill_s, 3)));
    with_floor(put, ours.put, floor.map(|f| f.put), lg_put).emit();
    let lg_get = theirs.map(|t| t.get);
    let get = row("get", ours.get, lg_get);
    with_floor(get, ours.get, floor.map(|f| f.get), lg_get).emit();
    row("search_filtered", ours.filtered, theirs.map(|t| t.filtered)).emit();
    let Some((rate, p50, p99, n)) = ours.vector else {
        return;
    };
    let lg = theirs.and_then(|t| t.vector);
    let mut rec = row("search_vector", rate, lg.map(|v| v.0))
        .kv("searches", n)
        .kv("p50_ms", round(p50, 3))
        .kv("p99_ms", round(p99, 3))
        .kv("langgraph_p50_ms", lg.map(|v| round(v.1, 3)))
        .kv("langgraph_p99_ms", lg.map(|v| round(v.2, 3)));
    if theirs.is_some() && lg.is_none() {
        rec = rec.kv(
            "langgraph",
            "not available: its vector index needs pgvector, not installed here",
        );
    }
    if items >= 100_000 {
        rec = rec.kv("target_p99_ms", TARGET_VECTOR_MS);
    }
    rec.emit();
}
