//! Agents through the API: their fields, bounds and defaults (answering-machine detection
//! among them), updates, deletion and the flow checks on save. Past 600 lines on purpose: one
//! resource with many fields, each checked at its bounds.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app};

async fn create_agent(app: &TestApp, body: Value) -> String {
    let resp = app.post("/agents", body).await;
    assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text);
    resp.body["id"].as_str().expect("agent id").to_owned()
}

fn flow(nodes: Value) -> Value {
    json!({"nodes": nodes, "flow_config_version": 1, "metadata": {"custom_metadata_keys": ["order_id"]}})
}

#[tokio::test]
async fn a_new_agent_gets_every_field_of_the_agent_object_with_defaults() {
    let app = spawn_app().await;
    let resp = app
        .post("/agents", json!({"name": "  Receptionist  "}))
        .await;
    assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text);
    let agent = &resp.body;
    assert_eq!(agent["name"], "Receptionist", "names are trimmed");
    assert_eq!(agent["type"], "prompt");
    assert_eq!(agent["is_active"], true);
    assert_eq!(agent["max_call_duration_secs"], 1800);
    for field in [
        "id",
        "flow_config",
        "system_prompt",
        "description",
        "voice",
        "background_sound",
        "background_sound_volume",
        "language",
        "temperature",
        "greeting_message",
        "agent_speaks_first",
        "vad_stop_secs",
        "vad_start_secs",
        "vad_confidence",
        "silence_timeout_secs",
        "max_continuous_speech_secs",
        "lead_memory_enabled",
        "webhook_url",
        "webhook_events",
        "webhook_headers",
        "extraction_parameters",
        "answering_machine_detection",
        "voicemail_message",
        "created_at",
        "updated_at",
    ] {
        assert!(agent.get(field).is_some(), "missing {field}: {}", resp.text);
    }
    let id = agent["id"].as_str().unwrap();
    let fetched = app.get(&format!("/agents/{id}")).await;
    assert_eq!(fetched.status, StatusCode::OK);
    // A save answers the agent and what its flow lacks; the agent itself is what GET shows.
    assert_eq!(fetched.body, saved_agent(&resp.body));
}

/// A save's answer without its `warnings`: the agent as GET shows it.
fn saved_agent(answer: &serde_json::Value) -> serde_json::Value {
    let mut agent = answer.clone();
    let warnings = agent.as_object_mut().unwrap().remove("warnings");
    assert!(warnings.is_some_and(|w| w.is_array()), "{answer}");
    agent
}

