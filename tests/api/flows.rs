//! Flow agents through the API: a flow that cannot run is refused with every issue at its
//! node, and nothing of it is saved; the simulator runs a flow in text against the stand-in
//! model vendor.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::converse::{Live, call_slug, conversing_app_with};
use crate::helpers::{TestApp, eventually, spawn_app, spawn_app_with};
use crate::sip_calls::{ended_call, endpoint};
use crate::vendor::{Reply, VendorServer};

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

/// Book a meeting: greet, ask for a time, check the calendar, confirm, say goodbye.
fn booking(calendar: &str) -> Value {
    flow(json!([
        {"id": "start", "type": "start", "greeting": "Hi, this is Ada.", "is_literal": true, "next_step_id": "ask"},
        {"id": "ask", "type": "conversation", "name": "Ask for a time", "instructions": "Ask when the caller wants to meet.",
         "variables": [{"name": "time", "description": "When"}],
         "transitions": [{"next_step_id": "check", "condition": "the caller gave a time"}]},
        {"id": "check", "type": "integration_call", "integration_id": calendar, "provider": "google_calendar",
         "action": "check_availability",
         "args_template": {"start_time": "{{ask.time}}", "email": {"type": "ai_extract", "description": "The caller's email"}},
         "custom": [{"path": "$.busy", "equals": true, "next_step_id": "taken"}],
         "success_next_step_id": "confirm", "error_next_step_id": "bye",
         "sample_result": {"busy": false, "calendars": {"primary": {"busy": []}}}},
        {"id": "taken", "type": "conversation", "greeting": "That time is taken.", "is_literal": true,
         "transitions": [{"next_step_id": "ask", "condition": "the caller wants another time"}]},
        {"id": "confirm", "type": "conversation", "greeting": "Booked for {{ask.time}}.", "is_literal": true,
         "transitions": [{"next_step_id": "bye", "condition": "the caller is done"}]},
        {"id": "bye", "type": "end", "greeting": "Goodbye!", "is_literal": true}
    ]))
}

/// A path (`path` or `flow_path`) as (node, reason) pairs.
fn trail(path: &Value) -> Vec<(&str, &str)> {
    path.as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p["node_id"].as_str().unwrap_or_default(),
                p["reason"].as_str().unwrap_or_default(),
            )
        })
        .collect()
}

/// A transcript as (role, text, node) triples.
fn turns_of(transcript: &Value) -> Vec<(&str, &str, &str)> {
    transcript
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            (
                t["role"].as_str().unwrap_or_default(),
                t["text"].as_str().unwrap_or_default(),
                t["node"].as_str().unwrap_or_default(),
            )
        })
        .collect()
}

