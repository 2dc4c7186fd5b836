//! Namespaces: the path of labels an item lives under, such as `["users", "u-42", "facts"]`.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// A path of labels. Items live under a non-empty one; a search or a listing takes any
/// prefix, the empty one ([`Namespace::root`]) included.
///
/// A label is a non-empty string without `.`: the SQL backends key a namespace by its labels
/// joined with `.`, so that a prefix is a range of keys.
///
/// ```
/// use stategraph_store::Namespace;
/// let ns = Namespace::new(["users", "u-42"])?;
/// assert!(ns.starts_with(&Namespace::new(["users"])?));
/// assert_eq!(ns.to_string(), "users.u-42");
/// assert!(Namespace::new(["a.b"]).is_err());
/// # Ok::<(), stategraph_store::NamespaceError>(())
/// ```
///
/// Cloning shares the labels (an item read back carries its namespace without copying it).
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "Vec<String>", into = "Vec<String>")]
pub struct Namespace(Arc<[String]>);

/// A namespace label that cannot be stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NamespaceError {
    /// A label was the empty string.
    #[error("namespace label {index} is empty")]
    EmptyLabel {
        /// The label's position.
        index: usize,
    },
    /// A label held a `.`, the separator the SQL backends key namespaces by.
    #[error("namespace label {label:?} contains '.'")]
    Dot {
        /// The label.
        label: String,
    },
    /// An item's namespace had no label.
    #[error("an item's namespace needs at least one label")]
    Empty,
}

impl Namespace {
    /// A namespace of these labels, each checked.
    pub fn new<I, S>(labels: I) -> Result<Self, NamespaceError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let labels: Vec<String> = labels.into_iter().map(Into::into).collect();
        for (index, label) in labels.iter().enumerate() {
            if label.is_empty() {
                return Err(NamespaceError::EmptyLabel { index });
            }
            if label.contains('.') {
                return Err(NamespaceError::Dot {
                    label: label.clone(),
                });
            }
        }
        Ok(Self(labels.into()))
    }

    /// The empty prefix, under which every item lives.
    pub fn root() -> Self {
        Self::default()
    }

    /// Reads the `.`-joined form that [`Display`](fmt::Display) writes.
    pub fn from_joined(joined: &str) -> Result<Self, NamespaceError> {
        if joined.is_empty() {
            return Ok(Self::root());
        }
        Self::new(joined.split('.'))
    }

    /// Reads a namespace a SQL backend stored `.`-joined; one it cannot read is a
    /// [`StoreError::Corrupt`](crate::StoreError::Corrupt) naming it.
    pub(crate) fn from_stored(joined: &str) -> Result<Self, crate::StoreError> {
        Self::from_joined(joined).map_err(|e| crate::StoreError::Corrupt {
            namespace: joined.to_owned(),
            key: "-".to_owned(),
            why: e.to_string(),
        })
    }

    /// The labels, outermost first.
    pub fn labels(&self) -> &[String] {
        &self.0
    }

    /// How many labels.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether this is the root (no label).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `prefix`'s labels are this namespace's first labels.
    pub fn starts_with(&self, prefix: &Namespace) -> bool {
        self.0.starts_with(&prefix.0)
    }

    /// The first `depth` labels (all of them when it has fewer).
    pub fn truncated(&self, depth: usize) -> Namespace {
        Self(self.0.iter().take(depth).cloned().collect())
    }

    /// This namespace with one more label.
    pub fn child(&self, label: impl Into<String>) -> Result<Self, NamespaceError> {
        let mut labels = self.0.to_vec();
        labels.push(label.into());
        Self::new(labels)
    }

    /// Checks that an item may live here: at least one label.
    pub fn for_item(&self) -> Result<&Self, NamespaceError> {
        if self.0.is_empty() {
            return Err(NamespaceError::Empty);
        }
        Ok(self)
    }
}

impl TryFrom<Vec<String>> for Namespace {
    type Error = NamespaceError;
    fn try_from(labels: Vec<String>) -> Result<Self, Self::Error> {
        Self::new(labels)
    }
}

impl From<Namespace> for Vec<String> {
    fn from(ns: Namespace) -> Self {
        ns.0.to_vec()
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join("."))
    }
}

impl fmt::Debug for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

/// One condition of a namespace listing: the namespace starts (`Prefix`) or ends (`Suffix`)
/// with these labels, where a `*` label matches any label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchCondition {
    /// Which end of the namespace the labels are matched against.
    pub side: MatchSide,
    /// The labels; `*` matches any one label.
    pub labels: Vec<String>,
}

/// The end of a namespace a [`MatchCondition`] looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchSide {
    /// The first labels.
    Prefix,
    /// The last labels.
    Suffix,
}

impl MatchCondition {
    /// Namespaces that start with these labels.
    pub fn prefix<I: IntoIterator<Item = S>, S: Into<String>>(labels: I) -> Self {
        Self {
            side: MatchSide::Prefix,
            labels: labels.into_iter().map(Into::into).collect(),
        }
    }

    /// Namespaces that end with these labels.
    pub fn suffix<I: IntoIterator<Item = S>, S: Into<String>>(labels: I) -> Self {
        Self {
            side: MatchSide::Suffix,
            labels: labels.into_iter().map(Into::into).collect(),
        }
    }

    /// Whether `ns` meets the condition.
    pub fn matches(&self, ns: &Namespace) -> bool {
        let labels = ns.labels();
        if labels.len() < self.labels.len() {
            return false;
        }
        let window = match self.side {
            MatchSide::Prefix => &labels[..self.labels.len()],
            MatchSide::Suffix => &labels[labels.len() - self.labels.len()..],
        };
        window
            .iter()
            .zip(&self.labels)
            .all(|(have, want)| want == "*" || have == want)
    }
}

/// Whether the `.`-joined namespace `ns` is the `.`-joined `prefix` or under it; every
/// namespace is under the root (`""`). The backends' vector ranking tests owners so.
pub(crate) fn joined_under(ns: &str, prefix: &str) -> bool {
    prefix.is_empty()
        || ns
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

#[cfg(test)]
mod tests {
    use super::joined_under;

    #[test]
    fn joined_under_takes_whole_labels_only() {
        assert!(joined_under("a.b", "a.b"));
        assert!(joined_under("a.b.c", "a.b"));
        assert!(joined_under("a.b", ""));
        assert!(!joined_under("a.bc", "a.b"));
        assert!(!joined_under("a", "a.b"));
        assert!(!joined_under("b.a", "a"));
    }
}