#[tokio::test]
async fn a_flow_agent_keeps_its_nodes_metadata_webhooks_and_extra_node_keys() {
    let app = spawn_app().await;
    let calendar = app
        .store
        .connect_integration(
            app.workspace_id,
            "google_calendar",
            "desk@example.com",
            |_| None,
        )
        .await
        .unwrap();
    let body = json!({
        "name": "Booking flow",
        "type": "flow",
        "flow_config": flow(json!([
            {"id": "start", "type": "start", "name": "Start", "position": {"x": 0, "y": 10.5}, "agent_speaks_first": true,
             "greeting": "Hello!", "is_literal": true, "next_step_id": "book", "auto_advance": false},
            {"id": "book", "type": "integration_call", "name": "Book", "position": {"x": 100, "y": 0},
             "integration_id": calendar.id, "provider": "google_calendar", "action": "create_event", "args_template": {"start_time": "{{metadata.start}}"},
             "success_next_step_id": "done"},
            {"id": "done", "type": "end", "greeting": "Goodbye.", "is_literal": true}
        ])),
        "system_prompt": "You book appointments.",
        "temperature": 1.2,
        "webhook_url": "https://hooks.example.com/calls",
        "webhook_events": ["call.started", "call.ended"],
        "webhook_headers": {"Authorization": "Bearer abc", "X-Team": "sales"},
        "extraction_parameters": [{"name": "email", "description": "The caller's email"}],
        "max_call_duration_secs": null,
    });
    let resp = app.post("/agents", body).await;
    assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text);
    let id = resp.body["id"].as_str().unwrap();
    let agent = app.get(&format!("/agents/{id}")).await.body;
    assert_eq!(agent["type"], "flow");
    assert_eq!(agent["flow_config"]["flow_config_version"], 1);
    assert_eq!(
        agent["flow_config"]["metadata"]["custom_metadata_keys"],
        json!(["order_id"])
    );
    let nodes = &agent["flow_config"]["nodes"];
    assert_eq!(nodes[0]["next_step_id"], "book");
    assert_eq!(nodes[0]["is_literal"], true);
    assert_eq!(nodes[0]["position"], json!({"x": 0.0, "y": 10.5}));
    assert_eq!(
        nodes[1]["action"], "create_event",
        "unlisted node keys are kept"
    );
    assert_eq!(
        nodes[1]["args_template"]["start_time"],
        "{{metadata.start}}"
    );
    assert_eq!(agent["webhook_headers"]["X-Team"], "sales");
    assert_eq!(
        agent["webhook_events"],
        json!(["call.started", "call.ended"])
    );
    assert_eq!(agent["extraction_parameters"][0]["name"], "email");
    assert!(agent["max_call_duration_secs"].is_null());
    assert_eq!(agent["temperature"], 1.2);
}

#[tokio::test]
async fn out_of_bounds_agent_fields_are_refused_with_the_field_named() {
    let app = spawn_app().await;
    let cases = [
        (json!({}), "name"),
        (json!({"name": "   "}), "name"),
        (json!({"name": "x".repeat(201)}), "name"),
        (json!({"name": "a", "temperature": 2.01}), "temperature"),
        (json!({"name": "a", "temperature": -0.1}), "temperature"),
        (json!({"name": "a", "vad_stop_secs": 10.5}), "vad_stop_secs"),
        (json!({"name": "a", "vad_start_secs": -1}), "vad_start_secs"),
        (
            json!({"name": "a", "vad_confidence": 1.5}),
            "vad_confidence",
        ),
        (
            json!({"name": "a", "background_sound_volume": 2}),
            "background_sound_volume",
        ),
        (
            json!({"name": "a", "silence_timeout_secs": 0}),
            "silence_timeout_secs",
        ),
        (
            json!({"name": "a", "silence_timeout_secs": 3601}),
            "silence_timeout_secs",
        ),
        (
            json!({"name": "a", "max_continuous_speech_secs": 0}),
            "max_continuous_speech_secs",
        ),
        (
            json!({"name": "a", "max_call_duration_secs": 0}),
            "max_call_duration_secs",
        ),
        (
            json!({"name": "a", "max_call_duration_secs": 14401}),
            "max_call_duration_secs",
        ),
        (
            json!({"name": "a", "webhook_url": "ftp://example.com/x"}),
            "webhook_url",
        ),
        (
            json!({"name": "a", "webhook_url": "https://"}),
            "webhook_url",
        ),
        (
            json!({"name": "a", "webhook_url": "http://localhost:9000/hook"}),
            "webhook_url",
        ),
        (
            json!({"name": "a", "webhook_url": "http://169.254.169.254/latest"}),
            "webhook_url",
        ),
        (
            json!({"name": "a", "webhook_headers": {"X-Count": 3}}),
            "webhook_headers",
        ),
        (
            json!({"name": "a", "webhook_headers": {"Bad Header": "v"}}),
            "webhook_headers",
        ),
        (
            json!({"name": "a", "language": "english please"}),
            "language",
        ),
        (json!({"name": "a", "type": "robot"}), "type"),
        (json!({"name": "a", "type": "flow"}), "flow_config"),
        (
            json!({"name": "a", "type": "flow", "flow_config": flow(json!([]))}),
            "flow_config",
        ),
        (
            json!({"name": "a", "type": "flow", "flow_config": {"nodes": [{"id": "s", "type": "start"}], "flow_config_version": 2}}),
            "flow_config_version",
        ),
        (
            json!({"name": "a", "type": "flow", "flow_config": flow(json!([{"id": "s", "type": "start"}, {"id": "s", "type": "end"}]))}),
            "flow_config.nodes[1].id",
        ),
        (
            json!({"name": "a", "type": "flow", "flow_config": flow(json!([{"id": "s", "type": "start", "next_step_id": "nowhere"}]))}),
            "next_step_id",
        ),
        (
            json!({"name": "a", "extraction_parameters": [{"name": "x"}, {"name": "x"}]}),
            "extraction_parameters",
        ),
        (
            json!({"name": "a", "extraction_parameters": [{"description": "no name"}]}),
            "extraction_parameters",
        ),
    ];
    for (body, needle) in cases {
        let resp = app.post("/agents", body).await;
        resp.assert_invalid(needle);
    }
    let list = app.get("/agents").await;
    assert_eq!(
        list.body["pagination"]["total"], 0,
        "nothing invalid was stored"
    );
}

