//! `stategraph store FILE ls|get|search`: the long-term store kept in a checkpoint file —
//! its namespaces, one item, a search — read without refreshing any item's TTL.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{json, Map, Value};
use stategraph_checkpoints::inspect::format_utc_ms;
use stategraph_store::{
    Filter, GetOp, Item, ListNamespacesOp, MatchCondition, Namespace, Op, OpResult, SearchItem,
    SearchOp, SqliteStore, Store, StoreError,
};

use crate::failure::{Failure, Outcome};
use crate::file::{exists, is_url};
use crate::output::{emit, json_text, short, Output};

/// What `store` shows.
#[derive(Debug, Clone, clap::Subcommand)]
pub(crate) enum StoreView {
    /// The namespaces items live under, sorted.
    Ls {
        /// Only namespaces under this prefix (labels joined with `.`, e.g. users.alice).
        prefix: Option<String>,
        /// Cut each namespace to this many labels (each listed once).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        depth: Option<u64>,
        /// Show at most this many.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// One item: its value and times.
    Get {
        /// Its namespace (labels joined with `.`).
        namespace: String,
        /// Its key.
        key: String,
    },
    /// Items under a namespace prefix, newest first, or ranked by --query.
    Search {
        /// The prefix (labels joined with `.`; `""` for every item).
        prefix: String,
        /// Rank by this text (full text; the items that match it).
        #[arg(long, short = 'q')]
        query: Option<String>,
        /// Only items whose value matches this filter, as LangGraph writes it, e.g.
        /// '{"kind": "fact", "n": {"$gte": 2}}'.
        #[arg(long)]
        filter: Option<String>,
        /// Show at most this many.
        #[arg(long, short = 'n', default_value_t = 10)]
        limit: usize,
    },
}

fn failed(file: &Path) -> impl Fn(StoreError) -> Failure + '_ {
    move |e| Failure::runtime(format!("{}: {e}", file.display()))
}

fn namespace(text: &str) -> Result<Namespace, Failure> {
    Namespace::from_joined(text).map_err(|e| Failure::usage(format!("namespace {text:?}: {e}")))
}

/// Run `view` on the store of `file`.
pub(super) async fn run(out: Output, file: &Path, view: &StoreView) -> Outcome {
    if is_url(file) {
        return Err(Failure::usage(
            "store reads a checkpoint file; a PostgreSQL store is not supported yet",
        ));
    }
    exists(file)?;
    let store = stategraph_studio::open_store(file).map_err(failed(file))?;
    let outcome = match view {
        StoreView::Ls {
            prefix,
            depth,
            limit,
        } => ls(out, file, store.as_ref(), prefix.as_deref(), *depth, *limit).await,
        StoreView::Get { namespace, key } => get(out, file, store.as_ref(), namespace, key).await,
        StoreView::Search {
            prefix,
            query,
            filter,
            limit,
        } => {
            let op = search_op(prefix, query.as_deref(), filter.as_deref(), *limit)?;
            search(out, file, store.as_ref(), op).await
        }
    };
    if let Some(store) = store {
        store.close();
    }
    outcome
}

async fn ls(
    out: Output,
    file: &Path,
    store: Option<&SqliteStore>,
    prefix: Option<&str>,
    depth: Option<u64>,
    limit: usize,
) -> Outcome {
    let mut op = ListNamespacesOp::new();
    op.limit = limit;
    if let Some(prefix) = prefix {
        op = op.condition(MatchCondition::prefix(namespace(prefix)?.labels().to_vec()));
    }
    if let Some(depth) = depth {
        op = op.max_depth(usize::try_from(depth).unwrap_or(usize::MAX));
    }
    let list = match store {
        Some(store) => store.list_namespaces(op).await.map_err(failed(file))?,
        None => Vec::new(),
    };
    if out.json {
        let list: Vec<&[String]> = list.iter().map(Namespace::labels).collect();
        return Ok(emit(&json_text(&json!({ "namespaces": list })))?);
    }
    if list.is_empty() {
        return Ok(emit(&format!(
            "no store namespaces in {}\n",
            file.display()
        ))?);
    }
    let text: String = list.iter().map(|ns| format!("{ns}\n")).collect();
    Ok(emit(&text)?)
}

