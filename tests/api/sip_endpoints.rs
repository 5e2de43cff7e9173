use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::campaigns::agent;
use crate::helpers::{spawn_app, spawn_app_with};

fn slug_random(slug: &str, prefix: &str) -> String {
    slug.strip_prefix(&format!("{prefix}-"))
        .unwrap_or_else(|| panic!("{slug} does not start with {prefix}-"))
        .to_owned()
}

#[tokio::test]
async fn endpoints_are_created_with_a_secret_slug_and_their_uri() {
    let app = spawn_app_with(|c| c.sip_host = "sip.example.test".into()).await;
    let agent_id = agent(&app, Some(600)).await;
    let created = app
        .post(
            "/sip-endpoints",
            json!({"name": "Front Desk", "inbound_agent_id": agent_id}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let e = &created.body["data"];
    let slug = e["slug"].as_str().unwrap();
    let random = slug_random(slug, "front-desk");
    assert_eq!(random.len(), 24);
    assert!(
        random
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    );
    assert_eq!(e["sip_uri"], format!("sip:{slug}@sip.example.test"));
    assert_eq!(e["inbound_agent_id"], agent_id.as_str());
    assert_eq!(e["is_active"], true);
    assert_eq!(e["allowed_source_ips"], Value::Null);
    assert_eq!(e["last_call_at"], Value::Null);
    for field in ["id", "name", "created_at", "updated_at"] {
        assert!(!e[field].is_null(), "{field}");
    }

    // A chosen prefix; two endpoints never share a slug.
    let other = app
        .post(
            "/sip-endpoints",
            json!({"name": "Front Desk", "slug": "desk-2"}),
        )
        .await;
    assert_eq!(other.status, StatusCode::CREATED, "{}", other.text);
    let other_slug = other.body["data"]["slug"].as_str().unwrap();
    slug_random(other_slug, "desk-2");
    assert_ne!(slug_random(other_slug, "desk-2"), random);

    let id = e["id"].as_str().unwrap();
    let got = app.get(&format!("/sip-endpoints/{id}")).await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.body["data"], *e);

    let list = app.get("/sip-endpoints?limit=1").await;
    assert_eq!(list.status, StatusCode::OK);
    assert_eq!(list.body["data"].as_array().unwrap().len(), 1);
    assert_eq!(list.body["data"][0]["id"], id);
    assert_eq!(list.body["pagination"]["total"], 2);
    assert_eq!(list.body["pagination"]["has_more"], true);
}

#[tokio::test]
async fn endpoints_update_and_normalize_their_source_list() {
    let app = spawn_app().await;
    let agent_id = agent(&app, Some(600)).await;
    let created = app
        .post(
            "/sip-endpoints",
            json!({"name": "Trunk", "allowed_source_ips": ["192.0.2.7", "10.0.0.0/8", "2001:DB8::/32", "192.0.2.7/32"]}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let e = &created.body["data"];
    assert_eq!(
        e["allowed_source_ips"],
        json!(["192.0.2.7", "10.0.0.0/8", "2001:db8::/32"])
    );
    assert_eq!(e["inbound_agent_id"], Value::Null);
    assert_eq!(e["max_concurrent_calls"], Value::Null, "no cap by default");
    let id = e["id"].as_str().unwrap();
    let slug = e["slug"].as_str().unwrap();

    let updated = app
        .patch(
            &format!("/sip-endpoints/{id}"),
            json!({"name": "Trunk EU", "inbound_agent_id": agent_id, "is_active": false, "allowed_source_ips": null}),
        )
        .await;
    assert_eq!(updated.status, StatusCode::OK, "{}", updated.text);
    let u = &updated.body["data"];
    assert_eq!(u["name"], "Trunk EU");
    assert_eq!(u["inbound_agent_id"], agent_id.as_str());
    assert_eq!(u["is_active"], false);
    assert_eq!(u["allowed_source_ips"], Value::Null);
    assert_eq!(u["slug"], slug, "the slug never changes");

    // Absent fields stay; null clears the agent.
    let cleared = app
        .patch(
            &format!("/sip-endpoints/{id}"),
            json!({"inbound_agent_id": null}),
        )
        .await;
    assert_eq!(cleared.status, StatusCode::OK);
    assert_eq!(cleared.body["data"]["inbound_agent_id"], Value::Null);
    assert_eq!(cleared.body["data"]["name"], "Trunk EU");
    assert_eq!(cleared.body["data"]["is_active"], false);

    // A cap is set, kept when absent, and removed with null.
    for (body, cap) in [
        (json!({"max_concurrent_calls": 10000}), json!(10000)),
        (json!({"name": "Trunk"}), json!(10000)),
        (json!({"max_concurrent_calls": null}), Value::Null),
    ] {
        let r = app.patch(&format!("/sip-endpoints/{id}"), body).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        assert_eq!(r.body["data"]["max_concurrent_calls"], cap);
    }
    let capped = app
        .post(
            "/sip-endpoints",
            json!({"name": "Capped", "max_concurrent_calls": 1}),
        )
        .await;
    assert_eq!(capped.status, StatusCode::CREATED, "{}", capped.text);
    assert_eq!(capped.body["data"]["max_concurrent_calls"], 1);
}

#[tokio::test]
async fn bad_endpoint_input_is_refused_with_the_field_named() {
    let app = spawn_app().await;
    let cases = [
        (json!({}), "name"),
        (json!({"name": ""}), "name"),
        (json!({"name": "x".repeat(121)}), "name"),
        (json!({"name": 5}), "name"),
        (json!({"name": "a", "slug": "Front"}), "slug"),
        (json!({"name": "a", "slug": "a--b"}), "slug"),
        (json!({"name": "a", "slug": "-ab"}), "slug"),
        (json!({"name": "a", "slug": "thirteen-char"}), "slug"),
        (json!({"name": "a", "slug": ""}), "slug"),
        (
            json!({"name": "a", "allowed_source_ips": []}),
            "allowed_source_ips",
        ),
        (
            json!({"name": "a", "allowed_source_ips": ["example.com"]}),
            "allowed_source_ips[0]",
        ),
        (
            json!({"name": "a", "allowed_source_ips": ["10.0.0.1", "10.0.0.0/33"]}),
            "allowed_source_ips[1]",
        ),
        (
            json!({"name": "a", "allowed_source_ips": ["10.1.2.3/8"]}),
            "allowed_source_ips[0]",
        ),
        (
            json!({"name": "a", "allowed_source_ips": "10.0.0.1"}),
            "allowed_source_ips",
        ),
        (
            json!({"name": "a", "inbound_agent_id": "not-a-uuid"}),
            "inbound_agent_id",
        ),
        (
            json!({"name": "a", "inbound_agent_id": uuid::Uuid::new_v4()}),
            "inbound_agent_id",
        ),
        (json!({"name": "a", "sip_uri": "sip:x@y"}), "sip_uri"),
        (json!({"name": "a", "is_active": false}), "is_active"),
        (
            json!({"name": "a", "max_concurrent_calls": 0}),
            "max_concurrent_calls",
        ),
        (
            json!({"name": "a", "max_concurrent_calls": 10001}),
            "max_concurrent_calls",
        ),
        (
            json!({"name": "a", "max_concurrent_calls": -3}),
            "max_concurrent_calls",
        ),
        (
            json!({"name": "a", "max_concurrent_calls": 1.5}),
            "max_concurrent_calls",
        ),
        (
            json!({"name": "a", "max_concurrent_calls": "2"}),
            "max_concurrent_calls",
        ),
    ];
    for (body, field) in cases {
        let resp = app.post("/sip-endpoints", body.clone()).await;
        assert_eq!(
            resp.status,
            StatusCode::BAD_REQUEST,
            "{body}: {}",
            resp.text
        );
        resp.assert_invalid(field);
    }
    let created = app.post("/sip-endpoints", json!({"name": "ok"})).await;
    let id = created.body["data"]["id"].as_str().unwrap().to_owned();
    for (body, field) in [
        (json!({}), "Writable fields"),
        (json!({"slug": "new"}), "slug"),
        (json!({"is_active": "yes"}), "is_active"),
        (json!({"max_concurrent_calls": 0}), "max_concurrent_calls"),
        (
            json!({"max_concurrent_calls": 1e20}),
            "max_concurrent_calls",
        ),
        (
            json!({"allowed_source_ips": ["1.2.3.4:5060"]}),
            "allowed_source_ips[0]",
        ),
    ] {
        let resp = app
            .patch(&format!("/sip-endpoints/{id}"), body.clone())
            .await;
        assert_eq!(
            resp.status,
            StatusCode::BAD_REQUEST,
            "{body}: {}",
            resp.text
        );
        resp.assert_invalid(field);
    }
    // Nothing was written by the refusals.
    assert_eq!(
        app.get("/sip-endpoints").await.body["pagination"]["total"],
        1
    );
    let bad_id = app.get("/sip-endpoints/not-a-uuid").await;
    assert_eq!(bad_id.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn deleting_an_endpoint_is_final_and_does_not_give_a_creation_back() {
    let app = spawn_app_with(|c| c.sip_endpoint_daily_limit = 3).await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let resp = app
            .post("/sip-endpoints", json!({"name": format!("line {i}")}))
            .await;
        assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text);
        ids.push(resp.body["data"]["id"].as_str().unwrap().to_owned());
    }
    let deleted = app.delete(&format!("/sip-endpoints/{}", ids[0])).await;
    assert_eq!(deleted.status, StatusCode::OK);
    assert_eq!(deleted.body, json!({"success": true, "id": ids[0]}));
    for path in [format!("/sip-endpoints/{}", ids[0])] {
        assert_eq!(app.get(&path).await.status, StatusCode::NOT_FOUND);
        assert_eq!(app.delete(&path).await.status, StatusCode::NOT_FOUND);
        let patched = app.patch(&path, json!({"name": "back"})).await;
        assert_eq!(patched.status, StatusCode::NOT_FOUND);
    }
    assert_eq!(
        app.get("/sip-endpoints").await.body["pagination"]["total"],
        2
    );

    let over = app
        .post("/sip-endpoints", json!({"name": "one more"}))
        .await;
    assert_eq!(over.status, StatusCode::TOO_MANY_REQUESTS, "{}", over.text);
    assert_eq!(over.error_code(), "RATE_LIMIT");
    assert!(over.body["error"].as_str().unwrap().contains("per day"));
    assert_eq!(
        app.get("/sip-endpoints").await.body["pagination"]["total"],
        2
    );
}

#[tokio::test]
async fn another_workspace_cannot_see_or_change_endpoints() {
    let app = spawn_app().await;
    let created = app.post("/sip-endpoints", json!({"name": "mine"})).await;
    let id = created.body["data"]["id"].as_str().unwrap().to_owned();
    let (_, other) = app.other_workspace().await;
    let path = format!("/sip-endpoints/{id}");
    let get = app.send(Method::GET, &path, Some(&other), None).await;
    assert_eq!(get.status, StatusCode::NOT_FOUND);
    let patch = app
        .send(
            Method::PATCH,
            &path,
            Some(&other),
            Some(json!({"name": "theirs"})),
        )
        .await;
    assert_eq!(patch.status, StatusCode::NOT_FOUND);
    let delete = app.send(Method::DELETE, &path, Some(&other), None).await;
    assert_eq!(delete.status, StatusCode::NOT_FOUND);
    let list = app
        .send(Method::GET, "/sip-endpoints", Some(&other), None)
        .await;
    assert_eq!(list.body["data"], json!([]));
    // Another workspace's agent cannot answer this workspace's endpoint.
    let their_agent = app
        .send(
            Method::POST,
            "/agents",
            Some(&other),
            Some(json!({"name": "Theirs", "max_call_duration_secs": 60})),
        )
        .await;
    let their_agent = their_agent.body["id"].as_str().unwrap().to_owned();
    let resp = app
        .patch(&path, json!({"inbound_agent_id": their_agent}))
        .await;
    assert_eq!(resp.status, StatusCode::BAD_REQUEST);
    resp.assert_invalid("inbound_agent_id");
    assert_eq!(app.get(&path).await.body["data"]["name"], "mine");
}

#[tokio::test]
async fn endpoint_routes_require_their_scopes() {
    let app = spawn_app().await;
    let reader = app.key_with_scopes("phone_numbers:search").await;
    let created = app.post("/sip-endpoints", json!({"name": "mine"})).await;
    let id = created.body["data"]["id"].as_str().unwrap().to_owned();
    let path = format!("/sip-endpoints/{id}");
    assert_eq!(
        app.send(Method::GET, &path, Some(&reader), None)
            .await
            .status,
        StatusCode::OK
    );
    for (method, p, body) in [
        (
            Method::POST,
            "/sip-endpoints".to_owned(),
            Some(json!({"name": "x"})),
        ),
        (Method::PATCH, path.clone(), Some(json!({"name": "x"}))),
        (Method::DELETE, path.clone(), None),
    ] {
        let resp = app.send(method, &p, Some(&reader), body).await;
        assert_eq!(resp.status, StatusCode::UNAUTHORIZED);
        assert_eq!(resp.error_code(), "INSUFFICIENT_SCOPE");
    }
    assert_eq!(app.get(&path).await.body["data"]["name"], "mine");
}
