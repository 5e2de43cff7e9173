//! The flow simulator with no model at all: a caller who types keypad entries, the model's
//! choices scripted in the request (which edge, which arguments, at which turn), and what it
//! refuses of them.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app};

/// A flow agent of `flow`; its id.
async fn flow_agent(app: &TestApp, flow: Value) -> String {
    let created = app
        .post(
            "/agents",
            json!({"name": "Desk", "type": "flow", "flow_config": flow}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    created.body["id"].as_str().unwrap().to_string()
}

/// The simulator's answer to `body`, which must be a 200.
async fn simulate(app: &TestApp, agent: &str, body: Value) -> Value {
    let r = app
        .post(&format!("/agents/{agent}/flow/test"), body.clone())
        .await;
    assert_eq!(r.status, StatusCode::OK, "{body}: {}", r.text);
    r.body["data"].clone()
}

fn path(d: &Value) -> Vec<&str> {
    d["path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["node_id"].as_str().unwrap())
        .collect()
}

fn agent_said(d: &Value) -> Vec<&str> {
    d["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["role"] == "agent")
        .map(|t| t["text"].as_str().unwrap())
        .collect()
}

fn keypad_menu() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/flows/bistro_keypad.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test]
async fn typed_keys_walk_a_keypad_menu_with_no_model() {
    let app = spawn_app().await;
    let id = flow_agent(&app, keypad_menu()).await;
    let d = simulate(
        &app,
        &id,
        json!({"turns": [{"digits": "9"}, {"digits": "2"}, {"digits": "4719"}]}),
    )
    .await;
    assert_eq!(d["final_node"], "booked", "{d}");
    assert_eq!(d["end_reason"], "agent_hangup", "{d}");
    assert_eq!(path(&d), ["start", "menu", "member", "booked"], "{d}");
    assert_eq!(d["variables"]["member.digits"], "4719", "{d}");
    let keyed: Vec<(&str, &str)> = d["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["role"] == "user")
        .map(|t| (t["digits"].as_str().unwrap(), t["node"].as_str().unwrap()))
        .collect();
    assert_eq!(keyed, [("9", "menu"), ("2", "menu"), ("4719", "member")]);
    assert_eq!(
        agent_said(&d).last(),
        Some(&"Member 4719, you are booked."),
        "{d}"
    );
    // A key the menu does not take has the menu said again.
    let menus = agent_said(&d)
        .iter()
        .filter(|t| t.contains("Press 1 for our hours"))
        .count();
    assert_eq!(menus, 2, "{d}");
}

/// Ask for the party's size (the model decides), confirm it, and say goodbye when done.
fn party_flow() -> Value {
    json!({"flow_config_version": 1, "nodes": [
        {"id": "start", "type": "start", "greeting": "Acme Bistro, hello.", "is_literal": true, "next_step_id": "ask"},
        {"id": "ask", "type": "conversation", "instructions": "Ask how many people are coming.",
         "variables": [{"name": "party", "description": "How many people"}],
         "transitions": [{"next_step_id": "confirm", "condition": "the caller said how many"}]},
        {"id": "confirm", "type": "conversation", "greeting": "A table for {{ask.party}}.", "is_literal": true,
         "transitions": [{"next_step_id": "bye", "condition": "the caller has nothing more"}]},
        {"id": "bye", "type": "end", "greeting": "Goodbye.", "is_literal": true}
    ]})
}

/// The party flow simulated with `body`.
async fn party(body: Value) -> Value {
    let app = spawn_app().await;
    let id = flow_agent(&app, party_flow()).await;
    simulate(&app, &id, body).await
}

#[tokio::test]
async fn the_model_s_choices_scripted_in_the_request_drive_the_flow() {
    let d = party(json!({
            "turns": ["Four of us, tonight.", "That's all, thanks."],
            "scripted_model": [
                {"turn": 1, "say": "Lovely.", "edge": "confirm", "arguments": {"party": "four"}},
                {"turn": 2, "edge": "bye"}
            ]
    }))
    .await;
    assert_eq!(path(&d), ["start", "ask", "confirm", "bye"], "{d}");
    let reasons: Vec<&str> = d["path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons[2], "model: the caller said how many", "{d}");
    assert_eq!(d["variables"]["ask.party"], "four", "{d}");
    assert_eq!(
        agent_said(&d),
        [
            "Acme Bistro, hello.",
            "Lovely. A table for four.",
            "Goodbye."
        ],
        "{d}"
    );
    assert_eq!(d["end_reason"], "agent_hangup", "{d}");
    assert_eq!(d["unused_choices"], json!([]), "{d}");
    let calls: Vec<&str> = d["dispatches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(calls, ["go_to_confirm", "go_to_bye"], "{d}");
}

#[tokio::test]
async fn a_scripted_edge_the_node_does_not_offer_is_reported_and_the_flow_stays() {
    let d = party(json!({
            "turns": ["Four of us."],
            "scripted_model": [
                {"turn": 1, "edge": "bye"},
                {"turn": 5, "say": "Never said."}
            ]
    }))
    .await;
    assert_eq!(d["final_node"], "ask", "{d}");
    let wrong = d["dispatches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "go_to_bye")
        .unwrap_or_else(|| panic!("{d}"));
    assert_eq!(wrong["status"], "failed", "{d}");
    // The fifth turn never came.
    assert_eq!(d["unused_choices"], json!([1]), "{d}");
}

#[tokio::test]
async fn the_simulator_refuses_malformed_keys_and_choices() {
    let app = spawn_app().await;
    let id = flow_agent(&app, party_flow()).await;
    let path = format!("/agents/{id}/flow/test");
    for (body, field) in [
        (json!({"turns": [{"digits": "12x"}]}), "turns[0].digits"),
        (json!({"turns": [{"digits": ""}]}), "turns[0].digits"),
        (
            json!({"turns": ["Hi", {"digits": "1", "say": "x"}]}),
            "turns[1]",
        ),
        (json!({"turns": [7]}), "turns[0]"),
        (
            json!({"turns": ["Hi"], "scripted_model": []}),
            "scripted_model",
        ),
        (
            json!({"turns": ["Hi"], "scripted_model": [{"turn": 99}]}),
            "scripted_model[0].turn",
        ),
        (
            json!({"turns": ["Hi"], "scripted_model": [{"turn": 1, "edge": "nowhere"}]}),
            "scripted_model[0].edge",
        ),
        (
            json!({"turns": ["Hi"], "scripted_model": [{"turn": 1, "arguments": [1]}]}),
            "scripted_model[0].arguments",
        ),
        (
            json!({"turns": ["Hi"], "scripted_model": [{"turn": 1, "pick": "x"}]}),
            "scripted_model[0]",
        ),
    ] {
        let r = app.post(&path, body.clone()).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {}", r.text);
        assert!(r.text.contains(field), "{body}: {}", r.text);
    }
}
