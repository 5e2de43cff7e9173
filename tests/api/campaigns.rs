//! Campaigns: creation, the ten PATCH rules, the state table, preflight and audit events.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchboard_actors::campaign::NumberStatus;
use switchboard_actors::phone::{PhoneNumber, parse_country};

use crate::helpers::{TestApp, spawn_app};

/// An agent with the given duration cap.
pub async fn agent(app: &TestApp, max_call_duration_secs: Option<i64>) -> String {
    let resp = app
        .post(
            "/agents",
            json!({"name": "Ava", "max_call_duration_secs": max_call_duration_secs}),
        )
        .await;
    assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text);
    resp.body["id"].as_str().unwrap().to_owned()
}

pub async fn number(app: &TestApp, e164: &str, status: &str) -> String {
    let parsed = PhoneNumber::parse(e164, parse_country("IL").unwrap()).unwrap();
    app.store
        .add_owned_number(
            app.workspace_id,
            &parsed,
            NumberStatus::parse(status).expect("a number status"),
        )
        .await
        .unwrap()
        .id
        .to_string()
}

/// A campaign ready to launch: agent with a cap, active number, an always-open window.
async fn ready_campaign(app: &TestApp, name: &str) -> String {
    // Enough credit that the engine does not pause the campaign for money.
    crate::helpers::credit(&app.store, app.workspace_id, 100_000).await;
    let agent = agent(app, Some(300)).await;
    let number = number(
        app,
        &format!("+97250{}", &uuid::Uuid::now_v7().as_u128().to_string()[..7]),
        "active",
    )
    .await;
    let resp = app
        .post(
            "/campaigns",
            json!({"name": name, "agent_id": agent, "from_phone_number_id": number,
                   "calling_window": {"timezone": "UTC", "start": "00:00", "end": "24:00"}}),
        )
        .await;
    assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text);
    resp.body["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_new_campaign_is_a_draft_with_the_documented_defaults() {
    let app = spawn_app().await;
    let resp = app
        .post("/campaigns", json!({"name": "  Spring outreach  "}))
        .await;
    assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text);
    let c = &resp.body;
    assert_eq!(c["status"], "draft");
    assert_eq!(c["name"], "Spring outreach");
    assert_eq!(c["company_id"], app.workspace_id.to_string());
    for (field, value) in [
        ("max_attempts", json!(3)),
        ("max_infra_retries", json!(3)),
        ("retry_no_answer_seconds", json!(3600)),
        ("retry_completed_seconds", json!(86400)),
        ("double_dial_gap_seconds", json!(30)),
        ("max_calls_per_day", json!(1000)),
        ("min_seconds_between_calls", json!(0)),
        ("max_in_flight", json!(1)),
        ("budget_cents", Value::Null),
        ("randomize_retry_time", json!(false)),
        ("double_dial_enabled", json!(false)),
        ("stop_on_no_answer", json!(false)),
        ("spent_cents", json!(0)),
        ("total_leads", json!(0)),
        ("started_at", Value::Null),
    ] {
        assert_eq!(c[field], value, "{field}");
    }
    assert_eq!(c["retry_rules"]["max_attempts"], 3);
    assert_eq!(c["stats"]["contacts"]["pending"], 0);
    assert!(c["agent"].is_null() && c["from_phone_number"].is_null());
    let events = app
        .get(&format!("/campaigns/{}/events", c["id"].as_str().unwrap()))
        .await;
    assert_eq!(events.body["data"][0]["kind"], "created");
}

