use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchboard_actors::ids::WorkspaceId;

use crate::helpers::{TestApp, spawn_app, spawn_app_with};

/// Gives a workspace a saved payment method (billing's own setup endpoint is tested with
/// billing).
async fn give_payment_method(app: &TestApp, ws: WorkspaceId) {
    let method = switchboard::domain::payments::PaymentMethod {
        id: "pm_test".into(),
        label: "test".into(),
    };
    app.store
        .set_payment_method(ws, Some(&method))
        .await
        .expect("payment method saved");
}

async fn credit(app: &TestApp, ws: WorkspaceId, cents: i64) {
    crate::helpers::credit(&app.store, ws, cents).await;
}

async fn balance(app: &TestApp) -> i64 {
    app.store
        .billing_account(app.workspace_id)
        .await
        .expect("account")
        .expect("workspace")
        .balance_cents
}

/// A workspace ready to buy: payment method and $50.
async fn ready_to_buy(app: &TestApp) {
    give_payment_method(app, app.workspace_id).await;
    credit(app, app.workspace_id, 5000).await;
}

async fn first_available(app: &TestApp) -> String {
    let resp = app.get("/phone-numbers/search?limit=1").await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text);
    resp.body["data"][0]["phone_number"]
        .as_str()
        .expect("a number is available")
        .to_owned()
}

async fn buy(app: &TestApp, number: &str) -> Value {
    let resp = app
        .post("/phone-numbers/purchase", json!({"phone_number": number}))
        .await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text);
    resp.body
}

#[tokio::test]
async fn search_offers_valid_israeli_mobile_numbers_deterministically() {
    let app = spawn_app().await;
    let resp = app.get("/phone-numbers/search?limit=25").await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text);
    let data = resp.body["data"].as_array().unwrap();
    assert_eq!(data.len(), 25);
    let il: phonenumber::country::Id = "IL".parse().unwrap();
    for n in data {
        let number = n["phone_number"].as_str().unwrap();
        assert!(
            number.starts_with("+9725"),
            "{number} is an Israeli mobile number"
        );
        let parsed =
            switchboard_actors::phone::PhoneNumber::parse(number, il).expect("valid number");
        assert_eq!(parsed.country().as_deref(), Some("IL"));
        assert_eq!(n["country_code"], "IL");
        assert_eq!(n["monthly_price"], 5.0);
        assert_eq!(n["currency"], "usd");
        assert!(
            n["friendly_name"].as_str().unwrap().starts_with("05"),
            "{n}"
        );
    }
    let again = app.get("/phone-numbers/search?limit=25&country=IL").await;
    assert_eq!(again.body, resp.body, "the inventory is deterministic");
    assert_eq!(
        app.get("/phone-numbers/search").await.body["data"]
            .as_array()
            .unwrap()
            .len(),
        20,
        "default limit"
    );
}

#[tokio::test]
async fn search_filters_by_digits_in_either_form() {
    let app = spawn_app().await;
    let resp = app.get("/phone-numbers/search?contains=0545&limit=5").await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text);
    let data = resp.body["data"].as_array().unwrap();
    assert!(!data.is_empty());
    for n in data {
        assert!(
            n["phone_number"].as_str().unwrap().starts_with("+97254"),
            "{n}"
        );
    }
    let resp = app
        .get("/phone-numbers/search?contains=97258&limit=5")
        .await;
    for n in resp.body["data"].as_array().unwrap() {
        assert!(
            n["phone_number"].as_str().unwrap().starts_with("+97258"),
            "{n}"
        );
    }
}

#[tokio::test]
async fn search_refuses_other_countries_and_bad_parameters() {
    let app = spawn_app().await;
    let resp = app.get("/phone-numbers/search?country=US").await;
    assert_eq!(resp.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        resp.body["error"],
        "Only Israeli phone numbers are supported"
    );
    for bad in [
        "country=XX",
        "limit=0",
        "limit=101",
        "contains=12a",
        "contains=1234567890123",
        "limit=many",
    ] {
        let resp = app.get(&format!("/phone-numbers/search?{bad}")).await;
        assert_eq!(resp.status, StatusCode::BAD_REQUEST, "{bad}: {}", resp.text);
        assert_eq!(resp.error_code(), "INVALID_REQUEST");
    }
}

