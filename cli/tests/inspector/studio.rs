//! `studio`: the binary prints a loopback URL with a token, serves the API to a request that
//! carries it and refuses one that does not (the API itself is tested in `studio/tests/`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

use crate::support::*;

/// `GET path` on `addr` with `cookie`; the whole response.
pub(crate) fn get(addr: &str, path: &str, cookie: Option<&str>) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect to the studio");
    let cookie = cookie.map_or(String::new(), |c| format!("Cookie: sg_studio={c}\r\n"));
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{cookie}Connection: close\r\n\r\n"
    )
    .expect("send");
    let mut out = String::new();
    stream.read_to_string(&mut out).expect("read");
    out
}

/// `stategraph studio ARGS…` started: the child, its first line, its address and token.
pub(crate) fn start_studio(args: &[&str]) -> (std::process::Child, String, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stategraph"))
        .arg("studio")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the studio");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("stdout");
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the URL");
    let url = line
        .trim()
        .rsplit(' ')
        .next()
        .unwrap_or_default()
        .to_owned();
    let rest = url
        .strip_prefix("http://127.0.0.1:")
        .unwrap_or_default()
        .to_owned();
    let (port, token) = rest.split_once("/?token=").unwrap_or_default();
    let addr = format!("127.0.0.1:{port}");
    (child, line, addr, token.to_owned())
}

#[test]
fn studio_prints_a_tokened_loopback_url_and_refuses_requests_without_the_token() {
    let (_dir, db) = fixture();
    let (mut child, line, addr, token) = start_studio(&[p(&db), "--read-only"]);
    let token = token.as_str();
    let refused = get(&addr, "/api/threads", None);
    let wrong = get(&addr, "/api/threads", Some(&"0".repeat(32)));
    let served = get(&addr, "/api/threads", Some(token));
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        line.starts_with("stategraph studio (read-only): open http://127.0.0.1:"),
        "{line}"
    );
    assert_eq!(token.len(), 32, "{line}");
    assert!(token.chars().all(|c| c.is_ascii_hexdigit()), "{line}");
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    assert!(wrong.starts_with("HTTP/1.1 401"), "{wrong}");
    assert!(served.starts_with("HTTP/1.1 200"), "{served}");
    assert!(served.contains("\"thread\":\"main\""), "{served}");
}

#[test]
fn studio_on_a_missing_file_fails_with_exit_1() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("none.db");
    let ran = sg(&["studio", p(&missing)]).fails(1);
    assert!(ran.stderr.contains("no such file"), "{ran:#?}");
    assert!(!missing.exists());
}
