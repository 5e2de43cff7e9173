//! A campaign's contacts: enrollment from JSON and CSV (normalized numbers, duplicates, invalid
//! rows, do-not-call), its limits, and the exclusion of open contacts by an archive.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::spawn_app;

#[tokio::test]
async fn enrollment_normalizes_numbers_and_reports_duplicates_invalid_rows_and_do_not_call() {
    let app = spawn_app().await;
    let id = app.post("/campaigns", json!({"name": "Enroll"})).await.body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let blocked = app
        .post("/do-not-call", json!({"phone_number": "+972501234999"}))
        .await;
    assert_eq!(blocked.status, StatusCode::CREATED, "{}", blocked.text);
    let resp = app
        .post(
            &format!("/campaigns/{id}/contacts"),
            json!({"contacts": [
                {"phone_number": "050-123-4567", "variables": {"first_name": "Dana"}},
                {"phone_number": "+972 50 123 4567"},
                {"phone_number": "not a number"},
                {"phone_number": "+972501234999"},
                {"phone_number": "+972501234568", "timezone": "Mars/Olympus"},
                {"phone_number": "+972501234569", "timezone": "Asia/Jerusalem", "metadata": {"crm": 7}},
                {"nope": 1},
            ]}),
        )
        .await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text);
    assert_eq!(resp.body["enrolled"], 2);
    assert_eq!(resp.body["duplicates"], 1);
    assert_eq!(resp.body["excluded_dnc"], 1);
    let rows: Vec<i64> = resp.body["invalid"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["row"].as_i64().unwrap())
        .collect();
    assert_eq!(rows, [3, 5, 7]);

    let again = app
        .post(
            &format!("/campaigns/{id}/contacts"),
            json!({"contacts": [{"phone_number": "0501234567"}]}),
        )
        .await;
    assert_eq!(again.body["duplicates"], 1);
    assert_eq!(again.body["enrolled"], 0);

    let pending = app
        .get(&format!("/campaigns/{id}/contacts?state=pending"))
        .await;
    let contacts = pending.body["data"].as_array().unwrap();
    assert_eq!(contacts.len(), 2);
    assert_eq!(contacts[0]["phone_number"], "+972501234567");
    assert_eq!(contacts[0]["variables"]["first_name"], "Dana");
    let excluded = app
        .get(&format!("/campaigns/{id}/contacts?state=excluded"))
        .await;
    assert_eq!(excluded.body["data"][0]["excluded_reason"], "do_not_call");
    let one = app
        .get(&format!(
            "/campaigns/{id}/contacts/{}",
            contacts[1]["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(one.body["metadata"]["crm"], 7);
    let campaign = app.get(&format!("/campaigns/{id}")).await;
    assert_eq!(campaign.body["total_leads"], 3);
    assert_eq!(campaign.body["stats"]["contacts"]["excluded"], 1);
    assert_eq!(
        app.get(&format!("/campaigns/{id}/contacts?state=nope"))
            .await
            .status,
        StatusCode::BAD_REQUEST
    );
}

#[tokio::test]
async fn contacts_can_be_enrolled_from_csv() {
    let app = spawn_app().await;
    let id = app.post("/campaigns", json!({"name": "CSV"})).await.body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let csv = "Phone_Number,timezone,first_name\n050-765-4321,Asia/Jerusalem,Noa\n+972507654322,,Eli\nbad,,X\n";
    let resp = app
        .send_raw(
            Method::POST,
            &format!("/campaigns/{id}/contacts"),
            "text/csv",
            csv,
        )
        .await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text);
    assert_eq!(resp.body["enrolled"], 2);
    assert_eq!(resp.body["invalid"][0]["row"], 3);
    let list = app.get(&format!("/campaigns/{id}/contacts")).await;
    assert_eq!(list.body["data"][0]["variables"]["first_name"], "Noa");
    assert_eq!(list.body["data"][0]["timezone"], "Asia/Jerusalem");
    let no_phone = app
        .send_raw(
            Method::POST,
            &format!("/campaigns/{id}/contacts"),
            "text/csv",
            "name\nx\n",
        )
        .await;
    assert_eq!(no_phone.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn enrollment_refuses_oversized_json_and_terminal_campaigns() {
    let app = spawn_app().await;
    let id = app.post("/campaigns", json!({"name": "Big"})).await.body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let many: Vec<Value> = (0..10_001)
        .map(|i| json!({"phone_number": format!("+9725{:08}", i)}))
        .collect();
    let resp = app
        .post(
            &format!("/campaigns/{id}/contacts"),
            json!({"contacts": many}),
        )
        .await;
    assert_eq!(
        resp.status,
        StatusCode::BAD_REQUEST,
        "{}",
        &resp.text[..resp.text.len().min(200)]
    );
    assert_eq!(
        app.get(&format!("/campaigns/{id}")).await.body["total_leads"],
        0,
        "nothing half-enrolled"
    );
    app.post_empty(&format!("/campaigns/{id}/stop")).await;
    let resp = app
        .post(
            &format!("/campaigns/{id}/contacts"),
            json!({"contacts": [{"phone_number": "0501234567"}]}),
        )
        .await;
    assert_eq!(resp.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn archiving_excludes_every_open_contact() {
    let app = spawn_app().await;
    let id = app.post("/campaigns", json!({"name": "Arch"})).await.body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.post(
        &format!("/campaigns/{id}/contacts"),
        json!({"contacts": [{"phone_number": "0501234567"}, {"phone_number": "0501234568"}]}),
    )
    .await;
    app.delete(&format!("/campaigns/{id}")).await;
    // An archived campaign is gone from the API; its contacts stay in the store.
    let contacts = app
        .store
        .list_contacts(
            app.workspace_id,
            switchboard_actors::ids::CampaignId::from_uuid(id.parse().unwrap()),
            None,
            switchboard::store::Page {
                limit: 10,
                offset: 0,
            },
        )
        .await
        .unwrap()
        .items;
    assert_eq!(contacts.len(), 2);
    assert!(
        contacts
            .iter()
            .all(|c| c.state == "excluded"
                && c.excluded_reason.as_deref() == Some("campaign_archived")),
        "{contacts:?}"
    );
}