#[tokio::test]
async fn creation_refuses_missing_names_and_engine_owned_fields() {
    let app = spawn_app().await;
    let resp = app.post("/campaigns", json!({"description": "x"})).await;
    assert_eq!(resp.status, StatusCode::BAD_REQUEST);
    assert!(resp.body["error"].as_str().unwrap().contains("name"));
    for field in [
        "status",
        "spent_cents",
        "last_tick_result",
        "total_leads",
        "id",
        "bogus",
    ] {
        let resp = app.post("/campaigns", json!({"name": "x", field: 1})).await;
        assert_eq!(resp.status, StatusCode::BAD_REQUEST, "{field}");
        assert!(
            resp.body["error"]
                .as_str()
                .unwrap()
                .contains("max_in_flight"),
            "message lists writable fields: {}",
            resp.text
        );
    }
    let resp = app.post("/campaigns", json!({"name": "   "})).await;
    assert_eq!(resp.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn names_are_unique_among_non_archived_campaigns_only() {
    let app = spawn_app().await;
    let first = app.post("/campaigns", json!({"name": "Q4"})).await;
    let dup = app.post("/campaigns", json!({"name": "Q4"})).await;
    assert_eq!(dup.status, StatusCode::CONFLICT);
    assert_eq!(dup.error_code(), "CONFLICT");
    let id = first.body["id"].as_str().unwrap();
    assert_eq!(
        app.delete(&format!("/campaigns/{id}")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        app.post("/campaigns", json!({"name": "Q4"})).await.status,
        StatusCode::CREATED
    );
}

#[tokio::test]
async fn patch_changes_only_the_keys_sent() {
    let app = spawn_app().await;
    let id = app
        .post(
            "/campaigns",
            json!({"name": "A", "description": "keep", "max_attempts": 5}),
        )
        .await
        .body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let resp = app
        .patch(
            &format!("/campaigns/{id}"),
            json!({"max_in_flight": 4, "budget_cents": 5000}),
        )
        .await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text);
    assert_eq!(resp.body["max_in_flight"], 4);
    assert_eq!(resp.body["budget_cents"], 5000);
    assert_eq!(resp.body["description"], "keep");
    assert_eq!(resp.body["max_attempts"], 5);
    assert_eq!(resp.body["status"], "draft");
    let resp = app
        .patch(&format!("/campaigns/{id}"), json!({"budget_cents": null}))
        .await;
    assert!(resp.body["budget_cents"].is_null(), "null removes the cap");
}

#[tokio::test]
async fn patch_enforces_every_field_rule() {
    let app = spawn_app().await;
    let id = app.post("/campaigns", json!({"name": "Rules"})).await.body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/campaigns/{id}");
    let (_, other) = app.other_workspace().await;
    let foreign_disposition = app
        .send(Method::GET, "/dispositions", Some(&other), None)
        .await
        .body["data"][0]["id"]
        .clone();
    let bad = [
        json!({}),
        json!({"status": "running"}),
        json!({"spent_cents": 1}),
        json!({"nope": 1}),
        json!({"name": ""}),
        json!({"name": 5}),
        json!({"max_attempts": 0}),
        json!({"max_attempts": 1000}),
        json!({"max_attempts": "3"}),
        json!({"max_attempts": 2.5}),
        json!({"max_infra_retries": 21}),
        json!({"retry_no_answer_seconds": 29}),
        json!({"retry_completed_seconds": 604801}),
        json!({"double_dial_gap_seconds": 9}),
        json!({"max_calls_per_day": 0}),
        json!({"min_seconds_between_calls": 86401}),
        json!({"max_in_flight": 9}),
        json!({"budget_cents": 0}),
        json!({"budget_cents": -5}),
        json!({"budget_cents": "100"}),
        json!({"stop_on_voicemail": "yes"}),
        json!({"double_dial_enabled": 1}),
        json!({"regulatory_basis": "lawful_basis_confirmed"}),
        json!({"stop_disposition_ids": "abc"}),
        json!({"stop_disposition_ids": ["not-a-uuid"]}),
        json!({"stop_disposition_ids": [foreign_disposition]}),
        json!({"calling_window": "9-5"}),
        json!({"calling_window": {"timezone": "Nowhere/City", "start": "09:00", "end": "17:00"}}),
        json!({"starts_at": "tomorrow"}),
        json!({"starts_at": "2027-01-02T00:00:00Z", "ends_at": "2027-01-01T00:00:00Z"}),
        json!({"agent_id": uuid::Uuid::now_v7().to_string()}),
        json!({"from_phone_number_id": uuid::Uuid::now_v7().to_string()}),
    ];
    for body in bad {
        let resp = app.patch(&path, body.clone()).await;
        assert_eq!(
            resp.status,
            StatusCode::BAD_REQUEST,
            "{body} -> {}",
            resp.text
        );
        assert_eq!(resp.error_code(), "INVALID_REQUEST");
    }
    let invalid_json = app
        .send_raw(Method::PATCH, &path, "application/json", "{\"name\": ")
        .await;
    assert_eq!(invalid_json.status, StatusCode::BAD_REQUEST);
    // Nothing was half-applied.
    let now = app.get(&path).await;
    assert_eq!(now.body["max_attempts"], 3);
    assert_eq!(now.body["name"], "Rules");

    let disposition = app.get("/dispositions").await.body["data"][1]["id"].clone();
    let ok = app
        .patch(
            &path,
            json!({"regulatory_basis": "consent", "stop_disposition_ids": [disposition], "stop_on_voicemail": true,
                   "calling_window": {"timezone": "America/New_York", "days": ["mon", "fri"], "start": "09:00", "end": "17:00"}}),
        )
        .await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.text);
    assert_eq!(ok.body["stop_dispositions"][0]["id"], disposition);
    assert_eq!(ok.body["calling_window"]["use_contact_timezone"], true);
    assert_eq!(ok.body["regulatory_basis"], "consent");
}

#[tokio::test]
async fn launch_preflight_names_the_problem() {
    let app = spawn_app().await;
    let id = app
        .post("/campaigns", json!({"name": "Preflight"}))
        .await
        .body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/campaigns/{id}");
    let launch = format!("{path}/launch");

    let resp = app.post_empty(&launch).await;
    assert_eq!(
        (resp.status, resp.error_code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "CAMPAIGN_NOT_READY")
    );
    assert!(
        resp.body["message"].as_str().unwrap().contains("agent"),
        "{}",
        resp.text
    );

    let uncapped = agent(&app, None).await;
    app.patch(&path, json!({"agent_id": uncapped})).await;
    let resp = app.post_empty(&launch).await;
    assert!(
        resp.body["message"]
            .as_str()
            .unwrap()
            .contains("max_call_duration_secs"),
        "{}",
        resp.text
    );

    let capped = agent(&app, Some(600)).await;
    app.patch(&path, json!({"agent_id": capped})).await;
    let resp = app.post_empty(&launch).await;
    assert!(
        resp.body["message"]
            .as_str()
            .unwrap()
            .contains("from_phone_number_id"),
        "{}",
        resp.text
    );

    let pending = number(&app, "+972501112233", "pending_requirements").await;
    app.patch(&path, json!({"from_phone_number_id": pending}))
        .await;
    let resp = app.post_empty(&launch).await;
    assert!(
        resp.body["message"]
            .as_str()
            .unwrap()
            .contains("not active"),
        "{}",
        resp.text
    );

    let active = number(&app, "+972501112244", "active").await;
    let soon = chrono::Utc::now() + chrono::Duration::hours(2);
    app.patch(
        &path,
        json!({"from_phone_number_id": active, "ends_at": soon.to_rfc3339(),
        "calling_window": {"timezone": "UTC", "days": ["mon"], "start": "00:00", "end": "00:01"}}),
    )
    .await;
    let resp = app.post_empty(&launch).await;
    // Unless the test runs in the first minute of a Monday, the window is unreachable.
    if resp.status == StatusCode::UNPROCESSABLE_ENTITY {
        assert!(
            resp.body["message"]
                .as_str()
                .unwrap()
                .contains("calling window"),
            "{}",
            resp.text
        );
    }
    assert_eq!(
        app.get(&path).await.body["status"],
        if resp.status == StatusCode::OK {
            "running"
        } else {
            "draft"
        }
    );
}

#[tokio::test]
async fn the_state_table_moves_campaigns_and_records_audit_events() {
    let app = spawn_app().await;
    let id = ready_campaign(&app, "Table").await;
    let path = format!("/campaigns/{id}");

    let launched = app.post_empty(&format!("{path}/launch")).await;
    assert_eq!(launched.status, StatusCode::OK, "{}", launched.text);
    assert_eq!(launched.body["status"], "running");
    assert!(
        launched.body["from_number"]
            .as_str()
            .unwrap()
            .starts_with("+972")
    );
    let started_at = launched.body["started_at"].clone();
    assert!(started_at.is_string());

    let again = app.post_empty(&format!("{path}/resume")).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.body["message"], "Already running");
    assert_eq!(again.body["status"], "running");

    let paused = app.post_empty(&format!("{path}/pause")).await;
    assert_eq!(paused.body["status"], "paused");
    // PATCH never changes status.
    let patched = app.patch(&path, json!({"max_in_flight": 2})).await;
    assert_eq!(patched.body["status"], "paused");

    let resumed = app.post_empty(&format!("{path}/resume")).await;
    assert_eq!(resumed.body["status"], "running");
    assert_eq!(
        resumed.body["started_at"], started_at,
        "resume does not move started_at"
    );

    let stopped = app.post_empty(&format!("{path}/stop")).await;
    assert_eq!(stopped.body["status"], "stopped");
    for action in ["resume", "launch", "pause", "stop"] {
        let resp = app.post_empty(&format!("{path}/{action}")).await;
        assert_eq!(
            resp.status,
            StatusCode::BAD_REQUEST,
            "{action} on a stopped campaign"
        );
    }
    let resp = app.patch(&path, json!({"max_in_flight": 3})).await;
    assert_eq!(
        resp.status,
        StatusCode::BAD_REQUEST,
        "terminal campaigns cannot be edited"
    );
    assert_eq!(
        app.get(&path).await.body["status"],
        "stopped",
        "stopped campaigns stay readable"
    );

    let kinds: Vec<String> = app.get(&format!("{path}/events")).await.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        kinds,
        [
            "created", "launched", "paused", "updated", "resumed", "stopped"
        ]
    );

    let archived = app.delete(&path).await;
    assert_eq!(archived.status, StatusCode::OK);
    assert_eq!(archived.body["status"], "archived");
    assert_eq!(app.get(&path).await.status, StatusCode::NOT_FOUND);
    for action in ["resume", "launch", "pause", "stop"] {
        assert_eq!(
            app.post_empty(&format!("{path}/{action}")).await.status,
            StatusCode::NOT_FOUND
        );
    }
    assert_eq!(
        app.patch(&path, json!({"name": "x"})).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(app.delete(&path).await.status, StatusCode::NOT_FOUND);
    let list = app.get("/campaigns").await;
    assert!(
        list.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["id"] != id.as_str())
    );
}

