//! integration_call nodes against the stand-in Google, through the simulator's real runs and
//! a live SIP call: each routing rule of the spec, the OAuth refresh, sealed grants, and a
//! booking confirmed by email.
//!
//! Past 600 lines on purpose: one rig (the stand-in Google, a connected calendar, a flow agent)
//! serves every test, and each test is one rule of the spec; split, the rig would be shared
//! across files for no gain in reading.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchboard::domain::secrets::Secrets;
use switchboard::runtime::integrations::connect;
use switchboard::store::{Integration, IntegrationStatus};

use crate::converse::{Live, call_slug, conversing_app_with};
use crate::google::{Fault, GoogleStandIn, grant};
use crate::helpers::{TestApp, eventually, spawn_app_with};
use crate::sip_calls::{ended_call, endpoint};
use crate::vendor::{Reply, VendorServer};

/// The slot the tests ask about: 10:00-10:30 in Berlin, 09:00-09:30 UTC.
const SLOT: (&str, &str) = ("2026-12-01T10:00", "2026-12-01T10:30");

/// Connects `account` with the stand-in's grant (again: reconnects it).
async fn connect_google(app: &TestApp, provider: &str, account: &str) -> Integration {
    let secrets = Secrets::load_or_create(&app.dir().join("secrets.key")).unwrap();
    connect(
        &app.store,
        &secrets,
        app.workspace_id,
        provider,
        account,
        Some(&grant()),
    )
    .await
    .unwrap()
}

/// A flow that checks the slot in `metadata` and says where the result sent it.
pub(crate) fn routing(calendar: &str) -> Value {
    json!({"nodes": [
        {"id": "start", "type": "start", "greeting": "Hi.", "is_literal": true, "next_step_id": "check"},
        {"id": "check", "type": "integration_call", "integration_id": calendar, "provider": "google_calendar",
         "action": "check_availability",
         "args_template": {"start_time": "{{metadata.start}}", "end_time": "{{metadata.end}}",
                           "time_zone": {"type": "literal", "value": "Europe/Berlin"}},
         "custom": [
            {"path": "$.available", "equals": "false", "next_step_id": "taken"},
            {"path": "$.available", "equals": false, "next_step_id": "never"},
            {"path": "$.timeZone", "equals": "Europe/Paris", "next_step_id": "never"}],
         "success_next_step_id": "free", "error_next_step_id": "sorry"},
        {"id": "taken", "type": "end", "greeting": "That time is taken.", "is_literal": true},
        {"id": "never", "type": "end", "greeting": "Never said.", "is_literal": true},
        {"id": "free", "type": "end", "greeting": "That time is free.", "is_literal": true},
        {"id": "sorry", "type": "end", "greeting": "Sorry, the calendar cannot be reached.", "is_literal": true}
    ], "flow_config_version": 1, "metadata": {"custom_metadata_keys": ["start", "end"]}})
}

struct Rig {
    app: TestApp,
    google: GoogleStandIn,
    _vendor: VendorServer,
    calendar: Integration,
    agent: String,
}

async fn rig() -> Rig {
    rig_with("Router", routing).await
}

