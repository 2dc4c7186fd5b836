//! The inspector on a PostgreSQL saver's tables: a `postgres://` URL (with `?schema=NAME`) in
//! place of the file. The same fixture threads are written to a file and to a schema, and
//! every read command answers the same on both; `prune` and `fork` write through the URL;
//! `verify` finds a damaged value. Without `STATEGRAPH_PG_URL` each test says how to start
//! the server and skips (it fails under `CI=true`).

use std::sync::Arc;

use serde_json::Value;
use stategraph::checkpoints::{PostgresOptions, PostgresSaver};

use crate::support::{doc_graph_on, fixture, p, runtime, sg, write_fixture};

/// The value of `var`; `None` (after saying `how` to get it) when unset, a failure under
/// `CI=true`.
fn from_env(var: &str, how: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(value) if !value.is_empty() => Some(value),
        _ => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("{var} is not set and CI=true: {how}");
            }
            eprintln!("skipped: {var} is not set; {how}");
            None
        }
    }
}

fn url() -> Option<String> {
    let how = "start a throwaway server with: eval \"export $(.ci/postgres.sh | tail -n 1)\"";
    from_env("STATEGRAPH_PG_URL", how)
}

/// A schema with the fixture's threads; dropped when the guard goes.
struct Schema {
    saver: PostgresSaver,
    url: String,
}

impl Schema {
    fn new(base: &str, name: &str) -> Self {
        let schema = format!("cli_{name}_{}", std::process::id());
        let saver = runtime().block_on(async {
            let options = PostgresOptions {
                schema: schema.clone(),
                pool_size: 2,
                ..PostgresOptions::default()
            };
            let saver = PostgresSaver::connect_with(base, options)
                .await
                .expect("connect");
            saver.drop_schema().await.expect("drop an old schema");
            let options = PostgresOptions {
                schema: schema.clone(),
                pool_size: 2,
                ..PostgresOptions::default()
            };
            PostgresSaver::connect_with(base, options)
                .await
                .expect("connect")
        });
        write_fixture(doc_graph_on(Arc::new(saver.clone())));
        Schema {
            saver,
            url: format!("{base}?schema={schema}"),
        }
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let saver = self.saver.clone();
        let _ = std::thread::spawn(move || runtime().block_on(saver.drop_schema())).join();
    }
}

/// `v` without what differs between two runs of the same graph (ids, times, parents), and
/// with a step's first items of a list shown alike: the file reports them as the list
/// replaced by those items, the database as those items appended to nothing.
fn without_ids(v: &Value) -> Value {
    if let (Some("replaced"), Some(Value::Array(items))) = (v["kind"].as_str(), v.get("value")) {
        return serde_json::json!({ "field": v["field"], "items": items });
    }
    if let (Some("appended"), Some(items)) = (v["kind"].as_str(), v.get("values")) {
        return serde_json::json!({ "field": v["field"], "items": items });
    }
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| {
                    !matches!(
                        k.as_str(),
                        "id" | "parent"
                            | "checkpoint"
                            | "created_at"
                            | "updated_at"
                            | "short"
                            | "created_at_ms"
                            | "updated_at_ms"
                            | "file"
                            | "anchor"
                            | "from"
                            | "to"
                    )
                })
                .map(|(k, v)| (k.clone(), without_ids(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_ids).collect()),
        other => other.clone(),
    }
}

#[test]
fn read_commands_answer_the_same_on_a_database_as_on_a_file() {
    let Some(base) = url() else { return };
    let (_dir, db) = fixture();
    let schema = Schema::new(&base, "same");
    for args in [
        vec!["threads"],
        vec!["history", "-t", "main"],
        vec!["history", "-t", "paused"],
        vec!["show", "-t", "main"],
        vec!["show", "-t", "main", "-c", "step:1"],
        vec!["show", "-t", "paused", "--field", "log"],
        vec!["diff", "-t", "main", "step:0", "step:2"],
        vec!["runs", "-t", "main"],
    ] {
        let on = |target: &str| {
            let mut all = vec![args[0], target];
            all.extend(&args[1..]);
            all.push("--json");
            sg(&all).ok().json()
        };
        let (file, database) = (on(p(&db)), on(&schema.url));
        assert_eq!(
            without_ids(&file),
            without_ids(&database),
            "{args:?} differs between a file and a database"
        );
    }
}