#[tokio::test]
async fn pausing_a_draft_is_refused_and_drafts_can_be_stopped_or_archived() {
    let app = spawn_app().await;
    let id = app.post("/campaigns", json!({"name": "Draft"})).await.body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        app.post_empty(&format!("/campaigns/{id}/pause"))
            .await
            .status,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        app.post_empty(&format!("/campaigns/{id}/stop")).await.body["status"],
        "stopped"
    );
    assert_eq!(
        app.delete(&format!("/campaigns/{id}")).await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn a_campaign_starting_later_waits_as_scheduled() {
    let app = spawn_app().await;
    let id = ready_campaign(&app, "Later").await;
    let later = chrono::Utc::now() + chrono::Duration::days(1);
    app.patch(
        &format!("/campaigns/{id}"),
        json!({"starts_at": later.to_rfc3339()}),
    )
    .await;
    let resp = app.post_empty(&format!("/campaigns/{id}/launch")).await;
    assert_eq!(resp.body["status"], "scheduled", "{}", resp.text);
}

#[tokio::test]
async fn lists_are_paginated_and_hide_archived_campaigns() {
    let app = spawn_app().await;
    for i in 0..3 {
        app.post("/campaigns", json!({"name": format!("C{i}")}))
            .await;
    }
    let page = app.get("/campaigns?limit=2").await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(page.body["data"].as_array().unwrap().len(), 2);
    assert_eq!(
        page.body["pagination"],
        json!({"total": 3, "limit": 2, "offset": 0, "has_more": true})
    );
    let filtered = app.get("/campaigns?status=draft&offset=2").await;
    assert_eq!(filtered.body["pagination"]["has_more"], false);
    assert_eq!(
        app.get("/campaigns?status=archived").await.status,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        app.get("/campaigns?limit=0").await.status,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        app.get("/campaigns?limit=abc").await.status,
        StatusCode::BAD_REQUEST
    );
}

#[tokio::test]
async fn campaigns_of_another_workspace_read_as_missing() {
    let app = spawn_app().await;
    let id = app.post("/campaigns", json!({"name": "Mine"})).await.body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, other) = app.other_workspace().await;
    let path = format!("/campaigns/{id}");
    for (method, p, body) in [
        (Method::GET, path.clone(), None),
        (Method::PATCH, path.clone(), Some(json!({"name": "Theirs"}))),
        (Method::DELETE, path.clone(), None),
        (Method::POST, format!("{path}/launch"), None),
        (Method::POST, format!("{path}/stop"), None),
        (Method::GET, format!("{path}/events"), None),
        (Method::GET, format!("{path}/contacts"), None),
        (
            Method::POST,
            format!("{path}/contacts"),
            Some(json!({"contacts": []})),
        ),
    ] {
        let resp = app.send(method.clone(), &p, Some(&other), body).await;
        assert_eq!(resp.status, StatusCode::NOT_FOUND, "{method} {p}");
    }
    assert_eq!(app.get(&path).await.body["name"], "Mine");
    assert_eq!(
        app.send(Method::GET, "/campaigns", Some(&other), None)
            .await
            .body["pagination"]["total"],
        0
    );
}
