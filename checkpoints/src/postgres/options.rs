//! [`PostgresOptions`]: where in the database a [`PostgresSaver`](super::PostgresSaver) keeps
//! its tables, and how it talks to the server.

use super::tls::{PostgresTls, TlsClientCert};
use crate::CheckpointError;

/// Longest schema name PostgreSQL keeps whole (its identifiers are at most 63 bytes).
const MAX_SCHEMA_LEN: usize = 63;

/// Options of a [`PostgresSaver`](super::PostgresSaver).
///
/// ```
/// use stategraph_checkpoints::PostgresOptions;
/// let options = PostgresOptions {
///     schema: "tenant_a".to_owned(),
///     pool_size: 4,
///     ..PostgresOptions::default()
/// };
/// assert!(options.validate().is_ok());
/// ```
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    /// The schema that holds the saver's tables (created if missing): a plain lowercase
    /// identifier, `[a-z_][a-z0-9_]*`, at most 63 bytes. Default `stategraph`. Savers with
    /// different schemas in one database share nothing.
    pub schema: String,
    /// Most connections the saver's pool opens. Default 8.
    pub pool_size: usize,
    /// Largest value (one field's stored part) accepted, in bytes. Default 16 MiB.
    pub max_value_bytes: usize,
    /// A full state record is stored every this many checkpoints of a branch (the others
    /// store what changed since their parent); bounds the rows a load reads. A put that
    /// extends a remembered head spaces them further for a big state, one per 16 of its
    /// parts (decision 0059). Default 16.
    pub full_every: u32,
    /// Create the schema and its tables when they are missing (default `true`). With
    /// `false` (the inspector's choice), connecting to a schema without them fails with an
    /// integrity error naming `<schema>.sg_meta`, and nothing is created.
    pub create_schema: bool,
    /// The server's own URL for the run queue's `LISTEN` connection, when the saver's URL
    /// goes through a transaction-mode pooler (PgBouncer takes the `LISTEN` and then delivers
    /// no notification, so workers would wake only by their poll). Default `None`: the
    /// saver's URL.
    pub listen_url: Option<String>,
    /// TLS to the server (default [`PostgresTls::Off`]). With TLS on, every connection must
    /// be TLS and the server's certificate is checked (decision 0062).
    pub tls: PostgresTls,
    /// A client certificate to present to the server (default `None`); needs TLS on.
    pub tls_client_cert: Option<TlsClientCert>,
    /// Send the hot calls (a put that extends a head, the head read at an invoke's start,
    /// a lease, a heartbeat, a run's end) as named statements each pooled connection
    /// prepares once, instead of unnamed statements parsed and planned on every call
    /// (default `false`). It saves the server about 0.1 ms a call, but needs a direct
    /// connection or a pooler that follows named prepared statements (PgBouncer 1.21 or
    /// newer with `max_prepared_statements` set): PgBouncer in transaction mode before
    /// that sends a call to a server connection that never prepared it, and the call fails
    /// with "prepared statement … does not exist" (decision 0063).
    pub prepared_statements: bool,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            schema: "stategraph".to_owned(),
            pool_size: 8,
            max_value_bytes: 16 << 20,
            full_every: 16,
            create_schema: true,
            listen_url: None,
            tls: PostgresTls::Off,
            tls_client_cert: None,
            prepared_statements: false,
        }
    }
}

impl PostgresOptions {
    /// Check the options: a schema name the saver can use, a pool of at least one
    /// connection.
    ///
    /// # Errors
    /// [`CheckpointError::InvalidSchemaName`] for a schema name outside `[a-z_][a-z0-9_]*`
    /// or longer than 63 bytes, or a `pool_size` of 0 (reported against the schema, which
    /// then could not be reached).
    pub fn validate(&self) -> Result<(), CheckpointError> {
        let bad = |reason| CheckpointError::InvalidSchemaName {
            name: self.schema.chars().take(64).collect(),
            reason,
        };
        let name = self.schema.as_str();
        let mut chars = name.chars();
        match chars.next() {
            None => return Err(bad("empty")),
            Some(c) if !(c.is_ascii_lowercase() || c == '_') => {
                return Err(bad("must start with a lowercase letter or `_`"))
            }
            Some(_) => {}
        }
        if !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
            return Err(bad("only lowercase letters, digits and `_` are allowed"));
        }
        if name.len() > MAX_SCHEMA_LEN {
            return Err(bad("longer than 63 bytes"));
        }
        if name.starts_with("pg_") {
            return Err(bad("names starting with `pg_` are reserved by PostgreSQL"));
        }
        if self.pool_size == 0 {
            return Err(bad("the pool size is 0, so no connection could reach it"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(schema: &str) -> PostgresOptions {
        PostgresOptions {
            schema: schema.to_owned(),
            ..PostgresOptions::default()
        }
    }

    #[test]
    fn schema_names_outside_plain_lowercase_identifiers_are_refused() {
        for good in ["stategraph", "_t1", "a_b_9"] {
            assert!(named(good).validate().is_ok(), "{good}");
        }
        for bad in ["", "1a", "Tenant", "a-b", "a\"b", "pg_x", &"a".repeat(64)] {
            match named(bad).validate() {
                Err(CheckpointError::InvalidSchemaName { .. }) => {}
                other => panic!("{bad:?}: expected InvalidSchemaName, got {other:?}"),
            }
        }
    }

    #[test]
    fn a_pool_of_no_connections_is_refused() {
        let options = PostgresOptions {
            pool_size: 0,
            ..PostgresOptions::default()
        };
        let e = options.validate().err().map(|e| e.to_string());
        assert!(e.is_some_and(|t| t.contains("pool size is 0")));
    }
}
