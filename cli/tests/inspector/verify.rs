//! `verify`: a clean file passes; every flipped envelope is named.

use std::path::Path;

use rusqlite::Connection;
use serde_json::json;

use crate::support::*;

/// Flip the last byte of one stored envelope; returns text the report must name.
fn flip(db: &Path, what: &str) -> String {
    let conn = Connection::open(db).expect("open");
    let flip_last = |mut data: Vec<u8>| {
        let last = data.len() - 1;
        data[last] ^= 0x01;
        data
    };
    match what {
        "blob" => {
            let (id, hash, data): (i64, Vec<u8>, Vec<u8>) = conn
                .query_row(
                    "SELECT id, hash, data FROM sg_blobs ORDER BY id LIMIT 1",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .expect("a blob");
            conn.execute(
                "UPDATE sg_blobs SET data = ?2 WHERE id = ?1",
                rusqlite::params![id, flip_last(data)],
            )
            .expect("update");
            hex(&hash)
        }
        "log part" => {
            let (log, part, hash, data): (i64, i64, Vec<u8>, Vec<u8>) = conn
                .query_row(
                    "SELECT log, part, hash, data FROM sg_log_parts WHERE data IS NOT NULL ORDER BY log, part LIMIT 1",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                )
                .expect("a log part");
            conn.execute(
                "UPDATE sg_log_parts SET data = ?3 WHERE log = ?1 AND part = ?2",
                rusqlite::params![log, part, flip_last(data)],
            )
            .expect("update");
            hex(&hash)
        }
        "body" => {
            let (seq, id, body): (i64, Vec<u8>, Vec<u8>) = conn
                .query_row(
                    "SELECT seq, id, body FROM sg_checkpoints WHERE thread = 'main' AND ns = '' ORDER BY seq LIMIT 1 OFFSET 2",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .expect("a checkpoint");
            conn.execute(
                "UPDATE sg_checkpoints SET body = ?2 WHERE seq = ?1",
                rusqlite::params![seq, flip_last(body)],
            )
            .expect("update");
            hex(&id)
        }
        "write" => {
            type Key = (String, String, Vec<u8>, Vec<u8>, i64, Vec<u8>, Vec<u8>);
            let (thread, ns, cp, task, idx, hash, data): Key = conn
                .query_row(
                    "SELECT thread, ns, checkpoint, task, idx, hash, data FROM sg_writes LIMIT 1",
                    [],
                    |r| {
                        Ok((
                            r.get(0)?,
                            r.get(1)?,
                            r.get(2)?,
                            r.get(3)?,
                            r.get(4)?,
                            r.get(5)?,
                            r.get(6)?,
                        ))
                    },
                )
                .expect("a pending write");
            conn.execute(
                "UPDATE sg_writes SET data = ?6 WHERE thread = ?1 AND ns = ?2 AND checkpoint = ?3 AND task = ?4 AND idx = ?5",
                rusqlite::params![thread, ns, cp, task, idx, flip_last(data)],
            )
            .expect("update");
            hex(&hash)
        }
        other => panic!("unknown target {other}"),
    }
}

#[test]
fn verify_passes_a_clean_file_and_names_every_flipped_envelope() {
    let (_dir, db) = fixture();
    let ran = sg(&["verify", p(&db)]).ok();
    assert!(
        ran.stdout.contains("ok: no problems found"),
        "{}",
        ran.stdout
    );
    let report = sg(&["verify", p(&db), "--json"]).ok().json();
    assert_eq!(report["ok"], true);
    assert_eq!(report["problems"], json!([]));
    let counts = &report["counts"];
    assert_eq!(counts["sqlite_ok"], true);
    assert!(counts["blobs"].as_u64().unwrap() > 0, "{counts}");
    assert!(counts["log_parts"].as_u64().unwrap() > 0, "{counts}");
    assert!(counts["writes"].as_u64().unwrap() > 0, "{counts}");
    assert_eq!(counts["checkpoints"], counts["loaded"]);
    assert_eq!(
        counts["checkpoints"].as_i64(),
        Some(count_rows(&db, "sg_checkpoints"))
    );

    for (what, table) in [
        ("blob", "sg_blobs"),
        ("log part", "sg_log_parts"),
        ("body", "sg_checkpoints"),
        ("write", "sg_writes"),
    ] {
        let (_dir, db) = fixture();
        let key = flip(&db, what);
        let ran = sg(&["verify", p(&db)]).fails(1);
        assert!(
            ran.stdout
                .lines()
                .any(|l| l.contains(table) && l.contains(&key)),
            "{what}: the report names {key} in {table}:\n{}",
            ran.stdout
        );
        assert!(ran.stderr.contains("problem(s) found"), "{ran:#?}");
        let report = sg(&["verify", p(&db), "--json"]).fails(1).json();
        assert_eq!(report["ok"], false);
        let problems = report["problems"].as_array().unwrap();
        assert!(
            problems.iter().any(|p| p["table"] == table
                && p["key"].as_str().unwrap().contains(&key)
                && p["detail"].as_str().unwrap().contains("hash")),
            "{what}: {problems:#?}"
        );
    }
}
