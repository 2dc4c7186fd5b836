//! Building the deferred setup and its catalog hash.

use serde_json::json;
use stategraph_nodes::deferred::{catalog_hash, DeferredSetup, TOOL_SEARCH};
use stategraph_nodes::prelude::*;

use crate::support::*;

#[test]
fn setup_is_absent_without_deferrable_candidates() {
    let specs = [
        ToolSpec::new("calc", "", ToolSource::Config),
        ToolSpec::new("web", "", ToolSource::BuiltIn),
        mcp("not_deferred", "").deferrable(false),
    ];
    assert!(DeferredSetup::build(&specs).is_none());
    assert!(DeferredSetup::build(&[]).is_none());
}

#[test]
fn deferred_set_is_the_deferrable_tag_not_the_source() {
    let specs = [
        ToolSpec::new("cfg_deferred", "", ToolSource::Config).deferrable(true),
        mcp("mcp_eager", "").deferrable(false),
        mcp("mcp_default", ""),
    ];
    assert_eq!(setup(&specs).names(), ["cfg_deferred", "mcp_default"]);
}

#[test]
fn catalog_keeps_candidate_order() {
    let specs = [
        mcp("zeta", ""),
        ToolSpec::new("calc", "", ToolSource::Config),
        mcp("alpha", ""),
    ];
    assert_eq!(setup(&specs).names(), ["zeta", "alpha"]);
}

#[test]
fn setup_present_means_tool_names_and_hash_present() {
    let s = setup(&[mcp("a", "")]);
    assert!(!s.names().is_empty());
    assert_eq!(s.tool_search().spec().name, TOOL_SEARCH);
    assert_eq!(s.catalog_hash().len(), 16);
    assert!(s.catalog_hash().chars().all(|c| c.is_ascii_hexdigit()));
}

#[test]
fn catalog_hash_does_not_depend_on_input_order() {
    let (a, b, c) = (mcp("a", "one"), mcp("b", "two"), mcp("c", "three"));
    let h = catalog_hash(&[a.clone(), b.clone(), c.clone()]);
    assert_eq!(h, catalog_hash(&[c.clone(), a.clone(), b.clone()]));
    assert_eq!(h, setup(&[b, c, a]).catalog_hash());
}

#[test]
fn catalog_hash_changes_with_membership() {
    let (a, b) = (mcp("a", "one"), mcp("b", "two"));
    let both = catalog_hash(&[a.clone(), b.clone()]);
    assert_ne!(both, catalog_hash(std::slice::from_ref(&a)));
    assert_ne!(both, catalog_hash(&[a, b, mcp("c", "")]));
}

#[test]
fn catalog_hash_changes_with_description_or_schema() {
    let a = mcp("a", "one");
    let h = catalog_hash(std::slice::from_ref(&a));
    assert_ne!(h, catalog_hash(&[mcp("a", "one!")]));
    assert_ne!(
        h,
        catalog_hash(&[a
            .clone()
            .parameters(json!({"type": "object", "properties": {"x": {"type": "string"}}}))])
    );
    assert_ne!(h, catalog_hash(&[mcp("A", "one")]));
}

#[test]
fn catalog_hash_does_not_depend_on_json_key_order() {
    let one = mcp("a", "").parameters(
        serde_json::from_str(
            r#"{"type":"object","properties":{"x":{"type":"string"},"y":{"type":"number"}}}"#,
        )
        .unwrap(),
    );
    let two = mcp("a", "").parameters(
        serde_json::from_str(
            r#"{"properties":{"y":{"type":"number"},"x":{"type":"string"}},"type":"object"}"#,
        )
        .unwrap(),
    );
    assert_eq!(catalog_hash(&[one]), catalog_hash(&[two]));
}
