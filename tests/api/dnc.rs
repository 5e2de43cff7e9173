use chrono::{Duration, Utc};
use reqwest::{Method, StatusCode};
use serde_json::json;
use switchboard::store::{DncSource, NewDncEntry};
use switchboard_actors::ids::{AgentId, WorkspaceId};

use crate::helpers::{TestApp, spawn_app};

/// Creates an agent in `ws` through the API (with a key of that workspace).
async fn agent(app: &TestApp, ws: WorkspaceId, name: &str) -> AgentId {
    let (_, key) = app
        .store
        .create_key(ws, "agents", &switchboard::domain::auth::Scopes::All, None)
        .await
        .expect("key");
    let created = app
        .send(
            Method::POST,
            "/agents",
            Some(&key),
            Some(json!({"name": name, "max_call_duration_secs": 300})),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let id = created.body["id"].as_str().expect("agent id");
    AgentId::from_uuid(id.parse().expect("agent id is a UUID"))
}

fn str_of(v: &serde_json::Value) -> String {
    v.as_str()
        .unwrap_or_else(|| panic!("not a string: {v}"))
        .to_owned()
}

#[tokio::test]
async fn a_number_added_in_national_form_is_stored_in_e164_with_its_details() {
    let app = spawn_app().await;
    let resp = app
        .post(
            "/do-not-call",
            json!({"phone_number": "050-123-4567", "reason": "  asked us to stop  "}),
        )
        .await;
    assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text);
    let e = &resp.body;
    assert_eq!(e["phone_number"], "+972501234567");
    assert_eq!(e["reason"], "asked us to stop");
    assert_eq!(e["source"], "api");
    assert_eq!(e["company_id"], app.workspace_id.to_string());
    assert!(e["expires_at"].is_null());
    assert_eq!(e["agents"], json!([]));
    assert!(e["created_by"].is_string());
    assert!(e["created_at"].is_string());
    let id = str_of(&e["id"]);
    let fetched = app.get(&format!("/do-not-call/{id}")).await;
    assert_eq!(fetched.status, StatusCode::OK);
    assert_eq!(fetched.body, resp.body);
}

#[tokio::test]
async fn national_and_international_forms_look_up_the_same_entry_unwrapped() {
    let app = spawn_app().await;
    let created = app
        .post("/do-not-call", json!({"phone_number": "+972 50 123 4567"}))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    for form in [
        "050-123-4567",
        "%2B972%2050%20123%204567",
        "%2B972501234567",
        "00972501234567",
    ] {
        let resp = app.get(&format!("/do-not-call?phone={form}")).await;
        assert_eq!(resp.status, StatusCode::OK, "{form}: {}", resp.text);
        assert_eq!(
            resp.body["id"], created.body["id"],
            "{form}: the bare entry, not wrapped"
        );
        assert!(resp.body.get("data").is_none());
    }
}

#[tokio::test]
async fn looking_up_a_number_not_on_the_list_is_404_and_an_unreadable_one_is_400() {
    let app = spawn_app().await;
    let missing = app.get("/do-not-call?phone=050-765-4321").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.error_code(), "NOT_FOUND");
    let bad = app.get("/do-not-call?phone=hello").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.error_code(), "INVALID_REQUEST");
}

#[tokio::test]
async fn adding_a_number_already_on_the_list_in_any_form_is_a_conflict() {
    let app = spawn_app().await;
    assert_eq!(
        app.post("/do-not-call", json!({"phone_number": "050-123-4567"}))
            .await
            .status,
        StatusCode::CREATED
    );
    let dup = app
        .post("/do-not-call", json!({"phone_number": "+972501234567"}))
        .await;
    assert_eq!(dup.status, StatusCode::CONFLICT, "{}", dup.text);
    assert_eq!(dup.error_code(), "CONFLICT");
}

#[tokio::test]
async fn the_list_is_paginated_most_recently_added_first() {
    let app = spawn_app().await;
    let numbers = ["050-111-1111", "050-222-2222", "050-333-3333"];
    for n in numbers {
        assert_eq!(
            app.post("/do-not-call", json!({"phone_number": n}))
                .await
                .status,
            StatusCode::CREATED
        );
    }
    let all = app.get("/do-not-call").await;
    assert_eq!(all.status, StatusCode::OK);
    let phones: Vec<String> = all.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| str_of(&e["phone_number"]))
        .collect();
    assert_eq!(phones, ["+972503333333", "+972502222222", "+972501111111"]);
    assert_eq!(all.body["pagination"]["total"], 3);
    assert_eq!(all.body["pagination"]["has_more"], false);

    let page = app.get("/do-not-call?limit=2&offset=1").await;
    assert_eq!(page.body["data"].as_array().unwrap().len(), 2);
    assert_eq!(page.body["data"][0]["phone_number"], "+972502222222");
    assert_eq!(page.body["pagination"]["limit"], 2);
    assert_eq!(page.body["pagination"]["offset"], 1);
    let first = app.get("/do-not-call?limit=2").await;
    assert_eq!(first.body["pagination"]["has_more"], true);
    assert_eq!(
        app.get("/do-not-call?limit=0").await.status,
        StatusCode::BAD_REQUEST
    );
}