#[test]
fn prune_and_fork_write_through_the_url() {
    let Some(base) = url() else { return };
    let schema = Schema::new(&base, "write");
    let before = sg(&["history", &schema.url, "-t", "main", "--json"])
        .ok()
        .json();
    let n = before.as_array().map_or(0, Vec::len);
    assert!(n > 3, "{before}");
    let pruned = sg(&["prune", &schema.url, "-t", "main", "--keep", "2", "--json"])
        .ok()
        .json();
    assert_eq!(pruned["kept"], 2);
    assert_eq!(
        pruned["deleted"].as_u64(),
        Some(n as u64 - 2 + count_sub(&schema))
    );
    let after = sg(&["history", &schema.url, "-t", "main", "--json"])
        .ok()
        .json();
    assert_eq!(after.as_array().map_or(0, Vec::len), 2);
    sg(&[
        "fork",
        &schema.url,
        "-t",
        "paused",
        "-c",
        "step:1",
        "--to",
        "copy",
        "--set",
        "/count=41",
    ])
    .ok();
    let copy = sg(&["show", &schema.url, "-t", "copy", "--json"])
        .ok()
        .json();
    assert_eq!(copy["state"]["count"], 41, "{copy}");
    // A schema that does not exist is an error, and is not created.
    let missing = format!("{base}?schema=cli_no_such_schema");
    let ran = sg(&["threads", &missing]).fails(1);
    assert!(
        ran.stderr.contains("no stategraph tables"),
        "{}",
        ran.stderr
    );
}

/// Checkpoints of `main` outside its root namespace (prune counts every namespace).
fn count_sub(schema: &Schema) -> u64 {
    let threads = sg(&["threads", &schema.url, "--json"]).ok().json();
    let main = threads
        .as_array()
        .and_then(|a| a.iter().find(|t| t["thread"] == "main"))
        .cloned()
        .unwrap_or_default();
    main["namespaces"]
        .as_array()
        .map(|ns| {
            ns.iter()
                .filter(|n| n["ns"] != "(root)")
                .map(|n| n["checkpoints"].as_u64().unwrap_or(0))
                .sum()
        })
        .unwrap_or(0)
}

#[test]
fn verify_passes_a_sound_schema_and_names_a_damaged_value() {
    let Some(base) = url() else { return };
    let schema = Schema::new(&base, "verify");
    let ok = sg(&["verify", &schema.url, "--json"]).ok().json();
    assert_eq!(ok["ok"], true, "{ok}");
    assert!(ok["counts"]["loaded"].as_u64().unwrap_or(0) > 5, "{ok}");
    let name = schema.saver.schema().to_owned();
    runtime().block_on(async {
        let (client, conn) = tokio_postgres::connect(&base, tokio_postgres::NoTls)
            .await
            .expect("connect");
        tokio::spawn(conn);
        client
            .batch_execute(&format!(
                "UPDATE \"{name}\".sg_values SET data = set_byte(data, 5, get_byte(data, 5) # 1) \
                 WHERE hash = (SELECT hash FROM \"{name}\".sg_values ORDER BY length(data) DESC LIMIT 1)"
            ))
            .await
            .expect("damage a value");
    });
    let bad = sg(&["verify", &schema.url, "--json"]).fails(1);
    let report = bad.json();
    assert_eq!(report["ok"], false);
    let problems = report["problems"].as_array().cloned().unwrap_or_default();
    assert!(
        problems.iter().any(|p| p["table"] == "sg_values"
            && p["detail"].as_str().is_some_and(|d| d.contains("hash"))),
        "{report}"
    );
    assert!(
        problems.iter().any(|p| p["table"] == "sg_checkpoints"),
        "the checkpoints that refer to it fail to load: {report}"
    );
}

