//! Calls over HTTP, placed through the simulated carrier in real time: `POST /calls` (queue,
//! balance, do-not-call, idempotency), `GET /calls` with filters, `GET /calls/{id}`,
//! `POST /calls/{id}/disposition`, and a campaign run end to end.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchboard::config::Carrier;
use switchboard_actors::sim::SimConfig;

use crate::campaigns::{agent, number};
use crate::helpers::{TestApp, spawn_app_with};

/// The simulated carrier answering by `mix` within seconds, and the engine's short intervals.
pub(crate) fn simulated(c: &mut switchboard::config::Config, mix: &str) {
    c.carrier = Carrier::Sim(SimConfig {
        mix: mix.parse().unwrap(),
        ring_secs: "0-1".parse().unwrap(),
        talk_secs: "1-2".parse().unwrap(),
        seed: 3,
        dial_log: None,
    });
    c.evaluation_interval = Duration::from_secs(1);
    c.disposition_timeout = Duration::from_secs(2);
}

/// The simulated carrier answering every call at once and talking `secs` seconds.
pub(crate) fn answering_for(c: &mut switchboard::config::Config, secs: &str) {
    simulated(c, "answered=1");
    if let Carrier::Sim(sim) = &mut c.carrier {
        sim.ring_secs = "0".parse().unwrap();
        sim.talk_secs = secs.parse().unwrap();
    }
}

/// Credits the workspace and places a direct call to `to` from a new agent and number;
/// answers the call's id, the agent's and the number's.
pub(crate) async fn place_direct(app: &TestApp, to: &str) -> (String, String, String) {
    crate::helpers::credit(&app.store, app.workspace_id, 100_000).await;
    let agent = agent(app, Some(120)).await;
    let number = number(app, "+972501230000", "active").await;
    (post_call(app, &agent, &number, to).await, agent, number)
}

/// `POST /calls` from `agent` and number `from` to `to`; answers the new call's id.
pub(crate) async fn post_call(app: &TestApp, agent: &str, from: &str, to: &str) -> String {
    let placed = app
        .post(
            "/calls",
            json!({"agent_id": agent, "to_number": to, "from_phone_number_id": from}),
        )
        .await;
    assert_eq!(placed.status, StatusCode::CREATED, "{}", placed.text);
    placed.body["id"].as_str().unwrap().to_owned()
}

pub(crate) async fn sim_app(mix: &str) -> TestApp {
    let app = spawn_app_with(|c| simulated(c, mix)).await;
    crate::helpers::credit(&app.store, app.workspace_id, 100_000).await;
    app
}

struct Parts {
    agent: String,
    number: String,
}

async fn parts(app: &TestApp) -> Parts {
    Parts {
        agent: agent(app, Some(120)).await,
        number: number(app, "+972501230000", "active").await,
    }
}

/// Places a call to `to` and waits for it to end.
async fn call_and_wait(app: &TestApp, p: &Parts, to: &str) -> Value {
    let resp = app
        .post(
            "/calls",
            json!({"agent_id": p.agent, "to_number": to, "from_phone_number_id": p.number}),
        )
        .await;
    assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text);
    wait_for_end(app, resp.body["id"].as_str().unwrap()).await
}

async fn wait_for_end(app: &TestApp, id: &str) -> Value {
    app.await_status(&format!("/calls/{id}"), "ended", Duration::from_secs(10))
        .await
}

#[tokio::test]
async fn a_direct_call_is_queued_placed_settled_and_billed() {
    let app = sim_app("answered=1").await;
    let p = parts(&app).await;
    let resp = app
        .post(
            "/calls",
            json!({"agent_id": p.agent, "to_number": "052-555-0101", "from_phone_number_id": p.number,
                   "priority": 7, "metadata": {"crm_id": "A-1"}, "variables": {"first_name": "Dana"}}),
        )
        .await;
    assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text);
    let call = &resp.body;
    assert_eq!(call["status"], "queued");
    assert_eq!(call["direction"], "outbound");
    assert_eq!(call["to_number"], "+972525550101");
    assert_eq!(call["from_number"], "+972501230000");
    assert_eq!(call["priority"], 7);
    assert_eq!(call["metadata"]["crm_id"], "A-1");
    // 120 s cap at 10 cents a minute.
    assert_eq!(call["reserved_cents"], 20);
    let id = call["id"].as_str().unwrap().to_owned();

    let ended = wait_for_end(&app, &id).await;
    assert_eq!(ended["outcome"], "answered");
    assert!(ended["duration_secs"].as_i64().unwrap() >= 1);
    let cost = ended["cost_cents"].as_i64().unwrap();
    assert!(cost >= 1);
    assert!(ended["started_at"].is_string() && ended["ended_at"].is_string());
    let billing = app.get("/billing").await;
    assert_eq!(billing.body["balance_cents"], 100_000 - cost);

    let listed = app.get("/calls?status=ended&direction=outbound").await;
    assert_eq!(listed.status, StatusCode::OK);
    assert_eq!(listed.body["pagination"]["total"], 1);
    assert_eq!(listed.body["data"][0]["id"], id.as_str());
    let by_agent = app.get(&format!("/calls?agent_id={}", p.agent)).await;
    assert_eq!(by_agent.body["pagination"]["total"], 1);
    let none = app.get("/calls?status=queued").await;
    assert_eq!(none.body["pagination"]["total"], 0);
    let future = app.get("/calls?created_after=2099-01-01T00:00:00Z").await;
    assert_eq!(future.body["pagination"]["total"], 0);
    for bad in [
        "/calls?status=answered",
        "/calls?direction=sideways",
        "/calls?limit=0",
        "/calls?created_after=2026-02-01T00:00:00Z&created_before=2026-01-01T00:00:00Z",
        "/calls?created_after=yesterday",
    ] {
        let resp = app.get(bad).await;
        assert_eq!(resp.status, StatusCode::BAD_REQUEST, "{bad}: {}", resp.text);
        assert_eq!(resp.error_code(), "INVALID_REQUEST");
    }
}

