//! Searching the deferred catalog.

use stategraph_nodes::deferred::MAX_RESULTS;
use stategraph_nodes::prelude::*;

use crate::support::*;

#[test]
fn empty_or_whitespace_query_finds_nothing() {
    let s = five_plus();
    assert!(s.search("").is_empty());
    assert!(s.search("   \t\n").is_empty());
}

#[test]
fn query_is_trimmed_before_matching() {
    let s = five_plus();
    assert_eq!(search(&s, "  select:calendar  "), ["calendar"]);
    assert_eq!(search(&s, "  +slack  "), ["slack_post"]);
}

#[test]
fn select_returns_catalog_order_not_request_order() {
    let s = five_plus();
    assert_eq!(
        search(&s, "select:calendar,github_issues,slack_post"),
        ["github_issues", "slack_post", "calendar"]
    );
}

#[test]
fn select_matches_exact_names_case_sensitively() {
    let s = five_plus();
    assert!(s.search("select:Calendar").is_empty());
    assert!(s.search("select:calend").is_empty());
    assert_eq!(
        search(&s, "select: calendar , slack_post "),
        ["slack_post", "calendar"]
    );
}

#[test]
fn select_ignores_unknown_names() {
    let s = five_plus();
    assert_eq!(search(&s, "select:nope,calendar,,also_nope"), ["calendar"]);
}

#[test]
fn select_is_not_capped() {
    let s = five_plus();
    let all = s.names().join(",");
    assert_eq!(search(&s, &format!("select:{all}")).len(), 7);
}

#[test]
fn select_prefix_is_case_sensitive() {
    // `SELECT:calendar` is an ordinary regex query: it matches nothing here.
    assert!(five_plus().search("SELECT:calendar").is_empty());
}

#[test]
fn plus_term_keeps_tools_whose_name_contains_term_case_insensitively() {
    let s = five_plus();
    assert_eq!(search(&s, "+GITHUB"), ["github_issues", "github_prs"]);
    // the term is matched against the name only, not the description
    assert!(s.search("+jupyter").is_empty());
}

#[test]
fn plus_term_ranks_by_rest_matches_stably_and_keeps_zero_matches() {
    let s = setup(&[
        mcp("db_read", "read rows"),
        mcp("db_write", "write rows, write tables, write"),
        mcp("db_admin", "admin"),
        mcp("db_copy", "write once"),
    ]);
    // db_write: 3 (+ its name) = 4 matches, db_copy: 1; the zero-match ones keep catalog order.
    assert_eq!(
        search(&s, "+db WRITE"),
        ["db_write", "db_copy", "db_read", "db_admin"]
    );
}

#[test]
fn plus_term_rest_is_one_regex() {
    let s = setup(&[mcp("db_a", "alpha"), mcp("db_b", "beta beta")]);
    assert_eq!(search(&s, "+db alpha|beta"), ["db_b", "db_a"]);
}

#[test]
fn plus_term_is_capped_at_five() {
    let specs: Vec<ToolSpec> = (0..8).map(|i| mcp(&format!("tool_{i}"), "")).collect();
    let s = setup(&specs);
    assert_eq!(MAX_RESULTS, 5);
    assert_eq!(
        search(&s, "+tool"),
        ["tool_0", "tool_1", "tool_2", "tool_3", "tool_4"]
    );
}

#[test]
fn bare_plus_finds_nothing() {
    let s = five_plus();
    assert!(s.search("+").is_empty());
    assert!(s.search("+    ").is_empty());
}

#[test]
fn regex_scores_name_matches_above_description_matches() {
    let s = five_plus();
    // "issue" is in the names of github_issues and issue_tracker (2), and only in the
    // description of jira_search (1).
    assert_eq!(
        search(&s, "issue"),
        ["github_issues", "issue_tracker", "jira_search"]
    );
}

#[test]
fn regex_ties_keep_catalog_order() {
    let s = setup(&[
        mcp("b_tool", "x"),
        mcp("a_tool", "x"),
        mcp("c", "tool in description"),
    ]);
    assert_eq!(search(&s, "tool"), ["b_tool", "a_tool", "c"]);
}

#[test]
fn regex_search_is_case_insensitive() {
    assert_eq!(search(&five_plus(), "SLACK"), ["slack_post"]);
}

#[test]
fn regex_search_is_capped_at_five() {
    let specs: Vec<ToolSpec> = (0..8).map(|i| mcp(&format!("t{i}"), "common")).collect();
    assert_eq!(setup(&specs).search("common").len(), 5);
}

#[test]
fn regex_query_is_a_real_regex() {
    assert_eq!(
        search(&five_plus(), "^(slack|jira)_"),
        ["slack_post", "jira_search"]
    );
}

#[test]
fn invalid_regex_falls_back_to_literal() {
    let s = setup(&[
        mcp("sum", "compute sum( of numbers"),
        mcp("other", "sum of things"),
    ]);
    assert_eq!(search(&s, "sum("), ["sum"]);
    assert!(s.search("[unclosed").is_empty());
}

#[test]
fn multi_word_query_is_one_phrase_not_keywords() {
    // Mirrors DeerFlow: the query is not split into keywords.
    let s = setup(&[
        mcp("nb", "Jupyter notebook runner"),
        mcp("nb2", "notebook jupyter bridge"),
    ]);
    assert_eq!(search(&s, "notebook jupyter"), ["nb2"]);
    assert_eq!(search(&s, "notebook|jupyter"), ["nb", "nb2"]);
}
