use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::helpers::{TestApp, spawn_app};

async fn add_payment_method(app: &TestApp) {
    let resp = app
        .post(
            "/billing/payment-method",
            json!({"payment_token": "tok_visa_4242"}),
        )
        .await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text);
}

/// Every ledger row of the workspace, newest first.
async fn ledger(app: &TestApp) -> Vec<serde_json::Value> {
    let resp = app.get("/billing/ledger?limit=100").await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text);
    resp.body["data"].as_array().unwrap().clone()
}

async fn assert_ledger_adds_up(app: &TestApp) {
    let sum: i64 = ledger(app)
        .await
        .iter()
        .map(|e| e["amount_cents"].as_i64().unwrap())
        .sum();
    assert_eq!(
        app.get("/billing").await.body["balance_cents"],
        sum,
        "the ledger adds up to the balance"
    );
}

#[tokio::test]
async fn a_new_workspace_reports_an_empty_balance_in_the_spec_shape() {
    let app = spawn_app().await;
    let resp = app.get("/billing").await;
    assert_eq!(resp.status, StatusCode::OK);
    assert_eq!(
        resp.body,
        json!({
            "has_payment_method": false,
            "billing_email": "",
            "balance_cents": 0,
            "balance": 0.0,
            "currency": "usd",
            "is_suspended": false,
            "auto_topup_enabled": false,
            "auto_topup_amount_cents": 0,
            "low_balance_threshold_cents": 0,
        })
    );
}

#[tokio::test]
async fn topping_up_without_a_payment_method_is_a_billing_error() {
    let app = spawn_app().await;
    let resp = app
        .post("/billing/top-up", json!({"amount_cents": 1000}))
        .await;
    assert_eq!(resp.status, StatusCode::PAYMENT_REQUIRED, "{}", resp.text);
    assert_eq!(resp.error_code(), "BILLING_ERROR");
    assert_eq!(app.get("/billing").await.body["balance_cents"], 0);
    assert!(ledger(&app).await.is_empty());
}

#[tokio::test]
async fn a_payment_method_is_saved_with_the_billing_email() {
    let app = spawn_app().await;
    let resp = app
        .post(
            "/billing/payment-method",
            json!({"payment_token": "tok_visa_4242", "billing_email": "ops@example.com"}),
        )
        .await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text);
    assert_eq!(resp.body["has_payment_method"], true);
    assert_eq!(resp.body["billing_email"], "ops@example.com");
    assert_eq!(app.get("/billing").await.body["has_payment_method"], true);

    for (body, needle) in [
        (json!({}), "payment_token"),
        (json!({"payment_token": "  "}), "payment_token"),
        (json!({"payment_token": 42}), "payment_token"),
        (
            json!({"payment_token": "tok", "billing_email": "not-an-email"}),
            "billing_email",
        ),
        (
            json!({"payment_token": "tok", "card_number": "4242"}),
            "Writable fields",
        ),
    ] {
        let resp = app.post("/billing/payment-method", body.clone()).await;
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
    let declined = app
        .post(
            "/billing/payment-method",
            json!({"payment_token": "tok with spaces"}),
        )
        .await;
    assert_eq!(
        declined.status,
        StatusCode::PAYMENT_REQUIRED,
        "{}",
        declined.text
    );
    assert_eq!(declined.error_code(), "BILLING_ERROR");
}

#[tokio::test]
async fn a_top_up_credits_the_balance_through_a_ledger_entry() {
    let app = spawn_app().await;
    add_payment_method(&app).await;
    let resp = app
        .post("/billing/top-up", json!({"amount_cents": 2550}))
        .await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text);
    assert_eq!(resp.body["success"], true);
    assert_eq!(resp.body["amount_cents"], 2550);
    assert_eq!(resp.body["balance_cents"], 2550);
    let status = app.get("/billing").await;
    assert_eq!(status.body["balance_cents"], 2550);
    assert_eq!(status.body["balance"], 25.5);

    let entries = ledger(&app).await;
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["id"], resp.body["ledger_entry_id"]);
    assert_eq!(entries[0]["kind"], "topup");
    assert_eq!(entries[0]["amount_cents"], 2550);
    assert_eq!(entries[0]["balance_after_cents"], 2550);
    assert!(
        entries[0]["reference"]
            .as_str()
            .is_some_and(|r| !r.is_empty()),
        "the provider's charge reference is kept"
    );
    assert_ledger_adds_up(&app).await;
}