#[tokio::test]
async fn bad_do_not_call_input_is_refused_with_the_field_named() {
    let app = spawn_app().await;
    let past = (Utc::now() - Duration::minutes(1)).to_rfc3339();
    let (other_ws, _) = app.other_workspace().await;
    let foreign_agent = agent(&app, other_ws, "Theirs").await;
    for (body, needle) in [
        (json!({}), "phone_number"),
        (json!({"phone_number": "not a number"}), "phone_number"),
        (json!({"phone_number": 5}), "phone_number"),
        (
            json!({"phone_number": "050-123-4567", "expires_at": past}),
            "expires_at",
        ),
        (
            json!({"phone_number": "050-123-4567", "expires_at": "tomorrow"}),
            "expires_at",
        ),
        (
            json!({"phone_number": "050-123-4567", "reason": "x".repeat(501)}),
            "reason",
        ),
        (
            json!({"phone_number": "050-123-4567", "agent_ids": ["nope"]}),
            "agent_ids",
        ),
        (
            json!({"phone_number": "050-123-4567", "agent_ids": [uuid::Uuid::now_v7()]}),
            "agent_ids",
        ),
        (
            json!({"phone_number": "050-123-4567", "agent_ids": [foreign_agent.to_string()]}),
            "agent_ids",
        ),
        (
            json!({"phone_number": "050-123-4567", "source": "manual"}),
            "Writable fields",
        ),
    ] {
        let resp = app.post("/do-not-call", body.clone()).await;
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
    assert_eq!(
        app.get("/do-not-call").await.body["pagination"]["total"],
        0,
        "nothing was added"
    );
}

#[tokio::test]
async fn an_entry_is_updated_and_its_expiry_cleared_with_null() {
    let app = spawn_app().await;
    let a = agent(&app, app.workspace_id, "Alice").await;
    let later = (Utc::now() + Duration::days(30)).to_rfc3339();
    let created = app
        .post(
            "/do-not-call",
            json!({"phone_number": "050-123-4567", "expires_at": later}),
        )
        .await;
    assert!(created.body["expires_at"].is_string());
    let id = str_of(&created.body["id"]);
    let path = format!("/do-not-call/{id}");

    let updated = app
        .patch(
            &path,
            json!({"reason": "complaint", "agent_ids": [a.to_string()]}),
        )
        .await;
    assert_eq!(updated.status, StatusCode::OK, "{}", updated.text);
    assert_eq!(updated.body["reason"], "complaint");
    assert_eq!(
        updated.body["agents"],
        json!([{"id": a.to_string(), "name": "Alice"}])
    );
    assert!(
        updated.body["expires_at"].is_string(),
        "an absent field is left as it is"
    );

    let cleared = app
        .patch(&path, json!({"expires_at": null, "agent_ids": []}))
        .await;
    assert_eq!(cleared.status, StatusCode::OK);
    assert!(cleared.body["expires_at"].is_null());
    assert_eq!(cleared.body["agents"], json!([]));
    assert_eq!(cleared.body["reason"], "complaint");
    assert_eq!(cleared.body["phone_number"], "+972501234567");

    for (body, needle) in [
        (json!({}), "No writable field"),
        (json!({"phone_number": "050-000-0000"}), "Writable fields"),
        (
            json!({"expires_at": (Utc::now() - Duration::hours(1)).to_rfc3339()}),
            "expires_at",
        ),
        (json!({"agent_ids": [uuid::Uuid::now_v7()]}), "agent_ids"),
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
        app.patch(
            &format!("/do-not-call/{}", uuid::Uuid::now_v7()),
            json!({"reason": "x"})
        )
        .await
        .status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn a_removed_number_is_no_longer_on_the_list_and_can_be_added_again() {
    let app = spawn_app().await;
    let created = app
        .post("/do-not-call", json!({"phone_number": "050-123-4567"}))
        .await;
    let id = str_of(&created.body["id"]);
    let deleted = app.delete(&format!("/do-not-call/{id}")).await;
    assert_eq!(deleted.status, StatusCode::OK);
    assert_eq!(deleted.body, json!({"success": true, "id": id}));
    assert_eq!(
        app.get(&format!("/do-not-call/{id}")).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.get("/do-not-call?phone=0501234567").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.delete(&format!("/do-not-call/{id}")).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.post("/do-not-call", json!({"phone_number": "050-123-4567"}))
            .await
            .status,
        StatusCode::CREATED
    );
}

#[tokio::test]
async fn an_expired_entry_counts_as_absent() {
    let app = spawn_app().await;
    // An entry that expired a minute ago (the API refuses past expiries, so write it directly).
    let past = Utc::now() - Duration::minutes(1);
    let new = NewDncEntry {
        phone_number: "+972501234567",
        reason: "temporary",
        source: DncSource::Manual,
        expires_at: Some(past),
        agent_ids: &[],
        created_by: None,
    };
    let expired = app
        .store
        .create_dnc_entry(app.workspace_id, &new)
        .await
        .expect("entry");
    assert_eq!(
        app.get("/do-not-call?phone=050-123-4567").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(app.get("/do-not-call").await.body["pagination"]["total"], 0);
    assert!(
        !app.store
            .is_blocked(app.workspace_id, "+972501234567", None, Utc::now())
            .await
            .unwrap()
    );
    assert!(
        app.store
            .blocked_numbers(app.workspace_id, None, Utc::now())
            .await
            .unwrap()
            .is_empty()
    );
    // Before it expired it did block.
    let before = past - Duration::seconds(1);
    assert!(
        app.store
            .is_blocked(app.workspace_id, "+972501234567", None, before)
            .await
            .unwrap()
    );
    // It is still readable by id, and adding the number again replaces it.
    let by_id = app.get(&format!("/do-not-call/{}", expired.id)).await;
    assert_eq!(by_id.status, StatusCode::OK);
    assert_eq!(by_id.body["source"], "manual");
    assert!(by_id.body["created_by"].is_null());
    let again = app
        .post("/do-not-call", json!({"phone_number": "050-123-4567"}))
        .await;
    assert_eq!(again.status, StatusCode::CREATED, "{}", again.text);
    assert_eq!(
        app.get("/do-not-call?phone=050-123-4567").await.body["id"],
        again.body["id"]
    );
}

#[tokio::test]
async fn an_entry_with_a_future_expiry_blocks_until_it_expires() {
    let app = spawn_app().await;
    let expires = Utc::now() + Duration::hours(2);
    let created = app
        .post(
            "/do-not-call",
            json!({"phone_number": "050-123-4567", "expires_at": expires.to_rfc3339()}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert_eq!(
        app.get("/do-not-call?phone=050-123-4567").await.status,
        StatusCode::OK
    );
    let ws = app.workspace_id;
    assert!(
        app.store
            .is_blocked(ws, "+972501234567", None, Utc::now())
            .await
            .unwrap()
    );
    assert!(
        !app.store
            .is_blocked(ws, "+972501234567", None, expires + Duration::seconds(1))
            .await
            .unwrap()
    );
    assert!(
        app.store
            .blocked_numbers(ws, None, expires + Duration::seconds(1))
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn an_agent_specific_entry_blocks_only_the_agents_it_names() {
    let app = spawn_app().await;
    let ws = app.workspace_id;
    let a = agent(&app, ws, "Agent A").await;
    let b = agent(&app, ws, "Agent B").await;
    let only_a = app
        .post(
            "/do-not-call",
            json!({"phone_number": "050-111-1111", "agent_ids": [a.to_string(), a.to_string()]}),
        )
        .await;
    assert_eq!(only_a.status, StatusCode::CREATED, "{}", only_a.text);
    assert_eq!(
        only_a.body["agents"],
        json!([{"id": a.to_string(), "name": "Agent A"}]),
        "duplicates collapse"
    );
    assert_eq!(
        app.post("/do-not-call", json!({"phone_number": "050-222-2222"}))
            .await
            .status,
        StatusCode::CREATED
    );

    let at = Utc::now();
    let for_a = app.store.blocked_numbers(ws, Some(a), at).await.unwrap();
    let for_b = app.store.blocked_numbers(ws, Some(b), at).await.unwrap();
    let for_none = app.store.blocked_numbers(ws, None, at).await.unwrap();
    assert_eq!(
        for_a,
        ["+972501111111".to_owned(), "+972502222222".to_owned()]
            .into_iter()
            .collect()
    );
    assert_eq!(for_b, ["+972502222222".to_owned()].into_iter().collect());
    assert_eq!(for_none, for_b);
    assert!(
        app.store
            .is_blocked(ws, "+972501111111", Some(a), at)
            .await
            .unwrap()
    );
    assert!(
        !app.store
            .is_blocked(ws, "+972501111111", Some(b), at)
            .await
            .unwrap()
    );
    assert!(
        app.store
            .is_blocked(ws, "+972502222222", Some(b), at)
            .await
            .unwrap()
    );
    assert!(
        !app.store
            .is_blocked(ws, "+972503333333", Some(a), at)
            .await
            .unwrap()
    );
    let (other_ws, _) = app.other_workspace().await;
    assert!(
        app.store
            .blocked_numbers(other_ws, None, at)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn another_workspace_cannot_see_or_change_do_not_call_entries() {
    let app = spawn_app().await;
    let created = app
        .post(
            "/do-not-call",
            json!({"phone_number": "050-123-4567", "reason": "mine"}),
        )
        .await;
    let id = str_of(&created.body["id"]);
    let (_, other) = app.other_workspace().await;
    let path = format!("/do-not-call/{id}");
    for method in [Method::GET, Method::DELETE] {
        let resp = app.send(method.clone(), &path, Some(&other), None).await;
        assert_eq!(resp.status, StatusCode::NOT_FOUND, "{method}");
        assert_eq!(resp.error_code(), "NOT_FOUND");
    }
    let resp = app
        .send(
            Method::PATCH,
            &path,
            Some(&other),
            Some(json!({"reason": "theirs"})),
        )
        .await;
    assert_eq!(resp.status, StatusCode::NOT_FOUND);
    let lookup = app
        .send(
            Method::GET,
            "/do-not-call?phone=050-123-4567",
            Some(&other),
            None,
        )
        .await;
    assert_eq!(lookup.status, StatusCode::NOT_FOUND);
    let list = app
        .send(Method::GET, "/do-not-call", Some(&other), None)
        .await;
    assert_eq!(list.body["data"], json!([]));
    // The same number may be on both workspaces' lists.
    let theirs = app
        .send(
            Method::POST,
            "/do-not-call",
            Some(&other),
            Some(json!({"phone_number": "050-123-4567"})),
        )
        .await;
    assert_eq!(theirs.status, StatusCode::CREATED);
    assert_eq!(app.get(&path).await.body["reason"], "mine");
}

#[tokio::test]
async fn do_not_call_routes_refuse_keys_without_their_scope() {
    let app = spawn_app().await;
    let created = app
        .post("/do-not-call", json!({"phone_number": "050-123-4567"}))
        .await;
    let id = str_of(&created.body["id"]);
    let path = format!("/do-not-call/{id}");
    let reader = app.key_with_scopes("do_not_call:read").await;
    let manager = app.key_with_scopes("do_not_call:manage").await;
    let neither = app.key_with_scopes("billing:read").await;

    for (method, path, body) in [
        (
            Method::POST,
            "/do-not-call".to_owned(),
            Some(json!({"phone_number": "050-222-2222"})),
        ),
        (Method::PATCH, path.clone(), Some(json!({"reason": "x"}))),
        (Method::DELETE, path.clone(), None),
    ] {
        let resp = app.send(method.clone(), &path, Some(&reader), body).await;
        assert_eq!(resp.status, StatusCode::UNAUTHORIZED, "{method} {path}");
        assert_eq!(resp.error_code(), "INSUFFICIENT_SCOPE");
        assert_eq!(resp.body["required_scope"], "do_not_call:manage");
    }
    for path in [
        "/do-not-call".to_owned(),
        "/do-not-call?phone=0501234567".to_owned(),
        path.clone(),
    ] {
        let resp = app.send(Method::GET, &path, Some(&neither), None).await;
        assert_eq!(resp.status, StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(resp.error_code(), "INSUFFICIENT_SCOPE");
        assert_eq!(
            app.send(Method::GET, &path, Some(&reader), None)
                .await
                .status,
            StatusCode::OK,
            "{path}"
        );
    }
    let added = app
        .send(
            Method::POST,
            "/do-not-call",
            Some(&manager),
            Some(json!({"phone_number": "050-222-2222"})),
        )
        .await;
    assert_eq!(added.status, StatusCode::CREATED);
    assert_eq!(
        app.send(Method::GET, "/do-not-call", None, None)
            .await
            .error_code(),
        "MISSING_KEY"
    );
}
