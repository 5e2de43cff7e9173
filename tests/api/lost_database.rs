//! A lost database: `/healthz` and the API say so plainly, calls under way go on and are
//! recorded once the database is back. On PostgreSQL the service reaches its database through
//! a relay the test cuts (`database::Relay`); on SQLite only what needs no cut runs.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::Value;
use switchboard::config::Config;

use crate::database::{Relay, fresh_database, postgres_server};
use crate::helpers::{TestApp, eventually, spawn_app, spawn_on};

/// The service on a new PostgreSQL database reached through a relay; `None` on SQLite.
async fn relayed(configure: impl FnOnce(&mut Config)) -> Option<(TestApp, Relay)> {
    let server = postgres_server()?;
    let dir = tempfile::tempdir().unwrap();
    let url = fresh_database(dir.path(), "unused").await;
    let port: u16 = server.rsplit(':').next().unwrap().parse().unwrap();
    let relay = Relay::to(std::net::SocketAddr::from(([127, 0, 0, 1], port))).await;
    let relayed = url.replace(&format!(":{port}/"), &format!(":{}/", relay.port));
    let clock = std::sync::Arc::new(switchboard_actors::clock::AdjustableClock::default());
    let store = switchboard::store::Store::open_with_clock(&relayed, clock.clone())
        .await
        .unwrap();
    Some((spawn_on(store, clock, relayed, configure).await, relay))
}

async fn health(app: &TestApp) -> crate::helpers::Resp {
    app.send(Method::GET, "/healthz", None, None).await
}

/// Waits until `/healthz` answers `status`.
async fn health_becomes(app: &TestApp, status: StatusCode) -> crate::helpers::Resp {
    eventually(
        Duration::from_secs(20),
        &format!("/healthz answers {status}"),
        || async move {
            let h = health(app).await;
            (h.status == status).then_some(h)
        },
    )
    .await
}

/// `/healthz` names the database and its schema, and says plainly when the database is lost
/// and when it is back.
#[tokio::test]
async fn health_names_the_database_and_reports_it_lost_and_back() {
    let app = spawn_app().await;
    let h = health(&app).await;
    assert_eq!(h.status, StatusCode::OK);
    let engine = if postgres_server().is_some() {
        "postgresql"
    } else {
        "sqlite"
    };
    assert_eq!(h.body["database"]["engine"], engine, "{}", h.text);
    assert_eq!(h.body["database"]["reachable"], true);
    assert!(h.body["database"]["schema_version"].as_i64().unwrap() >= 1);
    let Some((app, mut relay)) = relayed(|_| {}).await else {
        return;
    };
    assert_eq!(health(&app).await.status, StatusCode::OK);

    relay.cut();
    let lost = health_becomes(&app, StatusCode::SERVICE_UNAVAILABLE).await;
    assert_eq!(lost.body["status"], "unavailable", "{}", lost.text);
    assert_eq!(lost.body["database"]["reachable"], false, "{}", lost.text);
    let error = lost.body["database"]["error"].as_str().unwrap();
    assert!(
        !error.is_empty() && !error.contains("postgres://"),
        "{error}"
    );
    // The API answers in its error shape meanwhile, and nothing is half written.
    let refused = app.send(Method::GET, "/agents", Some(&app.key), None).await;
    assert_eq!(
        refused.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        refused.text
    );
    assert!(refused.body["code"].is_string(), "{}", refused.text);

    relay.restore().await;
    health_becomes(&app, StatusCode::OK).await;
    assert_eq!(app.get("/agents").await.status, StatusCode::OK);
}

/// A direct call and a campaign's call are talking when the database goes away and end while
/// it is away: each is recorded with its real outcome and length once it is back (not left
/// open, not ended as interrupted), and the campaign goes on to its end.
#[tokio::test]
async fn calls_ending_while_the_database_is_lost_are_recorded_once_it_is_back() {
    let Some((app, mut relay)) = relayed(|c| crate::calls::answering_for(c, "8")).await else {
        return;
    };
    let (direct, agent, number) = crate::calls::place_direct(&app, "+972525550101").await;
    let campaign = crate::calls::one_pass_campaign(&app, "Lost", &agent, &number).await;
    app.enroll_and_launch(&campaign, &["+972525550102"]).await;
    let talking: Vec<Value> = eventually(
        Duration::from_secs(15),
        "both calls are answered",
        || async {
            let calls = app.get("/calls").await.body["data"].as_array().cloned()?;
            (calls.len() == 2 && calls.iter().all(|c| c["status"] == "in_progress"))
                .then_some(calls)
        },
    )
    .await;

    let answered = std::time::Instant::now();
    relay.cut();
    health_becomes(&app, StatusCode::SERVICE_UNAVAILABLE).await;
    // The calls were still talking when the database went: their ends come after the cut.
    assert!(
        answered.elapsed() < Duration::from_secs(7),
        "{:?}",
        answered.elapsed()
    );
    // Both calls hang up while the database is away, for longer than a write waits for a
    // connection (10 s).
    tokio::time::sleep(Duration::from_secs(15)).await;
    relay.restore().await;

    for call in &talking {
        let id = call["id"].as_str().unwrap();
        let ended = app
            .await_status(&format!("/calls/{id}"), "ended", Duration::from_secs(30))
            .await;
        assert_eq!(ended["outcome"], "answered", "{ended}");
        assert_ne!(ended["end_reason"], "interrupted", "{ended}");
        assert_eq!(ended["duration_secs"], 8, "{ended}");
        assert!(ended["cost_cents"].as_i64().unwrap() >= 1, "{ended}");
    }
    assert!(talking.iter().any(|c| c["id"] == direct.as_str()));
    app.await_status(
        &format!("/campaigns/{campaign}"),
        "completed",
        Duration::from_secs(30),
    )
    .await;
}
