//! Finding a checkpoint from what a person typed: a unique part of its id (from its start or
//! its end) or `step:N` on a branch, and the shortest id suffix that tells a listing apart.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::{Checkpoint, CheckpointId};

/// Fewest hex digits a part of an id must have to name a checkpoint.
pub const MIN_REF_LEN: usize = 6;

/// Why a checkpoint reference did not name exactly one checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// Neither hex digits (6 to 32 of them) nor `step:N` / `step:N@REF`.
    #[error(
        "invalid checkpoint reference `{}`: expected a full id, at least 6 hex digits from its start or end, or step:N",
        .0.escape_debug()
    )]
    Invalid(String),
    /// No checkpoint's id starts or ends with these digits.
    #[error("no checkpoint {0}")]
    NotFound(String),
    /// Several checkpoints' ids start or end with these digits.
    #[error("checkpoint {digits} is ambiguous: {} checkpoints match ({})", .candidates.len(), id_list(.candidates))]
    Ambiguous {
        /// The digits given (lower case).
        digits: String,
        /// Every checkpoint that matches, oldest first.
        candidates: Vec<CheckpointId>,
    },
    /// The branch has no checkpoint of that step.
    #[error("no checkpoint of step {step} on the branch that ends at {head}")]
    NoStep {
        /// The step asked for.
        step: i64,
        /// The end of the branch searched.
        head: CheckpointId,
    },
    /// `step:N` on a thread without checkpoints.
    #[error("no checkpoints to take step {0} from")]
    Empty(i64),
}