/// The service with the stand-in Google, a connected calendar, and a flow agent on it.
async fn rig_with(name: &str, flow: fn(&str) -> Value) -> Rig {
    let google = GoogleStandIn::start().await;
    let vendor = VendorServer::start().await;
    let app = spawn_app_with(|c| {
        vendor.serve(c);
        google.serve(c);
    })
    .await;
    let calendar = connect_google(&app, "google_calendar", "desk@example.com").await;
    let created = app
        .post(
            "/agents",
            json!({"name": name, "type": "flow", "flow_config": flow(&calendar.id.to_string())}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    Rig {
        agent: created.body["id"].as_str().unwrap().to_string(),
        app,
        google,
        _vendor: vendor,
        calendar,
    }
}

/// What one real run of the flow did: its last node, the reason it went there, and the
/// integration's record.
struct Run {
    final_node: String,
    reason: String,
    dispatch: Value,
}

impl Rig {
    async fn run_with(&self, body: Value) -> Run {
        let r = self
            .app
            .post(&format!("/agents/{}/flow/test", self.agent), body)
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        let d = &r.body["data"];
        let path = d["path"].as_array().unwrap();
        Run {
            final_node: d["final_node"].as_str().unwrap_or_default().to_string(),
            reason: path.last().unwrap()["reason"].as_str().unwrap().to_string(),
            dispatch: d["dispatches"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| {
                    e["name"]
                        .as_str()
                        .is_some_and(|n| n.starts_with("google_calendar."))
                })
                .cloned()
                .unwrap_or(Value::Null),
        }
    }

    async fn run(&self, metadata: Value) -> Run {
        self.run_with(json!({"turns": ["Hi."], "metadata": metadata}))
            .await
    }

    async fn slot(&self) -> Run {
        self.run(json!({"start": SLOT.0, "end": SLOT.1})).await
    }
}

#[tokio::test]
async fn an_integration_call_takes_exactly_the_edge_the_spec_routes_it_to() {
    let r = rig().await;

    // Free: no custom branch matches, success_next_step_id fires. The flow sees wall-clock
    // times in the zone; the call keeps Google's answer as it came.
    let free = r.slot().await;
    assert_eq!(free.final_node, "free");
    assert_eq!(
        free.reason,
        "success_next_step_id: no custom branch matched"
    );
    assert_eq!(free.dispatch["status"], "succeeded", "{}", free.dispatch);
    assert_eq!(
        free.dispatch["arguments"],
        json!({"start_time": SLOT.0, "end_time": SLOT.1, "time_zone": "Europe/Berlin"})
    );
    let view: Value =
        serde_json::from_str(free.dispatch["response_preview"].as_str().unwrap()).unwrap();
    assert_eq!(view["available"], true);
    assert_eq!(view["timeZone"], "Europe/Berlin");
    assert!(
        view["timeZone_note"]
            .as_str()
            .unwrap()
            .contains("Europe/Berlin")
    );
    let raw = free.dispatch["raw_response_preview"].as_str().unwrap();
    assert!(raw.contains("2026-12-01T10:00:00+01:00"), "{raw}");
    assert!(!raw.contains("timeZone_note"), "{raw}");

    // Busy: custom[0] ("false", a string) equals the boolean false once stringified, and
    // wins over custom[1], which matches too.
    r.google.add_event(
        "primary",
        json!({"id": "x", "summary": "Taken",
               "start": {"dateTime": "2026-12-01T09:15:00Z"}, "end": {"dateTime": "2026-12-01T09:45:00Z"}}),
    );
    let taken = r.slot().await;
    assert_eq!(taken.final_node, "taken");
    assert_eq!(taken.reason, "custom[0] matched");
    let view: Value =
        serde_json::from_str(taken.dispatch["response_preview"].as_str().unwrap()).unwrap();
    assert_eq!(
        view["calendars"]["primary"]["busy"][0],
        json!({"start": "2026-12-01 10:15", "end": "2026-12-01 10:45"})
    );

    // Each hard failure takes error_next_step_id, and says which it was.
    for (fault, kind, status) in [
        (Fault::Status(403), "provider_4xx", "failed"),
        (Fault::Status(404), "provider_4xx", "failed"),
        (Fault::Status(500), "provider_5xx", "failed"),
        (Fault::Status(503), "provider_5xx", "failed"),
        (
            Fault::Stall(Duration::from_secs(3)),
            "network_timeout",
            "timed_out",
        ),
    ] {
        r.google.fail_next(fault);
        let failed = r.slot().await;
        assert_eq!(failed.final_node, "sorry", "{fault:?}");
        assert_eq!(
            failed.reason,
            format!("error_next_step_id: {kind}"),
            "{fault:?}"
        );
        assert_eq!(failed.dispatch["status"], status, "{fault:?}");
        let error = failed.dispatch["error"].as_str().unwrap();
        assert!(error.starts_with(kind), "{error}");
        assert_eq!(failed.dispatch["raw_response_preview"], Value::Null);
    }

    // A required argument that resolves to nothing (a metadata key not given is an empty
    // string) is a hard failure, and nothing is sent.
    let sent = r.google.requests().len();
    let missing = r.run(json!({"start": SLOT.0})).await;
    assert_eq!(missing.final_node, "sorry");
    assert_eq!(
        missing.reason,
        "error_next_step_id: missing_required_argument"
    );
    assert!(
        missing.dispatch["error"]
            .as_str()
            .unwrap()
            .contains("`end_time`"),
        "{}",
        missing.dispatch
    );
    // So is a time the provider would refuse; it is not sent either.
    let refused = r
        .run(json!({"start": "tomorrow at ten", "end": SLOT.1}))
        .await;
    assert_eq!(refused.reason, "error_next_step_id: provider_4xx");
    assert_eq!(r.google.requests().len(), sent);
}

#[tokio::test]
async fn a_disconnected_integration_stays_in_error_until_it_is_connected_again() {
    let r = rig().await;
    assert_eq!(r.slot().await.final_node, "free");
    let d = r
        .app
        .delete(&format!("/integrations/{}", r.calendar.id))
        .await;
    assert_eq!(d.status, StatusCode::OK, "{}", d.text);
    let sent = r.google.requests().len();
    for _ in 0..2 {
        let run = r.slot().await;
        assert_eq!(run.final_node, "sorry");
        assert_eq!(run.reason, "error_next_step_id: integration_disconnected");
    }
    assert_eq!(r.google.requests().len(), sent, "nothing reached Google");
    // Connected again: the same integration, and the node works at once.
    let again = connect_google(&r.app, "google_calendar", "desk@example.com").await;
    assert_eq!(again.id, r.calendar.id);
    assert_eq!(again.status, IntegrationStatus::Connected);
    assert_eq!(r.slot().await.final_node, "free");

    // The account revokes access: Google refuses the grant at the next refresh, and the
    // integration is disconnected until it is connected again, even once Google would
    // honour the grant again.
    r.google.revoke(true);
    r.google.invalidate_tokens();
    let revoked = r.slot().await;
    assert_eq!(
        revoked.reason,
        "error_next_step_id: integration_disconnected"
    );
    assert!(
        revoked.dispatch["error"]
            .as_str()
            .unwrap()
            .contains("refused the grant"),
        "{}",
        revoked.dispatch
    );
    let list = r.app.get("/integrations").await;
    assert_eq!(
        list.body["data"][0]["status"], "disconnected",
        "{}",
        list.text
    );
    r.google.revoke(false);
    assert_eq!(
        r.slot().await.reason,
        "error_next_step_id: integration_disconnected"
    );
    connect_google(&r.app, "google_calendar", "desk@example.com").await;
    assert_eq!(r.slot().await.final_node, "free");
}

#[tokio::test]
async fn an_integration_of_another_workspace_or_provider_is_a_hard_failure() {
    let r = rig().await;
    let (other, _) = r.app.other_workspace().await;
    let secrets = Secrets::load_or_create(&r.app.dir().join("secrets.key")).unwrap();
    let theirs = connect(
        &r.app.store,
        &secrets,
        other,
        "google_calendar",
        "theirs@example.com",
        Some(&grant()),
    )
    .await
    .unwrap();
    let mail = connect_google(&r.app, "gmail", "desk@example.com").await;
    // Saving such a flow is refused; a version written before the check (or imported) still
    // cannot reach what is not the workspace's.
    let agent = switchboard_actors::ids::AgentId::from_uuid(r.agent.parse().unwrap());
    for (integration, version) in [(theirs.id.to_string(), 2), (mail.id.to_string(), 3)] {
        let stored = r
            .app
            .store
            .record_flow_version(r.app.workspace_id, agent, &routing(&integration))
            .await
            .unwrap();
        assert_eq!(stored, version);
        let run = r
            .run_with(json!({"turns": ["Hi."], "flow_version": version,
                             "metadata": {"start": SLOT.0, "end": SLOT.1}}))
            .await;
        assert_eq!(run.final_node, "sorry");
        assert_eq!(run.reason, "error_next_step_id: integration_foreign");
    }
    // Nothing was asked of Google for them.
    assert!(r.google.requests().is_empty(), "{:?}", r.google.requests());
}

#[tokio::test]
async fn access_tokens_are_refreshed_when_they_expire_and_once_on_a_401() {
    let r = rig().await;
    r.slot().await;
    r.slot().await;
    assert_eq!(
        r.google.issued(),
        1,
        "the access token is kept while it is valid"
    );
    // Google stops honouring it: the 401 refreshes it, and the request is sent again.
    r.google.invalidate_tokens();
    assert_eq!(r.slot().await.final_node, "free");
    assert_eq!(r.google.issued(), 2);
    // A second 401 in a row is the provider's answer: no third try.
    r.google.fail_next(Fault::Status(401));
    r.google.fail_next(Fault::Status(401));
    let denied = r.slot().await;
    assert_eq!(denied.reason, "error_next_step_id: provider_4xx");
    assert_eq!(r.google.issued(), 3);
    // A token within a minute of its expiry is refreshed before it is used.
    r.google.expires_in(30);
    r.google.invalidate_tokens();
    r.slot().await;
    let issued = r.google.issued();
    assert_eq!(r.slot().await.final_node, "free");
    assert_eq!(r.google.issued(), issued + 1);

    // The grant is sealed in the store: neither the refresh token nor the client secret is
    // in the database's files, nor in any answer.
    for entry in std::fs::read_dir(r.app.dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().contains("switchboard.db") {
            let bytes = std::fs::read(&path).unwrap();
            let text = String::from_utf8_lossy(&bytes);
            assert!(!text.contains(crate::google::REFRESH_TOKEN), "{path:?}");
            assert!(!text.contains(crate::google::CLIENT_SECRET), "{path:?}");
        }
    }
    let list = r.app.get("/integrations").await;
    assert!(!list.text.contains("refresh"), "{}", list.text);
    assert!(!list.text.contains(crate::google::CLIENT_SECRET));
}

/// A flow that cancels the event in `metadata`.
fn cancelling(calendar: &str) -> Value {
    json!({"nodes": [
        {"id": "start", "type": "start", "greeting": "Hi.", "is_literal": true, "next_step_id": "cancel"},
        {"id": "cancel", "type": "integration_call", "integration_id": calendar, "provider": "google_calendar",
         "action": "cancel_event", "args_template": {"event_id": "{{metadata.event}}"},
         "success_next_step_id": "done", "error_next_step_id": "sorry"},
        {"id": "done", "type": "end", "greeting": "Cancelled.", "is_literal": true},
        {"id": "sorry", "type": "end", "greeting": "I could not find it.", "is_literal": true}
    ], "flow_config_version": 1, "metadata": {"custom_metadata_keys": ["event"]}})
}

#[tokio::test]
async fn cancel_event_tries_primary_then_the_other_writable_calendars() {
    let r = rig_with("Canceller", cancelling).await;
    let (app, google, id) = (&r.app, &r.google, r.agent.as_str());
    google.add_event(
        "team@group.example.com",
        json!({"id": "evt9", "start": {"dateTime": "2026-12-01T09:00:00Z"}, "end": {"dateTime": "2026-12-01T09:30:00Z"}}),
    );
    let run = |event: &'static str| async move {
        let r = app
            .post(
                &format!("/agents/{id}/flow/test"),
                json!({"turns": ["Cancel it."], "metadata": {"event": event}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        r.body["data"].clone()
    };
    let d = run("evt9").await;
    assert_eq!(d["final_node"], "done", "{d}");
    let view: Value =
        serde_json::from_str(d["dispatches"][0]["response_preview"].as_str().unwrap()).unwrap();
    assert_eq!(
        view,
        json!({"cancelled": true, "event_id": "evt9", "calendar_id": "team@group.example.com"})
    );
    assert!(google.events("team@group.example.com").is_empty());
    let requests = google.requests();
    assert_eq!(
        requests,
        [
            "DELETE calendars/primary/events/evt9",
            "GET calendarList",
            "DELETE calendars/team@group.example.com/events/evt9",
        ]
    );
    // Found nowhere: the provider's 404 is a hard failure.
    let d = run("evt404").await;
    assert_eq!(d["final_node"], "sorry");
    assert_eq!(
        d["path"].as_array().unwrap().last().unwrap()["reason"],
        "error_next_step_id: provider_4xx"
    );
}

/// Book a meeting: greet, take a time and an address, check the calendar, create the event,
/// confirm by email, say goodbye.
fn booking(calendar: &str, mail: &str) -> Value {
    json!({"nodes": [
        {"id": "start", "type": "start", "greeting": "Hi, this is Ada. When would you like to meet?",
         "is_literal": true, "next_step_id": "ask"},
        {"id": "ask", "type": "conversation", "name": "Take a time",
         "instructions": "Take the meeting's start and end, and the caller's email address.",
         "variables": [{"name": "start", "description": "Start, ISO 8601"},
                       {"name": "end", "description": "End, ISO 8601"},
                       {"name": "email", "description": "The caller's email address"}],
         "transitions": [{"next_step_id": "check", "condition": "the caller gave a time and an address"}]},
        {"id": "check", "type": "integration_call", "integration_id": calendar, "provider": "google_calendar",
         "action": "check_availability",
         "args_template": {"start_time": "{{ask.start}}", "end_time": "{{ask.end}}", "time_zone": "Europe/Berlin"},
         "custom": [{"path": "$.available", "equals": false, "next_step_id": "taken"}],
         "success_next_step_id": "book", "error_next_step_id": "sorry"},
        {"id": "book", "type": "integration_call", "integration_id": calendar, "provider": "google_calendar",
         "action": "create_event",
         "args_template": {"start_time": "{{ask.start}}", "end_time": "{{ask.end}}", "time_zone": "Europe/Berlin",
                           "summary": "Call with {{metadata.user_number}}", "attendees": "{{ask.email}}"},
         "success_next_step_id": "mail", "error_next_step_id": "sorry"},
        {"id": "mail", "type": "integration_call", "integration_id": mail, "provider": "gmail",
         "action": "send_email",
         "args_template": {"to": "{{ask.email}}", "subject": "Your meeting with Acme",
                           "body": "See you on {{ask.start}} (Berlin time)."},
         "success_next_step_id": "confirm", "error_next_step_id": "confirm"},
        {"id": "confirm", "type": "end", "greeting": "You're booked, and a confirmation is on its way. Goodbye!",
         "is_literal": true},
        {"id": "taken", "type": "end", "greeting": "That time is taken, sorry. Goodbye!", "is_literal": true},
        {"id": "sorry", "type": "end", "greeting": "The calendar cannot be reached. Goodbye!", "is_literal": true}
    ], "flow_config_version": 1})
}

#[tokio::test]
async fn a_sip_call_books_an_event_and_emails_a_confirmation() {
    let google = GoogleStandIn::start().await;
    let vendor = VendorServer::start().await;
    vendor.transcript(
        "Tomorrow at ten for half an hour, ada@example.com.",
        Duration::ZERO,
    );
    vendor.reply(Reply::tool_calls(&[(
        "c1",
        "go_to_check",
        r#"{"start": "2026-12-01T10:00", "end": "2026-12-01T10:30", "email": "ada@example.com"}"#,
    )]));
    vendor.reply(Reply::text(&[
        "{\"summary\": \"A meeting was booked.\", \"extracted\": {}}",
    ]));
    let s = conversing_app_with(&vendor, |c| google.serve(c)).await;
    let calendar = connect_google(&s.app, "google_calendar", "desk@example.com").await;
    let mail = connect_google(&s.app, "gmail", "desk@example.com").await;
    let (_, _, slug) = endpoint(
        &s.app,
        json!({"type": "flow", "vad_stop_secs": 0.5,
               "flow_config": booking(&calendar.id.to_string(), &mail.id.to_string())}),
        json!({}),
    )
    .await;
    let live = Live::open(&s.app).await;
    let (mut ua, media) = call_slug(&s, &slug).await;
    live.agent_said("Hi, this is Ada. When would you like to meet?")
        .await;
    ua.stream_tone(media, 75).await;
    ua.expect_request("BYE", Duration::from_secs(20)).await;

    // The calendar has the event, at 10:00 Berlin time, with the caller invited.
    let events = google.events("primary");
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert_eq!(event["start"]["dateTime"], "2026-12-01T10:00:00+01:00");
    assert_eq!(event["start"]["timeZone"], "Europe/Berlin");
    assert_eq!(event["attendees"], json!([{"email": "ada@example.com"}]));
    assert!(event["summary"].as_str().unwrap().starts_with("Call with "));
    // The confirmation went out from the connected account.
    let sent = google.sent();
    assert_eq!(sent.len(), 1);
    let mime = sent[0]["mime"].as_str().unwrap();
    assert!(mime.contains("From: desk@example.com\r\n"), "{mime}");
    assert!(mime.contains("To: ada@example.com\r\n"), "{mime}");
    assert!(
        mime.contains("Subject: Your meeting with Acme\r\n"),
        "{mime}"
    );

    let call = ended_call(&s.app, 1).await;
    assert_eq!(call["end_reason"], "agent_hangup", "{call}");
    let id = call["id"].as_str().unwrap();
    let detail = eventually(Duration::from_secs(10), "the call's analysis", || async {
        let d = s.app.get(&format!("/calls/{id}")).await.body;
        (d["analysis_status"] == "completed").then_some(d)
    })
    .await;
    let nodes: Vec<&str> = detail["flow_path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["node_id"].as_str().unwrap())
        .collect();
    assert_eq!(nodes, ["start", "ask", "check", "book", "mail", "confirm"]);
    let events = detail["events"].as_array().unwrap();
    let created = events
        .iter()
        .find(|e| e["name"] == "google_calendar.create_event")
        .expect("the event's creation is in the call's events");
    assert_eq!(created["status"], "succeeded");
    let raw = created["raw_response_preview"].as_str().unwrap();
    assert!(raw.contains("2026-12-01T10:00:00+01:00"), "{raw}");
    let seen = created["response_preview"].as_str().unwrap();
    assert!(seen.contains("2026-12-01 10:00"), "{seen}");
    assert!(
        events
            .iter()
            .any(|e| e["name"] == "gmail.send_email" && e["status"] == "succeeded"),
        "{events:?}"
    );
    let last = detail["transcript"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        last["text"],
        "You're booked, and a confirmation is on its way. Goodbye!"
    );
    assert_eq!(last["node"], "confirm");

    // The dashboard's call page: the SIP facts, the path through the flow, each integration's
    // run, and the turn's node.
    // An inbound call: its codec is known; a SIP code is the far end's answer to a call placed.
    assert_eq!(detail["codec"], "pcmu", "{detail}");
    let mut web = crate::dashboard::Session::new(&s.app);
    web.sign_in(&s.app.key).await;
    let page = web.get(&format!("/app/calls/{id}")).await.text;
    for fact in [
        format!(
            "<dt>End reason</dt><dd>{}</dd>",
            detail["end_reason"].as_str().unwrap()
        ),
        format!(
            "<dt>Codec</dt><dd>{}</dd>",
            detail["codec"].as_str().unwrap_or("—")
        ),
        format!(
            "<dt>SIP code</dt><dd>{}</dd>",
            detail["sip_code"]
                .as_i64()
                .map_or("—".to_owned(), |c| c.to_string())
        ),
        format!(
            "<dt>Answered by</dt><dd>{}</dd>",
            detail["answered_by"].as_str().unwrap_or("—")
        ),
    ] {
        assert!(page.contains(&fact), "{fact} in {page}");
    }
    let path = page.split("id=\"path\"").nth(1).expect("the flow path");
    let mut at = 0;
    for node in ["start", "ask", "check", "book", "mail", "confirm"] {
        at += path[at..]
            .find(&format!("<strong>{node}</strong>"))
            .unwrap_or_else(|| panic!("{node} after the one before it in {path}"));
    }
    assert!(
        page.contains("<td>google_calendar.create_event</td><td>succeeded</td>"),
        "{page}"
    );
    assert!(
        page.contains("<td>gmail.send_email</td><td>succeeded</td>"),
        "{page}"
    );
    assert!(
        page.contains("<span class=\"node\">in confirm</span>"),
        "{page}"
    );
    assert!(page.contains("A meeting was booked."), "{page}");
}

#[tokio::test]
async fn the_operator_connects_an_account_with_its_grant_sealed_and_reconnects_it_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let db = crate::database::fresh_database(dir.path(), "ops.db").await;
    let key_file = dir.path().join("ops.key");
    let (ok, ws, out) =
        crate::cli::switchboard(&db, &["workspace", "create", "--name", "Acme", "--json"]);
    assert!(ok, "{out}");
    let ws = ws["id"].as_str().unwrap().to_string();
    let connect = |extra: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .args(["--database-url", &db, "--secrets-key-file"])
            .arg(&key_file)
            .args([
                "integration",
                "connect",
                "--workspace",
                &ws,
                "--provider",
                "google_calendar",
            ])
            .args(["--account", "desk@example.com", "--json"])
            .args(extra)
            .env(
                "SWITCHBOARD_OAUTH_CLIENT_SECRET",
                crate::google::CLIENT_SECRET,
            )
            .env(
                "SWITCHBOARD_OAUTH_REFRESH_TOKEN",
                crate::google::REFRESH_TOKEN,
            )
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    let (ok, first) = connect(&["--client-id", crate::google::CLIENT_ID]);
    assert!(ok, "{first}");
    assert!(!first.contains(crate::google::REFRESH_TOKEN), "{first}");
    assert!(!first.contains(crate::google::CLIENT_SECRET), "{first}");
    let id: Value = serde_json::from_str(first.trim()).unwrap();
    let (ok, second) = connect(&["--client-id", crate::google::CLIENT_ID]);
    assert!(ok, "{second}");
    let again: Value = serde_json::from_str(second.trim()).unwrap();
    assert_eq!(
        again["id"], id["id"],
        "connecting again keeps the integration"
    );
    // The key file is the operator's alone, and opens the sealed grant.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let store = switchboard::store::Store::open(&db).await.unwrap();
    let integration = switchboard_actors::ids::IntegrationId::from_uuid(
        id["id"].as_str().unwrap().parse().unwrap(),
    );
    let (_, _, sealed) = store
        .integration_for_run(integration)
        .await
        .unwrap()
        .unwrap();
    let sealed = sealed.expect("the grant is kept");
    assert!(!sealed.contains(crate::google::REFRESH_TOKEN));
    let plain = Secrets::load_or_create(&key_file)
        .unwrap()
        .open(&sealed, integration.as_uuid().as_bytes())
        .unwrap();
    let grant: switchboard::edge::google::OAuthGrant = serde_json::from_slice(&plain).unwrap();
    assert_eq!(grant, crate::google::grant());
    // A grant is all three parts or none.
    let (ok, out) = connect(&["--client-id", " "]);
    assert!(!ok);
    assert!(out.contains("must not be empty"), "{out}");
}

/// A flow that lists the day's events in New York.
fn listing(calendar: &str) -> Value {
    json!({"nodes": [
        {"id": "start", "type": "start", "greeting": "Hi.", "is_literal": true, "next_step_id": "list"},
        {"id": "list", "type": "integration_call", "integration_id": calendar, "provider": "google_calendar",
         "action": "list_events",
         "args_template": {"start_time": "2026-03-08T00:00", "end_time": "2026-03-09T00:00",
                           "time_zone": "America/New_York", "query": "standup"},
         "custom": [{"path": "$.items[0].start.dateTime", "equals": "2026-03-08 09:00", "next_step_id": "nine"}],
         "success_next_step_id": "other", "error_next_step_id": "other"},
        {"id": "nine", "type": "end", "greeting": "Your standup is at nine.", "is_literal": true},
        {"id": "other", "type": "end", "greeting": "Something else.", "is_literal": true}
    ], "flow_config_version": 1})
}

#[tokio::test]
async fn list_events_reads_the_window_in_the_zone_and_routes_on_wall_clock_times() {
    let r = rig_with("Lister", listing).await;
    // 13:00 UTC on the day New York's clocks spring forward, 09:00 EDT.
    r.google.add_event(
        "primary",
        json!({"id": "s1", "summary": "standup",
               "start": {"dateTime": "2026-03-08T13:00:00Z", "timeZone": "America/New_York"},
               "end": {"dateTime": "2026-03-08T13:15:00Z", "timeZone": "America/New_York"}}),
    );
    let d = r.run_with(json!({"turns": ["What's on today?"]})).await;
    assert_eq!(d.final_node, "nine", "{}", d.reason);
    assert_eq!(d.reason, "custom[0] matched");
    assert_eq!(d.dispatch["name"], "google_calendar.list_events");
    let view: Value =
        serde_json::from_str(d.dispatch["response_preview"].as_str().unwrap()).unwrap();
    assert_eq!(
        view["items"][0]["end"],
        json!({"dateTime": "2026-03-08 09:15"})
    );
    assert_eq!(view["timeZone"], "America/New_York");
    // The window went to Google as instants with New York's offset (EST at midnight).
    let query = r.google.last_query();
    for part in [
        "timeMin=2026-03-08T00%3A00%3A00-05%3A00",
        "timeMax=2026-03-09T00%3A00%3A00-04%3A00",
        "q=standup",
        "singleEvents=true",
        "timeZone=America%2FNew_York",
    ] {
        assert!(query.contains(part), "{part} in {query}");
    }
}
