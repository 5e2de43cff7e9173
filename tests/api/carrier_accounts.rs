use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::campaigns::number;
use crate::helpers::{spawn_app, spawn_app_with};

#[tokio::test]
async fn numbers_come_off_a_carrier_account_and_stop_being_used() {
    let app = spawn_app().await;
    let account = app
        .store
        .create_carrier_account(app.workspace_id, "Main trunk", "telnyx")
        .await
        .unwrap();
    let on = number(&app, "+972500000011", "active").await;
    let off = number(&app, "+972500000012", "active").await;
    assert!(
        app.store
            .assign_number_to_account(app.workspace_id, account.id, on.parse().unwrap())
            .await
            .unwrap()
    );

    let status = app.get("/carrier-accounts/status").await;
    assert_eq!(status.status, StatusCode::OK, "{}", status.text);
    assert_eq!(
        status.body,
        json!({"enabled": true, "accounts": 1, "numbers": 1})
    );
    let list = app.get("/carrier-accounts").await;
    assert_eq!(list.body["data"][0]["name"], "Main trunk");
    assert_eq!(list.body["data"][0]["number_count"], 1);
    let id = account.id;
    let numbers = app.get(&format!("/carrier-accounts/{id}/numbers")).await;
    assert_eq!(numbers.body["pagination"]["total"], 1);
    assert_eq!(numbers.body["data"][0]["id"], on.as_str());
    assert_eq!(
        numbers.body["data"][0]["carrier_account"]["id"],
        id.to_string()
    );

    // A number not on this account, and an account not of this workspace.
    let r = app
        .delete(&format!("/carrier-accounts/{id}/numbers/{off}"))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.error_code(), "NUMBER_NOT_FOUND");
    let stranger = uuid::Uuid::now_v7();
    let r = app
        .delete(&format!("/carrier-accounts/{stranger}/numbers/{on}"))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.error_code(), "CARRIER_ACCOUNT_NOT_FOUND");

    let r = app
        .delete(&format!("/carrier-accounts/{id}/numbers/{on}"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body, json!({"success": true, "id": on}));
    // The number is still the workspace's, but inactive and off the account.
    let n = app.get(&format!("/phone-numbers/{on}")).await;
    assert_eq!(n.status, StatusCode::OK, "{}", n.text);
    assert_eq!(n.body["is_active"], false);
    assert!(n.body["carrier_account"].is_null(), "{}", n.text);
    assert_eq!(
        app.get(&format!("/carrier-accounts/{id}/numbers"))
            .await
            .body["pagination"]["total"],
        0
    );

    // Without the scope: 403, as the spec says for these routes.
    let key = app.key_with_scopes("calls:read").await;
    let r = app
        .send(Method::GET, "/carrier-accounts", Some(&key), None)
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(r.error_code(), "INSUFFICIENT_SCOPE");
}

#[tokio::test]
async fn the_emergency_switch_closes_every_carrier_route() {
    let app = spawn_app_with(|c| c.carrier_accounts_enabled = false).await;
    let id = uuid::Uuid::now_v7();
    for (method, path) in [
        (Method::GET, "/carrier-accounts/status".to_string()),
        (Method::GET, "/carrier-accounts".to_string()),
        (Method::GET, format!("/carrier-accounts/{id}")),
        (Method::GET, format!("/carrier-accounts/{id}/numbers")),
        (
            Method::DELETE,
            format!("/carrier-accounts/{id}/numbers/{id}"),
        ),
    ] {
        let key = app.key.clone();
        let r = app.send(method.clone(), &path, Some(&key), None).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{method} {path}");
        assert_eq!(r.error_code(), "CARRIER_ACCOUNTS_NOT_ENABLED");
        assert_eq!(r.body["enabled"], false);
    }
}