#[tokio::test]
async fn answering_machine_detection_is_on_by_default_and_takes_overrides_within_bounds() {
    let app = spawn_app().await;
    let id = create_agent(&app, json!({"name": "Dialer"})).await;
    let path = format!("/agents/{id}");
    let agent = app.get(&path).await.body;
    let amd = &agent["answering_machine_detection"];
    assert_eq!(amd["enabled"], true);
    assert_eq!(amd["greet_early"], true);
    assert!(amd["greeting_ms"].is_null(), "no override: {amd}");
    assert!(agent["voicemail_message"].is_null());

    let resp = app
        .patch(
            &path,
            json!({
                "answering_machine_detection": {"greeting_ms": 2000, "maximum_number_of_words": 2, "silence_threshold": null},
                "voicemail_message": "Hi, this is Acme calling about your order. Please call us back.",
            }),
        )
        .await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text);
    let amd = &resp.body["answering_machine_detection"];
    assert_eq!(amd["enabled"], true, "left out, enabled takes its default");
    assert_eq!(amd["greeting_ms"], 2000);
    assert_eq!(amd["maximum_number_of_words"], 2);
    assert!(amd["silence_threshold"].is_null());
    assert!(
        resp.body["voicemail_message"]
            .as_str()
            .unwrap()
            .starts_with("Hi")
    );
    assert_eq!(app.get(&path).await.body, saved_agent(&resp.body));

    // The object is written whole; null clears the voicemail message.
    let resp = app
        .patch(
            &path,
            json!({"answering_machine_detection": {"enabled": false}, "voicemail_message": null}),
        )
        .await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text);
    assert_eq!(resp.body["answering_machine_detection"]["enabled"], false);
    assert!(resp.body["answering_machine_detection"]["greeting_ms"].is_null());
    let resp = app
        .patch(
            &path,
            json!({"answering_machine_detection": {"enabled": false, "greet_early": false}}),
        )
        .await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text);
    assert_eq!(
        resp.body["answering_machine_detection"]["greet_early"],
        false
    );
    let resp = app
        .patch(
            &path,
            json!({"answering_machine_detection": {"greet_early": 1}}),
        )
        .await;
    assert_eq!(resp.status, StatusCode::BAD_REQUEST, "{}", resp.text);
    assert_eq!(
        resp.body["field"], "answering_machine_detection.greet_early",
        "{}",
        resp.text
    );
    assert!(resp.body["voicemail_message"].is_null());

    let edges = json!({"name": "Edges", "answering_machine_detection": {
        "initial_silence_ms": 100, "greeting_ms": 10000, "after_greeting_silence_ms": 100,
        "total_analysis_time_ms": 30000, "min_word_length_ms": 20, "between_words_silence_ms": 2000,
        "maximum_number_of_words": 1, "maximum_word_length_ms": 30000, "silence_threshold": 32767,
    }, "voicemail_message": "x".repeat(2000)});
    let resp = app.post("/agents", edges).await;
    assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text);

    for (body, needle) in [
        (
            json!({"answering_machine_detection": {"initial_silence_ms": 99}}),
            "answering_machine_detection.initial_silence_ms",
        ),
        (
            json!({"answering_machine_detection": {"total_analysis_time_ms": 30001}}),
            "answering_machine_detection.total_analysis_time_ms",
        ),
        (
            json!({"answering_machine_detection": {"maximum_number_of_words": 0}}),
            "answering_machine_detection.maximum_number_of_words",
        ),
        (
            json!({"answering_machine_detection": {"silence_threshold": -5}}),
            "answering_machine_detection.silence_threshold",
        ),
        (
            json!({"answering_machine_detection": {"greeting_ms": 1.5}}),
            "answering_machine_detection.greeting_ms",
        ),
        (
            json!({"answering_machine_detection": {"beep": true}}),
            "beep",
        ),
        (
            json!({"answering_machine_detection": null}),
            "answering_machine_detection",
        ),
        (json!({"voicemail_message": ""}), "voicemail_message"),
        (
            json!({"voicemail_message": "x".repeat(2001)}),
            "voicemail_message",
        ),
    ] {
        let resp = app.patch(&path, body).await;
        resp.assert_invalid(needle);
    }
    let after = app.get(&path).await.body;
    assert_eq!(after["answering_machine_detection"]["enabled"], false);
}