#[tokio::test]
async fn buying_a_number_charges_the_first_month_and_leaves_it_pending() {
    let app = spawn_app().await;
    ready_to_buy(&app).await;
    let number = first_available(&app).await;
    let result = buy(&app, &number).await;
    assert_eq!(result["success"], true);
    assert_eq!(result["phoneNumber"], number.as_str());
    assert_eq!(result["monthlyPrice"], 5.0);
    assert_eq!(result["currency"], "usd");
    assert_eq!(result["status"], "pending_requirements");
    assert!(result["message"].as_str().is_some_and(|m| !m.is_empty()));
    assert_eq!(balance(&app).await, 4500);

    let id = result["id"].as_str().unwrap();
    let got = app.get(&format!("/phone-numbers/{id}")).await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.body["number"], number.as_str());
    assert_eq!(got.body["status"], "pending_requirements");
    assert_eq!(got.body["is_active"], false);
    assert_eq!(got.body["provider"], "switchboard");
    assert_eq!(got.body["country_code"], "IL");
    assert_eq!(got.body["monthly_cost"], 5.0);
    assert!(got.body["inbound_agent_id"].is_null());

    let list = app.get("/phone-numbers").await;
    assert_eq!(list.status, StatusCode::OK);
    assert_eq!(list.body["pagination"]["total"], 1);
    assert_eq!(list.body["data"][0]["id"], id);

    let search = app.get("/phone-numbers/search?limit=100").await;
    assert!(
        search.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["phone_number"] != number.as_str()),
        "held numbers are not offered"
    );
}

#[tokio::test]
async fn national_forms_buy_the_same_number() {
    let app = spawn_app().await;
    ready_to_buy(&app).await;
    let result = buy(&app, "054-555-0101").await;
    assert_eq!(result["phoneNumber"], "+972545550101");
    let again = app
        .post(
            "/phone-numbers/purchase",
            json!({"phone_number": "+972 54 555 0101"}),
        )
        .await;
    assert_eq!(again.status, StatusCode::CONFLICT);
}

#[tokio::test]
async fn non_israeli_and_invalid_numbers_cannot_be_bought() {
    let app = spawn_app().await;
    ready_to_buy(&app).await;
    for foreign in ["+12015550123", "+447911123456"] {
        let resp = app
            .post("/phone-numbers/purchase", json!({"phone_number": foreign}))
            .await;
        assert_eq!(resp.status, StatusCode::BAD_REQUEST, "{foreign}");
        assert_eq!(
            resp.body["error"],
            "Only Israeli phone numbers are supported"
        );
        assert_eq!(resp.error_code(), "INVALID_REQUEST");
    }
    for (body, needle) in [
        (json!({"phone_number": "hello"}), "phone_number"),
        (json!({"phone_number": "+972 1"}), "phone_number"),
        (json!({"phone_number": 972501234567_i64}), "phone_number"),
        (json!({}), "phone_number"),
        (
            json!({"phone_number": "+972545550102", "plan": "gold"}),
            "Writable fields",
        ),
    ] {
        let resp = app.post("/phone-numbers/purchase", body.clone()).await;
        assert_eq!(
            resp.status,
            StatusCode::BAD_REQUEST,
            "{body}: {}",
            resp.text
        );
        assert!(
            resp.body["error"].as_str().unwrap().contains(needle),
            "{body}: {}",
            resp.text
        );
    }
    assert_eq!(balance(&app).await, 5000, "nothing was charged");
}

#[tokio::test]
async fn buying_without_a_payment_method_is_a_billing_error() {
    let app = spawn_app().await;
    credit(&app, app.workspace_id, 5000).await;
    let number = first_available(&app).await;
    let resp = app
        .post("/phone-numbers/purchase", json!({"phone_number": number}))
        .await;
    assert_eq!(resp.status, StatusCode::PAYMENT_REQUIRED);
    assert_eq!(resp.error_code(), "BILLING_ERROR");
    assert_eq!(balance(&app).await, 5000);
    assert_eq!(
        app.get("/phone-numbers").await.body["pagination"]["total"],
        0
    );
}