/// A flow agent booking in a connected calendar; its id.
async fn booker(app: &TestApp) -> String {
    let cal = app
        .store
        .connect_integration(
            app.workspace_id,
            "google_calendar",
            "desk@example.com",
            |_| None,
        )
        .await
        .unwrap();
    let created = app
        .post(
            "/agents",
            json!({"name": "Booker", "type": "flow", "system_prompt": "You are Ada from Acme.",
                   "flow_config": booking(&cal.id.to_string())}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    created.body["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn the_simulator_runs_a_flow_in_text_through_the_call_s_director_and_loop() {
    let vendor = VendorServer::start().await;
    let app = spawn_app_with(|c| vendor.serve(c)).await;
    let id = booker(&app).await;
    vendor.reply(Reply::text(&["When would you like to meet?"]));
    vendor.reply(Reply::tool_calls(&[(
        "c1",
        "go_to_check",
        r#"{"time": "ten"}"#,
    )]));
    vendor.reply(Reply::tool_calls(&[(
        "c2",
        "extract_arguments",
        r#"{"email": "ada@example.com"}"#,
    )]));
    vendor.reply(Reply::tool_calls(&[("c3", "go_to_bye", "{}")]));
    let r = app
        .post(
            &format!("/agents/{id}/flow/test"),
            json!({"turns": ["I'd like a meeting.", "Ten o'clock.", "That's all."], "dry_run": true}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let d = &r.body["data"];
    let turns = turns_of(&d["transcript"]);
    assert_eq!(
        turns,
        [
            ("agent", "Hi, this is Ada.", "start"),
            ("user", "I'd like a meeting.", "start"),
            ("agent", "When would you like to meet?", "ask"),
            ("user", "Ten o'clock.", "ask"),
            ("agent", "Booked for ten.", "confirm"),
            ("user", "That's all.", "confirm"),
            ("agent", "Goodbye!", "bye"),
        ]
    );
    let path = trail(&d["path"]);
    assert_eq!(
        path,
        [
            ("start", "start"),
            ("ask", "next_step_id"),
            ("check", "model: the caller gave a time"),
            ("confirm", "success_next_step_id: no custom branch matched"),
            ("bye", "model: the caller is done"),
        ]
    );
    let dispatch = d["dispatches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "google_calendar.check_availability")
        .expect("the integration's run");
    assert_eq!(
        dispatch["arguments"],
        json!({"start_time": "ten", "email": "ada@example.com"})
    );
    assert!(
        dispatch["response_preview"]
            .as_str()
            .unwrap()
            .starts_with("dry run:")
    );
    assert_eq!(d["variables"]["ask.time"], "ten");
    assert_eq!(d["variables"]["check.email"], "ada@example.com");
    assert_eq!(d["variables"]["check.result"]["busy"], false);
    assert_eq!(d["final_node"], "bye");
    assert_eq!(d["end_reason"], "agent_hangup");
    // The model was briefed node by node, offered the node's edges, and made to fill the
    // integration's arguments.
    let requests = vendor.chat_requests();
    assert_eq!(requests.len(), 4);
    let system = requests[1].1["messages"][0]["content"].as_str().unwrap();
    assert!(system.starts_with("You are Ada from Acme."), "{system}");
    assert!(
        system.contains("Ask when the caller wants to meet."),
        "{system}"
    );
    assert_eq!(requests[1].1["tools"][0]["function"]["name"], "go_to_check");
    assert_eq!(
        requests[2].1["tool_choice"],
        json!({"type": "function", "function": {"name": "extract_arguments"}})
    );
}

#[tokio::test]
async fn the_simulator_refuses_what_it_cannot_run_in_words() {
    let app = spawn_app().await;
    let id = booker(&app).await;
    let prompt = app.post("/agents", json!({"name": "Plain"})).await;
    let prompt_id = prompt.body["id"].as_str().unwrap().to_string();
    let path = format!("/agents/{id}/flow/test");
    for (body, field) in [
        (json!({}), "exactly one"),
        (
            json!({"turns": ["Hi"], "caller": {"description": "A busy man"}}),
            "exactly one",
        ),
        (json!({"turns": []}), "turns"),
        (json!({"turns": ["  "]}), "turns[0]"),
        (json!({"turns": "Hi"}), "turns"),
        (json!({"caller": {"description": ""}}), "caller.description"),
        (
            json!({"caller": {"description": "x", "max_turns": 99}}),
            "caller.max_turns",
        ),
        (json!({"turns": ["Hi"], "replay": true}), "replay"),
    ] {
        let r = app.post(&path, body.clone()).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {}", r.text);
        assert!(r.text.contains(field), "{body}: {}", r.text);
    }
    let r = app
        .post(
            &format!("/agents/{prompt_id}/flow/test"),
            json!({"turns": ["Hi"]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    assert_eq!(r.error_code(), "NOT_A_FLOW_AGENT");
    let r = app
        .post(&path, json!({"turns": ["Hi"], "flow_version": 7}))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    let r = app
        .post(
            "/agents/01a1fc49-0000-7000-8000-000000000000/flow/test",
            json!({"turns": ["Hi"]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    // Without a chat model a played caller cannot be played.
    let r = app
        .post(&path, json!({"caller": {"description": "A busy man"}}))
        .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text);
    assert_eq!(r.error_code(), "MODEL_NOT_CONFIGURED");
    // A save names the nodes that need the model, none being configured.
    let saved = app
        .patch(&format!("/agents/{id}"), json!({"name": "Booker"}))
        .await;
    assert_eq!(saved.status, StatusCode::OK, "{}", saved.text);
    let warned: Vec<(&str, &str)> = saved.body["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["node_id"].as_str().unwrap(), w["code"].as_str().unwrap()))
        .collect();
    assert_eq!(
        warned,
        [
            ("ask", "model_not_configured"),
            ("check", "model_not_configured"),
            ("taken", "model_not_configured"),
            ("confirm", "model_not_configured")
        ]
    );
    assert!(
        saved.body["warnings"][1]["message"]
            .as_str()
            .unwrap()
            .contains("ai_extract")
    );
    // The flow runs until a step needs the model: there the agent says so and hangs up.
    let r = app.post(&path, json!({"turns": ["Hi"]})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let d = &r.body["data"];
    assert_eq!(d["end_reason"], "model_not_configured", "{d}");
    assert_eq!(d["final_node"], "ask");
    let said = crate::converse::agent_lines(d);
    assert_eq!(
        said,
        ["Hi, this is Ada.", switchboard_actors::turns::FALLBACK_LINE]
    );
}

/// A front desk decided by the caller's words alone: no node needs the model.
fn front_desk() -> Value {
    flow(json!([
        {"id": "start", "type": "start", "greeting": "Hello, Acme Bistro. Would you like to book a table, or hear our hours?", "is_literal": true, "next_step_id": "menu"},
        {"id": "menu", "type": "conversation", "greeting": "Say book, or hours.", "is_literal": true,
         "transitions": [
            {"next_step_id": "party", "when": {"variable": "caller.last_words", "contains": ["book", "reserve", "a table"]}},
            {"next_step_id": "hours", "when": {"variable": "caller.last_words", "matches": "\\b(hours?|open)\\b"}}
         ]},
        {"id": "party", "type": "conversation", "greeting": "For how many people?", "is_literal": true,
         "transitions": [{"next_step_id": "booked", "when": {"variable": "caller.last_words", "matches": "\\b([1-9]|one|two|three|four|five|six)\\b"}}]},
        {"id": "hours", "type": "end", "greeting": "We are open from noon to ten, every day.", "is_literal": true},
        {"id": "booked", "type": "end", "greeting": "Your table is booked. Goodbye!", "is_literal": true}
    ]))
}

#[tokio::test]
async fn a_flow_decided_by_the_caller_s_words_runs_with_no_model_at_all() {
    let app = spawn_app().await;
    let created = app
        .post(
            "/agents",
            json!({"name": "Front desk", "type": "flow", "flow_config": front_desk()}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert_eq!(
        created.body["warnings"],
        json!([]),
        "no node needs the model"
    );
    let id = created.body["id"].as_str().unwrap();
    let path = format!("/agents/{id}/flow/test");
    let r = app
        .post(&path, json!({"turns": ["Hi, umm, what time do you OPEN?"]}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let d = &r.body["data"];
    assert_eq!(d["end_reason"], "agent_hangup", "{d}");
    assert_eq!(
        trail(&d["path"]),
        [
            ("start", "start"),
            ("menu", "next_step_id"),
            (
                "hours",
                "when: caller.last_words matches /\\b(hours?|open)\\b/"
            )
        ]
    );
    // A miss asks again in the node's own words; the words of one node are not checked at the next.
    let r = app
        .post(
            &path,
            json!({"turns": ["Hello?", "I'd like to reserve, please.", "Just me and three friends, four."]}),
        )
        .await;
    let d = &r.body["data"];
    assert_eq!(d["end_reason"], "agent_hangup", "{d}");
    assert_eq!(d["final_node"], "booked", "{d}");
    let said = crate::converse::agent_lines(d);
    assert_eq!(
        said,
        [
            "Hello, Acme Bistro. Would you like to book a table, or hear our hours?",
            "Say book, or hours.",
            "For how many people?",
            "Your table is booked. Goodbye!"
        ]
    );
}

#[tokio::test]
async fn a_sip_call_to_a_flow_agent_follows_its_nodes_and_keeps_its_path() {
    let vendor = VendorServer::start().await;
    vendor.transcript("That's all, thanks.", Duration::ZERO);
    vendor.reply(Reply::tool_calls(&[("c1", "go_to_bye", "{}")]));
    // The end-of-call analysis asks the model next.
    vendor.reply(Reply::text(&[
        "{\"summary\": \"The caller needed nothing.\", \"extracted\": {}}",
    ]));
    let s = conversing_app_with(&vendor, |_| {}).await;
    let flow = flow(json!([
        {"id": "start", "type": "start", "greeting": "Hi, this is Ada.", "is_literal": true, "next_step_id": "help"},
        {"id": "help", "type": "conversation", "name": "Help", "instructions": "Help the caller.",
         "transitions": [{"next_step_id": "bye", "condition": "the caller is done"}]},
        {"id": "bye", "type": "end", "greeting": "Goodbye!", "is_literal": true}
    ]));
    let (agent_id, _, slug) = endpoint(
        &s.app,
        json!({"type": "flow", "flow_config": flow, "vad_stop_secs": 0.5,
               "greeting_message": "Never said: the flow greets."}),
        json!({}),
    )
    .await;
    let live = Live::open(&s.app).await;
    let (mut ua, media) = call_slug(&s, &slug).await;
    live.agent_said("Hi, this is Ada.").await;
    ua.stream_tone(media, 75).await;
    // The flow says goodbye and hangs up.
    ua.expect_request("BYE", Duration::from_secs(15)).await;
    let call = ended_call(&s.app, 1).await;
    assert_eq!(call["end_reason"], "agent_hangup", "{call}");
    let id = call["id"].as_str().unwrap();
    let detail = eventually(Duration::from_secs(10), "the call's analysis", || async {
        let d = s.app.get(&format!("/calls/{id}")).await.body;
        (d["analysis_status"] == "completed").then_some(d)
    })
    .await;
    let path = trail(&detail["flow_path"]);
    assert_eq!(
        path,
        [
            ("start", "start"),
            ("help", "next_step_id"),
            ("bye", "model: the caller is done")
        ]
    );
    let turns = turns_of(&detail["transcript"]);
    assert_eq!(
        turns,
        [
            ("agent", "Hi, this is Ada.", "start"),
            ("user", "That's all, thanks.", "start"),
            ("agent", "Goodbye!", "bye"),
        ]
    );
    // The model was asked once, in `help`, and offered its edge only.
    let requests = vendor.conversation_requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let tools = &requests[0].1["tools"];
    assert_eq!(tools.as_array().unwrap().len(), 1, "{tools}");
    assert_eq!(tools[0]["function"]["name"], "go_to_bye");

    // Replayed against the version it ran: the same path, no divergence.
    vendor.reply(Reply::tool_calls(&[("c2", "go_to_bye", "{}")]));
    let replay = |body: Value| {
        let path = format!("/agents/{agent_id}/flow/test");
        let app = &s.app;
        async move { app.post(&path, body).await }
    };
    let same = replay(json!({"replay_call_id": id, "flow_version": 1, "dry_run": true})).await;
    assert_eq!(same.status, StatusCode::OK, "{}", same.text);
    let r = &same.body["data"]["replay"];
    assert_eq!(r["first_divergence"], Value::Null, "{r}");
    assert_eq!(r["turns"][0]["text"], "That's all, thanks.");
    assert_eq!(r["turns"][0]["original"]["answered_in"], "bye");
    assert_eq!(r["turns"][0]["replay"]["answered_in"], "bye");

    // A new version sends callers of tier `vip` to their own node first: the replay parts
    // from the original call at its first turn, where the check says it must.
    let v2 = json!({"nodes": [
        {"id": "start", "type": "start", "greeting": "Hi, this is Ada.", "is_literal": true, "next_step_id": "help"},
        {"id": "help", "type": "conversation", "instructions": "Help the caller.",
         "transitions": [
            {"next_step_id": "vip", "when": {"variable": "metadata.tier", "equals": "vip"}},
            {"next_step_id": "bye", "condition": "the caller is done"}]},
        {"id": "vip", "type": "conversation", "greeting": "Welcome back, valued customer.", "is_literal": true,
         "transitions": [{"next_step_id": "bye", "condition": "the caller is done"}]},
        {"id": "bye", "type": "end", "greeting": "Goodbye!", "is_literal": true}
    ], "flow_config_version": 1, "metadata": {"custom_metadata_keys": ["tier"]}});
    let r = s
        .app
        .patch(&format!("/agents/{agent_id}"), json!({"flow_config": v2}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let parted =
        replay(json!({"replay_call_id": id, "metadata": {"tier": "vip"}, "dry_run": true})).await;
    assert_eq!(parted.status, StatusCode::OK, "{}", parted.text);
    let r = &parted.body["data"]["replay"];
    assert_eq!(r["first_divergence"], 0, "{r}");
    assert_eq!(r["turns"][0]["original"]["answered_in"], "bye");
    assert_eq!(r["turns"][0]["replay"]["answered_in"], "vip");
    assert_eq!(
        parted.body["data"]["path"][2]["reason"],
        "when: metadata.tier equals vip"
    );
    // Another workspace's call is not found; neither is a call without caller turns there.
    let other = replay(json!({"replay_call_id": "01a1fc49-0000-7000-8000-000000000000"})).await;
    assert_eq!(other.status, StatusCode::NOT_FOUND, "{}", other.text);
}

#[tokio::test]
async fn a_dry_run_answers_a_tool_with_its_own_sample_when_its_node_declares_none() {
    let vendor = VendorServer::start().await;
    let app = spawn_app_with(|c| vendor.serve(c)).await;
    let tool = app
        .post(
            "/tools",
            json!({"name": "find customer", "description": "Finds the customer",
                   "config": {"url": "https://8.8.8.8/hook", "sample_result": {"tier": "gold"},
                              "payload_config": {"extraction_parameters": [{"name": "email", "description": "Their email"}]}}}),
        )
        .await;
    assert_eq!(tool.status, StatusCode::CREATED, "{}", tool.text);
    let tool_id = tool.body["id"].as_str().unwrap();
    let created = app
        .post(
            "/agents",
            json!({"name": "Finder", "type": "flow", "flow_config": flow(json!([
                {"id": "start", "type": "start", "greeting": "Hi.", "is_literal": true, "next_step_id": "find"},
                {"id": "find", "type": "tool_call", "tool_id": tool_id, "next_step_id": "done"},
                {"id": "done", "type": "end", "greeting": "Found you.", "is_literal": true}
            ]))}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let id = created.body["id"].as_str().unwrap();
    let attached = app
        .put(&format!("/agents/{id}/tools/{tool_id}"), json!({}))
        .await;
    assert_eq!(attached.status, StatusCode::OK, "{}", attached.text);
    vendor.reply(Reply::tool_calls(&[(
        "c1",
        "extract_arguments",
        r#"{"email": "ada@example.com"}"#,
    )]));
    let r = app
        .post(
            &format!("/agents/{id}/flow/test"),
            json!({"turns": ["It's Ada."], "dry_run": true}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let d = &r.body["data"];
    assert_eq!(d["final_node"], "done", "{d}");
    assert_eq!(
        d["variables"]["find.result"],
        json!({"tier": "gold"}),
        "{d}"
    );
    let run = d["dispatches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == tool.body["name"])
        .expect("the tool's run");
    assert_eq!(run["response_preview"], "dry run: {\"tier\":\"gold\"}");
    assert_eq!(run["arguments"]["email"], "ada@example.com");
}
