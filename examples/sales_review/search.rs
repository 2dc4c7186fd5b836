//! `web_search` behind a [`SearchProvider`]: offline, a small local corpus of industry data
//! and news shipped with the example (`sales_review/corpus/*.md`), scored by the query's words.

use std::path::Path;
use std::sync::Arc;

use futures::future::BoxFuture;
use stategraph_nodes::prelude::*;

/// Why a search failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum SearchError {
    /// The corpus folder or one of its files could not be read.
    #[error("search corpus {path:?} could not be read: {source}")]
    Corpus {
        /// The folder or file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The search API could not be reached or gave no answer.
    #[cfg_attr(not(feature = "live"), allow(dead_code))]
    #[error("search API {url} failed: {reason}")]
    Http {
        /// The URL asked.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// A corpus document lacks its front matter.
    #[error("search corpus document {path:?} has no `{field}` in its front matter")]
    Document {
        /// The file.
        path: String,
        /// The missing field.
        field: &'static str,
    },
}

/// One search result.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SearchHit {
    /// The document's title.
    pub(crate) title: String,
    /// Who published it.
    pub(crate) source: String,
    /// Where it lives.
    pub(crate) url: String,
    /// When it was published.
    pub(crate) date: String,
    /// The best-matching sentence or two.
    pub(crate) snippet: String,
}

/// Something that answers a search query.
pub(crate) trait SearchProvider: std::fmt::Debug + Send + Sync + 'static {
    /// The provider's name.
    fn name(&self) -> &str;
    /// At most `limit` hits for `query`, best first.
    ///
    /// # Errors
    /// The provider could not answer.
    fn search<'a>(
        &'a self,
        query: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<SearchHit>, SearchError>>;
}

/// A corpus document: its front matter and body.
#[derive(Clone, Debug)]
struct Document {
    hit: SearchHit,
    body: String,
}

/// The offline provider: documents read from a folder of Markdown files with a front matter
/// (`title`, `source`, `url`, `date`), scored by how often the query's words occur.
#[derive(Clone, Debug)]
pub(crate) struct CorpusSearch {
    documents: Vec<Document>,
}

impl CorpusSearch {
    /// Reads every `*.md` file of `dir`, in name order.
    ///
    /// # Errors
    /// [`SearchError::Corpus`] for an unreadable folder or file; [`SearchError::Document`]
    /// for a file without its front matter.
    pub(crate) fn load(dir: &Path) -> Result<Self, SearchError> {
        let io = |path: &Path, source| SearchError::Corpus {
            path: path.display().to_string(),
            source,
        };
        let mut paths = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
            let path = entry.map_err(|e| io(dir, e))?.path();
            if path.extension().is_some_and(|x| x == "md") {
                paths.push(path);
            }
        }
        paths.sort();
        let mut documents = Vec::new();
        for path in paths {
            let text = std::fs::read_to_string(&path).map_err(|e| io(&path, e))?;
            documents.push(parse_document(&path.display().to_string(), &text)?);
        }
        Ok(CorpusSearch { documents })
    }

    /// How many documents the corpus holds.
    pub(crate) fn len(&self) -> usize {
        self.documents.len()
    }
}

/// A document's front matter (`key: value` lines between `---` lines) and body.
fn parse_document(path: &str, text: &str) -> Result<Document, SearchError> {
    let rest = text.strip_prefix("---\n").unwrap_or(text);
    let (head, body) = rest.split_once("\n---\n").unwrap_or(("", rest));
    let field = |name: &'static str| {
        head.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(|v| v.trim().to_owned())
            .ok_or(SearchError::Document {
                path: path.to_owned(),
                field: name,
            })
    };
    Ok(Document {
        hit: SearchHit {
            title: field("title")?,
            source: field("source")?,
            url: field("url")?,
            date: field("date")?,
            snippet: String::new(),
        },
        body: body.trim().to_owned(),
    })
}

/// The query's words worth matching: lower case, three letters or more.
fn terms(query: &str) -> Vec<String> {
    const STOP: [&str; 8] = ["the", "and", "for", "with", "from", "what", "how", "news"];
    query
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| w.len() >= 3 && !STOP.contains(&w.as_str()))
        .collect()
}

fn occurrences(text: &str, terms: &[String]) -> usize {
    let text = text.to_lowercase();
    terms.iter().map(|t| text.matches(t.as_str()).count()).sum()
}

impl Document {
    /// How many of the terms occur anywhere (first), then how often (a title match weighs
    /// three times a body match).
    fn score(&self, terms: &[String]) -> (usize, usize) {
        let text = format!("{} {}", self.hit.title, self.body).to_lowercase();
        let distinct = terms.iter().filter(|t| text.contains(t.as_str())).count();
        let weight = 3 * occurrences(&self.hit.title, terms) + occurrences(&self.body, terms);
        (distinct, weight)
    }

    /// The sentence matching most terms (the first on a tie), at most 300 characters.
    fn snippet(&self, terms: &[String]) -> String {
        let best = self
            .body
            .split_inclusive(". ")
            .map(str::trim)
            .fold(("", 0), |best, s| {
                let n = occurrences(s, terms);
                if n > best.1 {
                    (s, n)
                } else {
                    best
                }
            })
            .0;
        let best = if best.is_empty() { &self.body } else { best };
        best.chars().take(300).collect()
    }
}

impl SearchProvider for CorpusSearch {
    fn name(&self) -> &str {
        "local-corpus"
    }

    fn search<'a>(
        &'a self,
        query: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<SearchHit>, SearchError>> {
        let terms = terms(query);
        let mut scored: Vec<((usize, usize), &Document)> = self
            .documents
            .iter()
            .map(|d| (d.score(&terms), d))
            .filter(|(s, _)| s.0 > 0)
            .collect();
        scored.sort_by_key(|s| std::cmp::Reverse(s.0));
        let hits = scored
            .into_iter()
            .take(limit)
            .map(|(_, d)| SearchHit {
                snippet: d.snippet(&terms),
                ..d.hit.clone()
            })
            .collect();
        Box::pin(async move { Ok(hits) })
    }
}

/// The hits as the tool returns them: numbered, each with its source line and snippet.
pub(crate) fn render_hits(query: &str, hits: &[SearchHit]) -> String {
    if hits.is_empty() {
        return format!("No results for {query:?}.");
    }
    let mut out = format!("Results for {query:?}:\n");
    for (i, h) in hits.iter().enumerate() {
        out.push_str(&format!(
            "[{}] {}\n    source: {}, {}, {}\n    {}\n",
            i + 1,
            h.title,
            h.source,
            h.date,
            h.url,
            h.snippet
        ));
    }
    out
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct SearchArgs {
    /// What to search for.
    query: String,
    /// At most this many results (default 3).
    #[serde(default)]
    limit: Option<usize>,
}

/// The `web_search` tool over `provider`: read-only; deferred (found through `tool_search`)
/// when `deferred`.
pub(crate) fn web_search(provider: Arc<dyn SearchProvider>, deferred: bool) -> FnTool {
    let spec = ToolSpec::new(
        "web_search",
        "Search the web for industry data and news; returns titles, sources and snippets",
        ToolSource::Config,
    )
    .read_only(true)
    .deferrable(deferred);
    FnTool::typed(spec, move |args: SearchArgs, _cx| {
        let provider = Arc::clone(&provider);
        async move {
            let limit = args.limit.unwrap_or(3).clamp(1, 10);
            let hits = provider.search(&args.query, limit).await?;
            Ok::<_, stategraph::BoxError>(render_hits(&args.query, &hits))
        }
    })
}