#[tokio::test]
async fn top_up_amounts_outside_100_to_1000000_cents_are_refused() {
    let app = spawn_app().await;
    add_payment_method(&app).await;
    for body in [
        json!({}),
        json!({"amount_cents": 99}),
        json!({"amount_cents": 1_000_001}),
        json!({"amount_cents": 150.5}),
        json!({"amount_cents": "500"}),
        json!({"amount_cents": 500, "currency": "eur"}),
    ] {
        let resp = app.post("/billing/top-up", body.clone()).await;
        assert_eq!(
            resp.status,
            StatusCode::BAD_REQUEST,
            "{body}: {}",
            resp.text
        );
        assert_eq!(resp.error_code(), "INVALID_REQUEST");
    }
    for amount in [100, 1_000_000] {
        assert_eq!(
            app.post("/billing/top-up", json!({"amount_cents": amount}))
                .await
                .status,
            StatusCode::OK,
            "{amount}"
        );
    }
    assert_eq!(app.get("/billing").await.body["balance_cents"], 1_000_100);
    assert_ledger_adds_up(&app).await;
}

#[tokio::test]
async fn the_ledger_lists_newest_first_and_adds_up_to_the_balance_after_charges() {
    let app = spawn_app().await;
    add_payment_method(&app).await;
    for amount in [1000, 2000, 3000] {
        assert_eq!(
            app.post("/billing/top-up", json!({"amount_cents": amount}))
                .await
                .status,
            StatusCode::OK
        );
    }
    let charged = switchboard::runtime::charges::charge(
        &app.store,
        &switchboard::domain::payments::LocalPaymentProvider,
        app.workspace_id,
        switchboard_actors::money::Cents::new(1234),
        switchboard::store::LedgerKind::Call,
        "a call",
    )
    .await
    .expect("charge");
    assert_eq!(charged.balance_after_cents, 6000 - 1234);
    let entries = ledger(&app).await;
    let amounts: Vec<i64> = entries
        .iter()
        .map(|e| e["amount_cents"].as_i64().unwrap())
        .collect();
    assert_eq!(amounts, [-1234, 3000, 2000, 1000]);
    assert_ledger_adds_up(&app).await;

    let page = app.get("/billing/ledger?limit=2&offset=1").await;
    assert_eq!(page.body["data"].as_array().unwrap().len(), 2);
    assert_eq!(page.body["data"][0]["amount_cents"], 3000);
    assert_eq!(page.body["pagination"]["total"], 4);
    assert_eq!(page.body["pagination"]["has_more"], true);
    assert_eq!(
        app.get("/billing/ledger?offset=-1").await.status,
        StatusCode::BAD_REQUEST
    );
}

#[tokio::test]
async fn enabling_auto_top_up_without_a_payment_method_is_a_billing_error() {
    let app = spawn_app().await;
    let resp = app
        .patch(
            "/billing/settings",
            json!({"auto_topup_enabled": true, "auto_topup_amount_cents": 1000}),
        )
        .await;
    assert_eq!(resp.status, StatusCode::PAYMENT_REQUIRED, "{}", resp.text);
    assert_eq!(resp.error_code(), "BILLING_ERROR");
    assert_eq!(app.get("/billing").await.body["auto_topup_enabled"], false);
    // Settings that do not enable auto top-up need no payment method.
    let resp = app
        .patch(
            "/billing/settings",
            json!({"low_balance_threshold_cents": 500, "billing_email": "a@b.co"}),
        )
        .await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text);
    assert_eq!(resp.body["low_balance_threshold_cents"], 500);
    assert_eq!(resp.body["billing_email"], "a@b.co");
    let cleared = app
        .patch("/billing/settings", json!({"billing_email": ""}))
        .await;
    assert_eq!(cleared.body["billing_email"], "");
}

#[tokio::test]
async fn enabling_auto_top_up_below_the_threshold_tops_up_at_once() {
    let app = spawn_app().await;
    add_payment_method(&app).await;
    let resp = app
        .patch("/billing/settings", json!({"auto_topup_enabled": true, "auto_topup_amount_cents": 5000, "low_balance_threshold_cents": 1000}))
        .await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text);
    assert_eq!(resp.body["auto_topup_enabled"], true);
    assert_eq!(resp.body["auto_topup_amount_cents"], 5000);
    assert_eq!(resp.body["low_balance_threshold_cents"], 1000);
    assert_eq!(
        resp.body["balance_cents"], 5000,
        "the balance was below the threshold"
    );
    let entries = ledger(&app).await;
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["kind"], "auto_topup");
    // Above the threshold now: saving again does not top up.
    let again = app
        .patch(
            "/billing/settings",
            json!({"low_balance_threshold_cents": 2000}),
        )
        .await;
    assert_eq!(again.body["balance_cents"], 5000);
    assert_ledger_adds_up(&app).await;
}