#[tokio::test]
async fn the_edges_of_every_bound_are_accepted() {
    let app = spawn_app().await;
    let body = json!({
        "name": "x".repeat(200), "temperature": 2, "vad_stop_secs": 10, "vad_start_secs": 0, "vad_confidence": 1,
        "background_sound_volume": 0, "silence_timeout_secs": 3600, "max_continuous_speech_secs": 1,
        "max_call_duration_secs": 14400, "webhook_url": "https://hooks.example.com:9000/hook",
    });
    let resp = app.post("/agents", body).await;
    assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text);
    assert_eq!(resp.body["max_call_duration_secs"], 14400);
}

#[tokio::test]
async fn wrong_types_unknown_fields_and_read_only_fields_are_refused() {
    let app = spawn_app().await;
    for (body, needle) in [
        (json!({"name": 5}), "name"),
        (json!({"name": "a", "temperature": "hot"}), "temperature"),
        (
            json!({"name": "a", "silence_timeout_secs": 1.5}),
            "silence_timeout_secs",
        ),
        (
            json!({"name": "a", "agent_speaks_first": "yes"}),
            "agent_speaks_first",
        ),
        (
            json!({"name": "a", "webhook_events": "call.started"}),
            "webhook_events",
        ),
        (json!({"name": "a", "voice": null}), "voice"),
        (
            json!({"name": "a", "id": "3c3c3c3c-0000-0000-0000-000000000000"}),
            "Writable fields",
        ),
        (
            json!({"name": "a", "created_at": "2024-01-01T00:00:00Z"}),
            "Writable fields",
        ),
        (json!({"name": "a", "colour": "red"}), "Writable fields"),
    ] {
        let resp = app.post("/agents", body).await;
        resp.assert_invalid(needle);
    }
    let resp = app
        .post("/agents", json!({"name": "a", "created_at": "x"}))
        .await;
    assert_eq!(
        resp.body["details"]["unknown_fields"],
        json!(["created_at"])
    );
    assert!(
        resp.body["details"]["writable_fields"]
            .as_array()
            .unwrap()
            .contains(&json!("max_call_duration_secs"))
    );
}

