//! The semantic index: which fields of a value are embedded, and by what.

use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

/// Turns texts into vectors of a fixed length.
pub trait Embedder: Send + Sync + fmt::Debug + 'static {
    /// The length of every vector it returns.
    fn dims(&self) -> usize;

    /// One vector per text, in order.
    fn embed<'a>(&'a self, texts: &'a [String])
        -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>>;
}

/// An embedder that failed, or answered with the wrong shape.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    /// The embedder's service failed or could not be reached.
    #[error("embedder failed: {0}")]
    Service(String),
    /// It returned a different number of vectors than texts.
    #[error("embedder returned {got} vectors for {asked} texts")]
    Count {
        /// Texts asked for.
        asked: usize,
        /// Vectors returned.
        got: usize,
    },
    /// The embedder's configuration cannot be used (a bad URL, an empty model name…).
    #[error("embedder configuration: {0}")]
    Config(String),
    /// The service answered with an HTTP error status.
    #[error("embedder service answered HTTP {status}: {body}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The error message of its body, cut to a readable length.
        body: String,
    },
    /// The service's answer could not be read as embeddings.
    #[error("embedder answer unreadable: {0}")]
    Decode(String),
    /// A vector's length was not the index's `dims`.
    #[error("embedder returned a vector of {got} dimensions; the index has {dims}")]
    Dims {
        /// The index's length.
        dims: usize,
        /// The vector's length.
        got: usize,
    },
}

/// What a store embeds, and with what.
#[derive(Debug, Clone)]
pub struct IndexConfig {
    /// The vectors' length.
    pub dims: usize,
    /// The fields embedded by default: dotted paths into the value, or `$` for the whole value.
    pub fields: Vec<String>,
    /// The embedder.
    pub embedder: Arc<dyn Embedder>,
}

impl IndexConfig {
    /// An index of `embedder`'s vectors over the whole value (`$`).
    pub fn new(embedder: Arc<dyn Embedder>) -> Self {
        Self {
            dims: embedder.dims(),
            fields: vec!["$".to_owned()],
            embedder,
        }
    }

    /// Embeds these fields instead of the whole value.
    pub fn fields<I: IntoIterator<Item = S>, S: Into<String>>(mut self, fields: I) -> Self {
        self.fields = fields.into_iter().map(Into::into).collect();
        self
    }

    /// Embeds `texts` and checks the answer's shape.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let vectors = self.embedder.embed(texts).await?;
        if vectors.len() != texts.len() {
            return Err(EmbedError::Count {
                asked: texts.len(),
                got: vectors.len(),
            });
        }
        if let Some(v) = vectors.iter().find(|v| v.len() != self.dims) {
            return Err(EmbedError::Dims {
                dims: self.dims,
                got: v.len(),
            });
        }
        Ok(vectors)
    }
}

/// Which fields a put indexes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum IndexFields {
    /// The store's [`IndexConfig::fields`].
    #[default]
    Default,
    /// None: the item is found by filters only.
    Off,
    /// These dotted paths (`$` for the whole value).
    Fields(Vec<String>),
}

/// The texts of `fields` in `value`, one per field present: a string as it is, anything
/// else as its JSON. `$` is the whole value.
pub fn field_texts(value: &Map<String, Value>, fields: &[String]) -> Vec<String> {
    fields
        .iter()
        .filter_map(|field| {
            if field == "$" {
                return Some(serde_json::to_string(value).unwrap_or_default());
            }
            let mut path = field.split('.');
            let first = value.get(path.next()?)?;
            path.try_fold(first, |v, key| v.as_object()?.get(key))
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
        })
        .collect()
}

/// The text full-text search reads: every string in the value, in order, space-separated.
pub fn searchable_text(value: &Map<String, Value>) -> String {
    fn walk(v: &Value, out: &mut String) {
        match v {
            Value::String(s) => {
                if !out.is_empty() {
                    out.push(' ');
                }
                out.push_str(s);
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            Value::Object(map) => map.values().for_each(|i| walk(i, out)),
            _ => {}
        }
    }
    let mut out = String::new();
    value.values().for_each(|v| walk(v, &mut out));
    out
}
