//! Agent webhooks as a receiver sees them: a real HTTP server on loopback that checks every
//! delivery's signature with the workspace's secret (read through the API), calls placed
//! through the simulated carrier, retries, a restart on the same database file, the outbound
//! URL policy at send time, rotation, `tool.called`, and the deliveries API.
//!
//! Past 600 lines on purpose: every test uses the one signature-checking receiver defined here.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use axum::response::IntoResponse;
use hmac::{Hmac, Mac};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::Sha256;
use switchboard::Config;
use switchboard::config::Carrier;
use switchboard::edge::egress::Egress;
use switchboard::runtime::agent_webhooks::{FunctionToolCall, ToolCallError, call_function_tool};
use switchboard::store::enqueue_event;
use switchboard_actors::events::{CallAnalyzed, EventData, Speaker, TranscriptFinal};
use switchboard_actors::ids::{AgentId, CallId, ToolId};
use switchboard_actors::sim::SimConfig;

use crate::campaigns::number;
use crate::converse::{Live, call_slug, conversing_app_with};
use crate::helpers::{TestApp, eventually, spawn_app_with};
use crate::sip_calls::{SECS, call_until_the_agent_hangs_up, ended_call, endpoint, sip_app_with};
use crate::vendor::{Reply, VendorServer};

/// The call `id` as `GET /calls` lists it (a call event's data).
async fn listed(app: &TestApp, id: &str) -> Value {
    let calls = app.get("/calls?limit=100").await.body;
    calls["data"]
        .as_array()
        .expect("calls")
        .iter()
        .find(|c| c["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("{id} is not listed: {calls}"))
}

/// One request the receiver got.
#[derive(Clone, Debug)]
pub struct Received {
    headers: HeaderMap,
    body: String,
    envelope: Value,
    /// Whether the signature verified with the secret the receiver held then.
    verified: bool,
}

/// A webhook receiver: it verifies each signature with `secret` (refusing with 401 what does
/// not verify) and answers the statuses of `script` in turn, then 200 with `answer`.
#[derive(Clone, Default)]
pub struct Receiver {
    secret: Arc<Mutex<String>>,
    script: Arc<Mutex<VecDeque<u16>>>,
    answer: Arc<Mutex<String>>,
    got: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    fn got(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }

    pub fn kinds(&self) -> Vec<String> {
        self.got()
            .iter()
            .map(|r| r.envelope["type"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

/// Checks a delivery's `v1` signature the way a receiver's own code would: hex HMAC-SHA256
/// over `"{timestamp}.{body}"`, keyed with the whole secret.
fn signature_valid(secret: &str, headers: &HeaderMap, body: &str) -> bool {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let (Some(timestamp), Some(signature)) = (
        header("x-switchboard-timestamp"),
        header("x-switchboard-signature").and_then(|s| s.strip_prefix("v1=")),
    ) else {
        return false;
    };
    let Ok(signature) = hex::decode(signature) else {
        return false;
    };
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{timestamp}.{body}").as_bytes());
    mac.verify_slice(&signature).is_ok()
}

async fn receive(
    State(r): State<Receiver>,
    headers: HeaderMap,
    body: String,
) -> axum::response::Response {
    let verified = signature_valid(&r.secret.lock().unwrap(), &headers, &body);
    r.got.lock().unwrap().push(Received {
        envelope: serde_json::from_str(&body).unwrap_or(Value::Null),
        headers,
        body,
        verified,
    });
    if !verified {
        return (AxumStatus::UNAUTHORIZED, "bad signature").into_response();
    }
    let status = r.script.lock().unwrap().pop_front().unwrap_or(200);
    let status = AxumStatus::from_u16(status).unwrap();
    (status, r.answer.lock().unwrap().clone()).into_response()
}

/// Runs a receiver on `listener`.
fn serve_receiver(listener: tokio::net::TcpListener, receiver: Receiver) {
    let app = axum::Router::new().fallback(receive).with_state(receiver);
    tokio::spawn(async move { axum::serve(listener, app).await });
}

pub async fn receiver(app: &TestApp) -> (SocketAddr, Receiver) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let receiver = Receiver::default();
    *receiver.secret.lock().unwrap() = secret(app).await;
    serve_receiver(listener, receiver.clone());
    (addr, receiver)
}

/// The workspace's signing secret, read through the API.
async fn secret(app: &TestApp) -> String {
    let resp = app.get("/webhook-signing-secret").await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text);
    resp.body["secret"].as_str().unwrap().to_owned()
}

/// The service's test settings here: webhooks may reach loopback, retries come fast, and every
/// call is answered after a second and talks for a second.
fn settings(c: &mut Config) {
    c.egress_allow = vec!["127.0.0.0/8".parse().unwrap()];
    c.webhook_retry_base = Duration::from_millis(200);
    c.webhook_retry_cap = Duration::from_secs(1);
    c.carrier = Carrier::Sim(SimConfig {
        mix: "answered=1".parse().unwrap(),
        ring_secs: "1".parse().unwrap(),
        talk_secs: "1".parse().unwrap(),
        seed: 3,
        dial_log: None,
    });
}

async fn app() -> TestApp {
    app_with(settings).await
}

async fn app_with(configure: impl FnOnce(&mut Config)) -> TestApp {
    let app = spawn_app_with(configure).await;
    crate::helpers::credit(&app.store, app.workspace_id, 100_000).await;
    app
}

/// An agent whose webhook is `url`, subscribed to `events`.
async fn hooked_agent(app: &TestApp, url: &str, events: &[&str]) -> String {
    let resp = app
        .post(
            "/agents",
            json!({"name": "Ava", "max_call_duration_secs": 120, "webhook_url": url,
                   "webhook_events": events,
                   "webhook_headers": {"X-Team": "ops", "X-Switchboard-Event": "forged"}}),
        )
        .await;
    assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text);
    resp.body["id"].as_str().unwrap().to_owned()
}

/// The call events with the call as their data.
const CALL_EVENTS: [&str; 3] = ["call.started", "call.answered", "call.ended"];

/// An agent whose webhook is `url`, subscribed to `events`, and a call of it that has ended:
/// their ids.
async fn hooked_call(app: &TestApp, url: &str, events: &[&str]) -> (String, String) {
    let agent = hooked_agent(app, url, events).await;
    let ended = call(app, &agent).await;
    (agent, ended["id"].as_str().unwrap().to_owned())
}

/// Places a call from a fresh number with `agent` and waits for it to end.
async fn call(app: &TestApp, agent: &str) -> Value {
    let id = place(app, agent).await;
    app.await_status(&format!("/calls/{id}"), "ended", Duration::from_secs(15))
        .await
}

/// Places a call from a fresh number with `agent`: its id.
async fn place(app: &TestApp, agent: &str) -> String {
    let digits = uuid::Uuid::new_v4().as_u128().to_string();
    let from = number(
        app,
        &format!("+97250{}", &digits[digits.len() - 7..]),
        "active",
    )
    .await;
    let resp = app
        .post(
            "/calls",
            json!({"agent_id": agent, "to_number": "052-555-0101", "from_phone_number_id": from}),
        )
        .await;
    assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text);
    resp.body["id"].as_str().unwrap().to_owned()
}

/// The deliveries of a call, oldest first.
async fn deliveries(app: &TestApp, call: &str) -> Vec<Value> {
    let resp = app
        .get(&format!("/webhook-deliveries?call_id={call}"))
        .await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text);
    let mut rows = resp.body["data"].as_array().unwrap().clone();
    rows.reverse();
    rows
}

/// `GET path` with `key`.
async fn get_with(app: &TestApp, path: &str, key: &str) -> crate::helpers::Resp {
    app.send(reqwest::Method::GET, path, Some(key), None).await
}

/// Waits until the receiver got `n` requests.
pub async fn wait_for(receiver: &Receiver, n: usize) -> Vec<Received> {
    eventually(
        Duration::from_secs(20),
        &format!("{n} deliveries arrive"),
        || async { (receiver.got().len() >= n).then(|| receiver.got()) },
    )
    .await
}

/// Waits until every delivery of `call` is `status`, and there are `n` of them.
async fn wait_all(app: &TestApp, call: &str, n: usize, status: &str) -> Vec<Value> {
    eventually(
        Duration::from_secs(20),
        &format!("{n} deliveries are {status}"),
        || async {
            let rows = deliveries(app, call).await;
            (rows.len() == n && rows.iter().all(|d| d["status"] == status)).then_some(rows)
        },
    )
    .await
}

#[tokio::test]
async fn a_calls_events_arrive_signed_in_order_with_the_call_as_the_api_shows_it() {
    let app = app().await;
    let (addr, receiver) = receiver(&app).await;
    let (agent, call_id) =
        hooked_call(&app, &format!("http://{addr}/hook?token=abc"), &CALL_EVENTS).await;
    let call_id = call_id.as_str();
    let got = wait_for(&receiver, 3).await;
    assert_eq!(
        receiver.kinds(),
        ["call.started", "call.answered", "call.ended"]
    );
    for r in &got {
        assert!(r.verified, "signed with the workspace's secret: {r:?}");
        let e = &r.envelope;
        let keys: Vec<&String> = e.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            ["call_id", "created_at", "data", "id", "type"],
            "{}",
            r.body
        );
        assert_eq!(e["call_id"], call_id);
        assert_eq!(e["data"]["id"], call_id);
        assert!(
            chrono::DateTime::parse_from_rfc3339(e["created_at"].as_str().unwrap()).is_ok(),
            "{}",
            e["created_at"]
        );
        let h = |name: &str| r.headers.get(name).unwrap().to_str().unwrap().to_owned();
        assert_eq!(h("x-switchboard-delivery"), e["id"].as_str().unwrap());
        assert_eq!(h("x-switchboard-event"), e["type"].as_str().unwrap());
        assert_eq!(
            r.headers.get_all("x-switchboard-event").iter().count(),
            1,
            "the agent's headers never replace the service's"
        );
        assert_eq!(h("x-team"), "ops", "the agent's own headers are sent");
        assert_eq!(h("content-type"), "application/json");
        let at: i64 = h("x-switchboard-timestamp").parse().unwrap();
        assert!((at - chrono::Utc::now().timestamp()).abs() < 300);
    }
    let data = |i: usize| &got[i].envelope["data"];
    assert_eq!(data(0)["status"], "dialing");
    assert!(data(0)["answered_at"].is_null());
    assert_eq!(data(1)["status"], "in_progress");
    assert!(data(1)["answered_at"].is_string());
    assert_eq!(data(2)["status"], "ended");
    assert_eq!(data(2)["outcome"], "answered");
    assert_eq!(data(2)["answered_at"], data(1)["answered_at"]);
    assert!(data(2)["cost_cents"].as_i64().unwrap() > 0);
    // The ended call as `GET /calls` lists it.
    assert_eq!(*data(2), listed(&app, call_id).await);

    let rows = wait_all(&app, call_id, 3, "delivered").await;
    for (row, r) in rows.iter().zip(&got) {
        assert_eq!(row["id"], r.envelope["id"]);
        assert_eq!(row["type"], r.envelope["type"]);
        assert_eq!(row["agent_id"], agent.as_str());
        assert_eq!(row["attempts"], 1);
        assert_eq!(row["last_status_code"], 200);
        assert!(row["delivered_at"].is_string() && row["next_attempt_at"].is_null());
        assert_eq!(row["envelope"], r.envelope);
        assert_eq!(row["url"], format!("http://{addr}/hook?token=abc"));
    }
    let one = app
        .get(&format!(
            "/webhook-deliveries/{}",
            rows[2]["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(one.status, StatusCode::OK, "{}", one.text);
    assert_eq!(one.body, rows[2]);
}

#[tokio::test]
async fn a_receiver_failing_twice_gets_the_event_on_the_third_attempt_and_later_events_wait() {
    let app = app().await;
    let (addr, receiver) = receiver(&app).await;
    receiver.script.lock().unwrap().extend([500, 500]);
    let (_, call_id) = hooked_call(
        &app,
        &format!("http://{addr}/hook"),
        &["call.started", "call.ended"],
    )
    .await;
    let call_id = call_id.as_str();
    let rows = wait_all(&app, call_id, 2, "delivered").await;
    // The ended event waited for the started one, however long its retries took.
    assert_eq!(
        receiver.kinds(),
        ["call.started", "call.started", "call.started", "call.ended"]
    );
    let got = receiver.got();
    let first_id = &got[0].envelope["id"];
    assert!(
        got[..3].iter().all(|r| &r.envelope["id"] == first_id),
        "a retry is the same event"
    );
    assert_eq!(rows[0]["attempts"], 3);
    assert_eq!(rows[0]["last_status_code"], 200);
    assert!(rows[0]["last_error"].is_null());
    assert_eq!(rows[1]["attempts"], 1);
}

#[tokio::test]
async fn a_failed_attempt_is_recorded_and_retried_later() {
    let app = app().await;
    let (addr, receiver) = receiver(&app).await;
    receiver.script.lock().unwrap().extend([503; 50]);
    let (_, call_id) = hooked_call(&app, &format!("http://{addr}/hook"), &["call.ended"]).await;
    let call_id = call_id.as_str();
    let row = eventually(Duration::from_secs(10), "two attempts failed", || async {
        let rows = deliveries(&app, call_id).await;
        rows.first()
            .filter(|d| d["attempts"].as_i64() >= Some(2))
            .cloned()
    })
    .await;
    assert_eq!(row["status"], "pending");
    assert_eq!(row["last_status_code"], 503);
    assert_eq!(row["last_error"], "the webhook answered HTTP 503");
    assert!(row["next_attempt_at"].as_str().unwrap() > row["last_attempt_at"].as_str().unwrap());

    // Past the retry window, the next failure is the last.
    app.clock.advance(Duration::from_secs(25 * 3600));
    let rows = wait_all(&app, call_id, 1, "failed").await;
    assert!(rows[0]["next_attempt_at"].is_null());
    assert!(rows[0]["delivered_at"].is_null());
}

#[tokio::test]
async fn pending_deliveries_survive_a_restart_and_arrive_once_in_order() {
    let app = app().await;
    // A port with nobody listening yet: every attempt is refused until the receiver comes up.
    let port = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let (_, call_id) = hooked_call(&app, &format!("http://{port}/hook"), &CALL_EVENTS).await;
    let call_id = call_id.as_str();
    let first = eventually(Duration::from_secs(10), "an attempt failed", || async {
        let rows = deliveries(&app, call_id).await;
        (rows.len() == 3 && rows[0]["attempts"].as_i64() >= Some(1)).then_some(rows)
    })
    .await;
    assert_eq!(first[0]["status"], "pending");
    assert_eq!(first[0]["last_error"], "the connection failed");
    assert!(
        first[1..].iter().all(|d| d["attempts"] == 0),
        "later events wait for the first: {first:?}"
    );

    let app = app.restart(settings).await;
    let listener = tokio::net::TcpListener::bind(port).await.unwrap();
    let receiver = Receiver::default();
    *receiver.secret.lock().unwrap() = secret(&app).await;
    serve_receiver(listener, receiver.clone());

    let rows = wait_all(&app, call_id, 3, "delivered").await;
    assert_eq!(
        receiver.kinds(),
        ["call.started", "call.answered", "call.ended"],
        "each event once, in order"
    );
    assert!(receiver.got().iter().all(|r| r.verified));
    assert!(rows[0]["attempts"].as_i64().unwrap() >= 2);
}

#[tokio::test]
async fn a_call_live_when_the_service_stopped_ends_interrupted_with_its_event() {
    let long = |c: &mut Config| {
        settings(c);
        if let Carrier::Sim(sim) = &mut c.carrier {
            sim.talk_secs = "600".parse().unwrap();
        }
    };
    let app = app_with(long).await;
    let (addr, receiver) = receiver(&app).await;
    let agent = hooked_agent(&app, &format!("http://{addr}/hook"), &CALL_EVENTS).await;
    let call_id = place(&app, &agent).await;
    wait_for(&receiver, 2).await;

    let app = app.restart(long).await;
    let ended = app
        .await_status(
            &format!("/calls/{call_id}"),
            "ended",
            Duration::from_secs(10),
        )
        .await;
    assert_eq!(ended["end_reason"], "interrupted");
    let got = wait_for(&receiver, 3).await;
    assert_eq!(receiver.kinds(), CALL_EVENTS);
    assert_eq!(got[2].envelope["data"], listed(&app, &call_id).await);
}

#[tokio::test]
async fn an_inbound_call_sends_the_same_events() {
    let s = sip_app_with(0, 100, None, settings).await;
    let (addr, receiver) = receiver(&s.app).await;
    let (_, _, slug) = endpoint(
        &s.app,
        json!({"silence_timeout_secs": 1, "agent_speaks_first": false,
               "webhook_url": format!("http://{addr}/hook"), "webhook_events": CALL_EVENTS}),
        json!({}),
    )
    .await;
    call_until_the_agent_hangs_up(s.sip, &slug).await;
    let ended = ended_call(&s.app, 1).await;
    let got = wait_for(&receiver, 3).await;
    assert_eq!(receiver.kinds(), CALL_EVENTS);
    assert!(got.iter().all(|r| r.verified));
    assert_eq!(got[0].envelope["data"]["direction"], "inbound");
    assert!(
        got[0].envelope["data"]["answered_at"].is_string(),
        "an inbound call is received answered"
    );
    assert_eq!(got[2].envelope["data"], ended);
}

#[tokio::test]
async fn events_raised_elsewhere_follow_the_calls_own_and_commit_with_their_transaction() {
    let app = app().await;
    let (addr, receiver) = receiver(&app).await;
    let events = ["call.ended", "call.analyzed", "transcript.final"];
    let (_, call_id) = hooked_call(&app, &format!("http://{addr}/hook"), &events).await;
    let id: CallId = call_id.parse().unwrap();
    let analyzed = EventData::CallAnalyzed(CallAnalyzed {
        summary: Some("Booked a table for two".into()),
        extracted: json!({"party_size": 2}).as_object().unwrap().clone(),
        disposition: Some("Interested".into()),
        disposition_id: None,
    });
    // Inside a transaction that rolls back, nothing is written.
    let mut tx = app.store.begin().await.unwrap();
    let written = enqueue_event(&mut tx, app.store.now(), id, &analyzed)
        .await
        .unwrap();
    assert!(written.is_some());
    tx.rollback().await.unwrap();
    let mut tx = app.store.begin().await.unwrap();
    enqueue_event(&mut tx, app.store.now(), id, &analyzed)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    app.store.outbox_written();
    let at = app.store.now();
    let turn = EventData::TranscriptFinal(TranscriptFinal {
        role: Speaker::User,
        text: "A table for two, please.".into(),
        turn: 1,
        started_at: at,
        ended_at: at,
        interrupted: false,
    });
    assert!(
        app.store
            .enqueue_call_event(id, &turn)
            .await
            .unwrap()
            .is_some()
    );

    let rows = wait_all(&app, &call_id, 3, "delivered").await;
    assert_eq!(receiver.kinds(), events);
    let got = receiver.got();
    assert_eq!(
        got[1].envelope["data"],
        json!({"summary": "Booked a table for two", "extracted": {"party_size": 2},
               "disposition": "Interested", "disposition_id": null})
    );
    assert_eq!(got[2].envelope["data"]["role"], "user");
    assert_eq!(got[2].envelope["data"]["turn"], 1);
    assert_eq!(rows[1]["type"], "call.analyzed");

    // A kind the agent does not subscribe to is not written.
    let quiet = hooked_agent(&app, &format!("http://{addr}/hook"), &["call.ended"]).await;
    let ended = call(&app, &quiet).await;
    let other: CallId = ended["id"].as_str().unwrap().parse().unwrap();
    assert_eq!(
        app.store.enqueue_call_event(other, &turn).await.unwrap(),
        None
    );
}

#[tokio::test]
async fn kinds_the_agent_does_not_subscribe_to_are_not_sent() {
    let app = app().await;
    let (addr, receiver) = receiver(&app).await;
    let (_, call_id) = hooked_call(&app, &format!("http://{addr}/hook"), &["call.ended"]).await;
    let call_id = call_id.as_str();
    wait_all(&app, call_id, 1, "delivered").await;
    assert_eq!(receiver.kinds(), ["call.ended"]);

    // An agent without a webhook URL writes no events at all.
    let quiet = app
        .post(
            "/agents",
            json!({"name": "Quiet", "max_call_duration_secs": 60, "webhook_events": ["call.ended"]}),
        )
        .await;
    let ended = call(&app, quiet.body["id"].as_str().unwrap()).await;
    assert!(
        deliveries(&app, ended["id"].as_str().unwrap())
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn a_webhook_url_on_a_private_address_is_refused_when_it_is_sent() {
    let app = app().await;
    let (addr, receiver) = receiver(&app).await;
    // Saved while the operator allowed loopback ...
    let agent = hooked_agent(&app, &format!("http://{addr}/hook"), &["call.started"]).await;
    // ... which the operator no longer does.
    let app = app
        .restart(|c| {
            settings(c);
            c.egress_allow.clear();
        })
        .await;
    let ended = call(&app, &agent).await;
    let call_id = ended["id"].as_str().unwrap();
    let row = eventually(
        Duration::from_secs(10),
        "an attempt was refused",
        || async {
            deliveries(&app, call_id)
                .await
                .first()
                .filter(|d| d["attempts"].as_i64() >= Some(1))
                .cloned()
        },
    )
    .await;
    assert_eq!(row["status"], "pending");
    assert!(row["last_status_code"].is_null());
    assert_eq!(
        row["last_error"],
        "the URL is not allowed: the address 127.0.0.1 is not a public address"
    );
    assert!(receiver.got().is_empty());
}

#[tokio::test]
async fn rotating_the_secret_signs_what_follows_pending_retries_included() {
    let app = app().await;
    let (addr, receiver) = receiver(&app).await;
    let old = secret(&app).await;
    assert!(old.starts_with("whsec_") && old.len() == 70, "{old}");
    assert_eq!(secret(&app).await, old, "the secret stays until rotated");
    // Refused until the secret is rotated.
    receiver.script.lock().unwrap().extend([500; 100]);
    let agent = hooked_agent(&app, &format!("http://{addr}/hook"), &["call.started"]).await;
    let ended = call(&app, &agent).await;
    wait_for(&receiver, 1).await;

    let rotated = app.post_empty("/webhook-signing-secret/rotate").await;
    assert_eq!(rotated.status, StatusCode::OK, "{}", rotated.text);
    let new = rotated.body["secret"].as_str().unwrap().to_owned();
    assert_ne!(new, old);
    assert_eq!(secret(&app).await, new);
    *receiver.secret.lock().unwrap() = new.clone();
    receiver.script.lock().unwrap().clear();
    wait_all(&app, ended["id"].as_str().unwrap(), 1, "delivered").await;

    let got = receiver.got();
    let last = got.last().unwrap();
    assert!(signature_valid(&old, &got[0].headers, &got[0].body));
    assert!(signature_valid(&new, &last.headers, &last.body));
    assert!(
        !signature_valid(&old, &last.headers, &last.body),
        "the retry is signed with the new secret only"
    );

    // The operator sees and rotates the same secret.
    let cli = |command: &str| {
        let ws = app.workspace_id.to_string();
        let args = [
            "workspace",
            "signing-secret",
            command,
            "--workspace",
            &ws,
            "--json",
        ];
        let (ok, out, text) = crate::cli::switchboard(&app.db_url, &args);
        assert!(ok, "{text}");
        out["secret"].as_str().unwrap().to_owned()
    };
    assert_eq!(cli("show"), new);
    let by_operator = cli("rotate");
    assert_ne!(by_operator, new);
    assert_eq!(secret(&app).await, by_operator);
}

#[tokio::test]
async fn function_tools_are_answered_by_the_agent_webhook_once_and_recorded() {
    let app = app().await;
    let (addr, receiver) = receiver(&app).await;
    *receiver.answer.lock().unwrap() = r#"{"temperature": 21}"#.into();
    // `tool.called` need not be among the agent's events: the answer is the tool's result.
    let agent = hooked_agent(&app, &format!("http://{addr}/hook"), &["call.ended"]).await;
    let egress = Egress::system(vec!["127.0.0.0/8".parse().unwrap()]);
    let mut tool_call = FunctionToolCall {
        workspace_id: app.workspace_id,
        call_id: CallId::new(),
        agent_id: agent.parse::<AgentId>().unwrap(),
        tool_id: ToolId::new(),
        tool_name: "getWeather".into(),
        arguments: json!({"city": "Haifa"}).as_object().unwrap().clone(),
    };
    let answer = call_function_tool(&app.store, &egress, &tool_call, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(answer, json!({"temperature": 21}));
    let got = receiver.got();
    assert_eq!(got.len(), 1);
    assert!(got[0].verified);
    let e = &got[0].envelope;
    assert_eq!(e["type"], "tool.called");
    assert_eq!(e["call_id"], tool_call.call_id.to_string());
    assert_eq!(
        e["data"],
        json!({"call_id": tool_call.call_id, "tool_id": tool_call.tool_id,
               "tool_name": "getWeather", "arguments": {"city": "Haifa"}})
    );
    let rows = deliveries(&app, &tool_call.call_id.to_string()).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["type"], "tool.called");
    assert_eq!(rows[0]["status"], "delivered");
    assert_eq!(rows[0]["attempts"], 1);
    assert_eq!(rows[0]["envelope"], *e);

    // A failure is an error with a reason, recorded as failed and never retried.
    receiver.script.lock().unwrap().push_back(502);
    tool_call.call_id = CallId::new();
    let err = call_function_tool(&app.store, &egress, &tool_call, Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ToolCallError::Status { status: 502 }),
        "{err}"
    );
    assert_eq!(err.to_string(), "the agent's webhook answered HTTP 502");
    let rows = deliveries(&app, &tool_call.call_id.to_string()).await;
    assert_eq!(rows[0]["status"], "failed");
    assert_eq!(rows[0]["last_status_code"], 502);
    assert!(rows[0]["next_attempt_at"].is_null());

    // An answer that is not JSON, and a policy refusal, are errors too.
    *receiver.answer.lock().unwrap() = "sunny".into();
    let err = call_function_tool(&app.store, &egress, &tool_call, Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(matches!(err, ToolCallError::NotJson { .. }), "{err}");
    let strict = Egress::system(Vec::new());
    let err = call_function_tool(&app.store, &strict, &tool_call, Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("is not a public address"), "{err}");
    assert_eq!(receiver.got().len(), 3, "the refused one was never sent");

    // Without a webhook URL there is nobody to answer.
    let bare = app
        .post(
            "/agents",
            json!({"name": "Bare", "max_call_duration_secs": 60}),
        )
        .await;
    tool_call.agent_id = bare.body["id"].as_str().unwrap().parse().unwrap();
    let err = call_function_tool(&app.store, &egress, &tool_call, Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(matches!(err, ToolCallError::NoWebhookUrl), "{err}");
    assert!(err.to_string().contains("no webhook_url"), "{err}");
}

#[tokio::test]
async fn a_function_tool_that_does_not_answer_in_time_fails() {
    let app = app().await;
    // Accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let silent = axum::Router::new().fallback(std::future::pending::<&'static str>);
    tokio::spawn(async move { axum::serve(listener, silent).await });
    let agent = hooked_agent(&app, &format!("http://{addr}/hook"), &[]).await;
    let tool_call = FunctionToolCall {
        workspace_id: app.workspace_id,
        call_id: CallId::new(),
        agent_id: agent.parse().unwrap(),
        tool_id: ToolId::new(),
        tool_name: "slow".into(),
        arguments: Default::default(),
    };
    let egress = Egress::system(vec!["127.0.0.0/8".parse().unwrap()]);
    let err = call_function_tool(&app.store, &egress, &tool_call, Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(matches!(err, ToolCallError::Timeout { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "the agent's webhook did not answer within 0.3 seconds"
    );
    let rows = deliveries(&app, &tool_call.call_id.to_string()).await;
    assert_eq!(rows[0]["status"], "failed");
    assert_eq!(rows[0]["last_error"], err.to_string());
}

#[tokio::test]
async fn deliveries_are_filtered_paged_scoped_and_isolated_per_workspace() {
    let app = app().await;
    let (addr, _receiver) = receiver(&app).await;
    let (agent, call_id) = hooked_call(&app, &format!("http://{addr}/hook"), &CALL_EVENTS).await;
    let call_id = call_id.as_str();
    let rows = wait_all(&app, call_id, 3, "delivered").await;

    let list = |query: &'static str| {
        let app = &app;
        async move {
            let resp = app.get(&format!("/webhook-deliveries{query}")).await;
            assert_eq!(resp.status, StatusCode::OK, "{}", resp.text);
            resp.body
        }
    };
    let ended_only = list("?type=call.ended").await;
    assert_eq!(ended_only["pagination"]["total"], 1);
    assert_eq!(ended_only["data"][0]["id"], rows[2]["id"]);
    assert_eq!(list("?status=pending").await["pagination"]["total"], 0);
    let page = list("?limit=2").await;
    assert_eq!(page["data"].as_array().unwrap().len(), 2);
    assert_eq!(page["pagination"]["has_more"], true);
    assert_eq!(page["data"][0]["id"], rows[2]["id"], "newest first");
    let by_agent = app
        .get(&format!("/webhook-deliveries?agent_id={agent}"))
        .await;
    assert_eq!(by_agent.body["pagination"]["total"], 3);
    app.get("/webhook-deliveries?type=call.exploded")
        .await
        .assert_invalid("type");
    app.get("/webhook-deliveries?status=lost")
        .await
        .assert_invalid("status");

    // Another workspace sees none of them, and has its own secret.
    let (_, other) = app.other_workspace().await;
    let theirs = get_with(&app, "/webhook-deliveries", &other).await;
    assert_eq!(theirs.body["pagination"]["total"], 0);
    let id = rows[0]["id"].as_str().unwrap();
    let one = get_with(&app, &format!("/webhook-deliveries/{id}"), &other).await;
    assert_eq!(one.status, StatusCode::NOT_FOUND);
    let their_secret = get_with(&app, "/webhook-signing-secret", &other).await;
    assert_ne!(their_secret.body["secret"], secret(&app).await);

    // Reading deliveries is webhooks:read; the secret is webhooks:manage.
    let reader = app.key_with_scopes("webhooks:read").await;
    let seen = get_with(&app, "/webhook-deliveries", &reader).await;
    assert_eq!(seen.status, StatusCode::OK);
    for (method, path) in [
        (reqwest::Method::GET, "/webhook-signing-secret"),
        (reqwest::Method::POST, "/webhook-signing-secret/rotate"),
    ] {
        let refused = app.send(method, path, Some(&reader), None).await;
        assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(refused.error_code(), "INSUFFICIENT_SCOPE");
    }
    let caller = app.key_with_scopes("calls:read").await;
    let refused = get_with(&app, "/webhook-deliveries", &caller).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn an_unknown_event_kind_is_refused_naming_it() {
    let app = app().await;
    let resp = app
        .post(
            "/agents",
            json!({"name": "Ava", "webhook_events": ["call.started", "call.exploded"]}),
        )
        .await;
    resp.assert_invalid("webhook_events[1]");
    assert!(resp.text.contains("call.exploded"), "{}", resp.text);
    let every = app
        .post(
            "/agents",
            json!({"name": "Ava", "webhook_events": ["call.started", "call.answered", "call.ended",
                   "call.analyzed", "transcript.final", "tool.called"]}),
        )
        .await;
    assert_eq!(every.status, StatusCode::CREATED, "{}", every.text);
}

#[tokio::test]
async fn a_conversing_calls_turns_are_sent_as_they_become_final_before_its_end() {
    let vendor = VendorServer::start().await;
    vendor.transcript("Do you open on Sundays?", Duration::ZERO);
    vendor.reply(Reply::text(&["No, we are closed on Sundays."]));
    let s = conversing_app_with(&vendor, settings).await;
    let (addr, receiver) = receiver(&s.app).await;
    let kinds = ["transcript.final", "call.ended"];
    let (_, _, slug) = endpoint(
        &s.app,
        json!({"greeting_message": "Hello.", "agent_speaks_first": true, "vad_stop_secs": 0.5,
               "webhook_url": format!("http://{addr}/hook"), "webhook_events": kinds}),
        json!({}),
    )
    .await;
    let (mut ua, media) = call_slug(&s, &slug).await;
    // The caller speaks once the greeting has played (its turn is sent then).
    let got = wait_for(&receiver, 1).await;
    assert_eq!(got[0].envelope["data"]["text"], "Hello.");
    ua.stream_tone(media, 75).await;
    // The caller's turn is sent while the call still runs.
    let got = wait_for(&receiver, 2).await;
    assert_eq!(got[1].envelope["type"], "transcript.final");
    assert_eq!(got[1].envelope["data"]["text"], "Do you open on Sundays?");
    // The caller hangs up once the agent's answer has been said, and sent.
    wait_for(&receiver, 3).await;
    ua.bye().await;
    let _ = ua.final_reply("BYE", SECS).await;

    let got = wait_for(&receiver, 4).await;
    assert!(got.iter().all(|r| r.verified));
    let data: Vec<&Value> = got.iter().map(|r| &r.envelope["data"]).collect();
    assert_eq!(
        receiver.kinds(),
        [
            "transcript.final",
            "transcript.final",
            "transcript.final",
            "call.ended"
        ]
    );
    let turns: Vec<(Value, Value, Value)> = data[..3]
        .iter()
        .map(|d| (d["turn"].clone(), d["role"].clone(), d["text"].clone()))
        .collect();
    assert_eq!(
        turns,
        [
            (json!(1), json!("agent"), json!("Hello.")),
            (json!(2), json!("user"), json!("Do you open on Sundays?")),
            (
                json!(3),
                json!("agent"),
                json!("No, we are closed on Sundays.")
            ),
        ]
    );
    for d in &data[..3] {
        let started: chrono::DateTime<chrono::Utc> =
            d["started_at"].as_str().unwrap().parse().unwrap();
        let ended: chrono::DateTime<chrono::Utc> = d["ended_at"].as_str().unwrap().parse().unwrap();
        // Every turn spans its audio, the agent's as played.
        assert!(started < ended, "{d}");
        assert_eq!(d["interrupted"], false);
    }
    let caller_turn = (
        data[1]["started_at"]
            .as_str()
            .unwrap()
            .parse::<chrono::DateTime<chrono::Utc>>()
            .unwrap(),
        data[1]["ended_at"]
            .as_str()
            .unwrap()
            .parse::<chrono::DateTime<chrono::Utc>>()
            .unwrap(),
    );
    let spoke = (caller_turn.1 - caller_turn.0).num_milliseconds();
    assert!((1000..2500).contains(&spoke), "the caller spoke {spoke} ms");
}

#[tokio::test]
async fn a_function_tool_on_a_call_is_answered_by_the_agent_webhook() {
    let vendor = VendorServer::start().await;
    vendor.transcript("Is the blue kettle in stock?", Duration::ZERO);
    vendor.reply(Reply::tool_calls(&[(
        "call_7",
        "checkStock",
        r#"{"sku": "KT-BLUE"}"#,
    )]));
    vendor.reply(Reply::text(&["Yes, we have four."]));
    let s = conversing_app_with(&vendor, settings).await;
    let (addr, receiver) = receiver(&s.app).await;
    *receiver.answer.lock().unwrap() = r#"{"in_stock": 4}"#.into();
    let tool = s
        .app
        .post(
            "/tools",
            json!({"name": "check stock", "type": "function", "description": "Stock of an item",
                   "config": {"parameters": {"type": "object", "required": ["sku"],
                              "properties": {"sku": {"type": "string"}}}}}),
        )
        .await;
    assert_eq!(tool.status, 201, "{}", tool.body);
    let (agent, _, slug) = endpoint(
        &s.app,
        json!({"agent_speaks_first": false, "vad_stop_secs": 0.5,
               "webhook_url": format!("http://{addr}/hook"), "webhook_events": ["call.ended"]}),
        json!({}),
    )
    .await;
    let attached = s
        .app
        .put(
            &format!(
                "/agents/{agent}/tools/{}",
                tool.body["id"].as_str().unwrap()
            ),
            json!({}),
        )
        .await;
    assert_eq!(attached.status, 200, "{}", attached.body);
    let live = Live::open(&s.app).await;
    let (mut ua, media) = call_slug(&s, &slug).await;
    // No greeting marks when the agent listens: a moment for its start before the caller
    // speaks.
    tokio::time::sleep(Duration::from_millis(500)).await;
    ua.stream_tone(media, 75).await;
    // The caller hangs up once the agent has answered with the tool's result.
    live.agent_said("Yes, we have four.").await;
    ua.bye().await;
    let _ = ua.final_reply("BYE", SECS).await;

    let got = wait_for(&receiver, 2).await;
    assert_eq!(receiver.kinds(), ["tool.called", "call.ended"]);
    let called = &got[0].envelope;
    assert!(got[0].verified);
    assert_eq!(called["data"]["tool_name"], "checkStock");
    assert_eq!(called["data"]["arguments"], json!({"sku": "KT-BLUE"}));
    let requests = vendor.conversation_requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let offered = requests[0].1["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "checkStock")
        .cloned()
        .expect("offered");
    assert_eq!(
        offered["function"]["parameters"]["required"],
        json!(["sku"])
    );
    let answer = requests[1].1["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .cloned()
        .expect("the tool's result");
    assert_eq!(answer["content"], r#"{"in_stock":4}"#);
    let call = ended_call(&s.app, 1).await;
    let detail = s
        .app
        .get(&format!("/calls/{}", call["id"].as_str().unwrap()))
        .await;
    let event = &detail.body["events"][0];
    assert_eq!(event["name"], "checkStock");
    assert_eq!(event["status"], "succeeded");
    assert_eq!(event["delivery_id"], called["id"]);
    assert_eq!(called["call_id"], call["id"]);
}
