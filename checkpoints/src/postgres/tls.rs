//! TLS between the saver and the server: [`PostgresTls`] says whether to use it and which
//! roots to trust, [`TlsClientCert`] which certificate to present; [`Connector`] makes the pool's and the listener's connections with it
//! (rustls, the server's certificate checked against those roots and the host name).
//! Decision 0062.

use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use deadpool_postgres::{Manager, ManagerConfig};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};
use tokio_postgres::{Config, NoTls};

use crate::CheckpointError;

/// Whether the saver's connections use TLS, and which certificates they trust.
///
/// With TLS on, every connection (the pool's and the run queue's listener) must be TLS: the
/// URL's `sslmode` is raised to `require`, so a server that does not offer TLS is refused
/// rather than spoken to in the clear; the server's certificate must chain to a trusted
/// root and name the URL's host.
///
/// ```
/// use stategraph_checkpoints::{PostgresOptions, PostgresTls};
/// let options = PostgresOptions {
///     tls: PostgresTls::CaFile("/etc/ssl/db-ca.pem".into()),
///     ..PostgresOptions::default()
/// };
/// assert!(matches!(options.tls, PostgresTls::CaFile(_)));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum PostgresTls {
    /// Plain TCP (the default). A URL asking for `sslmode=require` fails to connect.
    #[default]
    Off,
    /// TLS, trusting the operating system's root certificates.
    SystemRoots,
    /// TLS, trusting the certificates of this PEM file (a private CA, or the server's own
    /// self-signed certificate).
    CaFile(PathBuf),
}

/// A certificate the saver presents to the server, for servers that authenticate clients by
/// certificate (`cert` in `pg_hba.conf`, where the certificate's common name is the user) or
/// require one (`clientcert=verify-full`). Used only with TLS on.
///
/// ```
/// use stategraph_checkpoints::{PostgresOptions, PostgresTls, TlsClientCert};
/// let options = PostgresOptions {
///     tls: PostgresTls::CaFile("/etc/ssl/db-ca.pem".into()),
///     tls_client_cert: Some(TlsClientCert {
///         cert: "/etc/ssl/app.crt".into(),
///         key: "/etc/ssl/app.key".into(),
///     }),
///     ..PostgresOptions::default()
/// };
/// assert!(options.tls_client_cert.is_some());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsClientCert {
    /// A PEM file of the certificate, followed by any intermediate certificates.
    pub cert: PathBuf,
    /// A PEM file of its private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// How the saver opens connections: in the clear, or with rustls.
#[derive(Clone)]
pub(crate) enum Connector {
    Plain,
    Tls(MakeRustls),
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Connector::Plain => "Connector::Plain",
            Connector::Tls(_) => "Connector::Tls",
        })
    }
}

impl Connector {
    /// The connector `tls` asks for, presenting `client` to the server if given.
    ///
    /// # Errors
    /// [`CheckpointError::TlsSetup`] for a CA file that cannot be read or holds no
    /// certificate, a system without root certificates, a client certificate or key that
    /// cannot be read or do not match, or a client certificate with TLS off.
    pub(crate) fn new(
        tls: &PostgresTls,
        client: Option<&TlsClientCert>,
    ) -> Result<Self, CheckpointError> {
        let roots = match (tls, client) {
            (PostgresTls::Off, None) => return Ok(Connector::Plain),
            (PostgresTls::Off, Some(c)) => {
                return Err(setup(
                    &format!("presenting the client certificate {}", c.cert.display()),
                    "TLS is off (PostgresOptions::tls); a client certificate needs it on"
                        .to_owned(),
                ))
            }
            (PostgresTls::SystemRoots, _) => system_roots()?,
            (PostgresTls::CaFile(path), _) => file_roots(path)?,
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| setup("choosing the TLS versions", e.to_string()))?
            .with_root_certificates(roots);
        let config = match client {
            None => builder.with_no_client_auth(),
            Some(c) => {
                let (chain, key) = client_identity(c)?;
                builder.with_client_auth_cert(chain, key).map_err(|e| {
                    setup(
                        &format!(
                            "pairing the client certificate {} with the key {}",
                            c.cert.display(),
                            c.key.display()
                        ),
                        e.to_string(),
                    )
                })?
            }
        };
        Ok(Connector::Tls(MakeRustls(Arc::new(config))))
    }

    /// `config` as this connector must use it: TLS required when TLS is on.
    pub(crate) fn configure(&self, mut config: Config) -> Config {
        if let Connector::Tls(_) = self {
            config.ssl_mode(SslMode::Require);
        }
        config
    }

    /// A pool manager for `config` (already [`configured`](Connector::configure)).
    pub(crate) fn manager(&self, config: Config, manager: ManagerConfig) -> Manager {
        match self {
            Connector::Plain => Manager::from_config(config, NoTls, manager),
            Connector::Tls(tls) => Manager::from_config(config, tls.clone(), manager),
        }
    }
}

fn setup(what: &str, detail: String) -> CheckpointError {
    CheckpointError::TlsSetup {
        what: what.to_owned(),
        detail,
    }
}

fn system_roots() -> Result<RootCertStore, CheckpointError> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let why = found
            .errors
            .first()
            .map_or_else(|| "none found".to_owned(), ToString::to_string);
        return Err(setup("loading the system's root certificates", why));
    }
    Ok(roots)
}

/// The certificates of the PEM file `path`, at least one; errors say `what` was read.
fn pem_certs(path: &PathBuf, what: &str) -> Result<Vec<CertificateDer<'static>>, CheckpointError> {
    let what = || format!("{what} {}", path.display());
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| setup(&what(), e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| setup(&what(), e.to_string()))?;
    if certs.is_empty() {
        return Err(setup(&what(), "no certificate in it".to_owned()));
    }
    Ok(certs)
}

fn file_roots(path: &PathBuf) -> Result<RootCertStore, CheckpointError> {
    let certs = pem_certs(path, "reading the CA file")?;
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(setup(
            &format!("reading the CA file {}", path.display()),
            "no certificate in it can be used".to_owned(),
        ));
    }
    Ok(roots)
}

/// The certificate chain and private key of `client`, read from their PEM files.
fn client_identity(
    client: &TlsClientCert,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), CheckpointError> {
    let chain = pem_certs(&client.cert, "reading the client certificate")?;
    let key = PrivateKeyDer::from_pem_file(&client.key).map_err(|e| {
        setup(
            &format!("reading the client key {}", client.key.display()),
            e.to_string(),
        )
    })?;
    Ok((chain, key))
}

/// tokio-postgres's hook for TLS: a rustls client configuration shared by every connection.
#[derive(Clone)]
pub(crate) struct MakeRustls(Arc<ClientConfig>);

impl<S> MakeTlsConnect<S> for MakeRustls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsConnect;
    type Error = rustls::pki_types::InvalidDnsNameError;

    fn make_tls_connect(&mut self, host: &str) -> Result<RustlsConnect, Self::Error> {
        Ok(RustlsConnect {
            name: ServerName::try_from(host.to_owned())?,
            connector: tokio_rustls::TlsConnector::from(self.0.clone()),
        })
    }
}

/// One connection's handshake, for the host it was made for.
pub(crate) struct RustlsConnect {
    name: ServerName<'static>,
    connector: tokio_rustls::TlsConnector,
}

impl<S> TlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<RustlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let tls = self.connector.connect(self.name, stream).await?;
            Ok(RustlsStream(tls))
        })
    }
}

/// A connection's TLS stream.
pub(crate) struct RustlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for RustlsStream<S> {
    /// No channel binding: SCRAM authentication goes without `-PLUS`, as over `NoTls`.
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}
