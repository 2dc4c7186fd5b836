//! An overwrite in JSON (`{"field": {"__overwrite__": value}}`, LangGraph's wire form) reaches
//! the graph through a run's input, a resuming command's update and `update_state`.

mod common;

use common::Served;
use serde_json::json;

type TestResult = Result<(), Box<dyn std::error::Error>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_overwrite_replaces_a_field_through_input_command_and_update_state() -> TestResult {
    let s = Served::start().await?;
    let api = s.api();
    let t = api.thread().await;
    let wait = format!("/threads/{t}/runs/wait");
    let r = api
        .post(
            &wait,
            json!({"assistant_id": "chain", "input": {"log": ["x"]}}),
        )
        .await;
    assert_eq!(r.json()["log"], json!(["x", "a", "b", "c"]), "{}", r.body);

    // As a run's input, in both JSON forms LangGraph reads.
    for (form, value) in [
        (json!({"__overwrite__": ["fresh"]}), "fresh"),
        (
            json!({"type": "__overwrite__", "value": ["typed"]}),
            "typed",
        ),
    ] {
        let r = api
            .post(
                &wait,
                json!({"assistant_id": "chain", "input": {"log": form}}),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.json()["log"], json!([value, "a", "b", "c"]), "{}", r.body);
    }

    // Through update_state.
    let r = api
        .post(
            &format!("/threads/{t}/state"),
            json!({"values": {"log": {"__overwrite__": ["set"]}}, "as_node": "c"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let state = api.get(&format!("/threads/{t}/state")).await.json();
    assert_eq!(state["values"]["log"], json!(["set"]), "{state}");

    // In a resuming command's update.
    let t = api.thread().await;
    let wait = format!("/threads/{t}/runs/wait");
    let r = api
        .post(
            &wait,
            json!({"assistant_id": "approval", "input": {"log": ["x"]}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = api
        .post(
            &wait,
            json!({"assistant_id": "approval",
                   "command": {"resume": "yes", "update": {"log": {"__overwrite__": ["cmd"]}}}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json()["log"],
        json!(["cmd", "asked", "finished"]),
        "{}",
        r.body
    );
    Ok(())
}
