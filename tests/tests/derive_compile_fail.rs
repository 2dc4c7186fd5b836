//! Compile-fail tests of `#[derive(State)]`: every misuse gets an error that says what is
//! wrong and points at it. The expected messages are in `tests/ui/*.stderr`; regenerate them
//! with `TRYBUILD=overwrite cargo test -p stategraph-tests --test derive_compile_fail` and
//! review the diff.

#[test]
fn derive_state_misuse_fails_to_compile_with_a_clear_error() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("ui/*.rs");
}