#[tokio::test]
async fn patch_changes_only_the_sent_fields() {
    let app = spawn_app().await;
    let id = create_agent(
        &app,
        json!({"name": "Sales", "system_prompt": "Sell.", "webhook_url": "https://example.com/h"}),
    )
    .await;
    let path = format!("/agents/{id}");
    let before = app.get(&path).await.body;

    let resp = app
        .patch(
            &path,
            json!({"temperature": 0.2, "webhook_url": null, "max_call_duration_secs": 600}),
        )
        .await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text);
    assert_eq!(resp.body["temperature"], 0.2);
    assert!(
        resp.body["webhook_url"].is_null(),
        "null clears a nullable field"
    );
    assert_eq!(resp.body["max_call_duration_secs"], 600);
    assert_eq!(resp.body["system_prompt"], "Sell.");
    assert_eq!(resp.body["name"], "Sales");
    assert_eq!(resp.body["created_at"], before["created_at"]);
    assert_eq!(app.get(&path).await.body, saved_agent(&resp.body));

    let resp = app
        .patch(&path, json!({"max_call_duration_secs": null}))
        .await;
    assert!(resp.body["max_call_duration_secs"].is_null());
}

#[tokio::test]
async fn bad_patches_are_refused_and_change_nothing() {
    let app = spawn_app().await;
    let id = create_agent(&app, json!({"name": "Support"})).await;
    let path = format!("/agents/{id}");
    let before = app.get(&path).await.body;
    for (body, needle) in [
        (json!({}), "Writable fields"),
        (json!({"is_deleted": true}), "Writable fields"),
        (
            json!({"updated_at": "2024-01-01T00:00:00Z"}),
            "Writable fields",
        ),
        (json!({"name": ""}), "name"),
        (json!({"name": null}), "name"),
        (json!({"temperature": 3}), "temperature"),
        (json!({"type": "flow"}), "flow_config"),
        (json!({"vad_confidence": "high"}), "vad_confidence"),
    ] {
        let resp = app.patch(&path, body).await;
        resp.assert_invalid(needle);
    }
    assert_eq!(app.get(&path).await.body, before);
}

#[tokio::test]
async fn a_prompt_agent_becomes_a_flow_agent_once_given_nodes() {
    let app = spawn_app().await;
    let id = create_agent(&app, json!({"name": "Grows up"})).await;
    let path = format!("/agents/{id}");
    let resp = app
        .patch(
            &path,
            json!({"type": "flow", "flow_config": flow(json!([{"id": "start", "type": "start", "next_step_id": "end"}, {"id": "end", "type": "end"}]))}),
        )
        .await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text);
    assert_eq!(resp.body["type"], "flow");
    let resp = app.patch(&path, json!({"flow_config": null})).await;
    assert_eq!(
        resp.status,
        StatusCode::BAD_REQUEST,
        "a flow agent cannot lose its flow"
    );
}

#[tokio::test]
async fn deactivating_an_agent_keeps_it_and_filters_it_out_of_active_lists() {
    let app = spawn_app().await;
    let keep = create_agent(&app, json!({"name": "Keep"})).await;
    let retire = create_agent(&app, json!({"name": "Retire"})).await;
    let resp = app
        .post_empty(&format!("/agents/{retire}/deactivate"))
        .await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text);
    assert_eq!(resp.body["is_active"], false);
    assert_eq!(resp.body["name"], "Retire");
    assert_eq!(
        app.get(&format!("/agents/{retire}")).await.body["is_active"],
        false
    );

    let active = app.get("/agents?is_active=true").await;
    let ids: Vec<&str> = active.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![keep.as_str()]);
    let inactive = app.get("/agents?is_active=false").await;
    assert_eq!(inactive.body["data"][0]["id"], retire.as_str());
    assert_eq!(inactive.body["pagination"]["total"], 1);
    assert_eq!(app.get("/agents").await.body["pagination"]["total"], 2);

    let missing = app
        .post_empty("/agents/0190f0a0-0000-7000-8000-000000000000/deactivate")
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn agents_are_listed_in_pages() {
    let app = spawn_app().await;
    for i in 0..3 {
        create_agent(&app, json!({"name": format!("Agent {i}")})).await;
    }
    let page = app.get("/agents?limit=2&offset=0").await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(page.body["data"].as_array().unwrap().len(), 2);
    assert_eq!(
        page.body["pagination"],
        json!({"total": 3, "limit": 2, "offset": 0, "has_more": true})
    );
    assert_eq!(page.body["data"][0]["name"], "Agent 0");
    let last = app.get("/agents?limit=2&offset=2").await;
    assert_eq!(last.body["data"][0]["name"], "Agent 2");
    assert_eq!(last.body["pagination"]["has_more"], false);
    for bad in [
        "/agents?limit=0",
        "/agents?limit=101",
        "/agents?offset=-1",
        "/agents?is_active=maybe",
    ] {
        assert_eq!(app.get(bad).await.status, StatusCode::BAD_REQUEST, "{bad}");
    }
}

