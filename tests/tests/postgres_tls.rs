//! TLS to PostgreSQL (decision 0062): a saver with `PostgresTls::CaFile` talks to the server
//! only over TLS, its certificate checked against that CA — the pool's connections and the
//! run queue's listener alike — and refuses a server whose certificate another CA signed, or
//! a CA file it cannot use. Against `.ci/postgres.sh`'s server, which takes TLS and plain
//! TCP (`STATEGRAPH_PG_CA`: the CA that signed its certificate).
#![allow(missing_docs, clippy::expect_used, clippy::unwrap_used)]

#[path = "pg_support/mod.rs"]
mod pg_support;

use std::path::PathBuf;
use std::time::Duration;

use stategraph_checkpoints::{
    CheckpointError, Multitask, Namespace, PostgresOptions, PostgresSaver, PostgresTls, Saver,
    ThreadId, TlsClientCert, Wakeups,
};
use stategraph_tests::writes::{put_of, whole};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// `url` with an application name this test can find its connections by.
fn named(url: &str, app: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}application_name={app}")
}

fn with_tls(tls: PostgresTls) -> PostgresOptions {
    PostgresOptions {
        pool_size: 2,
        tls,
        ..PostgresOptions::default()
    }
}

/// The repository's fixture: a CA that signed nothing the server holds.
fn unrelated_ca() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/unrelated-ca.pem")
}

/// One server connection, as `pg_stat_activity` and `pg_stat_ssl` show it.
#[derive(Debug)]
struct Seen {
    user: String,
    ssl: bool,
    /// The client certificate's subject, empty without one.
    client_dn: String,
}

/// The connections the server holds whose application name is `app`, looked at over a
/// plain connection of the test's own.
async fn connections_named(
    url: &str,
    app: &str,
) -> Result<Vec<Seen>, Box<dyn std::error::Error + Send + Sync>> {
    let raw = pg_support::raw(url).await?;
    let rows = raw
        .query(
            "SELECT a.usename::text, s.ssl, COALESCE(s.client_dn, '') FROM pg_stat_activity a \
             JOIN pg_stat_ssl s USING (pid) WHERE a.application_name = $1",
            &[&app],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| Seen {
            user: r.get(0),
            ssl: r.get(1),
            client_dn: r.get(2),
        })
        .collect())
}

