//! A backend's vectors mirrored in memory, in one contiguous matrix, ranked exactly.
//!
//! A SQL backend keeps its vectors in its tables (the source of truth, written in the item's
//! transaction) and a [`VectorMirror`] per handle: one row of `dims` numbers per vector, each
//! row owned by an item key. A vector search scans every row the caller allows with a SIMD
//! dot product (`simsimd`, which picks AVX2, AVX-512 or NEON at run time) and keeps each
//! owner's best row. Decision 0086 says why and what it costs.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::hash::Hash;

use simsimd::SpatialSimilarity;

use crate::EmbedError;

/// Vectors of one length, each owned by a key `K`; an owner may hold several (one per
/// indexed field).
///
/// ```
/// use stategraph_store::mirror::VectorMirror;
/// let mut mirror: VectorMirror<&str> = VectorMirror::new(2);
/// mirror.set("east", &[vec![1.0, 0.0]])?;
/// mirror.set("north", &[vec![0.0, 1.0], vec![0.6, 0.8]])?;
/// let ranked = mirror.rank(&[1.0, 0.0], |_| true, 10);
/// assert_eq!(ranked[0].1, "east");
/// assert!((ranked[1].0 - 0.6).abs() < 1e-6); // north's best row
/// # Ok::<(), stategraph_store::EmbedError>(())
/// ```
#[derive(Debug, Clone)]
pub struct VectorMirror<K> {
    dims: usize,
    matrix: Vec<f32>,
    row_owner: Vec<K>,
    rows: HashMap<K, Vec<usize>>,
}

impl<K: Ord + Hash + Clone + Sync> VectorMirror<K> {
    /// An empty mirror of `dims`-long vectors.
    pub fn new(dims: usize) -> Self {
        Self {
            dims,
            matrix: Vec::new(),
            row_owner: Vec::new(),
            rows: HashMap::new(),
        }
    }

    /// The vectors' length.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// How many owners hold at least one vector.
    pub fn owners(&self) -> usize {
        self.rows.len()
    }

    /// How many vectors.
    pub fn len(&self) -> usize {
        self.row_owner.len()
    }

    /// Whether it holds no vector.
    pub fn is_empty(&self) -> bool {
        self.row_owner.is_empty()
    }

    /// Forgets every vector.
    pub fn clear(&mut self) {
        self.matrix.clear();
        self.row_owner.clear();
        self.rows.clear();
    }

    /// Makes `vectors` the owner's vectors (none: it has none). Nothing changes when one of
    /// them has the wrong length.
    pub fn set(&mut self, owner: K, vectors: &[Vec<f32>]) -> Result<(), EmbedError> {
        if let Some(v) = vectors.iter().find(|v| v.len() != self.dims) {
            return Err(EmbedError::Dims {
                dims: self.dims,
                got: v.len(),
            });
        }
        self.remove(&owner);
        if vectors.is_empty() {
            return Ok(());
        }
        let mut rows = Vec::with_capacity(vectors.len());
        for v in vectors {
            rows.push(self.row_owner.len());
            self.matrix.extend_from_slice(v);
            self.row_owner.push(owner.clone());
        }
        self.rows.insert(owner, rows);
        Ok(())
    }

    /// Forgets the owner's vectors.
    pub fn remove(&mut self, owner: &K) {
        let Some(mut rows) = self.rows.remove(owner) else {
            return;
        };
        // Highest first: the last row, moved into a freed one, is then never the owner's.
        rows.sort_unstable_by(|a, b| b.cmp(a));
        for row in rows {
            let last = self.row_owner.len() - 1;
            if row != last {
                let (head, tail) = self.matrix.split_at_mut(last * self.dims);
                head[row * self.dims..(row + 1) * self.dims].copy_from_slice(&tail[..self.dims]);
                let moved = self.row_owner[last].clone();
                if let Some(at) = self
                    .rows
                    .get_mut(&moved)
                    .and_then(|r| r.iter_mut().find(|r| **r == last))
                {
                    *at = row;
                }
            }
            self.matrix.truncate(last * self.dims);
            self.row_owner.swap_remove(row);
        }
    }

