//! Discovery, authentication, scopes, rate limits and request-level errors.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::json;
use switchboard::domain::auth::Scopes;

use crate::helpers::{Resp, TestApp, spawn_app, spawn_app_with};

#[tokio::test]
async fn the_index_lists_every_endpoint_with_its_scope_without_auth() {
    let app = spawn_app().await;
    let resp = app.send(Method::GET, "/", None, None).await;
    assert_eq!(resp.status, StatusCode::OK);
    let endpoints = resp.body["endpoints"].as_array().unwrap();
    let find = |m: &str, p: &str| {
        endpoints
            .iter()
            .find(|e| e["method"] == m && e["path"] == p)
            .cloned()
    };
    let disp = find("GET", "/dispositions").expect("dispositions listed");
    assert_eq!(disp["scope"], "dispositions:read");
    assert!(!disp["summary"].as_str().unwrap().is_empty());
    assert!(find("GET", "/").expect("index listed")["scope"].is_null());
    // The OpenAPI document lists the same operations.
    let doc = app.send(Method::GET, "/openapi.json", None, None).await;
    assert_eq!(doc.status, StatusCode::OK);
    assert!(doc.body["openapi"].as_str().unwrap().starts_with("3.1"));
    let mut count = 0;
    for (path, item) in doc.body["paths"].as_object().unwrap() {
        for (method, _) in item.as_object().unwrap() {
            if ["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                count += 1;
                assert!(
                    find(&method.to_uppercase(), path).is_some(),
                    "{method} {path} missing from GET /"
                );
            }
        }
    }
    assert_eq!(count, endpoints.len());
}

#[tokio::test]
async fn docs_health_and_metrics_are_served() {
    let app = spawn_app().await;
    let docs = app.send(Method::GET, "/docs", None, None).await;
    assert_eq!(docs.status, StatusCode::OK);
    assert!(
        docs.text.contains("<html")
            || docs.text.contains("<!doctype")
            || docs.text.contains("<!DOCTYPE")
    );
    let health = app.send(Method::GET, "/healthz", None, None).await;
    assert_eq!(health.body["status"], "ok");
    app.get("/dispositions").await;
    // Not on the API's port: anyone can reach that one.
    let public = app.send(Method::GET, "/metrics", None, None).await;
    assert_eq!(public.status, StatusCode::NOT_FOUND, "{}", public.text);
    let index = app.send(Method::GET, "/", None, None).await;
    assert!(!index.text.contains("/metrics"), "{}", index.text);
    let metrics = app.metrics().await;
    for name in [
        "switchboard_http_requests_total",
        "switchboard_calls_waiting",
        "switchboard_calls_live",
        "switchboard_campaigns_running",
        "switchboard_campaign_evaluations_total",
        "switchboard_campaign_evaluation_seconds_total",
        "switchboard_runtime_tasks",
        "switchboard_runtime_busy_seconds_total{worker=\"0\"}",
    ] {
        assert!(metrics.contains(name), "{name}: {metrics}");
    }
    // A name ending in _total is a counter; gauges never carry it.
    let types: Vec<&str> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .collect();
    assert!(!types.is_empty(), "{metrics}");
    for t in types {
        let (name, kind) = t.split_once(' ').unwrap();
        assert_eq!(
            name.ends_with("_total"),
            kind == "counter",
            "{name} is a {kind}"
        );
    }
}

