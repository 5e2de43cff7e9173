use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::spawn_app;

#[tokio::test]
async fn a_new_workspace_has_protected_default_dispositions_in_position_order() {
    let app = spawn_app().await;
    let resp = app.get("/dispositions").await;
    assert_eq!(resp.status, StatusCode::OK);
    let data = resp.body["data"].as_array().unwrap();
    assert!(data.len() >= 5);
    let positions: Vec<i64> = data.iter().map(|d| d["position"].as_i64().unwrap()).collect();
    let mut sorted = positions.clone();
    sorted.sort();
    assert_eq!(positions, sorted);
    assert!(data.iter().all(|d| d["is_protected"] == true));
}

#[tokio::test]
async fn dispositions_are_created_updated_reordered_and_deleted() {
    let app = spawn_app().await;
    let created = app.post("/dispositions", json!({"label": "Hot lead", "color": "#FF0000", "position": 0})).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert_eq!(created.body["color"], "#ff0000");
    assert_eq!(created.body["is_protected"], false);
    let id = created.body["id"].as_str().unwrap().to_owned();

    let list = app.get("/dispositions").await;
    assert_eq!(list.body["data"][0]["id"], id.as_str(), "position 0 sorts first");

    let updated = app.patch(&format!("/dispositions/{id}"), json!({"label": "Warm lead", "position": 99})).await;
    assert_eq!(updated.status, StatusCode::OK);
    assert_eq!(updated.body["label"], "Warm lead");
    let list = app.get("/dispositions").await;
    assert_eq!(list.body["data"].as_array().unwrap().last().unwrap()["id"], id.as_str());

    let deleted = app.delete(&format!("/dispositions/{id}")).await;
    assert_eq!(deleted.status, StatusCode::OK);
    assert_eq!(deleted.body["success"], true);
    assert_eq!(app.get(&format!("/dispositions/{id}")).await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn protected_dispositions_cannot_be_deleted() {
    let app = spawn_app().await;
    let list = app.get("/dispositions").await;
    let id = list.body["data"][0]["id"].as_str().unwrap().to_owned();
    let resp = app.delete(&format!("/dispositions/{id}")).await;
    assert_eq!(resp.status, StatusCode::BAD_REQUEST);
    assert_eq!(resp.error_code(), "INVALID_REQUEST");
    assert_eq!(app.get(&format!("/dispositions/{id}")).await.status, StatusCode::OK);
}

#[tokio::test]
async fn bad_disposition_input_is_refused_with_the_field_named() {
    let app = spawn_app().await;
    for (body, needle) in [
        (json!({}), "label"),
        (json!({"label": ""}), "label"),
        (json!({"label": "x", "color": "red"}), "color"),
        (json!({"label": "x", "position": -1}), "position"),
        (json!({"label": 7}), "label"),
        (json!({"label": "x", "id": "abc"}), "Writable fields"),
    ] {
        let resp = app.post("/dispositions", body.clone()).await;
        assert_eq!(resp.status, StatusCode::BAD_REQUEST, "{body}");
        assert!(resp.body["error"].as_str().unwrap().contains(needle), "{body}: {}", resp.text);
    }
    let dup = app.post("/dispositions", json!({"label": "Interested"})).await;
    assert_eq!(dup.status, StatusCode::CONFLICT);
    assert_eq!(dup.error_code(), "CONFLICT");
}

#[tokio::test]
async fn another_workspace_cannot_see_or_change_dispositions() {
    let app = spawn_app().await;
    let created = app.post("/dispositions", json!({"label": "Mine"})).await;
    let id = created.body["id"].as_str().unwrap();
    let (_, other) = app.other_workspace().await;
    let path = format!("/dispositions/{id}");
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let resp = app.send(method, &path, Some(&other), None).await;
        assert_eq!(resp.status, StatusCode::NOT_FOUND);
    }
    let resp = app.send(reqwest::Method::PATCH, &path, Some(&other), Some(json!({"label": "Theirs"}))).await;
    assert_eq!(resp.status, StatusCode::NOT_FOUND);
    assert_eq!(app.get(&path).await.body["label"], "Mine");
}
