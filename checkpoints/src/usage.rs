//! [`TokenUsage`]: the tokens a run's model calls used, summed, and how many calls they were
//! (decision 0083). The engine sums it per run; run records and the run queue store it.

use std::fmt;
use std::ops::{Add, AddAssign};

use serde::{Deserialize, Serialize};

/// Token totals of one or more model calls, and how many calls they were. Sums saturate
/// (a total never wraps around).
///
/// ```
/// use stategraph_checkpoints::TokenUsage;
///
/// let mut run = TokenUsage::default();
/// run += TokenUsage::of_call(100, 20, 120);
/// run += TokenUsage::of_call(0, 0, 0); // a call whose provider reported no usage
/// assert_eq!(run.model_calls, 2);
/// assert_eq!(run.to_string(), "in 100 / out 20 / total 120 tokens, 2 model calls");
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TokenUsage {
    /// Tokens of the requests (the prompts).
    #[serde(default)]
    pub input_tokens: u64,
    /// Tokens of the answers.
    #[serde(default)]
    pub output_tokens: u64,
    /// The providers' totals, summed (a provider's total may count more than input plus
    /// output, e.g. reasoning tokens).
    #[serde(default)]
    pub total_tokens: u64,
    /// Model calls that answered, with or without reporting usage.
    #[serde(default)]
    pub model_calls: u64,
}

impl TokenUsage {
    /// One model call that used these tokens (as its provider reported them).
    pub fn of_call(input_tokens: u64, output_tokens: u64, total_tokens: u64) -> Self {
        TokenUsage {
            input_tokens,
            output_tokens,
            total_tokens,
            model_calls: 1,
        }
    }

    /// Whether nothing was counted (no calls, no tokens).
    pub fn is_empty(&self) -> bool {
        *self == TokenUsage::default()
    }
}

impl Add for TokenUsage {
    type Output = TokenUsage;

    fn add(self, other: TokenUsage) -> TokenUsage {
        TokenUsage {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
            total_tokens: self.total_tokens.saturating_add(other.total_tokens),
            model_calls: self.model_calls.saturating_add(other.model_calls),
        }
    }
}

impl AddAssign for TokenUsage {
    fn add_assign(&mut self, other: TokenUsage) {
        *self = *self + other;
    }
}

impl std::iter::Sum for TokenUsage {
    fn sum<I: Iterator<Item = TokenUsage>>(iter: I) -> TokenUsage {
        iter.fold(TokenUsage::default(), Add::add)
    }
}

impl fmt::Display for TokenUsage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let calls = if self.model_calls == 1 {
            "model call"
        } else {
            "model calls"
        };
        write!(
            f,
            "in {} / out {} / total {} tokens, {} {calls}",
            self.input_tokens, self.output_tokens, self.total_tokens, self.model_calls
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_add_each_field_and_saturate() {
        let a = TokenUsage::of_call(u64::MAX - 1, 2, 3);
        let sum: TokenUsage = [a, TokenUsage::of_call(5, 1, 1)].into_iter().sum();
        assert_eq!(
            sum,
            TokenUsage {
                input_tokens: u64::MAX,
                output_tokens: 3,
                total_tokens: 4,
                model_calls: 2,
            }
        );
    }

    #[test]
    fn it_reads_json_missing_fields_as_zero() -> Result<(), serde_json::Error> {
        let usage: TokenUsage = serde_json::from_str(r#"{"input_tokens": 7}"#)?;
        assert_eq!(usage.input_tokens, 7);
        assert_eq!(usage.model_calls, 0);
        Ok(())
    }
}
