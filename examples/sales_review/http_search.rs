//! A [`SearchProvider`] over HTTP: a self-hostable search API that answers
//! `GET {base}/search?q=...&format=json` with SearXNG's JSON (`results`: `title`, `url`,
//! `content`, `engine`, `publishedDate`). Built with the `live` feature.

use futures::future::BoxFuture;

use super::search::{SearchError, SearchHit, SearchProvider};

/// The HTTP provider.
#[derive(Clone, Debug)]
pub(crate) struct HttpSearch {
    base: String,
    client: reqwest::Client,
}

#[derive(serde::Deserialize)]
struct Answer {
    #[serde(default)]
    results: Vec<Result>,
}

#[derive(serde::Deserialize)]
struct Result {
    title: String,
    url: String,
    #[serde(default)]
    content: String,
    #[serde(default)]
    engine: Option<String>,
    #[serde(default, rename = "publishedDate")]
    published: Option<String>,
}

impl HttpSearch {
    /// A provider asking the API at `base` (e.g. `http://127.0.0.1:8888`).
    ///
    /// # Errors
    /// [`SearchError::Http`] when the HTTP client cannot be built.
    pub(crate) fn new(base: &str) -> std::result::Result<Self, SearchError> {
        let client = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(20))
            .build()
            .map_err(|e| SearchError::Http {
                url: base.to_owned(),
                reason: e.to_string(),
            })?;
        Ok(HttpSearch {
            base: base.trim_end_matches('/').to_owned(),
            client,
        })
    }

    async fn get(
        &self,
        query: &str,
        limit: usize,
    ) -> std::result::Result<Vec<SearchHit>, SearchError> {
        let url = format!("{}/search", self.base);
        let failed = |reason: String| SearchError::Http {
            url: url.clone(),
            reason,
        };
        let response = self
            .client
            .get(&url)
            .query(&[("q", query), ("format", "json")])
            .send()
            .await
            .map_err(|e| failed(e.to_string()))?;
        let status = response.status();
        if !status.is_success() {
            return Err(failed(format!("status {status}")));
        }
        let answer: Answer = response
            .json()
            .await
            .map_err(|e| failed(format!("not a search answer: {e}")))?;
        Ok(answer
            .results
            .into_iter()
            .take(limit)
            .map(|r| SearchHit {
                source: r.engine.unwrap_or_else(|| "web".into()),
                date: r.published.unwrap_or_else(|| "undated".into()),
                snippet: r.content.chars().take(300).collect(),
                title: r.title,
                url: r.url,
            })
            .collect())
    }
}

impl SearchProvider for HttpSearch {
    fn name(&self) -> &str {
        "http"
    }

    fn search<'a>(
        &'a self,
        query: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, std::result::Result<Vec<SearchHit>, SearchError>> {
        Box::pin(self.get(query, limit))
    }
}
