//! The `delegate` example: two parallel research delegations and one exploring delegation,
//! each with its own resolved pool, then the lead's summary.

#[path = "../delegate.rs"]
mod example;

use stategraph_nodes::subagent::{Exclusion, SubagentStatus};

#[tokio::test]
async fn the_lead_delegates_three_tasks_and_summarises(
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let (answer, reports) = example::delegate().await?;
    assert!(answer.starts_with("Summary:"));
    let ids: Vec<&str> = reports.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["fan-out/0", "fan-out/1", "explore"]);
    assert!(reports
        .iter()
        .all(|r| r.outcome.status == SubagentStatus::Completed && r.outcome.stop_reason.is_none()));
    assert_eq!(
        reports[0].outcome.result.as_deref(),
        Some("Found: three sources agree on 'How do Rust futures get cancelled?'")
    );
    let research = reports[0].pool.as_ref().ok_or("no pool")?;
    assert_eq!(research.names(), ["read_notes", "lookup"]);
    assert_eq!(research.why_not("write_notes"), Some(Exclusion::Denied));
    assert_eq!(research.why_not("journal"), Some(Exclusion::AgentLocal));
    let explorer = reports[2].pool.as_ref().ok_or("no pool")?;
    assert_eq!(explorer.names(), ["read_notes"]);
    assert_eq!(
        explorer.why_not("write_notes"),
        Some(Exclusion::NotReadOnly)
    );
    assert_eq!(reports[2].model.as_deref(), Some("explorer-model"));
    Ok(())
}
