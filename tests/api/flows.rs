//! Flow agents through the API: a flow that cannot run is refused with every issue at its
//! node, and nothing of it is saved.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::spawn_app;

fn flow(nodes: Value) -> Value {
    json!({"nodes": nodes, "flow_config_version": 1})
}

#[tokio::test]
async fn a_flow_that_cannot_run_is_refused_with_each_issue_at_its_node() {
    let app = spawn_app().await;
    let broken = flow(json!([
        {"id": "start", "type": "start", "greeting": "Hi.", "is_literal": true, "next_step_id": "ask",
         "is_global": true, "global_condition": "always"},
        {"id": "ask", "type": "conversation", "instructions": "Ask for a time.",
         "transitions": [{"next_step_id": "done"}, {"next_step_id": "done", "when": {"variable": "nodot", "equals": 1}}]},
        {"id": "orphan", "type": "end"},
        {"id": "done", "type": "end", "is_global": true},
        {"id": "hand", "type": "transfer"},
        {"id": "odd", "type": "ending"}
    ]));
    let r = app
        .post(
            "/agents",
            json!({"name": "Broken", "type": "flow", "flow_config": broken}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert_eq!(r.error_code(), "FLOW_INVALID");
    let issues: Vec<(String, String)> = r.body["issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            assert!(i["message"].as_str().is_some_and(|m| !m.is_empty()), "{i}");
            (
                i["node_id"].as_str().unwrap().to_string(),
                i["code"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let has = |node: &str, code: &str| issues.iter().any(|i| i.0 == node && i.1 == code);
    // A node of an unknown type stops the reading at its issues.
    assert!(has("odd", "node_type_invalid"), "{issues:?}");
    assert!(has("start", "is_global_not_allowed"), "{issues:?}");
    assert!(has("ask", "transition_invalid"), "{issues:?}");
    assert!(has("done", "global_condition_missing"), "{issues:?}");
    assert!(has("hand", "destination_missing"), "{issues:?}");
    let agents = app.get("/agents").await;
    assert_eq!(agents.body["pagination"]["total"], 0, "{}", agents.text);

    // Without the unknown type, the graph's shape is checked too.
    let shaped = flow(json!([
        {"id": "start", "type": "start", "next_step_id": "ask"},
        {"id": "ask", "type": "conversation", "instructions": "Ask for a time."},
        {"id": "orphan", "type": "end"}
    ]));
    let r = app
        .post(
            "/agents",
            json!({"name": "Stuck", "type": "flow", "flow_config": shaped}),
        )
        .await;
    assert_eq!(r.error_code(), "FLOW_INVALID", "{}", r.text);
    let issues = r.body["issues"].as_array().unwrap();
    let codes: Vec<(&str, &str)> = issues
        .iter()
        .map(|i| (i["node_id"].as_str().unwrap(), i["code"].as_str().unwrap()))
        .collect();
    assert_eq!(codes, [("ask", "no_way_out"), ("orphan", "unreachable")]);
    assert_eq!(issues[0]["field"], "transitions");

    // Fixed, it is saved as the agent's first flow version.
    let fixed = flow(json!([
        {"id": "start", "type": "start", "next_step_id": "ask"},
        {"id": "ask", "type": "conversation", "instructions": "Ask for a time.",
         "transitions": [{"next_step_id": "orphan", "condition": "the caller is done"}]},
        {"id": "orphan", "type": "end"}
    ]));
    let r = app
        .post(
            "/agents",
            json!({"name": "Fine", "type": "flow", "flow_config": fixed}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let id = r.body["id"].as_str().unwrap();
    let versions = app.get(&format!("/agents/{id}/flow/versions")).await;
    assert_eq!(versions.body["data"].as_array().unwrap().len(), 1);
}