#[tokio::test]
async fn bad_billing_settings_are_refused_with_the_field_named() {
    let app = spawn_app().await;
    add_payment_method(&app).await;
    for (body, needle) in [
        (json!({}), "No writable field"),
        (
            json!({"auto_topup_amount_cents": 499}),
            "auto_topup_amount_cents",
        ),
        (
            json!({"auto_topup_amount_cents": 1_000_001}),
            "auto_topup_amount_cents",
        ),
        (
            json!({"auto_topup_amount_cents": -1}),
            "auto_topup_amount_cents",
        ),
        (
            json!({"low_balance_threshold_cents": -1}),
            "low_balance_threshold_cents",
        ),
        (
            json!({"low_balance_threshold_cents": 1_000_001}),
            "low_balance_threshold_cents",
        ),
        (json!({"billing_email": "nobody"}), "billing_email"),
        (json!({"billing_email": "a b@example.com"}), "billing_email"),
        (json!({"auto_topup_enabled": "yes"}), "auto_topup_enabled"),
        (
            json!({"auto_topup_enabled": true}),
            "auto_topup_amount_cents",
        ),
        (json!({"balance_cents": 100}), "Writable fields"),
    ] {
        let resp = app.patch("/billing/settings", body.clone()).await;
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
    for body in [
        json!({"auto_topup_amount_cents": 0}),
        json!({"auto_topup_amount_cents": 500}),
        json!({"low_balance_threshold_cents": 0}),
    ] {
        assert_eq!(
            app.patch("/billing/settings", body.clone()).await.status,
            StatusCode::OK,
            "{body}"
        );
    }
    assert_eq!(app.get("/billing").await.body["auto_topup_enabled"], false);
}

#[tokio::test]
async fn billing_is_per_workspace() {
    let app = spawn_app().await;
    add_payment_method(&app).await;
    assert_eq!(
        app.post("/billing/top-up", json!({"amount_cents": 1000}))
            .await
            .status,
        StatusCode::OK
    );
    let (_, other) = app.other_workspace().await;
    let theirs = app.send(Method::GET, "/billing", Some(&other), None).await;
    assert_eq!(theirs.body["balance_cents"], 0);
    assert_eq!(theirs.body["has_payment_method"], false);
    let their_ledger = app
        .send(Method::GET, "/billing/ledger", Some(&other), None)
        .await;
    assert_eq!(their_ledger.body["data"], json!([]));
    let top_up = app
        .send(
            Method::POST,
            "/billing/top-up",
            Some(&other),
            Some(json!({"amount_cents": 1000})),
        )
        .await;
    assert_eq!(
        top_up.status,
        StatusCode::PAYMENT_REQUIRED,
        "another workspace's payment method is not theirs"
    );
}

#[tokio::test]
async fn billing_routes_refuse_keys_without_their_scope() {
    let app = spawn_app().await;
    let reader = app.key_with_scopes("billing:read").await;
    let unrelated = app.key_with_scopes("do_not_call:read").await;
    for (method, path, body) in [
        (
            Method::POST,
            "/billing/payment-method",
            Some(json!({"payment_token": "tok"})),
        ),
        (
            Method::POST,
            "/billing/top-up",
            Some(json!({"amount_cents": 1000})),
        ),
        (
            Method::PATCH,
            "/billing/settings",
            Some(json!({"low_balance_threshold_cents": 0})),
        ),
    ] {
        let resp = app.send(method.clone(), path, Some(&reader), body).await;
        assert_eq!(resp.status, StatusCode::UNAUTHORIZED, "{method} {path}");
        assert_eq!(resp.error_code(), "INSUFFICIENT_SCOPE");
        assert_eq!(resp.body["required_scope"], "billing:manage");
    }
    for path in ["/billing", "/billing/ledger"] {
        let resp = app.send(Method::GET, path, Some(&unrelated), None).await;
        assert_eq!(resp.status, StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(resp.body["required_scope"], "billing:read");
        assert_eq!(
            app.send(Method::GET, path, Some(&reader), None)
                .await
                .status,
            StatusCode::OK,
            "{path}"
        );
    }
    assert_eq!(
        app.get("/billing").await.body["has_payment_method"],
        false,
        "the refused set-up saved nothing"
    );
}
