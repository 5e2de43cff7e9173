//! Crash safety of the real binary: `switchboard serve --carrier sim` is killed with SIGKILL
//! mid-campaign, several times, and restarted on the same database file. The simulated
//! carrier's dial log (written by every process in turn) must show no contact dialled twice for
//! one attempt, and every contact must end in a terminal state.

use std::collections::HashMap;
use std::time::Duration;

use switchboard::domain::auth::Scopes;
use switchboard::store::{Agent, CampaignSettings, NewContact, StatusChange, Store};
use switchboard_actors::campaign::{AuditEvent, CampaignStatus, NumberStatus};
use switchboard_actors::ids::CampaignId;
use switchboard_actors::phone::PhoneNumber;

use crate::helpers::eventually;

const CONTACTS: usize = 40;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn serve(db: &str, dir: &std::path::Path, port: u16) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args([
            "--database-url",
            db,
            "serve",
            "--metrics-listen",
            "none",
            "--http",
        ])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--data-dir")
        .arg(dir.join("data"))
        .args([
            "--carrier",
            "sim",
            "--sim-mix",
            "answered=2,no_answer=2,busy=1,voicemail=1",
            "--sim-ring-secs",
            "0-1",
            "--sim-talk-secs",
            "1-3",
            "--evaluation-interval-secs",
            "1",
            "--disposition-timeout-secs",
            "1",
            // The test polls the campaign; the API's per-key limit is not what it checks.
            "--rate-limit",
            "1000000",
        ])
        .arg("--sim-dial-log")
        .arg(dir.join("dials.log"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("switchboard starts")
}

#[tokio::test]
async fn killing_the_service_mid_campaign_never_redials_an_attempt_nor_loses_a_contact() {
    let dir = tempfile::tempdir().unwrap();
    let db = crate::database::fresh_database(dir.path(), "crash.db").await;

    // A running campaign, prepared straight in the store.
    let (c, secret) = running_campaign(&db, CONTACTS, 4_000_000, |s| {
        s.rules.max_in_flight = 4;
        s.rules.max_attempts = 2;
        s.rules.retry_no_answer_seconds = 30;
        s.rules.retry_completed_seconds = 60;
        s.rules.stop_on_unclassified = true;
    })
    .await;

    let log = dir.path().join("dials.log");
    let dials = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .count()
    };
    // Kill it abruptly three times, each time once more calls have been dialled.
    for round in 1..=3 {
        let port = free_port();
        let mut child = serve(&db, dir.path(), port);
        let before = dials();
        eventually(
            Duration::from_secs(60),
            &format!("round {round}: calls are dialled"),
            || async move { (dials() >= before + 3).then_some(()) },
        )
        .await;
        child.kill().await.expect("SIGKILL");
    }

    // The last run goes to the end.
    let port = free_port();
    let _child = serve(&db, dir.path(), port);
    switchboard::edge::tls::install_crypto();
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/campaigns/{}", c);
    completed(&client, &url, &secret, Duration::from_secs(240)).await;

    // The carrier's view over all four processes: one dial per contact and attempt.
    let text = std::fs::read_to_string(&log).unwrap();
    let mut per_attempt: HashMap<(String, String), usize> = HashMap::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        assert_eq!(fields.len(), 5, "dial log line {line:?}");
        *per_attempt
            .entry((fields[1].to_owned(), fields[2].to_owned()))
            .or_default() += 1;
    }
    let twice: Vec<_> = per_attempt.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "dialled twice for one attempt: {twice:?}");

    // Nobody lost: every contact is terminal, and every dial is a call on record.
    let rows = settled(&client, &url, &secret, CONTACTS).await;
    for row in &rows {
        let id = row["id"].as_str().unwrap();
        let dialled = per_attempt
            .keys()
            .filter(|(contact, _)| contact == id)
            .count() as i64;
        assert!(dialled <= row["attempts"].as_i64().unwrap(), "{row}");
    }
    let calls = get_json(
        &client,
        &format!("http://127.0.0.1:{port}/calls?campaign_id={c}&limit=100"),
        &secret,
    )
    .await;
    let dialled_calls = calls["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["started_at"].is_string())
        .count();
    assert!(dialled_calls >= per_attempt.len());
}

