//! The memory backend's searches: by vector, by text, or newest first. Each returns the
//! page's slots and scores; items are built for the page only.

use std::cmp::Reverse;

use super::items::{Items, Owner};
use crate::{text, vector, SearchOp, Timestamp};

/// A page of slots, each with its score when the search ranked.
pub(super) type Page = Vec<(usize, Option<f32>)>;

/// Under this share of all items (one in eight), a search without query sorts the items
/// under its prefix instead of walking every item newest first.
const SORT_BELOW: usize = 8;

/// The page `op` asks for; `query_vector` when the store has an index and `op` a query.
pub(super) fn search(
    items: &Items,
    op: &SearchOp,
    query_vector: Option<&[f32]>,
    now: Timestamp,
) -> Page {
    let want = op.offset.saturating_add(op.limit);
    if op.limit == 0 {
        return Vec::new();
    }
    let found = match (query_vector, &op.query) {
        (Some(q), _) => by_vector(items, op, q, want, now),
        (None, Some(query)) => by_text(items, op, query, want, now),
        (None, None) => newest(items, op, want, now),
    };
    found.into_iter().skip(op.offset).take(op.limit).collect()
}

/// Whether the entry in `slot` is live and meets the filter.
fn passes(items: &Items, op: &SearchOp, slot: usize, now: Timestamp) -> bool {
    items
        .entry(slot)
        .is_some_and(|e| e.live(now) && op.filter.matches(&e.value))
}

fn by_vector(items: &Items, op: &SearchOp, query: &[f32], want: usize, now: Timestamp) -> Page {
    let Some(mirror) = &items.mirror else {
        return Vec::new();
    };
    let prefix = op.prefix.to_string();
    let allow = |o: &Owner| o.under(&prefix) && passes(items, op, o.slot(), now);
    mirror
        .rank(query, allow, want)
        .into_iter()
        .map(|(score, owner)| (owner.slot(), Some(score)))
        .collect()
}

/// The live, filtered entries under `op.prefix`.
fn under_prefix<'a>(
    items: &'a Items,
    op: &'a SearchOp,
    now: Timestamp,
) -> impl Iterator<Item = &'a Owner> + 'a {
    items
        .tree
        .range(op.prefix.clone()..)
        .take_while(|(ns, _)| ns.starts_with(&op.prefix))
        .filter_map(|(_, at)| items.space(*at))
        .flat_map(|space| space.slots())
        .filter_map(|slot| items.entry(slot))
        .filter(move |e| e.live(now) && op.filter.matches(&e.value))
        .map(|e| &e.owner)
}

fn by_text(items: &Items, op: &SearchOp, query: &str, want: usize, now: Timestamp) -> Page {
    let words = text::words(query);
    let scored: Vec<(f32, &Owner)> = under_prefix(items, op, now)
        .filter_map(|owner| {
            let e = items.entry(owner.slot())?;
            let score = text::score(&words, &crate::index::searchable_text(&e.value))?;
            Some((score as f32, owner))
        })
        .collect();
    vector::top_k(scored, want)
        .into_iter()
        .map(|(score, owner)| (owner.slot(), Some(score)))
        .collect()
}

/// Newest-updated first, ties by joined namespace then key: a walk of the order index that
/// stops at `want`, or a sort of the prefix's items when they are few.
fn newest(items: &Items, op: &SearchOp, want: usize, now: Timestamp) -> Page {
    if few_under(items, op) {
        let mut found: Vec<(Reverse<Timestamp>, &Owner)> = under_prefix(items, op, now)
            .filter_map(|o| Some((Reverse(items.entry(o.slot())?.updated_at), o)))
            .collect();
        if want < found.len() {
            found.select_nth_unstable(want);
            found.truncate(want);
        }
        found.sort_unstable();
        return found.into_iter().map(|(_, o)| (o.slot(), None)).collect();
    }
    let prefix = op.prefix.to_string();
    items
        .newest
        .iter()
        .filter(|(_, o)| o.under(&prefix) && passes(items, op, o.slot(), now))
        .take(want)
        .map(|(_, o)| (o.slot(), None))
        .collect()
}

/// Whether under one item in [`SORT_BELOW`] lives under `op.prefix`.
fn few_under(items: &Items, op: &SearchOp) -> bool {
    let bound = items.len() / SORT_BELOW;
    let mut count = 0usize;
    for (_, at) in items
        .tree
        .range(op.prefix.clone()..)
        .take_while(|(ns, _)| ns.starts_with(&op.prefix))
    {
        count += items.space(*at).map_or(0, |space| space.len());
        if count >= bound {
            return false;
        }
    }
    true
}