#[tokio::test]
async fn bad_calls_are_refused_in_the_error_shape() {
    let app = sim_app("answered=1").await;
    let p = parts(&app).await;
    let inactive = number(&app, "+972501230001", "pending_requirements").await;
    let base = json!({"agent_id": p.agent, "to_number": "+972525550102", "from_phone_number_id": p.number});
    let with = |k: &str, v: Value| {
        let mut b = base.clone();
        b[k] = v;
        b
    };
    let without = |k: &str| {
        let mut b = base.clone();
        b.as_object_mut().unwrap().remove(k);
        b
    };
    for (body, needle) in [
        (without("agent_id"), "agent_id"),
        (without("to_number"), "to_number"),
        (without("from_phone_number_id"), "from_phone_number_id"),
        (with("to_number", json!("not a number")), "to_number"),
        (with("to_number", json!(972)), "to_number"),
        (with("priority", json!(11)), "priority"),
        (with("priority", json!("high")), "priority"),
        (with("agent_id", json!(uuid::Uuid::now_v7())), "agent_id"),
        (with("from_phone_number_id", json!(inactive)), "not active"),
        (with("metadata", json!([1, 2])), "metadata"),
        (with("idempotency_key", json!("")), "idempotency_key"),
        (with("status", json!("ended")), "status"),
    ] {
        app.post("/calls", body).await.assert_invalid(needle);
    }
    // Do-not-call applies to direct calls too.
    let dnc = app
        .post("/do-not-call", json!({"phone_number": "+972525550199"}))
        .await;
    assert_eq!(dnc.status, StatusCode::CREATED, "{}", dnc.text);
    let resp = app
        .post("/calls", with("to_number", json!("+972525550199")))
        .await;
    assert_eq!(resp.status, StatusCode::BAD_REQUEST);
    assert_eq!(resp.error_code(), "DO_NOT_CALL");
    // Unknown call ids.
    let resp = app.get(&format!("/calls/{}", uuid::Uuid::now_v7())).await;
    assert_eq!(resp.status, StatusCode::NOT_FOUND);
    assert_eq!(
        app.get("/calls/not-a-uuid").await.status,
        StatusCode::BAD_REQUEST
    );
    // Nothing was queued by any of the refusals.
    assert_eq!(app.get("/calls").await.body["pagination"]["total"], 0);
}

#[tokio::test]
async fn a_call_the_balance_cannot_cover_is_refused_with_402() {
    let app = sim_app("answered=1").await;
    let p = parts(&app).await;
    // 100,000 cents cover 5,000 reservations of 20; leave 19.
    app.store
        .apply_ledger_entry(
            app.workspace_id,
            -99_981,
            switchboard::store::LedgerKind::Adjustment,
            "test",
            None,
        )
        .await
        .unwrap();
    let resp = app
        .post(
            "/calls",
            json!({"agent_id": p.agent, "to_number": "+972525550103", "from_phone_number_id": p.number}),
        )
        .await;
    assert_eq!(resp.status, StatusCode::PAYMENT_REQUIRED, "{}", resp.text);
    assert_eq!(resp.error_code(), "BILLING_ERROR");
    assert_eq!(app.get("/calls").await.body["pagination"]["total"], 0);
}

#[tokio::test]
async fn a_repeated_idempotency_key_answers_the_first_call() {
    let app = sim_app("answered=1").await;
    let p = parts(&app).await;
    let body = json!({"agent_id": p.agent, "to_number": "+972525550104", "from_phone_number_id": p.number,
                      "idempotency_key": "order-77"});
    let first = app.post("/calls", body.clone()).await;
    assert_eq!(first.status, StatusCode::CREATED);
    let again = app.post("/calls", body.clone()).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text);
    assert_eq!(again.body["id"], first.body["id"]);
    let mut other = body.clone();
    other["to_number"] = json!("+972525550105");
    let conflict = app.post("/calls", other).await;
    assert_eq!(conflict.status, StatusCode::BAD_REQUEST);
    assert!(
        conflict.text.contains("idempotency_key"),
        "{}",
        conflict.text
    );
    assert_eq!(app.get("/calls").await.body["pagination"]["total"], 1);
}

