//! [`SecretEnv`]: the secrets one tool call receives, as environment variables.

use std::fmt;

use super::SecretValue;

/// The secrets one call receives: `(name, value)` pairs to set in a process's environment.
/// Its `Debug` lists the names only.
#[derive(Clone, Default)]
pub struct SecretEnv {
    vars: Vec<(String, SecretValue)>,
}

impl fmt::Debug for SecretEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretEnv")
            .field("names", &self.names().collect::<Vec<_>>())
            .finish()
    }
}

impl SecretEnv {
    /// An environment of these pairs (a later pair of the same name is dropped).
    pub fn new(vars: impl IntoIterator<Item = (String, SecretValue)>) -> Self {
        let mut env = SecretEnv::default();
        for (name, value) in vars {
            if !env.vars.iter().any(|(n, _)| *n == name) {
                env.vars.push((name, value));
            }
        }
        env
    }

    /// The names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.vars.iter().map(|(n, _)| n.as_str())
    }

    /// The pairs, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &SecretValue)> {
        self.vars.iter().map(|(n, v)| (n.as_str(), v))
    }

    /// Whether there is no secret.
    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }

    /// How many secrets.
    pub fn len(&self) -> usize {
        self.vars.len()
    }

    /// `text` with every occurrence of a value replaced by `[secret NAME]` (longest values
    /// first, empty values ignored): what a tool returns passes through this, so a command
    /// that prints a secret does not put it into the state, the checkpoint or the trace.
    ///
    /// ```
    /// use stategraph_nodes::secret::{SecretEnv, SecretValue};
    ///
    /// let env = SecretEnv::new([("TOKEN".to_string(), SecretValue::new("t-123"))]);
    /// assert_eq!(env.redact("auth: t-123"), "auth: [secret TOKEN]");
    /// ```
    pub fn redact(&self, text: &str) -> String {
        let mut vars: Vec<&(String, SecretValue)> = self
            .vars
            .iter()
            .filter(|(_, v)| !v.expose().is_empty())
            .collect();
        vars.sort_by_key(|(_, v)| std::cmp::Reverse(v.expose().len()));
        let mut text = text.to_owned();
        for (name, value) in vars {
            if text.contains(value.expose()) {
                text = text.replace(value.expose(), &format!("[secret {name}]"));
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_names_the_secrets_and_shows_no_value() {
        let env = SecretEnv::new([
            ("A".to_owned(), SecretValue::new("alpha-value")),
            ("A".to_owned(), SecretValue::new("second")),
        ]);
        let shown = format!("{env:?}");
        assert_eq!(shown, "SecretEnv { names: [\"A\"] }");
        assert_eq!(env.len(), 1);
    }

    #[test]
    fn redaction_replaces_longer_values_first_and_ignores_empty_ones() {
        let env = SecretEnv::new([
            ("SHORT".to_owned(), SecretValue::new("abc")),
            ("LONG".to_owned(), SecretValue::new("abcdef")),
            ("EMPTY".to_owned(), SecretValue::new("")),
        ]);
        assert_eq!(env.redact("abcdef abc x"), "[secret LONG] [secret SHORT] x");
    }
}