    /// The `k` owners `allow` lets through with the highest dot product with `query` (each
    /// by its best vector), best first; equal scores in key order. A query of another length
    /// matches nothing.
    ///
    /// `allow` is asked only about rows whose score would enter the best `k` so far, so a
    /// costly test (a namespace prefix) runs on few rows.
    pub fn rank(
        &self,
        query: &[f32],
        allow: impl Fn(&K) -> bool + Sync,
        k: usize,
    ) -> Vec<(f32, K)> {
        if query.len() != self.dims || k == 0 || self.dims == 0 {
            return Vec::new();
        }
        let rows = self.matrix.chunks_exact(self.dims).zip(&self.row_owner);
        if self.row_owner.len() != self.rows.len() {
            // Some owner has several vectors: keep every allowed row, then each owner's best.
            let scored = rows
                .enumerate()
                .filter(|(_, (_, owner))| allow(owner))
                .map(|(row, (v, owner))| (score(query, v), (owner, row)))
                .collect();
            return best_per_owner(scored, k);
        }
        let parts = parallelism(self.row_owner.len());
        if parts < 2 {
            return sorted(self.best_of(query, &allow, k, 0..self.row_owner.len()));
        }
        // The scan reads every row: split it across cores, then merge the parts' best.
        let len = self.row_owner.len();
        let step = len.div_ceil(parts);
        let allow = &allow;
        let merged = std::thread::scope(|scope| {
            let others: Vec<_> = (1..parts)
                .map(|p| {
                    let range = p * step..len.min((p + 1) * step);
                    scope.spawn(move || self.best_of(query, allow, k, range))
                })
                .collect();
            let mut best = self.best_of(query, allow, k, 0..step.min(len));
            for other in others {
                // A part whose thread panicked (it cannot: no code in it panics) is left out.
                if let Ok(part) = other.join() {
                    for r in part {
                        keep(&mut best, r, k);
                    }
                }
            }
            best
        });
        sorted(merged)
    }

    /// The best `k` allowed rows of `rows`, in a heap whose top is the worst.
    fn best_of<'s>(
        &'s self,
        query: &[f32],
        allow: &impl Fn(&K) -> bool,
        k: usize,
        rows: std::ops::Range<usize>,
    ) -> BinaryHeap<Ranked<'s, K>> {
        // `k` comes from a search's limit and offset, which may be far beyond the rows (a
        // caller asking for "all"): the heap never holds more than the range's rows.
        let mut best = BinaryHeap::with_capacity(k.min(rows.len()).saturating_add(1));
        let vectors =
            self.matrix[rows.start * self.dims..rows.end * self.dims].chunks_exact(self.dims);
        for (v, owner) in vectors.zip(&self.row_owner[rows]) {
            let candidate = Ranked {
                score: score(query, v),
                owner,
            };
            let enters = best.len() < k || best.peek().is_some_and(|worst| candidate < *worst);
            if enters && allow(owner) {
                keep(&mut best, candidate, k);
            }
        }
        best
    }

    /// As [`rank`](Self::rank), over the vectors of `owners` only: for a filter that
    /// leaves few candidates.
    pub fn rank_among<'a>(
        &'a self,
        query: &[f32],
        owners: impl IntoIterator<Item = &'a K>,
        k: usize,
    ) -> Vec<(f32, K)> {
        if query.len() != self.dims || k == 0 || self.dims == 0 {
            return Vec::new();
        }
        let mut scored = Vec::new();
        for owner in owners {
            let Some((key, rows)) = self.rows.get_key_value(owner) else {
                continue;
            };
            for row in rows {
                let v = &self.matrix[row * self.dims..(row + 1) * self.dims];
                scored.push((score(query, v), (key, *row)));
            }
        }
        best_per_owner(scored, k)
    }
}

/// Rows per core below which a scan stays on one thread (a thread costs more than it saves).
const ROWS_PER_PART: usize = 16_384;

/// How many parts a scan of `rows` rows is split into.
fn parallelism(rows: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    cores.min(rows / ROWS_PER_PART).max(1)
}

/// Adds `r` to `best`, dropping the worst beyond `k`.
fn keep<'a, K: Ord>(best: &mut BinaryHeap<Ranked<'a, K>>, r: Ranked<'a, K>, k: usize) {
    best.push(r);
    if best.len() > k {
        best.pop();
    }
}

/// A heap's rows, best first.
fn sorted<K: Ord + Clone>(best: BinaryHeap<Ranked<'_, K>>) -> Vec<(f32, K)> {
    best.into_sorted_vec()
        .into_iter()
        .map(|r| (r.score, r.owner.clone()))
        .collect()
}

/// A scored owner, ordered worst first: lower score, then later key (so a max-heap's top
/// is the one to drop).
#[derive(Debug)]
struct Ranked<'a, K> {
    score: f32,
    owner: &'a K,
}

impl<K: Ord> Ord for Ranked<'_, K> {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .score
            .partial_cmp(&self.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| self.owner.cmp(other.owner))
    }
}

impl<K: Ord> PartialOrd for Ranked<'_, K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<K: Ord> PartialEq for Ranked<'_, K> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl<K: Ord> Eq for Ranked<'_, K> {}

fn best_per_owner<K: Ord + Hash + Clone>(
    mut scored: Vec<(f32, (&K, usize))>,
    k: usize,
) -> Vec<(f32, K)> {
    scored.sort_by(|a, b| {
        b.0.partial_cmp(&a.0)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.1.cmp(&b.1))
    });
    let mut seen = std::collections::HashSet::new();
    scored
        .into_iter()
        .filter(|(_, (owner, _))| seen.insert(*owner))
        .take(k)
        .map(|(s, (owner, _))| (s, owner.clone()))
        .collect()
}