#[test]
fn runs_lists_queued_runs_with_their_status_and_reason() {
    use stategraph::checkpoints::{Multitask, RunEnd, ThreadId};
    let Some(base) = url() else { return };
    let schema = Schema::new(&base, "queue");
    let queue = schema.saver.queue();
    let thread = ThreadId::new("queued").expect("thread id");
    let (done, failed, waiting) = runtime().block_on(async {
        let mut ids = Vec::new();
        for i in 0..3 {
            let input = serde_json::json!({ "n": i });
            ids.push(
                queue
                    .submit(&thread, input, Multitask::Enqueue)
                    .await
                    .expect("submit"),
            );
        }
        let lease_for = std::time::Duration::from_secs(30);
        for end in [
            RunEnd::Success,
            RunEnd::Failed("the model timed out".to_owned()),
        ] {
            let lease = queue
                .lease("w", lease_for)
                .await
                .expect("lease")
                .expect("a run");
            queue.finish(&lease, end).await.expect("finish");
        }
        (ids[0].clone(), ids[1].clone(), ids[2].clone())
    });
    let listed = sg(&["runs", &schema.url, "--thread", "queued", "--json"])
        .ok()
        .json();
    let status_of = |run: &stategraph::checkpoints::RunId| {
        listed
            .as_array()
            .and_then(|a| a.iter().find(|r| r["run_id"] == run.as_str()))
            .map(|r| (r["status"].clone(), r["reason"].clone()))
    };
    assert_eq!(
        status_of(&done),
        Some((Value::from("success"), Value::Null))
    );
    assert_eq!(
        status_of(&failed),
        Some((Value::from("error"), Value::from("the model timed out")))
    );
    assert_eq!(
        status_of(&waiting),
        Some((Value::from("pending"), Value::Null))
    );
    let text = sg(&["runs", &schema.url, "--thread", "queued"]).ok().stdout;
    assert!(
        text.contains("the model timed out") && text.contains("pending"),
        "{text}"
    );
}

#[test]
fn trim_log_deletes_the_write_log_of_ended_runs_older_than_asked_and_refuses_a_file() {
    use stategraph::checkpoints::{Multitask, RunEnd, ThreadId};
    let Some(base) = url() else { return };
    let schema = Schema::new(&base, "trim");
    let queue = schema.saver.queue();
    let thread = ThreadId::new("trimmed").expect("thread id");
    let logged = || {
        runtime()
            .block_on(queue.write_log(&thread))
            .expect("log")
            .len()
    };
    runtime().block_on(async {
        queue
            .submit(&thread, serde_json::json!({}), Multitask::Enqueue)
            .await
            .expect("submit");
        let lease = queue
            .lease("w", std::time::Duration::from_secs(30))
            .await
            .expect("lease")
            .expect("a run");
        queue.finish(&lease, RunEnd::Success).await.expect("finish");
    });
    assert_eq!(logged(), 1, "the run's end is logged");
    let kept = sg(&["trim-log", &schema.url, "--older-than", "1h", "--json"])
        .ok()
        .json();
    assert_eq!(kept["deleted"], 0, "it ended moments ago");
    assert_eq!(logged(), 1);
    let text = sg(&["trim-log", &schema.url, "--older-than", "0s"])
        .ok()
        .stdout;
    assert!(text.starts_with("deleted 1 write-log row(s)"), "{text}");
    assert_eq!(logged(), 0);
    let (_dir, db) = fixture();
    let refused = sg(&["trim-log", p(&db), "--older-than", "1d"]).fails(2);
    assert!(refused.stderr.contains("postgres:// URL"), "{refused:?}");
    let bad = sg(&["trim-log", &schema.url, "--older-than", "3 weeks"]).fails(2);
    assert!(bad.stderr.contains("s, m, h or d"), "{bad:?}");
}