/// A running campaign of `contacts` contacts (`+97252` and 7 digits from `first`) in a fresh
/// workspace of the store at `db`, prepared straight in the store with ample credit, an agent,
/// a calling number and `tune`'s settings; the campaign's id and an all-scope API key.
pub async fn running_campaign(
    db: &str,
    contacts: usize,
    first: usize,
    tune: impl FnOnce(&mut CampaignSettings),
) -> (CampaignId, String) {
    let store = Store::open(db).await.unwrap();
    let ws = store.create_workspace("crash", "IL").await.unwrap();
    crate::helpers::credit(&store, ws.id, 1_000_000).await;
    let (key, secret) = store
        .create_key(ws.id, "crash", &Scopes::All, None)
        .await
        .unwrap();
    let mut agent = Agent::new("Crash agent".into());
    agent.max_call_duration_secs = Some(60);
    let agent = store.create_agent(ws.id, &agent).await.unwrap();
    let number = store
        .add_owned_number(
            ws.id,
            &PhoneNumber::from_e164_unchecked("+972501119999".into()),
            NumberStatus::Active,
        )
        .await
        .unwrap();
    let mut s = CampaignSettings::defaults("Crash".into());
    s.agent_id = Some(agent.id);
    s.from_phone_number_id = Some(number.id);
    s.calling_window = Some(switchboard::runtime::simulation::all_day("UTC"));
    tune(&mut s);
    let c = store.create_campaign(ws.id, &s, key.id).await.unwrap();
    let contacts: Vec<NewContact> = (0..contacts)
        .map(|i| NewContact {
            phone_number: format!("+97252{:07}", first + i),
            timezone: None,
            lead_id: None,
            variables: serde_json::json!({}),
            metadata: serde_json::json!({}),
            excluded: None,
        })
        .collect();
    store
        .enroll_contacts(ws.id, c.id, &contacts, key.id)
        .await
        .unwrap()
        .unwrap();
    assert!(
        store
            .change_campaign_status(
                ws.id,
                c.id,
                &StatusChange {
                    from: CampaignStatus::Draft,
                    to: CampaignStatus::Running,
                    event: AuditEvent::Launched,
                    actor: Some(key.id),
                    from_number: Some("+972501119999".into()),
                },
            )
            .await
            .unwrap()
    );
    store.close().await;
    (c.id, secret)
}

/// `url`'s JSON, with `secret`.
pub async fn get_json(client: &reqwest::Client, url: &str, secret: &str) -> serde_json::Value {
    client
        .get(url)
        .bearer_auth(secret)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Waits for the campaign at `url` to complete (the service may not listen yet); its money is
/// all released.
pub async fn completed(client: &reqwest::Client, url: &str, secret: &str, within: Duration) {
    let finished = eventually(
        within,
        "the campaign completes after the kills",
        || async move {
            let resp = client.get(url).bearer_auth(secret).send().await.ok()?;
            let body: serde_json::Value = resp.json().await.unwrap_or_default();
            (body["status"] == "completed").then_some(body)
        },
    )
    .await;
    assert_eq!(finished["reserved_cents"], 0);
}

/// The contacts of the campaign at `url`: `expected` of them, each settled (retired or
/// exhausted): none lost.
pub async fn settled(
    client: &reqwest::Client,
    url: &str,
    secret: &str,
    expected: usize,
) -> Vec<serde_json::Value> {
    let contacts = get_json(client, &format!("{url}/contacts?limit=100"), secret).await;
    let rows = contacts["data"].as_array().unwrap().clone();
    assert_eq!(rows.len(), expected);
    for row in &rows {
        assert!(
            ["retired", "exhausted"].contains(&row["state"].as_str().unwrap()),
            "{row}"
        );
    }
    rows
}
