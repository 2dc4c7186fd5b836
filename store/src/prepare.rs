//! What every backend does to a batch before it opens a transaction: checks each op and
//! embeds what the index needs, in one embedder call.

use crate::index::field_texts;
use crate::{check_key, vector, IndexFields, Op, StoreConfig, StoreError};

/// A checked batch, with its vectors.
#[derive(Debug)]
pub struct Prepared {
    /// The ops, in order.
    pub ops: Vec<Op>,
    /// Per op: a put's vectors (one per indexed field present), a ranked search's query
    /// vector (one); empty otherwise. Unit length, so a dot product is the cosine.
    pub vectors: Vec<Vec<Vec<f32>>>,
}

/// Checks `ops` and embeds the texts the index needs.
pub async fn prepare(config: &StoreConfig, ops: Vec<Op>) -> Result<Prepared, StoreError> {
    let mut texts = Vec::new();
    let mut owners = Vec::new();
    for (at, op) in ops.iter().enumerate() {
        check(op)?;
        let found = texts_of(config, op);
        owners.extend(std::iter::repeat_n(at, found.len()));
        texts.extend(found);
    }
    let mut vectors = vec![Vec::new(); ops.len()];
    for (at, v) in owners.into_iter().zip(embed(config, &texts).await?) {
        vectors[at].push(v);
    }
    Ok(Prepared { ops, vectors })
}

/// [`prepare`] for a batch of the one op `op`: checks it and returns its vectors.
pub async fn prepare_one(config: &StoreConfig, op: &Op) -> Result<Vec<Vec<f32>>, StoreError> {
    check(op)?;
    embed(config, &texts_of(config, op)).await
}

/// The texts `op` has the index embed (none without an index).
fn texts_of(config: &StoreConfig, op: &Op) -> Vec<String> {
    let Some(index) = &config.index else {
        return Vec::new();
    };
    match op {
        Op::Put(put) => match (&put.value, &put.index) {
            (Some(value), IndexFields::Default) => field_texts(value, &index.fields),
            (Some(value), IndexFields::Fields(fields)) => field_texts(value, fields),
            _ => Vec::new(),
        },
        Op::Search(search) => search.query.iter().cloned().collect(),
        _ => Vec::new(),
    }
}

/// `texts`' vectors, unit length, in order.
async fn embed(config: &StoreConfig, texts: &[String]) -> Result<Vec<Vec<f32>>, StoreError> {
    let Some(index) = &config.index else {
        return Ok(Vec::new());
    };
    let mut vectors = index.embed(texts).await?;
    vectors.iter_mut().for_each(|v| vector::normalize(v));
    Ok(vectors)
}

fn check(op: &Op) -> Result<(), StoreError> {
    match op {
        Op::Get(get) => {
            get.namespace.for_item()?;
            check_key(&get.key)
        }
        Op::Put(put) => {
            put.namespace.for_item()?;
            check_key(&put.key)
        }
        Op::Search(_) | Op::ListNamespaces(_) => Ok(()),
    }
}
