//! `--help`: every command and the exit codes.

use crate::support::*;

#[test]
fn help_lists_every_command_and_the_exit_codes() {
    let help = sg(&["--help"]).ok().stdout;
    for cmd in [
        "threads", "history", "show", "diff", "fork", "verify", "prune", "runs", "run", "trim-log",
        "--json",
    ] {
        assert!(help.contains(cmd), "{cmd} missing from:\n{help}");
    }
    assert!(help.contains("Exit status"), "{help}");
    let fork = sg(&["fork", "--help"]).ok().stdout;
    assert!(fork.contains("--set <PATH=JSON>"), "{fork}");
    assert!(fork.contains("--to <TO>"), "{fork}");
    sg(&["frobnicate"]).fails(2);
    sg(&["history"]).fails(2);
}
