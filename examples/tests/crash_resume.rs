//! The `crash_resume` example's command line: arguments that are not UTF-8 are a clear error
//! (or, for a path, a path), never a panic.

#[allow(dead_code)] // only the argument parser is used here
#[path = "../crash_resume.rs"]
mod example;

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

/// `--thread` with the bytes `t\xff`, which are not UTF-8.
fn not_utf8() -> OsString {
    OsString::from_vec(vec![b't', 0xff])
}

#[test]
fn a_thread_that_is_not_utf8_is_a_clear_error() {
    let given: Vec<OsString> = vec![
        "--db".into(),
        "t.db".into(),
        "--thread".into(),
        not_utf8(),
        "--steps".into(),
        "3".into(),
    ];
    let got = example::parse_args(given.into_iter());
    match got {
        Err(e) => assert!(e.contains("--thread must be valid UTF-8"), "{e}"),
        Ok(a) => panic!("accepted: {a:?}"),
    }
}

#[test]
fn a_db_path_that_is_not_utf8_is_a_path() -> Result<(), String> {
    let given: Vec<OsString> = vec![
        "--db".into(),
        not_utf8(),
        "--thread".into(),
        "t".into(),
        "--steps".into(),
        "3".into(),
    ];
    let parsed = example::parse_args(given.into_iter())?;
    assert_eq!(parsed.db.into_os_string(), not_utf8());
    Ok(())
}

#[test]
fn a_flag_that_is_not_utf8_is_an_unknown_argument() {
    let got = example::parse_args(vec![not_utf8()].into_iter());
    assert!(
        matches!(&got, Err(e) if e.starts_with("unknown argument")),
        "{got:?}"
    );
}
