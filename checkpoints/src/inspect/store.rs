//! What an inspector reads: a checkpoint file or (feature `postgres`) a PostgreSQL schema
//! named by a `postgres://` URL, opened the same way by every tool (the `stategraph` CLI and
//! its studio) without ever creating either.

use std::ops::Deref;
use std::path::Path;

use crate::shape::Shape;
use crate::{CheckpointError, Namespace, Saver, SqliteSaver, ThreadId};

/// A checkpoint store opened by an inspector: a SQLite file or a PostgreSQL schema. It
/// dereferences to the [`Saver`] it holds.
///
/// ```
/// use stategraph_checkpoints::inspect::{open_existing_read_only, Store};
/// use stategraph_checkpoints::Saver;
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("threads.db");
/// stategraph_checkpoints::SqliteSaver::open(&path)?.close()?;
/// let store = Store::File(open_existing_read_only(&path)?);
/// assert!(store.list_threads().await?.is_empty());
/// store.close()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Store {
    /// A SQLite checkpoint file.
    File(SqliteSaver),
    /// A PostgreSQL schema.
    #[cfg(feature = "postgres")]
    Postgres(crate::PostgresSaver),
}

impl Deref for Store {
    type Target = dyn Saver;
    fn deref(&self) -> &(dyn Saver + 'static) {
        match self {
            Store::File(s) => s,
            #[cfg(feature = "postgres")]
            Store::Postgres(s) => s,
        }
    }
}

impl Store {
    /// Close a file (its log folded back); a database needs nothing.
    ///
    /// # Errors
    /// As [`SqliteSaver::close`].
    pub fn close(&self) -> Result<(), CheckpointError> {
        match self {
            Store::File(s) => s.close(),
            #[cfg(feature = "postgres")]
            Store::Postgres(_) => Ok(()),
        }
    }

    /// The recorded shape of each field of a thread's namespace (none for a database,
    /// which records none).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn field_shapes(
        &self,
        thread: &ThreadId,
        ns: &Namespace,
    ) -> Result<std::collections::BTreeMap<String, Shape>, CheckpointError> {
        match self {
            Store::File(s) => s.field_shapes(thread, ns).await,
            #[cfg(feature = "postgres")]
            Store::Postgres(_) => Ok(Default::default()),
        }
    }
}

/// Whether `path` is a PostgreSQL URL (`postgres://` or `postgresql://`) rather than a file.
///
/// ```
/// use stategraph_checkpoints::inspect::is_database_url;
/// assert!(is_database_url("postgres://db/app?schema=t".as_ref()));
/// assert!(!is_database_url("threads.db".as_ref()));
/// ```
pub fn is_database_url(path: &Path) -> bool {
    path.to_str()
        .is_some_and(|s| s.starts_with("postgres://") || s.starts_with("postgresql://"))
}

/// `url` without its password, for showing: `postgres://user@host/db?schema=s`.
///
/// ```
/// use stategraph_checkpoints::inspect::url_without_password;
/// assert_eq!(url_without_password("postgres://me:s3cret@db:5432/app"), "postgres://me@db:5432/app");
/// assert_eq!(url_without_password("postgres://db/app"), "postgres://db/app");
/// ```
pub fn url_without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = match rest.find(['/', '?']) {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((user, host)) => {
            let user = user.split_once(':').map_or(user, |(u, _)| u);
            format!("{scheme}://{user}@{host}{tail}")
        }
        None => url.to_owned(),
    }
}

#[cfg(feature = "postgres")]
pub use database::{database_options, open_database};

#[cfg(feature = "postgres")]
mod database {
    use std::path::PathBuf;

    use crate::{CheckpointError, PostgresOptions, PostgresSaver, PostgresTls, TlsClientCert};

    /// The server's URL and the saver options a tool's `postgres://` URL asks for. Besides
    /// the server's own parameters, the URL may carry `schema=NAME` (default `stategraph`)
    /// and ask for TLS as libpq's do: `sslrootcert=FILE` (the CA to check the server's
    /// certificate against; `system` for the system's roots) or `sslmode=verify-full` /
    /// `verify-ca` (the system's roots unless `sslrootcert` names a file); either turns TLS
    /// on and required (decision 0062). `sslcert=FILE&sslkey=FILE` present a client
    /// certificate. These are taken out of the URL the server sees. The schema is never
    /// created (`create_schema: false`), and the pool is small (2).
    ///
    /// ```
    /// use stategraph_checkpoints::inspect::database_options;
    /// use stategraph_checkpoints::PostgresTls;
    /// let (url, options) = database_options("postgres://db/app?schema=t&sslmode=verify-full&application_name=x")?;
    /// assert_eq!(url, "postgres://db/app?application_name=x");
    /// assert_eq!(options.schema, "t");
    /// assert!(matches!(options.tls, PostgresTls::SystemRoots));
    /// assert!(!options.create_schema);
    /// # Ok::<(), stategraph_checkpoints::CheckpointError>(())
    /// ```
    ///
    /// # Errors
    /// [`CheckpointError::TlsSetup`] for `sslcert` without `sslkey` or the other way round.
    pub fn database_options(url: &str) -> Result<(String, PostgresOptions), CheckpointError> {
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut schema = "stategraph".to_owned();
        let (mut root, mut verify) = (None, false);
        let (mut cert, mut key) = (None, None);
        let mut rest = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("schema", name)) => schema = name.to_owned(),
                Some(("sslrootcert", path)) => root = Some(path.to_owned()),
                Some(("sslmode", "verify-full" | "verify-ca")) => verify = true,
                Some(("sslcert", path)) => cert = Some(PathBuf::from(path)),
                Some(("sslkey", path)) => key = Some(PathBuf::from(path)),
                _ => rest.push(pair),
            }
        }
        let tls_client_cert = match (cert, key) {
            (None, None) => None,
            (Some(cert), Some(key)) => Some(TlsClientCert { cert, key }),
            (Some(_), None) | (None, Some(_)) => {
                return Err(CheckpointError::TlsSetup {
                    what: "the URL's client certificate".to_owned(),
                    detail: "a client certificate needs both sslcert=FILE and sslkey=FILE in \
                             the URL"
                        .to_owned(),
                })
            }
        };
        let tls = match (root.as_deref(), verify) {
            (Some("system"), _) | (None, true) => PostgresTls::SystemRoots,
            (Some(path), _) => PostgresTls::CaFile(path.into()),
            (None, false) => PostgresTls::Off,
        };
        let server = if rest.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", rest.join("&"))
        };
        let options = PostgresOptions {
            schema,
            pool_size: 2,
            create_schema: false,
            tls,
            tls_client_cert,
            ..PostgresOptions::default()
        };
        Ok((server, options))
    }

    /// Connect to the schema a tool's `postgres://` URL names, as [`database_options`]
    /// reads the URL, without creating it.
    ///
    /// # Errors
    /// As [`database_options`] and [`PostgresSaver::connect_with`]; a schema without the
    /// saver's tables is an integrity error naming `<schema>.sg_meta`.
    pub async fn open_database(url: &str) -> Result<PostgresSaver, CheckpointError> {
        let (server, options) = database_options(url)?;
        PostgresSaver::connect_with(&server, options).await
    }
}
