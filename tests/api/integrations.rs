use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::spawn_app;

fn flow(nodes: Value) -> Value {
    json!({"nodes": nodes, "flow_config_version": 1, "metadata": {"custom_metadata_keys": ["order_id"]}})
}

#[tokio::test]
async fn flows_are_checked_against_integrations_and_every_save_is_a_version() {
    let app = spawn_app().await;
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
    let list = app.get("/integrations").await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.text);
    assert_eq!(list.body["data"][0]["status"], "connected");
    assert_eq!(list.body["data"][0]["provider"], "google_calendar");

    let tool = app
        .post(
            "/tools",
            json!({"name": "lookup", "type": "function", "config": {}}),
        )
        .await;
    assert_eq!(tool.status, StatusCode::CREATED);

    let good = flow(json!([
        {"id": "start", "type": "start", "next_step_id": "book"},
        {"id": "book", "type": "integration_call", "integration_id": cal.id, "provider": "google_calendar",
         "action": "create_event",
         "args_template": {
             "start_time": {"type": "ai_extract", "description": "When the caller wants to come"},
             "end_time": "{{book.start_time}}",
             "calendar_id": {"type": "literal", "value": "primary"},
             "summary": "Visit for {{metadata.user_number}} {{metadata.not_declared}}"
         },
         "success_next_step_id": "done", "error_next_step_id": "done"},
        {"id": "done", "type": "end"}
    ]));
    let created = app
        .post(
            "/agents",
            json!({"name": "Booker", "type": "flow", "flow_config": good}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let agent_id = created.body["id"].as_str().unwrap().to_string();

    // Each broken node reports its issue.
    let bad = flow(json!([
        {"id": "start", "type": "start", "next_step_id": "book"},
        {"id": "book", "type": "integration_call", "integration_id": cal.id, "provider": "google_calendar",
         "action": "delete_everything", "is_global": true,
         "args_template": {"end_time": "{{ghost.start_time}}", "start": "{{done.x}}", "odd": 5},
         "success_next_step_id": "nowhere"},
        {"id": "mail", "type": "integration_call", "integration_id": uuid::Uuid::new_v4(), "provider": "gmail",
         "action": "send_email", "args_template": {"to": "{{book.calendar_id}}"}},
        {"id": "done", "type": "end"}
    ]));
    let r = app
        .patch(&format!("/agents/{agent_id}"), json!({"flow_config": bad}))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert_eq!(r.error_code(), "FLOW_INVALID");
    let issues = r.body["issues"].as_array().unwrap();
    let has = |node: &str, code: &str| {
        issues
            .iter()
            .any(|i| i["node_id"] == node && i["code"] == code)
    };
    assert!(has("book", "action_invalid"), "{issues:?}");
    assert!(has("book", "is_global_not_allowed"), "{issues:?}");
    assert!(
        has("book", "args_template_dangling_reference"),
        "{issues:?}"
    );
    assert!(has("book", "args_template_invalid"), "{issues:?}");
    assert!(has("book", "transition_dangling"), "{issues:?}");
    assert!(has("mail", "integration_not_found"), "{issues:?}");
    // book.calendar_id is not an ai_extract argument of book: dangling too.
    assert!(
        has("mail", "args_template_dangling_reference"),
        "{issues:?}"
    );

    // A save that passes is a new version; a refused one is not.
    let second = app
        .patch(
            &format!("/agents/{agent_id}"),
            json!({"flow_config": good, "name": "Booker 2"}),
        )
        .await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.text);
    app.patch(&format!("/agents/{agent_id}"), json!({"name": "Booker 3"}))
        .await;
    let versions = app.get(&format!("/agents/{agent_id}/flow/versions")).await;
    assert_eq!(versions.status, StatusCode::OK, "{}", versions.text);
    let v = versions.body["data"].as_array().unwrap();
    assert_eq!(v.len(), 2, "a save without flow_config is not a flow save");
    assert_eq!(v[0]["version"], 2);
    assert_eq!(v[1]["version"], 1);
    assert_eq!(v[0]["flow_config"]["nodes"][1]["id"], "book");

    // Disconnecting the integration makes the next save of that flow fail.
    let d = app.delete(&format!("/integrations/{}", cal.id)).await;
    assert_eq!(d.status, StatusCode::OK, "{}", d.text);
    assert_eq!(d.body["status"], "disconnected");
    let r = app
        .patch(&format!("/agents/{agent_id}"), json!({"flow_config": good}))
        .await;
    assert_eq!(r.error_code(), "FLOW_INVALID");
    assert_eq!(r.body["issues"][0]["code"], "integration_not_found");
    let (_, other) = app.other_workspace().await;
    let r = app
        .send(
            reqwest::Method::DELETE,
            &format!("/integrations/{}", cal.id),
            Some(&other),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn tool_call_nodes_supply_their_tools_extraction_parameters() {
    let app = spawn_app().await;
    let mail = app
        .store
        .connect_integration(app.workspace_id, "gmail", "team@example.com", |_| None)
        .await
        .unwrap();
    let tool = app
        .post(
            "/tools",
            json!({"name": "find customer", "description": "Finds the customer",
                   "config": {"url": "https://8.8.8.8/hook",
                              "payload_config": {"extraction_parameters": [{"name": "email", "description": "Their email"}]}}}),
        )
        .await;
    assert_eq!(tool.status, StatusCode::CREATED, "{}", tool.text);
    let tool_id = tool.body["id"].as_str().unwrap();
    let nodes = |arg: &str| {
        flow(json!([
            {"id": "start", "type": "start", "next_step_id": "find"},
            {"id": "find", "type": "tool_call", "tool_id": tool_id, "next_step_id": "send"},
            {"id": "send", "type": "integration_call", "integration_id": mail.id, "provider": "gmail",
             "action": "send_email", "args_template": {"to": format!("{{{{find.{arg}}}}}")},
             "success_next_step_id": "done"},
            {"id": "done", "type": "end"}
        ]))
    };
    let ok = app
        .post(
            "/agents",
            json!({"name": "Mailer", "type": "flow", "flow_config": nodes("email")}),
        )
        .await;
    assert_eq!(ok.status, StatusCode::CREATED, "{}", ok.text);
    let bad = app
        .post(
            "/agents",
            json!({"name": "Mailer", "type": "flow", "flow_config": nodes("phone")}),
        )
        .await;
    assert_eq!(bad.error_code(), "FLOW_INVALID");
    assert_eq!(
        bad.body["issues"][0]["code"],
        "args_template_dangling_reference"
    );
}
