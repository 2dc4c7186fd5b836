//! Properties of search and the filter.

use proptest::prelude::*;
use serde_json::json;
use stategraph_nodes::prelude::*;
use stategraph_nodes::stategraph::reducers::Promoted;
use stategraph_nodes::ToolPolicy;

use crate::support::*;

fn catalog_strategy() -> impl Strategy<Value = (Vec<(String, bool)>, Vec<usize>, bool)> {
    (
        prop::collection::btree_map("[a-e]{1,3}", any::<bool>(), 1..10),
        prop::collection::vec(0usize..10, 0..6),
        any::<bool>(),
    )
        .prop_map(|(tools, promoted, stale)| (tools.into_iter().collect(), promoted, stale))
}

proptest! {
    #[test]
    fn deferred_filter_visible_and_check_call_agree((tools, promote, stale) in catalog_strategy()) {
        let mut specs: Vec<ToolSpec> = tools
            .iter()
            .map(|(n, d)| ToolSpec::new(n.clone(), "", ToolSource::Config).deferrable(*d))
            .collect();
        specs[0].deferrable = true;
        let s = setup(&specs);
        let promoted: Vec<String> = promote.iter().filter_map(|i| specs.get(*i)).map(|t| t.name.clone()).collect();
        let hash = if stale { "stale".to_owned() } else { s.catalog_hash().to_owned() };
        let state = ThreadState { promoted: Some(Promoted::new(hash, promoted.clone())), ..ThreadState::default() };
        let run = RunContext::default();
        let f = s.filter();
        let verdicts = f.visible(&specs.iter().collect::<Vec<_>>(), &state, &run);
        prop_assert_eq!(verdicts.len(), specs.len());
        for (spec, verdict) in specs.iter().zip(&verdicts) {
            let allowed = f.check_call(&ToolCall::new("c", spec.name.clone(), json!({})), None, &state, &run).is_ok();
            prop_assert_eq!(verdict.is_none(), allowed, "{}", spec.name);
            let expect_hidden = spec.deferrable && (stale || !promoted.contains(&spec.name));
            prop_assert_eq!(verdict.is_some(), expect_hidden);
        }
    }
}
