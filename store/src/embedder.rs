//! A deterministic local embedder, for tests and offline use.

use futures::future::BoxFuture;
use futures::FutureExt;

use crate::{EmbedError, Embedder};

/// Embeds a text as its hashed bag of words: each lowercased word adds ±1 at a position its
/// hash picks. Texts that share words point the same way, so a search ranks by shared
/// vocabulary. No model, no network; the same text always gives the same vector.
///
/// ```
/// use stategraph_store::{vector::dot, Embedder, HashEmbedder};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let e = HashEmbedder::new(64);
/// let texts = ["likes green tea".to_owned(), "green tea please".to_owned(), "owns a boat".to_owned()];
/// let mut v = e.embed(&texts).await?;
/// v.iter_mut().for_each(|v| stategraph_store::vector::normalize(v));
/// assert!(dot(&v[0], &v[1]) > dot(&v[0], &v[2]));
/// # Ok::<(), stategraph_store::EmbedError>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Copy)]
pub struct HashEmbedder {
    dims: usize,
}

impl HashEmbedder {
    /// Vectors of `dims` numbers (at least 1).
    pub fn new(dims: usize) -> Self {
        Self { dims: dims.max(1) }
    }

    /// One text's vector.
    pub fn vector(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0.0f32; self.dims];
        for word in crate::text::words(text) {
            let h = fnv1a(word.as_bytes());
            let at = usize::try_from(h % self.dims as u64).unwrap_or(0);
            v[at] += if h >> 63 == 0 { 1.0 } else { -1.0 };
        }
        v
    }
}

impl Embedder for HashEmbedder {
    fn dims(&self) -> usize {
        self.dims
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        let out = texts.iter().map(|t| self.vector(t)).collect();
        async move { Ok(out) }.boxed()
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}