#[tokio::test]
async fn buying_with_too_little_balance_is_a_billing_error() {
    let app = spawn_app().await;
    give_payment_method(&app, app.workspace_id).await;
    credit(&app, app.workspace_id, 499).await;
    let number = first_available(&app).await;
    let resp = app
        .post("/phone-numbers/purchase", json!({"phone_number": number}))
        .await;
    assert_eq!(resp.status, StatusCode::PAYMENT_REQUIRED, "{}", resp.text);
    assert_eq!(resp.error_code(), "BILLING_ERROR");
    assert_eq!(balance(&app).await, 499);
    assert_eq!(
        app.get("/phone-numbers").await.body["pagination"]["total"],
        0
    );
}

#[tokio::test]
async fn a_number_held_by_another_workspace_cannot_be_bought_until_released() {
    let app = spawn_app().await;
    ready_to_buy(&app).await;
    let (other_ws, other_key) = app.other_workspace().await;
    give_payment_method(&app, other_ws).await;
    credit(&app, other_ws, 5000).await;

    let number = first_available(&app).await;
    let mine = buy(&app, &number).await;
    let resp = app
        .send(
            Method::POST,
            "/phone-numbers/purchase",
            Some(&other_key),
            Some(json!({"phone_number": number})),
        )
        .await;
    assert_eq!(resp.status, StatusCode::CONFLICT, "{}", resp.text);
    assert_eq!(resp.error_code(), "CONFLICT");
    let other_balance = app
        .store
        .billing_account(other_ws)
        .await
        .unwrap()
        .unwrap()
        .balance_cents;
    assert_eq!(other_balance, 5000, "a refused purchase charges nothing");

    let id = mine["id"].as_str().unwrap();
    let released = app.delete(&format!("/phone-numbers/{id}")).await;
    assert_eq!(released.status, StatusCode::OK, "{}", released.text);
    assert_eq!(released.body, json!({"success": true, "id": id}));
    assert_eq!(
        app.get(&format!("/phone-numbers/{id}")).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.get("/phone-numbers").await.body["pagination"]["total"],
        0
    );
    assert_eq!(
        app.delete(&format!("/phone-numbers/{id}")).await.status,
        StatusCode::NOT_FOUND,
        "released once"
    );

    let resp = app
        .send(
            Method::POST,
            "/phone-numbers/purchase",
            Some(&other_key),
            Some(json!({"phone_number": number})),
        )
        .await;
    assert_eq!(
        resp.status,
        StatusCode::OK,
        "a released number can be bought again: {}",
        resp.text
    );
}

#[tokio::test]
async fn a_purchased_number_becomes_active_after_the_review_delay() {
    let app = spawn_app_with(|c| c.number_activation_delay = Duration::from_secs(86_400)).await;
    ready_to_buy(&app).await;
    let number = first_available(&app).await;
    let id = buy(&app, &number).await["id"].as_str().unwrap().to_owned();
    let path = format!("/phone-numbers/{id}");
    assert_eq!(app.get(&path).await.body["status"], "pending_requirements");
    app.clock.advance(Duration::from_secs(86_401));
    // The activation job runs every 50 ms.
    let number = app
        .await_status(&path, "active", Duration::from_secs(5))
        .await;
    assert_eq!(number["is_active"], true);
    assert!(number["ownership_verified_at"].is_string());
}

#[tokio::test]
async fn a_number_stays_pending_while_the_review_delay_runs() {
    let app = spawn_app().await;
    ready_to_buy(&app).await;
    let number = first_available(&app).await;
    let id = buy(&app, &number).await["id"].as_str().unwrap().to_owned();
    // The activation job runs every 50 ms in tests; the default delay is a day.
    assert_eq!(
        app.store
            .activate_due_numbers(app.store.now())
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        app.get(&format!("/phone-numbers/{id}")).await.body["status"],
        "pending_requirements"
    );
}

