//! Naming a checkpoint by a prefix of its id: resolving a prefix, and the shortest prefix
//! that tells a thread's ids apart.

use crate::CheckpointId;

/// Shortest checkpoint-id prefix [`resolve_prefix`] accepts, in hex digits.
pub const MIN_PREFIX_LEN: usize = 6;

/// Why a checkpoint-id prefix did not name exactly one checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    /// Not hex, longer than 32 digits, or shorter than [`MIN_PREFIX_LEN`].
    #[error(
        "invalid checkpoint reference `{}`: expected a full id, a unique part of one (at least 6 hex digits) or step:N", .0.escape_debug()
    )]
    Invalid(String),
    /// No checkpoint id starts with it.
    #[error("no checkpoint {0}")]
    NotFound(String),
    /// Several ids start with it (some of them listed).
    #[error("checkpoint prefix {prefix} is ambiguous: {} match ({})", .count, .examples.join(", "))]
    Ambiguous {
        /// The prefix given.
        prefix: String,
        /// How many ids match.
        count: usize,
        /// Up to five of them (then `...` if there are more).
        examples: Vec<String>,
    },
}

/// Find the checkpoint among `ids` named by `text`: its full 32-digit id, or a prefix of at
/// least [`MIN_PREFIX_LEN`] hex digits that only one of them has (case-insensitive).
///
/// # Errors
/// [`PrefixError`]: malformed text, no match, or several matches.
pub fn resolve_prefix(
    ids: impl IntoIterator<Item = CheckpointId>,
    text: &str,
) -> Result<CheckpointId, PrefixError> {
    let prefix = text.trim().to_ascii_lowercase();
    if prefix.len() < MIN_PREFIX_LEN
        || prefix.len() > 32
        || !prefix.chars().all(|c| c.is_ascii_hexdigit())
    {
        return Err(PrefixError::Invalid(text.chars().take(64).collect()));
    }
    let matches: Vec<CheckpointId> = ids
        .into_iter()
        .filter(|id| id.to_string().starts_with(&prefix))
        .collect();
    match matches.as_slice() {
        [] => Err(PrefixError::NotFound(prefix)),
        [one] => Ok(*one),
        many => {
            let mut unique: Vec<CheckpointId> = many.to_vec();
            unique.sort();
            unique.dedup();
            if let [one] = unique.as_slice() {
                return Ok(*one);
            }
            Err(PrefixError::Ambiguous {
                prefix,
                count: unique.len(),
                examples: unique
                    .iter()
                    .take(5)
                    .map(ToString::to_string)
                    .chain((unique.len() > 5).then(|| "...".to_owned()))
                    .collect(),
            })
        }
    }
}

/// The shortest prefix length (at least 8, at most 32) that tells every id of `ids` apart:
/// ids are time-ordered, so ids made in the same second share their first digits.
pub fn short_id_len(ids: &[CheckpointId]) -> usize {
    let mut texts: Vec<String> = ids.iter().map(ToString::to_string).collect();
    texts.sort();
    texts.dedup();
    let mut len = 8;
    for pair in texts.windows(2) {
        let common = pair[0]
            .bytes()
            .zip(pair[1].bytes())
            .take_while(|(a, b)| a == b)
            .count();
        len = len.max(common + 1);
    }
    len.min(32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_resolve_only_when_unique() {
        let a = CheckpointId::from_u128(0x0123_4567_89ab_cdef_0000_0000_0000_0001);
        let b = CheckpointId::from_u128(0x0123_4567_89ab_cdef_0000_0000_0000_0002);
        let c = CheckpointId::from_u128(0x0123_4500_0000_0000_0000_0000_0000_0000);
        let ids = [a, b, c];
        assert_eq!(resolve_prefix(ids, &a.to_string()), Ok(a));
        assert_eq!(resolve_prefix(ids, "01234500"), Ok(c));
        assert_eq!(
            resolve_prefix(ids, "0123456789AB"),
            Err(PrefixError::Ambiguous {
                prefix: "0123456789ab".into(),
                count: 2,
                examples: vec![a.to_string(), b.to_string()],
            })
        );
        assert!(matches!(
            resolve_prefix(ids, "fffffff"),
            Err(PrefixError::NotFound(_))
        ));
        assert!(matches!(
            resolve_prefix(ids, "01234"),
            Err(PrefixError::Invalid(_))
        ));
        assert!(matches!(
            resolve_prefix(ids, "0123xz"),
            Err(PrefixError::Invalid(_))
        ));
        assert_eq!(short_id_len(&ids), 32);
        assert_eq!(short_id_len(&[a, c]), 8);
        assert_eq!(short_id_len(&[a]), 8);
    }
}
