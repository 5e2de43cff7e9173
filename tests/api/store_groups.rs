//! Writes committed together: answered inbound calls recorded at the same moment share
//! transactions, each call with its own events, and a call that cannot be recorded is refused
//! alone while the rest of its group lands.

use reqwest::StatusCode;
use serde_json::json;
use switchboard::store::StoreError;
use switchboard_actors::ids::{AgentId, CallId, SipEndpointId};
use switchboard_actors::inbound::InboundStart;

use crate::call_detail::inbound_plan;
use crate::helpers::{TestApp, spawn_app};

/// Calls recorded at once.
const CALLS: usize = 60;

/// An agent raising `call.started` and `call.answered`, and an endpoint answering with it.
async fn desk(app: &TestApp) -> (AgentId, SipEndpointId, String) {
    let agent = app
        .post(
            "/agents",
            json!({
                "name": "Desk",
                "webhook_url": "https://hooks.example.com/calls",
                "webhook_events": ["call.started", "call.answered"],
            }),
        )
        .await;
    assert_eq!(agent.status, StatusCode::CREATED, "{}", agent.text);
    let agent_id = agent.body["id"].as_str().unwrap().to_owned();
    let endpoint = app
        .post(
            "/sip-endpoints",
            json!({"name": "desk", "inbound_agent_id": agent_id}),
        )
        .await;
    assert_eq!(endpoint.status, StatusCode::CREATED, "{}", endpoint.text);
    let endpoint = &endpoint.body["data"];
    (
        AgentId::from_uuid(agent_id.parse().unwrap()),
        SipEndpointId::from_uuid(endpoint["id"].as_str().unwrap().parse().unwrap()),
        endpoint["sip_uri"].as_str().unwrap().to_owned(),
    )
}

/// How many outbox rows call `id` has.
async fn events_of(app: &TestApp, id: CallId) -> i64 {
    let row = crate::database::text_row(
        &app.db_url,
        "SELECT CAST(COUNT(*) AS TEXT) FROM webhook_deliveries WHERE call_id = $1",
        id.as_uuid(),
    )
    .await;
    row[0]
        .as_deref()
        .and_then(|n| n.parse().ok())
        .expect("a count")
}

/// A counter's value.
async fn counter(app: &TestApp, name: &str) -> f64 {
    let (values, text) = app.metric_values(name).await;
    assert_eq!(values.len(), 1, "{name}: {text}");
    values[0]
}

#[tokio::test]
async fn calls_recorded_at_once_share_transactions_and_a_failing_one_is_refused_alone() {
    let app = spawn_app().await;
    let (agent, endpoint, uri) = desk(&app).await;
    let ids: Vec<CallId> = (0..CALLS).map(|_| CallId::new()).collect();
    let start = |id: CallId| InboundStart {
        id,
        plan: inbound_plan(id, app.workspace_id, endpoint, agent, &uri),
        from: "+15550001111".into(),
        codec: switchboard_sip::sdp::Codec::Pcmu,
        started_at: app.store.now(),
    };
    // Every call at once, and in their midst one already recorded (its id is taken).
    let mut starts: Vec<InboundStart> = ids.iter().map(|&id| start(id)).collect();
    app.store.inbound_started(&starts[0]).await.unwrap();
    let before = counter(&app, "switchboard_store_write_groups_total").await;
    starts.insert(CALLS / 2, start(ids[0]));
    let results =
        futures_util::future::join_all(starts.iter().map(|s| app.store.inbound_started(s))).await;
    let refused: Vec<usize> = (0..results.len())
        .filter(|&i| results[i].is_err())
        .collect();
    // The first call is refused (recorded already) and so is its second record; the rest land.
    assert_eq!(refused, [0, CALLS / 2], "{results:?}");
    assert!(
        matches!(results[0], Err(StoreError::Conflict { .. })),
        "{:?}",
        results[0]
    );
    for &id in &ids {
        assert_eq!(
            events_of(&app, id).await,
            2,
            "call {id}: started and answered"
        );
    }
    let listed = app.get("/calls?limit=100").await.body;
    assert_eq!(listed["data"].as_array().unwrap().len(), CALLS, "{listed}");
    // Fewer transactions than calls: they were committed in groups (SQLite's single writer
    // groups its writes; PostgreSQL writes each in its own transaction).
    if app.store.engine() != switchboard::store::Engine::Sqlite {
        return;
    }
    let groups = counter(&app, "switchboard_store_write_groups_total").await - before;
    let writes = counter(&app, "switchboard_store_grouped_writes_total").await;
    // Every call's record went through a group; the refused ones are not counted.
    assert_eq!(writes, CALLS as f64, "writes in groups");
    assert!(
        groups < CALLS as f64 / 2.0,
        "{groups} groups for {CALLS} calls"
    );
}