fn id_list(ids: &[CheckpointId]) -> String {
    ids.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The checkpoint of `history` (one thread's checkpoints in one namespace, in any order) that
/// `text` names:
///
/// - its full 32-digit id, or at least [`MIN_REF_LEN`] hex digits that only its id starts or
///   ends with (case-insensitive; ids made in the same second share their first digits, so the
///   end is usually the shorter unique part);
/// - `step:N`: the checkpoint of superstep `N` on the newest branch (the parent chain of the
///   newest checkpoint); of several with that step (an edit made at that step), the newest;
/// - `step:N@REF`: the same on the branch that ends at the checkpoint `REF` names.
///
/// ```
/// use stategraph_checkpoints::inspect::{find_checkpoint, LookupError};
/// use stategraph_checkpoints::{Checkpoint, CheckpointId, Control, Source};
///
/// let cp = |id: u128, parent: Option<u128>, step: i64| Checkpoint {
///     id: CheckpointId::from_u128(id),
///     parent: parent.map(CheckpointId::from_u128),
///     step,
///     source: Source::Loop,
///     created_at_ms: id as u64,
///     control: Control::default(),
///     metadata: Default::default(),
/// };
/// let history = [cp(0xa1, None, 0), cp(0xb2, Some(0xa1), 1), cp(0xc3, Some(0xa1), 1)];
/// // The newest branch is a1 -> c3; the older one a1 -> b2.
/// assert_eq!(find_checkpoint(&history, "step:1")?, CheckpointId::from_u128(0xc3));
/// assert_eq!(find_checkpoint(&history, "0000b2")?, CheckpointId::from_u128(0xb2));
/// let b2 = CheckpointId::from_u128(0xb2).to_string();
/// assert_eq!(find_checkpoint(&history, &format!("step:0@{b2}"))?, CheckpointId::from_u128(0xa1));
/// assert!(matches!(find_checkpoint(&history, "000000"), Err(LookupError::Ambiguous { .. })));
/// # Ok::<(), LookupError>(())
/// ```
///
/// # Errors
/// [`LookupError`]: malformed text, no match, several matches (all listed), or no checkpoint
/// of that step on the branch.
pub fn find_checkpoint(history: &[Checkpoint], text: &str) -> Result<CheckpointId, LookupError> {
    let trimmed = text.trim();
    let Some(rest) = trimmed.strip_prefix("step:") else {
        return find_by_digits(history.iter().map(|c| c.id), trimmed);
    };
    let (step_text, head) = match rest.split_once('@') {
        Some((s, r)) => (s, Some(find_by_digits(history.iter().map(|c| c.id), r)?)),
        None => (rest, None),
    };
    let step: i64 = step_text
        .trim()
        .parse()
        .map_err(|_| LookupError::Invalid(trimmed.chars().take(64).collect()))?;
    let head = match head {
        Some(h) => h,
        None => newest(history).ok_or(LookupError::Empty(step))?,
    };
    step_on_branch(history, head, step).ok_or(LookupError::NoStep { step, head })
}

/// The newest checkpoint: the latest created, the greater id on a tie.
fn newest(history: &[Checkpoint]) -> Option<CheckpointId> {
    history
        .iter()
        .max_by_key(|c| (c.created_at_ms, c.id))
        .map(|c| c.id)
}

/// The first checkpoint of `step` walking from `head` up its parents.
fn step_on_branch(history: &[Checkpoint], head: CheckpointId, step: i64) -> Option<CheckpointId> {
    let by_id: BTreeMap<CheckpointId, &Checkpoint> = history.iter().map(|c| (c.id, c)).collect();
    let mut cur = by_id.get(&head).copied();
    let mut walked = 0;
    while let Some(cp) = cur {
        if cp.step == step {
            return Some(cp.id);
        }
        walked += 1;
        if walked > by_id.len() {
            return None;
        }
        cur = cp.parent.and_then(|p| by_id.get(&p).copied());
    }
    None
}

/// The id among `ids` that starts or ends with the hex digits of `text`.
fn find_by_digits(
    ids: impl IntoIterator<Item = CheckpointId>,
    text: &str,
) -> Result<CheckpointId, LookupError> {
    let digits = text.trim().to_ascii_lowercase();
    if digits.len() < MIN_REF_LEN
        || digits.len() > 32
        || !digits.chars().all(|c| c.is_ascii_hexdigit())
    {
        return Err(LookupError::Invalid(text.chars().take(64).collect()));
    }
    let mut matches: Vec<CheckpointId> = ids
        .into_iter()
        .filter(|id| {
            let hex = id.to_string();
            hex.starts_with(&digits) || hex.ends_with(&digits)
        })
        .collect();
    matches.sort();
    matches.dedup();
    match matches.as_slice() {
        [] => Err(LookupError::NotFound(digits)),
        [one] => Ok(*one),
        _ => Err(LookupError::Ambiguous {
            digits,
            candidates: matches,
        }),
    }
}

/// The fewest trailing hex digits (at least [`MIN_REF_LEN`], at most 32) that name each of
/// `ids` uniquely through [`find_checkpoint`]: no two ids end alike, and no id's shown end is
/// the start of another id.
pub fn short_suffix_len(ids: &[CheckpointId]) -> usize {
    let mut texts: Vec<String> = ids.iter().map(ToString::to_string).collect();
    texts.sort();
    texts.dedup();
    (MIN_REF_LEN..32)
        .find(|&len| {
            let ends: HashSet<&str> = texts.iter().map(|t| &t[t.len() - len..]).collect();
            let mut starts: HashMap<&str, Vec<&str>> = HashMap::new();
            for t in &texts {
                starts.entry(&t[..len]).or_default().push(t);
            }
            ends.len() == texts.len()
                && texts.iter().all(|t| {
                    starts
                        .get(&t[t.len() - len..])
                        .is_none_or(|owners| owners.as_slice() == [t.as_str()])
                })
        })
        .unwrap_or(32)
}

/// The last `len` hex digits of `id` (all 32 if `len` is larger).
pub fn short_suffix(id: CheckpointId, len: usize) -> String {
    let hex = id.to_string();
    hex[hex.len() - len.min(hex.len())..].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_suffixes_are_unique_references_of_at_least_six_digits() -> Result<(), LookupError> {
        // Ids of one second share their start: the ends tell them apart.
        let ids: Vec<CheckpointId> = (0..14u128)
            .map(|i| CheckpointId::from_u128((0x01a2_3200_u128 << 96) | (i * 0x1_0001)))
            .collect();
        let len = short_suffix_len(&ids);
        assert_eq!(len, MIN_REF_LEN);
        for id in &ids {
            let shown = short_suffix(*id, len);
            let history: Vec<Checkpoint> = ids.iter().map(|&i| header(i)).collect();
            assert_eq!(find_checkpoint(&history, &shown)?, *id);
        }
        // Two ids whose last eight digits are alike need nine.
        let a = CheckpointId::from_u128(0x1000_0000_0000_0000_0000_0000_0abc_def1);
        let b = CheckpointId::from_u128(0x2000_0000_0000_0000_0000_0001_0abc_def1);
        assert_eq!(short_suffix_len(&[a, b]), 9);
        Ok(())
    }

    fn header(id: CheckpointId) -> Checkpoint {
        Checkpoint {
            id,
            parent: None,
            step: 0,
            source: crate::Source::Loop,
            created_at_ms: 0,
            control: crate::Control::default(),
            metadata: BTreeMap::new(),
        }
    }
}