#[tokio::test]
async fn numbers_are_assigned_to_agents_of_the_workspace_only() {
    let app = spawn_app().await;
    ready_to_buy(&app).await;
    let number = first_available(&app).await;
    let id = buy(&app, &number).await["id"].as_str().unwrap().to_owned();
    let path = format!("/phone-numbers/{id}");
    let agent = app
        .post("/agents", json!({"name": "Front desk"}))
        .await
        .body["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let resp = app.patch(&path, json!({"inbound_agent_id": agent, "outbound_agent_id": agent, "friendly_name": "Main line"})).await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text);
    assert_eq!(resp.body["inbound_agent_id"], agent.as_str());
    assert_eq!(resp.body["outbound_agent_id"], agent.as_str());
    assert_eq!(resp.body["friendly_name"], "Main line");

    let resp = app.patch(&path, json!({"outbound_agent_id": null})).await;
    assert_eq!(resp.status, StatusCode::OK);
    assert!(resp.body["outbound_agent_id"].is_null());
    assert_eq!(
        resp.body["inbound_agent_id"],
        agent.as_str(),
        "unsent fields stay"
    );
    assert_eq!(resp.body["friendly_name"], "Main line");

    let (_, other_key) = app.other_workspace().await;
    let foreign = app
        .send(
            Method::POST,
            "/agents",
            Some(&other_key),
            Some(json!({"name": "Theirs"})),
        )
        .await
        .body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    for (body, needle) in [
        (json!({"inbound_agent_id": foreign}), "inbound_agent_id"),
        (
            json!({"outbound_agent_id": "0190f0a0-0000-7000-8000-000000000000"}),
            "outbound_agent_id",
        ),
        (
            json!({"inbound_agent_id": "not-a-uuid"}),
            "inbound_agent_id",
        ),
        (json!({"friendly_name": null}), "friendly_name"),
        (json!({"friendly_name": "x".repeat(101)}), "friendly_name"),
        (json!({"status": "active"}), "Writable fields"),
        (json!({}), "Writable fields"),
    ] {
        let resp = app.patch(&path, body.clone()).await;
        assert_eq!(
            resp.status,
            StatusCode::BAD_REQUEST,
            "{body}: {}",
            resp.text
        );
        assert!(
            resp.body["error"].as_str().unwrap().contains(needle),
            "{body}: {}",
            resp.text
        );
    }
    assert_eq!(
        app.get(&path).await.body["inbound_agent_id"],
        agent.as_str()
    );
}

#[tokio::test]
async fn another_workspace_cannot_see_change_or_release_a_number() {
    let app = spawn_app().await;
    ready_to_buy(&app).await;
    let number = first_available(&app).await;
    let id = buy(&app, &number).await["id"].as_str().unwrap().to_owned();
    let path = format!("/phone-numbers/{id}");
    let (_, other) = app.other_workspace().await;
    assert_eq!(
        app.send(Method::GET, &path, Some(&other), None)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.send(Method::DELETE, &path, Some(&other), None)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let patch = app
        .send(
            Method::PATCH,
            &path,
            Some(&other),
            Some(json!({"friendly_name": "Mine now"})),
        )
        .await;
    assert_eq!(patch.status, StatusCode::NOT_FOUND);
    let list = app
        .send(Method::GET, "/phone-numbers", Some(&other), None)
        .await;
    assert_eq!(list.body["pagination"]["total"], 0);
    let mine = app.get(&path).await;
    assert_eq!(mine.status, StatusCode::OK);
    assert_ne!(mine.body["friendly_name"], "Mine now");
}

#[tokio::test]
async fn phone_number_routes_require_their_scopes() {
    let app = spawn_app().await;
    let searcher = app.key_with_scopes("phone_numbers:search").await;
    assert_eq!(
        app.send(Method::GET, "/phone-numbers/search", Some(&searcher), None)
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        app.send(Method::GET, "/phone-numbers", Some(&searcher), None)
            .await
            .status,
        StatusCode::OK
    );
    let resp = app
        .send(
            Method::POST,
            "/phone-numbers/purchase",
            Some(&searcher),
            Some(json!({"phone_number": "+972545550103"})),
        )
        .await;
    assert_eq!(resp.body["required_scope"], "phone_numbers:purchase");
    let path = "/phone-numbers/0190f0a0-0000-7000-8000-000000000000";
    let resp = app
        .send(
            Method::PATCH,
            path,
            Some(&searcher),
            Some(json!({"friendly_name": "x"})),
        )
        .await;
    assert_eq!(resp.body["required_scope"], "phone_numbers:configure");
    let resp = app.send(Method::DELETE, path, Some(&searcher), None).await;
    assert_eq!(resp.body["required_scope"], "phone_numbers:configure");
}