#[tokio::test]
async fn dispositions_land_once_on_answered_calls() {
    let app = sim_app("answered=1").await;
    let p = parts(&app).await;
    let ended = call_and_wait(&app, &p, "+972525550106").await;
    let id = ended["id"].as_str().unwrap().to_owned();
    let dispositions = app.get("/dispositions").await.body["data"].clone();
    let first = dispositions[0]["id"].as_str().unwrap().to_owned();
    let second = dispositions[1]["id"].as_str().unwrap().to_owned();
    let path = format!("/calls/{id}/disposition");
    let set = app.post(&path, json!({"disposition_id": first})).await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.text);
    assert_eq!(set.body["disposition_id"], first.as_str());
    assert_eq!(
        app.post(&path, json!({"disposition_id": first}))
            .await
            .status,
        StatusCode::OK
    );
    let other = app.post(&path, json!({"disposition_id": second})).await;
    assert_eq!(other.status, StatusCode::CONFLICT);
    let unknown = app
        .post(&path, json!({"disposition_id": uuid::Uuid::now_v7()}))
        .await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        app.post(&path, json!({"disposition": first})).await.status,
        StatusCode::BAD_REQUEST
    );
    // Another workspace's key sees no such call.
    let (_, other_key) = app.other_workspace().await;
    let resp = app
        .client
        .post(app.url(&path))
        .bearer_auth(other_key)
        .json(&json!({"disposition_id": first}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_disposition_on_an_unanswered_call_is_refused() {
    let app = sim_app("busy=1").await;
    let p = parts(&app).await;
    let ended = call_and_wait(&app, &p, "+972525550107").await;
    let id = ended["id"].as_str().unwrap().to_owned();
    assert_eq!(ended["outcome"], "busy");
    let d = app.get("/dispositions").await.body["data"][0]["id"].clone();
    let resp = app
        .post(
            &format!("/calls/{id}/disposition"),
            json!({"disposition_id": d}),
        )
        .await;
    assert_eq!(resp.status, StatusCode::BAD_REQUEST, "{}", resp.text);
    assert!(resp.text.contains("answered"));
}

/// A campaign open all day that calls each contact once (it stops on any outcome), two at a
/// time: its id.
pub(crate) async fn one_pass_campaign(
    app: &TestApp,
    name: &str,
    agent: &str,
    number: &str,
) -> String {
    let stop = app.get("/dispositions").await.body["data"][0]["id"].clone();
    let created = app
        .post(
            "/campaigns",
            json!({"name": name, "agent_id": agent, "from_phone_number_id": number,
                   "max_in_flight": 2, "stop_on_no_answer": true, "stop_on_unclassified": true,
                   "stop_disposition_ids": [stop],
                   "calling_window": {"timezone": "UTC", "start": "00:00", "end": "24:00"}}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    created.body["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_launched_campaign_runs_end_to_end_over_http() {
    let app = sim_app("answered=1,busy=1").await;
    let p = parts(&app).await;
    let id = one_pass_campaign(&app, "E2E", &p.agent, &p.number).await;
    app.enroll_and_launch(
        &id,
        &[
            "+972525550110",
            "+972525550111",
            "+972525550112",
            "+972525550113",
        ],
    )
    .await;
    let done = app
        .await_status(
            &format!("/campaigns/{id}"),
            "completed",
            Duration::from_secs(30),
        )
        .await;
    assert!(done["completed_at"].is_string());
    assert!(done["last_tick_at"].is_string());
    assert_eq!(done["reserved_cents"], 0);
    assert_eq!(done["stats"]["contacts"]["retired"], 4);
    let calls = app.get(&format!("/calls?campaign_id={id}")).await;
    assert_eq!(calls.body["pagination"]["total"], 4);
    let spent: i64 = calls.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["cost_cents"].as_i64().unwrap())
        .sum();
    assert_eq!(done["spent_cents"], spent);
    assert!(
        done["stats"]["call_outcomes"]
            .as_object()
            .is_some_and(|o| !o.is_empty()),
        "{done}"
    );
    // The list shows each campaign as its own GET does, stats and call outcomes too.
    one_pass_campaign(&app, "E2E second", &p.agent, &p.number).await;
    let list = app.get("/campaigns").await;
    let items = list.body["data"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{}", list.text);
    for item in items {
        let one = app
            .get(&format!("/campaigns/{}", item["id"].as_str().unwrap()))
            .await;
        assert_eq!(item, &one.body);
    }

    let contacts = app.get(&format!("/campaigns/{id}/contacts")).await;
    let contact = contacts.body["data"][0]["id"].as_str().unwrap().to_owned();
    let detail = app
        .get(&format!("/campaigns/{id}/contacts/{contact}"))
        .await;
    assert_eq!(detail.status, StatusCode::OK, "{}", detail.text);
    assert_eq!(detail.body["calls"].as_array().unwrap().len(), 1);
    assert_eq!(detail.body["dialing_status"]["reason"], "retired");
    let events: Vec<String> = app.get(&format!("/campaigns/{id}/events")).await.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_owned())
        .collect();
    assert!(events.contains(&"completed".to_owned()), "{events:?}");
}