#[tokio::test]
async fn another_workspace_cannot_see_or_change_agents() {
    let app = spawn_app().await;
    let id = create_agent(&app, json!({"name": "Mine"})).await;
    let (_, other) = app.other_workspace().await;
    let path = format!("/agents/{id}");
    assert_eq!(
        app.send(Method::GET, &path, Some(&other), None)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let patch = app
        .send(
            Method::PATCH,
            &path,
            Some(&other),
            Some(json!({"name": "Theirs"})),
        )
        .await;
    assert_eq!(patch.status, StatusCode::NOT_FOUND);
    let deactivate = app
        .send(
            Method::POST,
            &format!("{path}/deactivate"),
            Some(&other),
            None,
        )
        .await;
    assert_eq!(deactivate.status, StatusCode::NOT_FOUND);
    let list = app.send(Method::GET, "/agents", Some(&other), None).await;
    assert_eq!(list.body["pagination"]["total"], 0);
    let mine = app.get(&path).await.body;
    assert_eq!(mine["name"], "Mine");
    assert_eq!(mine["is_active"], true);
}

#[tokio::test]
async fn agent_routes_require_their_scopes() {
    let app = spawn_app().await;
    let id = create_agent(&app, json!({"name": "Scoped"})).await;
    let reader = app.key_with_scopes("agents:read").await;
    let resp = app
        .send(
            Method::POST,
            "/agents",
            Some(&reader),
            Some(json!({"name": "x"})),
        )
        .await;
    assert_eq!(resp.status, StatusCode::UNAUTHORIZED);
    assert_eq!(resp.body["required_scope"], "agents:create");
    let resp = app
        .send(
            Method::PATCH,
            &format!("/agents/{id}"),
            Some(&reader),
            Some(json!({"name": "x"})),
        )
        .await;
    assert_eq!(resp.body["required_scope"], "agents:update");
    let resp = app
        .send(
            Method::POST,
            &format!("/agents/{id}/deactivate"),
            Some(&reader),
            None,
        )
        .await;
    assert_eq!(resp.body["required_scope"], "agents:update");
    assert_eq!(
        app.send(Method::GET, &format!("/agents/{id}"), Some(&reader), None)
            .await
            .status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn the_store_hands_campaigns_the_agent_with_its_call_cap() {
    let app = spawn_app().await;
    let id = create_agent(
        &app,
        json!({"name": "Capped", "max_call_duration_secs": 300}),
    )
    .await;
    let agent_id: switchboard_actors::ids::AgentId = id.parse().unwrap();
    let agent = app
        .store
        .agent(app.workspace_id, agent_id)
        .await
        .unwrap()
        .expect("agent found");
    assert_eq!(agent.max_call_duration_secs, Some(300));
    assert!(agent.is_active);
    let (other, _) = app.other_workspace().await;
    assert!(app.store.agent(other, agent_id).await.unwrap().is_none());
}