#[tokio::test]
async fn missing_invalid_revoked_and_expired_keys_are_told_apart() {
    let app = spawn_app().await;
    let resp = app.send(Method::GET, "/dispositions", None, None).await;
    assert_eq!(
        (resp.status, resp.error_code()),
        (StatusCode::UNAUTHORIZED, "MISSING_KEY")
    );
    let resp = app
        .send(Method::GET, "/dispositions", Some("sb_nope"), None)
        .await;
    assert_eq!(
        (resp.status, resp.error_code()),
        (StatusCode::UNAUTHORIZED, "INVALID_KEY")
    );
    let fake = format!("sb_{}", "0".repeat(48));
    let resp = app
        .send(Method::GET, "/dispositions", Some(&fake), None)
        .await;
    assert_eq!(resp.error_code(), "INVALID_KEY");

    let (key, secret) = app
        .store
        .create_key(app.workspace_id, "x", &Scopes::All, None)
        .await
        .unwrap();
    assert_eq!(
        app.send(Method::GET, "/dispositions", Some(&secret), None)
            .await
            .status,
        StatusCode::OK
    );
    assert!(app.store.revoke_key(key.id).await.unwrap());
    let resp = app
        .send(Method::GET, "/dispositions", Some(&secret), None)
        .await;
    assert_eq!(resp.error_code(), "INVALID_KEY");

    let soon = app.store.now() + chrono::Duration::minutes(5);
    let (_, expiring) = app
        .store
        .create_key(app.workspace_id, "x", &Scopes::All, Some(soon))
        .await
        .unwrap();
    assert_eq!(
        app.send(Method::GET, "/dispositions", Some(&expiring), None)
            .await
            .status,
        StatusCode::OK
    );
    app.clock.advance(std::time::Duration::from_secs(6 * 60));
    let resp = app
        .send(Method::GET, "/dispositions", Some(&expiring), None)
        .await;
    assert_eq!(
        (resp.status, resp.error_code()),
        (StatusCode::UNAUTHORIZED, "EXPIRED_KEY")
    );
}

#[tokio::test]
async fn a_key_without_the_route_scope_gets_insufficient_scope() {
    let app = spawn_app().await;
    let reader = app.key_with_scopes("dispositions:read").await;
    assert_eq!(
        app.send(Method::GET, "/dispositions", Some(&reader), None)
            .await
            .status,
        StatusCode::OK
    );
    let resp = app
        .send(
            Method::POST,
            "/dispositions",
            Some(&reader),
            Some(json!({"label": "x"})),
        )
        .await;
    assert_eq!(
        (resp.status, resp.error_code()),
        (StatusCode::UNAUTHORIZED, "INSUFFICIENT_SCOPE")
    );
    assert_eq!(resp.body["required_scope"], "dispositions:manage");
}

#[tokio::test]
async fn every_scoped_route_refuses_a_key_without_its_scope() {
    let app = spawn_app().await;
    // A key holding one unrelated scope.
    let key = app.key_with_scopes("affiliates:read").await;
    let index = app.send(Method::GET, "/", None, None).await;
    let id = uuid::Uuid::now_v7();
    for endpoint in index.body["endpoints"].as_array().unwrap() {
        let Some(scope) = endpoint["scope"].as_str() else {
            continue;
        };
        if scope == "affiliates:read" {
            continue;
        }
        let path = endpoint["path"]
            .as_str()
            .unwrap()
            .replace("{id}", &id.to_string())
            .replace("{contact_id}", &id.to_string());
        let method = Method::from_bytes(endpoint["method"].as_str().unwrap().as_bytes()).unwrap();
        let resp = app.send(method.clone(), &path, Some(&key), None).await;
        // The spec answers 403 on carrier-account routes, 401 elsewhere.
        let expected = if path.starts_with("/carrier-accounts") {
            StatusCode::FORBIDDEN
        } else {
            StatusCode::UNAUTHORIZED
        };
        assert_eq!(resp.status, expected, "{method} {path}");
        assert_eq!(resp.error_code(), "INSUFFICIENT_SCOPE", "{method} {path}");
        let resp = app.send(method, &path, None, None).await;
        assert_eq!(resp.error_code(), "MISSING_KEY", "{path}");
    }
}

/// The first of up to `tries` requests with the app's key that is refused for the rate limit.
async fn first_limited(app: &TestApp, tries: usize) -> Option<Resp> {
    for _ in 0..tries {
        let resp = app.get("/dispositions").await;
        if resp.status == StatusCode::TOO_MANY_REQUESTS {
            return Some(resp);
        }
    }
    None
}

