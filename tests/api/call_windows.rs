use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::helpers::spawn_app;

#[tokio::test]
async fn without_saved_hours_the_default_window_is_in_the_workspace_countrys_zone() {
    let app = spawn_app().await;
    let resp = app.get("/call-windows").await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text);
    assert_eq!(
        resp.body,
        json!({
            "timezone": "Asia/Jerusalem",
            "days": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
            "start": "09:00",
            "end": "20:00",
            "use_contact_timezone": true,
            "is_default": true,
        })
    );
}

#[tokio::test]
async fn a_workspace_in_an_unmapped_country_defaults_to_utc() {
    let app = spawn_app().await;
    let ws = app
        .store
        .create_workspace("far away", "AQ")
        .await
        .expect("workspace");
    let (_, key) = app
        .store
        .create_key(ws.id, "k", &switchboard::domain::auth::Scopes::All, None)
        .await
        .expect("key");
    let resp = app
        .send(Method::GET, "/call-windows", Some(&key), None)
        .await;
    assert_eq!(resp.status, StatusCode::OK, "{}", resp.text);
    assert_eq!(resp.body["timezone"], "UTC");
    assert_eq!(resp.body["is_default"], true);
}

#[tokio::test]
async fn saved_calling_hours_are_answered_back_and_replace_the_default() {
    let app = spawn_app().await;
    let window = json!({"timezone": "Europe/London", "days": ["mon", "fri", "tue"], "start": "10:00", "end": "18:30"});
    let put = app.put("/call-windows", window).await;
    assert_eq!(put.status, StatusCode::OK, "{}", put.text);
    let expected = json!({
        "timezone": "Europe/London",
        "days": ["mon", "tue", "fri"],
        "start": "10:00",
        "end": "18:30",
        "use_contact_timezone": true,
        "is_default": false,
    });
    assert_eq!(put.body, expected);
    assert_eq!(app.get("/call-windows").await.body, expected);

    let replaced = app
        .put("/call-windows", json!({"timezone": "Asia/Jerusalem", "days": ["sun"], "start": "08:00", "end": "12:00", "use_contact_timezone": false}))
        .await;
    assert_eq!(replaced.status, StatusCode::OK);
    let got = app.get("/call-windows").await.body;
    assert_eq!(got["use_contact_timezone"], false);
    assert_eq!(got["days"], json!(["sun"]));
    let (_, other) = app.other_workspace().await;
    let theirs = app
        .send(Method::GET, "/call-windows", Some(&other), None)
        .await;
    assert_eq!(
        theirs.body["is_default"], true,
        "calling hours are per workspace"
    );
}

#[tokio::test]
async fn invalid_calling_hours_are_refused_with_the_field_named() {
    let app = spawn_app().await;
    let base =
        json!({"timezone": "Asia/Jerusalem", "days": ["mon"], "start": "09:00", "end": "17:00"});
    let with = |key: &str, value: serde_json::Value| {
        let mut body = base.clone();
        body[key] = value;
        body
    };
    for (body, needle) in [
        (with("timezone", json!("Mars/Olympus")), "timezone"),
        (with("days", json!(["funday"])), "days"),
        (with("days", json!([])), "days"),
        (with("start", json!("9am")), "start"),
        (with("end", json!("08:00")), "end"),
        (
            with("use_contact_timezone", json!("yes")),
            "use_contact_timezone",
        ),
        (with("colour", json!("red")), "colour"),
        (
            json!({"days": ["mon"], "start": "09:00", "end": "17:00"}),
            "timezone",
        ),
    ] {
        let resp = app.put("/call-windows", body.clone()).await;
        assert_eq!(
            resp.status,
            StatusCode::BAD_REQUEST,
            "{body}: {}",
            resp.text
        );
        assert_eq!(resp.error_code(), "INVALID_REQUEST");
        assert!(
            resp.body["error"].as_str().unwrap().contains(needle),
            "{body}: {}",
            resp.text
        );
    }
    let not_json = app
        .send_raw(Method::PUT, "/call-windows", "application/json", "{")
        .await;
    assert_eq!(not_json.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        app.get("/call-windows").await.body["is_default"],
        true,
        "nothing was saved"
    );
}

#[tokio::test]
async fn calling_hours_need_the_campaigns_manage_scope() {
    let app = spawn_app().await;
    let key = app
        .key_with_scopes("do_not_call:manage,billing:manage")
        .await;
    let window = json!({"timezone": "UTC", "days": ["mon"], "start": "09:00", "end": "17:00"});
    for (method, body) in [(Method::GET, None), (Method::PUT, Some(window.clone()))] {
        let resp = app
            .send(method.clone(), "/call-windows", Some(&key), body)
            .await;
        assert_eq!(resp.status, StatusCode::UNAUTHORIZED, "{method}");
        assert_eq!(resp.error_code(), "INSUFFICIENT_SCOPE");
        assert_eq!(resp.body["required_scope"], "campaigns:manage");
    }
    let manager = app.key_with_scopes("campaigns:manage").await;
    assert_eq!(
        app.send(Method::PUT, "/call-windows", Some(&manager), Some(window))
            .await
            .status,
        StatusCode::OK
    );
}