async fn get(
    out: Output,
    file: &Path,
    store: Option<&SqliteStore>,
    ns: &str,
    key: &str,
) -> Outcome {
    let namespace = namespace(ns)?;
    let missing = || Failure::runtime(format!("{}: no store item {ns}/{key}", file.display()));
    let store = store.ok_or_else(missing)?;
    let mut op = GetOp::new(namespace, key);
    op.refresh_ttl = false;
    let found = match store
        .batch(vec![Op::Get(op)])
        .await
        .map_err(failed(file))?
        .pop()
    {
        Some(OpResult::Item(item)) => item,
        _ => None,
    };
    let item = found.ok_or_else(missing)?;
    if out.json {
        return Ok(emit(&json_text(&item_json(&item, None)))?);
    }
    let mut text = String::new();
    let _ = writeln!(text, "namespace  {}", item.namespace);
    let _ = writeln!(text, "key        {}", item.key);
    let _ = writeln!(text, "created    {}", time(item.created_at.millis()));
    let _ = writeln!(text, "updated    {}", time(item.updated_at.millis()));
    let _ = writeln!(text, "{}", json_text(&Value::Object(item.value)));
    Ok(emit(&text)?)
}

fn search_op(
    prefix: &str,
    query: Option<&str>,
    filter: Option<&str>,
    limit: usize,
) -> Result<SearchOp, Failure> {
    let filter = match filter {
        None => Filter::default(),
        Some(text) => {
            let map: Map<String, Value> = serde_json::from_str(text).map_err(|e| {
                Failure::usage(format!("--filter {text:?}: not a JSON object: {e}"))
            })?;
            Filter::from_json(&map).map_err(|e| Failure::usage(format!("--filter: {e}")))?
        }
    };
    let mut op = SearchOp::new(namespace(prefix)?)
        .filter(filter)
        .page(limit, 0);
    op.query = query.map(str::to_owned);
    op.refresh_ttl = false;
    Ok(op)
}

async fn search(out: Output, file: &Path, store: Option<&SqliteStore>, op: SearchOp) -> Outcome {
    let found = match store {
        Some(store) => store.search(op).await.map_err(failed(file))?,
        None => Vec::new(),
    };
    if out.json {
        let items: Vec<Value> = found.iter().map(|f| item_json(&f.item, Some(f))).collect();
        return Ok(emit(&json_text(&json!({ "items": items })))?);
    }
    if found.is_empty() {
        return Ok(emit(&format!(
            "no store items found in {}\n",
            file.display()
        ))?);
    }
    let mut text = String::new();
    for f in &found {
        let score = f
            .score
            .map(|s| format!("  score {s:.3}"))
            .unwrap_or_default();
        let _ = writeln!(
            text,
            "{}/{}  {}{score}  {}",
            f.item.namespace,
            f.item.key,
            time(f.item.updated_at.millis()),
            short(&Value::Object(f.item.value.clone()), 80)
        );
    }
    Ok(emit(&text)?)
}

fn time(ms: i64) -> String {
    format_utc_ms(u64::try_from(ms).unwrap_or(0))
}

/// `--json`: an item with the fields the server's `/store` routes answer, with its score in a
/// search; its times are written as the CLI writes every time (UTC, ending in `Z`), not in the
/// server's `+00:00` form.
fn item_json(item: &Item, found: Option<&SearchItem>) -> Value {
    let mut out = json!({
        "namespace": item.namespace.labels(),
        "key": item.key,
        "value": item.value,
        "created_at": time(item.created_at.millis()),
        "updated_at": time(item.updated_at.millis()),
    });
    if let (Some(found), Value::Object(map)) = (found, &mut out) {
        map.insert("score".to_owned(), json!(found.score));
    }
    out
}
