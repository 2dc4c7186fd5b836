//! Where secret values come from: the [`SecretStore`] trait, the [`SecretValue`] that never
//! shows its content, and the revocable in-memory [`MemorySecrets`].

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

use crate::BoxError;

/// A secret's value. It has no `Display`, no `Serialize`, and its `Debug` prints
/// `SecretValue(..)`, so a value that ends up in a log line, an error or a debug dump shows
/// nothing; [`SecretValue::expose`] is the one way to read it.
///
/// ```
/// use stategraph_nodes::secret::SecretValue;
///
/// let token = SecretValue::new("s3cr3t");
/// assert_eq!(format!("{token:?}"), "SecretValue(..)");
/// assert_eq!(token.expose(), "s3cr3t");
/// ```
#[derive(Clone)]
pub struct SecretValue(Arc<str>);

impl SecretValue {
    /// A secret holding `value`.
    pub fn new(value: impl Into<String>) -> Self {
        SecretValue(Arc::from(value.into()))
    }

    /// The value itself: for the environment of a process, never for a message or a log.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretValue(..)")
    }
}

/// Where the application keeps secret values. It is read on every tool call that may receive
/// a secret (never cached by the runtime), so a value removed from the store is gone on the
/// next call.
pub trait SecretStore: Send + Sync + 'static {
    /// The value of secret `name`, or `None` when the store does not supply it.
    ///
    /// # Errors
    /// Any failure to read the store; the secret is then not given to the tool. The error
    /// must not contain a secret value (it is logged).
    fn get(&self, name: &str) -> Result<Option<SecretValue>, BoxError>;
}

impl<S: SecretStore + ?Sized> SecretStore for Arc<S> {
    fn get(&self, name: &str) -> Result<Option<SecretValue>, BoxError> {
        (**self).get(name)
    }
}

/// Secrets held in memory, for tests and examples; values can be revoked while an agent runs
/// (share it through an `Arc`).
///
/// ```
/// use stategraph_nodes::secret::{MemorySecrets, SecretStore};
///
/// let secrets = MemorySecrets::new().with("SALES_API_TOKEN", "t-1");
/// assert!(secrets.get("SALES_API_TOKEN")?.is_some());
/// assert!(secrets.revoke("SALES_API_TOKEN"));
/// assert!(secrets.get("SALES_API_TOKEN")?.is_none());
/// # Ok::<(), stategraph_nodes::BoxError>(())
/// ```
#[derive(Default)]
pub struct MemorySecrets {
    values: RwLock<HashMap<String, SecretValue>>,
}

impl fmt::Debug for MemorySecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let values = self.values.read().unwrap_or_else(PoisonError::into_inner);
        let mut names: Vec<&String> = values.keys().collect();
        names.sort();
        f.debug_struct("MemorySecrets")
            .field("names", &names)
            .finish()
    }
}

impl MemorySecrets {
    /// An empty store.
    pub fn new() -> Self {
        MemorySecrets::default()
    }

    /// The store with secret `name` set to `value`.
    pub fn with(self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.insert(name, value);
        self
    }

    /// Set secret `name` to `value` (replacing any value it had).
    pub fn insert(&self, name: impl Into<String>, value: impl Into<String>) {
        self.values
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.into(), SecretValue::new(value));
    }

    /// Remove secret `name`; whether it was there.
    pub fn revoke(&self, name: &str) -> bool {
        self.values
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name)
            .is_some()
    }
}

impl SecretStore for MemorySecrets {
    fn get(&self, name: &str) -> Result<Option<SecretValue>, BoxError> {
        Ok(self
            .values
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned())
    }
}
