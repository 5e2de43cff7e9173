//! A campaign's contacts: enrollment from JSON and CSV (normalized numbers, duplicates, invalid
//! rows, do-not-call), its limits, and the exclusion of open contacts by an archive.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchboard_actors::contact::{ContactState, ExclusionReason};

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
    // A quote opened and never closed swallows the rest of the file: that row says so, and
    // the rows before it are enrolled.
    let unclosed = app
        .send_raw(
            Method::POST,
            &format!("/campaigns/{id}/contacts"),
            "text/csv",
            "phone_number,first_name\n+972507654330,Dana\n+972507654331,\"Gil\n+972507654332,Tal\n",
        )
        .await;
    assert_eq!(unclosed.status, StatusCode::OK, "{}", unclosed.text);
    assert_eq!(unclosed.body["enrolled"], 1, "{}", unclosed.text);
    assert_eq!(unclosed.body["invalid"][0]["row"], 2);
    let error = unclosed.body["invalid"][0]["error"].as_str().unwrap();
    assert!(
        error.contains("a quote opened on line 3 is never closed"),
        "{error}"
    );
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
        contacts.iter().all(|c| c.state == ContactState::Excluded
            && c.excluded_reason == Some(ExclusionReason::CampaignArchived)),
        "{contacts:?}"
    );
}

/// A CSV of `rows` contacts `+9725NNNNNNNN` with a `first_name` column.
fn numbered_csv(rows: usize) -> String {
    let mut csv = String::from("phone_number,first_name\n");
    for i in 0..rows {
        csv.push_str(&format!("+9725{i:08},N{i}\n"));
    }
    csv
}

