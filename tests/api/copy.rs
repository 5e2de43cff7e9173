//! `switchboard copy`: an SQLite store that ran a campaign and a direct call moved into
//! PostgreSQL with the service stopped, then every GET the API lists asked again of the
//! service on PostgreSQL and answered alike. Runs when the suite has a PostgreSQL server.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchboard::config::Config;
use switchboard::store::Store;
use switchboard_actors::clock::AdjustableClock;

use crate::campaigns::{agent, number};
use crate::helpers::{TestApp, spawn_on};

fn simulated(c: &mut Config) {
    crate::calls::simulated(c, "answered=1,busy=1");
}

/// A campaign run to its end, a direct call ended, a do-not-call entry.
async fn history(app: &TestApp) {
    crate::helpers::credit(&app.store, app.workspace_id, 100_000).await;
    let agent = agent(app, Some(120)).await;
    let number = number(app, "+972501230000", "active").await;
    let id = crate::calls::one_pass_campaign(app, "Moved", &agent, &number).await;
    let contacts: Vec<Value> = (0..4)
        .map(|i| json!({"phone_number": format!("+97252555012{i}"), "metadata": {"z": i, "a": "first"}}))
        .collect();
    app.enroll_contacts_and_launch(&id, contacts).await;
    app.await_status(
        &format!("/campaigns/{id}"),
        "completed",
        Duration::from_secs(30),
    )
    .await;
    let call = app
        .post(
            "/calls",
            json!({"agent_id": agent, "to_number": "+972525550131", "from_phone_number_id": number,
                   "metadata": {"crm": "B-7"}}),
        )
        .await;
    assert_eq!(call.status, StatusCode::CREATED, "{}", call.text);
    let call = call.body["id"].as_str().unwrap().to_owned();
    app.await_status(&format!("/calls/{call}"), "ended", Duration::from_secs(10))
        .await;
    let blocked = app
        .post("/do-not-call", json!({"phone_number": "+972525550199"}))
        .await;
    assert_eq!(blocked.status, StatusCode::CREATED, "{}", blocked.text);
}

/// Every GET of the index, its `{...}` parts filled with the first item its list answers
/// (paths whose list is empty are left out), each answer's status and body.
async fn answers(app: &TestApp) -> BTreeMap<String, (StatusCode, Value)> {
    let index = app.send(Method::GET, "/", None, None).await;
    let mut out = BTreeMap::new();
    for e in index.body["endpoints"].as_array().unwrap() {
        let path = e["path"].as_str().unwrap();
        // The health check names the database by design; a shared link's page needs its token.
        if e["method"] != "GET" || path == "/healthz" || path.starts_with("/s/") {
            continue;
        }
        let Some(filled) = fill(app, path).await else {
            continue;
        };
        let r = app.send(Method::GET, &filled, Some(&app.key), None).await;
        let body = if r.body.is_null() {
            Value::String(r.text)
        } else {
            r.body
        };
        out.insert(filled, (r.status, body));
    }
    out
}

async fn fill(app: &TestApp, path: &str) -> Option<String> {
    let mut filled = String::new();
    for part in path.split('/').skip(1) {
        if part.starts_with('{') {
            let list = app.get(&filled).await;
            let id = list.body["data"][0]["id"].as_str()?.to_owned();
            filled.push('/');
            filled.push_str(&id);
        } else {
            filled.push('/');
            filled.push_str(part);
        }
    }
    Some(filled)
}

#[tokio::test]
async fn a_store_copied_into_postgresql_answers_every_request_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = format!("sqlite://{}", dir.path().join("before.db").display());
    let elsewhere = format!("sqlite://{}", dir.path().join("other.db").display());
    let (ok, _, said) =
        crate::cli::switchboard(&sqlite, &["copy", "--from", &sqlite, "--to", &elsewhere]);
    assert!(!ok && said.contains("into a PostgreSQL database"), "{said}");
    if crate::database::postgres_server().is_none() {
        return;
    }
    let clock = Arc::new(AdjustableClock::default());
    let store = Store::open_with_clock(&sqlite, clock.clone())
        .await
        .unwrap();
    let mut app = spawn_on(store, clock, sqlite.clone(), simulated).await;
    history(&app).await;
    let before = answers(&app).await;
    assert!(before.len() > 30, "{:?}", before.keys());
    app.halt().await;

    let postgres = crate::database::fresh_database(dir.path(), "unused").await;
    let (ok, _, said) =
        crate::cli::switchboard(&sqlite, &["copy", "--from", &sqlite, "--to", &postgres]);
    assert!(ok, "{said}");
    assert!(
        said.contains("contacts") && said.contains("each table's rows counted alike"),
        "{said}"
    );
    // A second copy into the same database is refused: it is no longer empty.
    let (again, _, refused) =
        crate::cli::switchboard(&sqlite, &["copy", "--from", &sqlite, "--to", &postgres]);
    assert!(!again && refused.contains("empty"), "{refused}");

    let app = app.resume_on(postgres, simulated).await;
    let after = answers(&app).await;
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
    for (path, answer) in &before {
        assert_eq!(&after[path], answer, "{path}");
    }
    // And the moved store goes on: a new call is placed and listed before the copied ones
    // (newest first), its row numbered on from theirs.
    let agent = app.get("/agents").await.body["data"][0]["id"].clone();
    let number = app.get("/phone-numbers").await.body["data"][0]["id"].clone();
    let placed = app
        .post(
            "/calls",
            json!({"agent_id": agent, "to_number": "+972525550132", "from_phone_number_id": number}),
        )
        .await;
    assert_eq!(placed.status, StatusCode::CREATED, "{}", placed.text);
    let calls = app.get("/calls").await.body;
    assert_eq!(calls["pagination"]["total"], 6);
    assert_eq!(calls["data"][0]["id"], placed.body["id"]);
}
