//! Exact vector ranking: unit vectors, dot products, the best `k`.

use std::cmp::Ordering;

/// Scales `v` to unit length (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let norm = dot(v, v).sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// The dot product; of two unit vectors, their cosine similarity.
///
/// Eight running sums let the compiler keep them in SIMD registers.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut sums = [0.0f32; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a8
        .remainder()
        .iter()
        .zip(b8.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in a8.zip(b8) {
        for i in 0..8 {
            sums[i] += x[i] * y[i];
        }
    }
    sums.iter().sum::<f32>() + tail
}

/// The best score among an item's vectors for `query`.
pub fn best_score(query: &[f32], vectors: &[Vec<f32>]) -> Option<f32> {
    vectors
        .iter()
        .map(|v| dot(query, v))
        .max_by(|a, b| a.partial_cmp(b).unwrap_or(Ordering::Equal))
}

/// Keeps the `k` highest-scored of `scored`, best first; equal scores in `T`'s order, so a
/// page of ties is the same on every call.
pub fn top_k<T: Ord>(mut scored: Vec<(f32, T)>, k: usize) -> Vec<(f32, T)> {
    let by_score = |a: &(f32, T), b: &(f32, T)| {
        b.0.partial_cmp(&a.0)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.1.cmp(&b.1))
    };
    if k < scored.len() {
        if k == 0 {
            return Vec::new();
        }
        scored.select_nth_unstable_by(k - 1, by_score);
        scored.truncate(k);
    }
    scored.sort_by(by_score);
    scored
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_breaks_ties_by_the_items_order() {
        let scored: Vec<(f32, u32)> = (0..64)
            .rev()
            .map(|n| (if n == 7 { 2.0 } else { 1.0 }, n))
            .collect();
        let best = top_k(scored, 5);
        assert_eq!(
            best.iter().map(|(_, n)| *n).collect::<Vec<_>>(),
            [7, 0, 1, 2, 3]
        );
    }
}