async fn campaign(app: &crate::helpers::TestApp, name: &str) -> String {
    app.post("/campaigns", json!({"name": name})).await.body["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn contact_count(app: &crate::helpers::TestApp, id: &str, state: Option<&str>) -> i64 {
    app.store
        .list_contacts(
            app.workspace_id,
            switchboard_actors::ids::CampaignId::from_uuid(id.parse().unwrap()),
            state.map(|s| switchboard_actors::contact::ContactState::parse(s).unwrap()),
            switchboard::store::Page {
                limit: 1,
                offset: 0,
            },
        )
        .await
        .unwrap()
        .total
}

#[tokio::test]
async fn a_large_csv_enrolls_in_batches_with_duplicates_do_not_call_leads_and_invalid_rows() {
    let app = spawn_app().await;
    let id = campaign(&app, "Large").await;
    const ROWS: usize = 50_000;
    let number = |i: usize| format!("+9725{i:08}");
    // Three numbers on the do-not-call list, a hundred already enrolled, one live lead.
    for i in [5, 20_005, 49_995] {
        let r = app
            .post("/do-not-call", json!({"phone_number": number(i)}))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
    let earlier: Vec<Value> = (40_000..40_100)
        .map(|i| json!({"phone_number": number(i)}))
        .collect();
    let r = app
        .post(
            &format!("/campaigns/{id}/contacts"),
            json!({"contacts": earlier}),
        )
        .await;
    assert_eq!(r.body["enrolled"], 100, "{}", r.text);
    let lead = app
        .post("/leads", json!({"phone_number": "+972525550101"}))
        .await
        .body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let stranger = uuid::Uuid::now_v7();

    // Row r (1-based) is contact i = r - 1; every 10th row is not a number, every 7th repeats
    // the row before it (under another name), rows 3 and 30,003 name a lead.
    let mut csv = String::from("phone_number,first_name,lead_id\n");
    let (mut expected_invalid, mut duplicates, mut excluded) = (Vec::new(), 0, 0);
    let mut last_valid = None;
    for i in 0..ROWS {
        let row = i + 1;
        let lead_id = match row {
            3 => lead.clone(),
            30_003 => stranger.to_string(),
            _ => String::new(),
        };
        if row % 10 == 0 {
            csv.push_str(&format!("not-a-number-{i},N{i},{lead_id}\n"));
            expected_invalid.push(row);
        } else if row % 7 == 0
            && let Some(prev) = last_valid
        {
            csv.push_str(&format!("{},again{i},{lead_id}\n", number(prev)));
            duplicates += 1;
        } else if row == 30_003 {
            csv.push_str(&format!("{},N{i},{lead_id}\n", number(i)));
            expected_invalid.push(row);
        } else {
            csv.push_str(&format!("{},N{i},{lead_id}\n", number(i)));
            if (40_000..40_100).contains(&i) {
                duplicates += 1;
            } else if [5, 20_005, 49_995].contains(&i) {
                excluded += 1;
            }
            last_valid = Some(i);
        }
    }
    let valid = ROWS - expected_invalid.len();
    let resp = app
        .send_raw(
            Method::POST,
            &format!("/campaigns/{id}/contacts"),
            "text/csv",
            csv,
        )
        .await;
    assert_eq!(
        resp.status,
        StatusCode::OK,
        "{}",
        &resp.text[..resp.text.len().min(300)]
    );
    assert_eq!(resp.body["duplicates"], duplicates);
    assert_eq!(resp.body["excluded_dnc"], excluded);
    assert_eq!(resp.body["enrolled"], valid - duplicates - excluded);
    let invalid = resp.body["invalid"].as_array().unwrap();
    let rows: Vec<usize> = invalid
        .iter()
        .map(|r| r["row"].as_u64().unwrap() as usize)
        .collect();
    assert_eq!(rows, expected_invalid);
    assert_eq!(
        invalid[rows.iter().position(|r| *r == 30_003).unwrap()]["error"],
        format!("lead_id `{stranger}` is not a lead of this workspace")
    );

    assert_eq!(
        contact_count(&app, &id, None).await as usize,
        100 + valid - duplicates
    );
    assert_eq!(
        contact_count(&app, &id, Some("excluded")).await,
        excluded as i64
    );
    // The first row of a number is the one kept; the lead landed.
    // Listed in enrollment order: the hundred JSON contacts, then the CSV's.
    let page = app
        .get(&format!("/campaigns/{id}/contacts?limit=10&offset=100"))
        .await;
    let page = page.body["data"].as_array().unwrap();
    assert_eq!(page[0]["phone_number"], number(0));
    assert_eq!(page[2]["lead_id"], lead.as_str());
    assert_eq!(page[5]["variables"]["first_name"], "N5");
    assert_eq!(page[5]["state"], "excluded");
    assert_eq!(page[6]["phone_number"], number(7));
    assert_eq!(page[6]["variables"]["first_name"], "N7");
}

#[tokio::test]
async fn csv_uploads_past_the_limits_or_unreadable_are_refused_and_write_nothing() {
    let app = crate::helpers::spawn_app_with(|c| {
        c.max_csv_rows = 25_000;
        c.max_csv_body_bytes = 1 << 20;
    })
    .await;
    let id = campaign(&app, "Limits").await;
    let post_csv = |body: Vec<u8>| {
        let app = &app;
        let path = format!("/campaigns/{id}/contacts");
        async move { app.send_raw(Method::POST, &path, "text/csv", body).await }
    };

    // More rows than allowed: two batches were written before the row past the limit.
    let resp = post_csv(numbered_csv(30_000).into_bytes()).await;
    assert_eq!(resp.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", resp.text);
    assert_eq!(resp.body["code"], "PAYLOAD_TOO_LARGE");
    assert!(
        resp.body["error"].as_str().unwrap().contains("25000"),
        "{}",
        resp.text
    );
    assert_eq!(
        contact_count(&app, &id, None).await,
        0,
        "nothing half-enrolled"
    );

    // More bytes than allowed.
    let mut big = numbered_csv(20_000).into_bytes();
    big.resize((1 << 20) + 1, b'\n');
    let resp = post_csv(big).await;
    assert_eq!(resp.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", resp.text);
    assert_eq!(resp.body["code"], "PAYLOAD_TOO_LARGE");

    // A header that is not UTF-8, or names no phone_number column.
    let resp = post_csv(b"phone_\xff,name\n+972501234567,x\n".to_vec()).await;
    assert_eq!(resp.status, StatusCode::BAD_REQUEST, "{}", resp.text);
    assert!(resp.body["error"].as_str().unwrap().contains("CSV header"));
    let resp = post_csv(b"name,phone\nx,+972501234567\n".to_vec()).await;
    assert_eq!(resp.status, StatusCode::BAD_REQUEST);
    assert!(
        resp.body["error"]
            .as_str()
            .unwrap()
            .contains("phone_number")
    );
    assert_eq!(contact_count(&app, &id, None).await, 0);

    // Up to the limits the upload is taken; a row that is not UTF-8 is an invalid row.
    let csv = numbered_csv(25_000).into_bytes();
    let mut with_bad_row = b"phone_number\n+972501234567\n\xff\xfe\n".to_vec();
    let resp = post_csv(csv).await;
    assert_eq!(
        resp.status,
        StatusCode::OK,
        "{}",
        &resp.text[..resp.text.len().min(300)]
    );
    assert_eq!(resp.body["enrolled"], 25_000);
    with_bad_row.extend_from_slice(b"+972501234568\n");
    let resp = post_csv(with_bad_row).await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text);
    assert_eq!(resp.body["enrolled"], 2);
    assert_eq!(resp.body["invalid"][0]["row"], 2);
    assert!(
        resp.body["invalid"][0]["error"]
            .as_str()
            .unwrap()
            .starts_with("unreadable CSV row"),
        "{}",
        resp.text
    );
}