/// `X-RateLimit-Reset`: the Unix time the current window ends.
fn rate_limit_reset(resp: &Resp) -> i64 {
    resp.headers["x-ratelimit-reset"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn the_rate_limit_applies_per_key_with_headers_on_every_response() {
    let app = spawn_app_with(|c| c.rate_limit_per_minute = 5).await;
    let now = app.store.now().timestamp();
    let other = app.key_with_scopes("all").await;
    let mut last = None;
    for i in 0..5 {
        let resp = app.get("/dispositions").await;
        // A window boundary may pass mid-test; the counter then restarts.
        if resp.status == StatusCode::TOO_MANY_REQUESTS {
            break;
        }
        assert_eq!(resp.headers["x-ratelimit-limit"], "5");
        let remaining: u32 = resp.headers["x-ratelimit-remaining"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(remaining <= 4 - i.min(4));
        let reset = rate_limit_reset(&resp);
        assert!(
            reset > now && reset <= now + 61,
            "reset {reset} is the end of the current minute"
        );
        last = Some(resp);
    }
    assert!(last.is_some());
    let limited = first_limited(&app, 6)
        .await
        .expect("the sixth request in a minute is limited");
    assert_eq!(limited.error_code(), "RATE_LIMIT");
    assert_eq!(limited.headers["x-ratelimit-remaining"], "0");
    // Another key has its own budget.
    assert_eq!(
        app.send(Method::GET, "/dispositions", Some(&other), None)
            .await
            .status,
        StatusCode::OK
    );
    // Errors carry the headers too, and requests without a valid key are limited by address.
    let mut saw_limit = false;
    for _ in 0..7 {
        let resp = app.send(Method::GET, "/dispositions", None, None).await;
        assert!(resp.headers.contains_key("x-ratelimit-limit"));
        if resp.status == StatusCode::TOO_MANY_REQUESTS {
            saw_limit = true;
        } else {
            assert_eq!(resp.error_code(), "MISSING_KEY");
        }
    }
    assert!(
        saw_limit,
        "anonymous requests are limited per source address"
    );
}

#[tokio::test]
async fn a_flood_of_made_up_keys_is_refused_before_any_key_is_looked_up() {
    let app = spawn_app_with(|c| c.rate_limit_per_minute = 5).await;
    // Keys that do not exist are charged to the source address.
    let mut limited = None;
    for i in 0..12 {
        let made_up = format!("sb_made_up_{i}");
        let resp = app
            .send(Method::GET, "/dispositions", Some(&made_up), None)
            .await;
        if resp.status == StatusCode::TOO_MANY_REQUESTS {
            limited = Some(resp);
            break;
        }
        assert_eq!(resp.error_code(), "INVALID_KEY", "{}", resp.text);
    }
    let limited = limited.expect("made-up keys are limited by address");
    assert_eq!(limited.error_code(), "RATE_LIMIT");
    // From then on the address is refused before its key is read: even a key the store would
    // accept gets 429 for the rest of the minute, with the headers.
    let valid = app.get("/dispositions").await;
    assert_eq!(
        valid.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        valid.text
    );
    assert_eq!(valid.headers["x-ratelimit-remaining"], "0");
    app.clock.advance(Duration::from_secs(60));
    assert_eq!(app.get("/dispositions").await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_limited_key_is_served_again_once_its_minute_has_passed() {
    let app = spawn_app_with(|c| c.rate_limit_per_minute = 3).await;
    // A window boundary may pass mid-test and restart the counter; the key is limited a few
    // requests later then.
    let limited = first_limited(&app, 10).await.expect("the key is limited");
    // The next minute on the service's clock.
    app.clock.advance(Duration::from_secs(60));
    let served = app.get("/dispositions").await;
    assert_eq!(served.status, StatusCode::OK, "{}", served.text);
    assert_eq!(served.headers["x-ratelimit-remaining"], "2");
    assert!(rate_limit_reset(&served) >= rate_limit_reset(&limited) + 60);
}

#[tokio::test]
async fn malformed_requests_get_json_errors_never_plain_text() {
    let app = spawn_app_with(|c| c.max_json_body_bytes = 1024).await;
    let cases = [
        app.send_raw(
            Method::POST,
            "/dispositions",
            "application/json",
            "{not json",
        )
        .await,
        app.send_raw(Method::POST, "/dispositions", "application/json", "[1,2]")
            .await,
        app.send_raw(Method::POST, "/dispositions", "application/json", "")
            .await,
        app.send_raw(
            Method::POST,
            "/dispositions",
            "application/json",
            format!("{{\"label\": \"{}\"}}", "x".repeat(5000)),
        )
        .await,
        app.get("/dispositions/not-a-uuid").await,
        app.send(Method::PUT, "/dispositions", Some(&app.key), None)
            .await,
        app.get("/no/such/route").await,
        app.get("/campaigns?limit=1000").await,
    ];
    let expected = [400, 400, 400, 413, 400, 405, 404, 400];
    for (resp, status) in cases.iter().zip(expected) {
        assert_eq!(resp.status.as_u16(), status, "{}", resp.text);
        resp.error_code();
    }
}