/// The CA of `.ci/postgres.sh`'s server certificate (`STATEGRAPH_PG_CA`, printed by
/// `.ci/postgres.sh ca`).
fn ca() -> Option<String> {
    let how = "export the server's CA with: eval \"export $(.ci/postgres.sh ca | tail -n 1)\"";
    from_env("STATEGRAPH_PG_CA", how)
}

#[test]
fn a_url_with_sslrootcert_reads_over_tls_and_refuses_a_server_another_ca_signed() {
    let (Some(base), Some(ca)) = (url(), ca()) else {
        return;
    };
    let schema = Schema::new(&base, "tls");
    let with_root = |root: &str| format!("{}&sslrootcert={root}", schema.url);
    let plain = sg(&["threads", &schema.url, "--json"]).ok().json();
    let over_tls = sg(&["threads", &with_root(&ca), "--json"]).ok().json();
    assert_eq!(plain, over_tls, "the same threads over TLS");
    let unrelated = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/unrelated-ca.pem"
    );
    let refused = sg(&["threads", &with_root(unrelated), "--json"]);
    assert_ne!(refused.code, 0, "{}", refused.stdout);
    assert!(
        refused.stderr.contains("certificate"),
        "says why: {}",
        refused.stderr
    );
}

/// The certificate and key `.ci/postgres.sh client` prints, for the user `sg_cert`, whom the
/// server admits by client certificate only.
fn client_cert() -> Option<(String, String)> {
    let how = "export the client certificate with: \
               eval \"export $(.ci/postgres.sh client | tail -n 1)\"";
    Some((
        from_env("STATEGRAPH_PG_CLIENT_CERT", how)?,
        from_env("STATEGRAPH_PG_CLIENT_KEY", how)?,
    ))
}

#[test]
fn a_url_with_sslcert_and_sslkey_logs_in_by_certificate_and_one_without_the_other_is_refused() {
    let (Some(base), Some(ca), Some((cert, key))) = (url(), ca(), client_cert()) else {
        return;
    };
    let schema = Schema::new(&base, "tls_cert");
    let as_cert_user = schema.url.replacen("postgres@", "sg_cert@", 1);
    let with = |extra: &str| format!("{as_cert_user}&sslrootcert={ca}{extra}");
    let plain = sg(&["threads", &schema.url, "--json"]).ok().json();
    let by_cert = sg(&[
        "threads",
        &with(&format!("&sslcert={cert}&sslkey={key}")),
        "--json",
    ])
    .ok()
    .json();
    assert_eq!(plain, by_cert, "the same threads, logged in by certificate");
    let no_cert = sg(&["threads", &with(""), "--json"]);
    assert_ne!(no_cert.code, 0);
    assert!(
        no_cert.stderr.contains("client certificate"),
        "says why: {}",
        no_cert.stderr
    );
    let half = sg(&["threads", &with(&format!("&sslcert={cert}")), "--json"]);
    assert_eq!(half.code, 2, "a usage error: {}", half.stderr);
    assert!(half.stderr.contains("sslkey"), "{}", half.stderr);
}

#[test]
fn studio_serves_a_postgres_url_and_refuses_half_a_client_certificate() {
    let Some(base) = url() else { return };
    let schema = Schema::new(&base, "studio");
    let (mut child, line, addr, token) = crate::studio::start_studio(&[&schema.url, "--read-only"]);
    let threads = crate::studio::get(&addr, "/api/threads", Some(&token));
    let info = crate::studio::get(&addr, "/api/info", Some(&token));
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        line.starts_with("stategraph studio (read-only): open http://"),
        "{line}"
    );
    assert!(threads.starts_with("HTTP/1.1 200"), "{threads}");
    assert!(threads.contains("\"thread\":\"main\""), "{threads}");
    assert!(info.contains("\"store\":\"postgres\""), "{info}");
    // As every command: half a client certificate is a usage error.
    let half = sg(&["studio", &format!("{}&sslcert=c.pem", schema.url)]).fails(2);
    assert!(half.stderr.contains("sslkey"), "{}", half.stderr);
}