/// `saver` stores a checkpoint and loads it back, and the run queue's listening connection
/// (made as the pool's are) hears a submission; that listener, still connected.
async fn stores_loads_and_hears_a_submission(
    saver: &PostgresSaver,
) -> Result<Wakeups, Box<dyn std::error::Error + Send + Sync>> {
    let t = ThreadId::new("t")?;
    let put = put_of(&t, None, -1, vec![whole("n", "1")]);
    let id = put.checkpoint.id;
    saver.put(put).await?;
    let loaded = saver.get(&t, &Namespace::root(), None).await?;
    assert_eq!(loaded.map(|l| l.checkpoint.id), Some(id));
    let queue = saver.queue();
    let mut wakeups = queue.wakeups().await;
    assert!(wakeups.is_listening(), "the listener connected");
    queue
        .submit(&t, serde_json::json!({}), Multitask::Enqueue)
        .await?;
    assert!(wakeups.wait(Duration::from_secs(10)).await, "woken");
    Ok(wakeups)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saver_with_a_ca_file_stores_and_loads_over_tls_and_so_does_its_listener() -> TestResult {
    let (Some(url), Some(ca)) = (pg_support::url(), pg_support::ca()) else {
        return Ok(());
    };
    let app = pg_support::unique_schema("tls_app");
    let (saver, _guard) =
        pg_support::fresh_with(&named(&url, &app), "tls", with_tls(PostgresTls::CaFile(ca)))
            .await?;
    let _listening = stores_loads_and_hears_a_submission(&saver).await?;
    // Every connection of this saver the server has is encrypted, the listener among them.
    let seen = connections_named(&url, &app).await?;
    assert!(seen.len() >= 2, "pool and listener: {seen:?}");
    assert!(seen.iter().all(|c| c.ssl), "{seen:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_whose_certificate_another_ca_signed_is_refused_before_anything_is_sent(
) -> TestResult {
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let options = PostgresOptions {
        schema: pg_support::unique_schema("tls_refused"),
        ..with_tls(PostgresTls::CaFile(unrelated_ca()))
    };
    let schema = options.schema.clone();
    let refused = PostgresSaver::connect_with(&url, options).await;
    assert!(
        matches!(refused, Err(CheckpointError::Storage(_))),
        "expected a storage error, got {refused:?}"
    );
    // The cause is the certificate check (rustls: an unknown issuer).
    let told = format!("{refused:?}");
    assert!(told.contains("UnknownIssuer"), "{told}");
    // Nothing was created: the handshake failed before any statement.
    let raw = pg_support::raw(&url).await?;
    let made: bool = raw
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
            &[&schema],
        )
        .await?
        .get(0);
    assert!(!made, "schema {schema} was created");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_file_that_is_missing_or_holds_no_certificate_is_a_tls_setup_error() -> TestResult {
    let dir = tempfile::tempdir()?;
    let missing = dir.path().join("missing.pem");
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "not a certificate\n")?;
    // No server is needed: the options are checked before connecting.
    let url = "postgres://nobody@127.0.0.1:1/none";
    for (path, says) in [(&missing, "missing.pem"), (&empty, "no certificate")] {
        let r = PostgresSaver::connect_with(url, with_tls(PostgresTls::CaFile(path.clone()))).await;
        match r {
            Err(CheckpointError::TlsSetup { what, detail }) => {
                let text = format!("{what}: {detail}");
                assert!(text.contains(says), "{text}");
                assert!(what.contains(&path.display().to_string()), "{what}");
            }
            other => panic!("{}: expected TlsSetup, got {other:?}", path.display()),
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tls_a_url_that_requires_it_is_refused() -> TestResult {
    let Some(url) = pg_support::url() else {
        return Ok(());
    };
    let sep = if url.contains('?') { '&' } else { '?' };
    let options = PostgresOptions {
        schema: pg_support::unique_schema("tls_off"),
        ..with_tls(PostgresTls::Off)
    };
    let refused = PostgresSaver::connect_with(&format!("{url}{sep}sslmode=require"), options).await;
    assert!(
        matches!(refused, Err(CheckpointError::Storage(_))),
        "{refused:?}"
    );
    // Refused for the TLS it lacks, not for anything else about the server.
    let told = refused.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(told.contains("no TLS implementation"), "{told}");
    Ok(())
}

/// `url` logging in as the user the server admits by client certificate only.
fn as_cert_user(url: &str) -> String {
    url.replacen("postgres@", &format!("{}@", pg_support::CERT_USER), 1)
}

/// Options for a fresh schema over TLS checked against `ca`, presenting `client`.
fn cert_options(ca: PathBuf, client: Option<TlsClientCert>, prefix: &str) -> PostgresOptions {
    PostgresOptions {
        schema: pg_support::unique_schema(prefix),
        tls_client_cert: client,
        ..with_tls(PostgresTls::CaFile(ca))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saver_presenting_a_client_certificate_logs_in_as_its_user_pool_and_listener_alike(
) -> TestResult {
    let (Some(url), Some(ca), Some(client)) = (
        pg_support::url(),
        pg_support::ca(),
        pg_support::client_cert(),
    ) else {
        return Ok(());
    };
    let app = pg_support::unique_schema("tls_cert_app");
    let options = cert_options(ca, Some(client), "tls_cert");
    // The schema is dropped over the plain connection the guard makes as `postgres`.
    let _guard = pg_support::SchemaGuard {
        url: url.clone(),
        schema: options.schema.clone(),
    };
    let saver = PostgresSaver::connect_with(&named(&as_cert_user(&url), &app), options).await?;
    let _listening = stores_loads_and_hears_a_submission(&saver).await?;
    // The server saw each connection as the certificate's user, with that certificate.
    let seen = connections_named(&url, &app).await?;
    assert!(seen.len() >= 2, "pool and listener: {seen:?}");
    for c in &seen {
        assert_eq!(c.user, pg_support::CERT_USER, "{seen:?}");
        assert!(c.ssl, "{seen:?}");
        assert!(
            c.client_dn
                .contains(&format!("CN={}", pg_support::CERT_USER)),
            "{seen:?}"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_its_client_certificate_the_certificate_user_is_refused_saying_why() -> TestResult {
    let (Some(url), Some(ca)) = (pg_support::url(), pg_support::ca()) else {
        return Ok(());
    };
    let refused =
        PostgresSaver::connect_with(&as_cert_user(&url), cert_options(ca, None, "tls_nocert"))
            .await;
    let told = refused.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(told.contains("valid client certificate"), "{told}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_that_cannot_be_used_is_a_tls_setup_error_naming_it() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (cert, key) = (dir.path().join("app.crt"), dir.path().join("app.key"));
    let url = "postgres://nobody@127.0.0.1:1/none";
    let client = |cert: &PathBuf, key: &PathBuf| TlsClientCert {
        cert: cert.clone(),
        key: key.clone(),
    };
    // With TLS off a certificate could not be presented: refused, not ignored.
    let off = PostgresOptions {
        tls_client_cert: Some(client(&cert, &key)),
        ..with_tls(PostgresTls::Off)
    };
    // A missing certificate file; a file with no certificate; a missing key.
    std::fs::write(dir.path().join("junk.crt"), "not a certificate\n")?;
    let junk = dir.path().join("junk.crt");
    let cases = [
        (off, "TLS is off", cert.clone()),
        (
            cert_options(unrelated_ca(), Some(client(&cert, &key)), "x"),
            "app.crt",
            cert.clone(),
        ),
        (
            cert_options(unrelated_ca(), Some(client(&junk, &key)), "x"),
            "no certificate",
            junk.clone(),
        ),
        (
            cert_options(unrelated_ca(), Some(client(&unrelated_ca(), &key)), "x"),
            "client key",
            key.clone(),
        ),
    ];
    for (options, says, names) in cases {
        match PostgresSaver::connect_with(url, options).await {
            Err(CheckpointError::TlsSetup { what, detail }) => {
                let text = format!("{what}: {detail}");
                assert!(text.contains(says), "{text}");
                assert!(what.contains(&names.display().to_string()), "{text}");
            }
            other => panic!("{says}: expected TlsSetup, got {other:?}"),
        }
    }
    Ok(())
}