/// The dot product, by SIMD where the CPU has it (a NaN, which `simsimd` never gives for
/// finite input, counts as the worst).
fn score(a: &[f32], b: &[f32]) -> f32 {
    match f32::dot(a, b) {
        Some(d) if !d.is_nan() => d as f32,
        _ => f32::MIN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(dims: usize, at: usize) -> Vec<f32> {
        let mut v = vec![0.0; dims];
        v[at] = 1.0;
        v
    }

    #[test]
    fn removing_an_owner_keeps_the_others_rows_right() -> Result<(), EmbedError> {
        let mut m = VectorMirror::new(4);
        m.set(1, &[unit(4, 0), unit(4, 1)])?;
        m.set(2, &[unit(4, 2)])?;
        m.set(3, &[unit(4, 3), unit(4, 0)])?;
        m.remove(&1);
        assert_eq!(m.len(), 3);
        assert_eq!(m.owners(), 2);
        assert_eq!(m.rank(&unit(4, 2), |_| true, 1), vec![(1.0, 2)]);
        assert_eq!(m.rank(&unit(4, 3), |_| true, 1), vec![(1.0, 3)]);
        m.set(3, &[])?;
        assert_eq!(m.rank(&unit(4, 3), |_| true, 5), vec![(0.0, 2)]);
        Ok(())
    }

    #[test]
    fn rank_keeps_each_owners_best_and_honours_allow() -> Result<(), EmbedError> {
        let mut m = VectorMirror::new(2);
        m.set("a", &[vec![0.0, 1.0], vec![1.0, 0.0]])?;
        m.set("b", &[vec![0.8, 0.6]])?;
        m.set("c", &[vec![1.0, 0.0]])?;
        let ranked = m.rank(&[1.0, 0.0], |k| *k != "c", 10);
        assert_eq!(ranked, vec![(1.0, "a"), (0.8, "b")]);
        let ranked = m.rank(&[1.0, 0.0], |_| true, 2);
        assert_eq!(ranked, vec![(1.0, "a"), (1.0, "c")]);
        Ok(())
    }

    #[test]
    fn rank_orders_ties_by_key_and_asks_allow_about_few_rows() -> Result<(), EmbedError> {
        let mut m = VectorMirror::new(2);
        for n in (0..100u32).rev() {
            let v = if n % 10 == 0 {
                vec![1.0, 0.0]
            } else {
                vec![0.0, 1.0]
            };
            m.set(n, &[v])?;
        }
        let asked = std::sync::atomic::AtomicUsize::new(0);
        let ranked = m.rank(
            &[1.0, 0.0],
            |n| {
                asked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                *n != 50
            },
            3,
        );
        assert_eq!(ranked, vec![(1.0, 0), (1.0, 10), (1.0, 20)]);
        let asked = asked.into_inner();
        assert!(asked < 50, "allow asked {asked} times");
        let among = m.rank_among(&[1.0, 0.0], [&7, &30, &99, &1000], 2);
        assert_eq!(among, vec![(1.0, 30), (0.0, 7)]);
        Ok(())
    }

    #[test]
    fn a_scan_split_across_cores_ranks_as_a_sort_does() -> Result<(), EmbedError> {
        let mut m = VectorMirror::new(4);
        let mut all = Vec::new();
        let mut seed = 7u64;
        for n in 0..(ROWS_PER_PART * 3 + 5) as u32 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            // Few distinct values, so ties cross the parts' borders.
            let x = (seed % 50) as f32 / 50.0;
            m.set(n, &[vec![x, 1.0 - x, 0.0, 0.0]])?;
            all.push((x, n));
        }
        let query = [1.0, 0.0, 0.0, 0.0];
        let ranked = m.rank(&query, |n| n % 3 != 0, 25);
        all.retain(|(_, n)| n % 3 != 0);
        all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let want: Vec<u32> = all.iter().take(25).map(|(_, n)| *n).collect();
        assert_eq!(ranked.iter().map(|(_, n)| *n).collect::<Vec<_>>(), want);
        Ok(())
    }

    #[test]
    fn a_k_far_beyond_the_rows_ranks_them_all() -> Result<(), EmbedError> {
        let mut m = VectorMirror::new(2);
        m.set(1, &[vec![1.0, 0.0]])?;
        m.set(2, &[vec![0.0, 1.0]])?;
        for k in [usize::MAX, usize::MAX / 2] {
            assert_eq!(m.rank(&[1.0, 0.0], |_| true, k), vec![(1.0, 1), (0.0, 2)]);
        }
        Ok(())
    }

    #[test]
    fn a_vector_of_the_wrong_length_is_refused_and_changes_nothing() {
        let mut m = VectorMirror::new(3);
        assert!(m.set(1, &[vec![1.0, 0.0, 0.0]]).is_ok());
        let err = m.set(1, &[vec![1.0]]);
        assert!(matches!(err, Err(EmbedError::Dims { dims: 3, got: 1 })));
        assert_eq!(m.len(), 1);
        assert!(m.rank(&[1.0], |_| true, 1).is_empty());
    }
}
