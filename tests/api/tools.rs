//! Tools over real HTTP, and their test deliveries to a real HTTP server on loopback.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::{OriginalUri, State};
use axum::http::{HeaderMap, Method, StatusCode as AxumStatus};
use axum::response::IntoResponse;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::campaigns::agent;
use crate::helpers::{TestApp, spawn_app, spawn_app_with};

/// What the receiver saw: method, path and query, headers, body.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub uri: String,
    pub headers: HeaderMap,
    pub body: String,
}

pub type Log = Arc<Mutex<Vec<Seen>>>;

async fn receive(
    State(log): State<Log>,
    method: Method,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: String,
) -> axum::response::Response {
    log.lock().unwrap().push(Seen {
        method: method.to_string(),
        uri: uri.to_string(),
        headers,
        body,
    });
    // `?delay_ms=N`: the answer comes N ms late.
    let delay = uri
        .query()
        .and_then(|q| q.strip_prefix("delay_ms="))
        .and_then(|ms| ms.parse().ok());
    if let Some(ms) = delay {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
    match uri.path() {
        "/fail" => (AxumStatus::INTERNAL_SERVER_ERROR, "boom").into_response(),
        "/redirect" => (
            AxumStatus::FOUND,
            [("location", "http://169.254.169.254/latest/meta-data/")],
        )
            .into_response(),
        // Never answers: the delivery's timeout ends it.
        "/slow" => std::future::pending().await,
        "/noisy" => format!("ok\u{1b}[2J\u{0}{}", "x".repeat(10_000)).into_response(),
        _ => (AxumStatus::OK, r#"{"ok":true}"#).into_response(),
    }
}

/// A webhook receiver on loopback.
pub async fn receiver() -> (SocketAddr, Log) {
    let log: Log = Arc::default();
    let app = axum::Router::new()
        .fallback(receive)
        .with_state(log.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, log)
}

/// An app whose webhooks may reach loopback (the operator's allow list).
async fn app_reaching_loopback() -> TestApp {
    spawn_app_with(|c| c.egress_allow = vec!["127.0.0.0/8".parse().unwrap()]).await
}

pub fn webhook(url: &str) -> Value {
    json!({
        "name": "look up order",
        "description": "Looks up an order by its number",
        "type": "webhook",
        "config": {
            "url": url,
            "method": "POST",
            "headers": {"Authorization": "Bearer downstream-secret", "X-Team": "ops"},
            "payload_config": {
                "extraction_parameters": [{"name": "order_number", "description": "The order number"}],
                "static_parameters": {"source": "switchboard"}
            }
        }
    })
}

#[tokio::test]
async fn webhook_tools_are_validated_normalized_and_idempotent() {
    let (addr, _) = receiver().await;
    let app = app_reaching_loopback().await;
    let url = format!("http://{addr}/hook");
    let mut body = webhook(&url);
    body["idempotency_key"] = json!("tool-1");
    let created = app.post("/tools", body.clone()).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let t = &created.body;
    assert_eq!(t["name"], "lookUpOrder");
    assert_eq!(t["type"], "webhook");
    assert_eq!(t["is_active"], true);
    assert_eq!(t["config"]["timeout_seconds"], 30);
    assert_eq!(t["config"]["method"], "POST");
    assert_eq!(
        t["config"]["payload_config"]["extraction_parameters"],
        json!([{"name": "orderNumber", "description": "The order number", "required": true}])
    );
    assert_eq!(
        t["config"]["payload_config"]["include_standard_metadata"],
        true
    );

    // The same key and body: the first tool again; another body: refused.
    let again = app.post("/tools", body.clone()).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.body["id"], t["id"]);
    body["description"] = json!("Something else");
    app.post("/tools", body)
        .await
        .assert_invalid("idempotency_key");

    // Payload settings sent beside config move into it.
    let migrated = app
        .post(
            "/tools",
            json!({"name": "notify", "description": "Notifies", "config": {"url": url},
                   "static_parameters": {"a": 1}, "include_standard_metadata": false}),
        )
        .await;
    assert_eq!(migrated.status, StatusCode::CREATED, "{}", migrated.text);
    assert_eq!(
        migrated.body["config"]["payload_config"]["static_parameters"],
        json!({"a": 1})
    );
    assert_eq!(
        migrated.body["config"]["payload_config"]["include_standard_metadata"],
        false
    );

    let bad = |config: Value| json!({"name": "x", "description": "d", "config": config});
    for (body, needle) in [
        (json!({"name": "x", "config": {"url": url}}), "description"),
        (bad(json!({})), "config"),
        (bad(json!({"url": url, "retry_count": 2})), "retry_count"),
        (bad(json!({"url": url, "method": "TRACE"})), "config.method"),
        (
            bad(json!({"url": url, "timeout_seconds": 61})),
            "timeout_seconds",
        ),
        (
            bad(json!({"url": url, "timeout_seconds": 0})),
            "timeout_seconds",
        ),
        (
            bad(json!({"url": url, "timeout_seconds": 2.5})),
            "timeout_seconds",
        ),
        (
            bad(json!({"url": url, "headers": {"Host": "x"}})),
            "config.headers.Host",
        ),
        (
            bad(json!({"url": url, "headers": {"Proxy-Authorization": "x"}})),
            "Proxy-Authorization",
        ),
        (
            bad(json!({"url": url, "headers": {"Transfer-Encoding": "chunked"}})),
            "Transfer-Encoding",
        ),
        (
            bad(json!({"url": url, "headers": {"X-A": 1}})),
            "config.headers.X-A",
        ),
        (
            bad(json!({"url": url, "headers": {"": "x"}})),
            "config.headers",
        ),
        (bad(json!({"url": url, "extra": 1})), "config.extra"),
        (
            bad(json!({"url": url, "payload_config": {"extraction_parameters": [{"name": "a"}]}})),
            "description",
        ),
        (bad(json!({"url": "ftp://example.com/x"})), "config.url"),
        (
            json!({"name": "  ", "description": "d", "config": {"url": url}}),
            "name",
        ),
        (
            json!({"name": "x", "description": "d", "type": "script", "config": {}}),
            "type",
        ),
    ] {
        app.post("/tools", body).await.assert_invalid(needle);
    }

    // Function tools take any object.
    let f = app
        .post(
            "/tools",
            json!({"name": "end_call", "type": "function", "config": {"anything": [1, 2]}}),
        )
        .await;
    assert_eq!(f.status, StatusCode::CREATED, "{}", f.text);
    assert_eq!(f.body["config"], json!({"anything": [1, 2]}));
}

#[tokio::test]
async fn the_default_policy_refuses_private_and_metadata_urls() {
    let app = spawn_app().await;
    for url in [
        "http://127.0.0.1:9/hook",
        "http://localhost/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://2130706433/",
        "http://[::ffff:127.0.0.1]/",
        "http://[fd00::1]/",
        "http://10.0.0.7/",
        "http://100.64.1.1/",
        "http://metadata.google.internal/",
    ] {
        let r = app.post("/tools", webhook(url)).await;
        r.assert_invalid("config.url");
    }
}

#[tokio::test]
async fn tools_are_listed_attached_updated_and_deactivated() {
    let (addr, _) = receiver().await;
    let app = app_reaching_loopback().await;
    let url = format!("http://{addr}/hook");
    let mut ids = Vec::new();
    for n in ["first tool", "second tool", "third tool"] {
        let mut body = webhook(&url);
        body["name"] = json!(n);
        let r = app.post("/tools", body).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
        ids.push(r.body["id"].as_str().unwrap().to_string());
    }
    let page = app.get("/tools?limit=2").await;
    assert_eq!(page.body["pagination"]["total"], 3);
    assert_eq!(page.body["pagination"]["has_more"], true);
    assert_eq!(page.body["data"].as_array().unwrap().len(), 2);
    app.get("/tools?limit=101").await.assert_invalid("limit");

    let agent_id = agent(&app, Some(300)).await;
    let a = app
        .put(
            &format!("/agents/{agent_id}/tools/{}", ids[2]),
            json!({"execution_order": 1, "config_override": {"timeout_seconds": 5}}),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    app.put(
        &format!("/agents/{agent_id}/tools/{}", ids[0]),
        json!({"execution_order": 2}),
    )
    .await;
    let listed = app.get(&format!("/tools?agent_id={agent_id}")).await;
    let items = listed.body["data"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["id"], ids[2].as_str());
    assert_eq!(items[0]["execution_order"], 1);
    assert_eq!(items[0]["config_override"], json!({"timeout_seconds": 5}));
    assert_eq!(items[1]["id"], ids[0].as_str());
    assert!(page.body["data"][0].get("execution_order").is_none());
    let gone = app
        .delete(&format!("/agents/{agent_id}/tools/{}", ids[2]))
        .await;
    assert_eq!(gone.status, StatusCode::OK);
    let listed = app.get(&format!("/tools?agent_id={agent_id}")).await;
    assert_eq!(listed.body["pagination"]["total"], 1);

    // PATCH: config is the whole configuration, validated like create.
    let id = &ids[1];
    let p = app
        .patch(
            &format!("/tools/{id}"),
            json!({"name": "renamed tool", "config": {"url": url, "method": "get"}}),
        )
        .await;
    assert_eq!(p.status, StatusCode::OK, "{}", p.text);
    assert_eq!(p.body["name"], "renamedTool");
    assert_eq!(p.body["config"]["method"], "GET");
    assert_eq!(
        p.body["config"]["payload_config"]["extraction_parameters"],
        json!([])
    );
    app.patch(
        &format!("/tools/{id}"),
        json!({"config": {"method": "GET"}}),
    )
    .await
    .assert_invalid("config.url");
    app.patch(&format!("/tools/{id}"), json!({"retry_count": 1}))
        .await
        .assert_invalid("retry_count");

    let d = app.delete(&format!("/tools/{id}")).await;
    assert_eq!(d.status, StatusCode::OK);
    assert_eq!(
        d.body,
        json!({"success": true, "id": id, "is_active": false})
    );
    assert_eq!(
        app.get(&format!("/tools/{id}")).await.body["is_active"],
        false
    );
    let back = app
        .patch(&format!("/tools/{id}"), json!({"is_active": true}))
        .await;
    assert_eq!(back.body["is_active"], true);

    // Another workspace sees none of it.
    let (_, other_key) = app.other_workspace().await;
    let r = app
        .send(
            reqwest::Method::GET,
            &format!("/tools/{id}"),
            Some(&other_key),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_test_delivery_sends_the_production_payload_and_reports_the_answer() {
    let (addr, log) = receiver().await;
    let app = app_reaching_loopback().await;
    let created = app
        .post("/tools", webhook(&format!("http://{addr}/hook")))
        .await;
    let id = created.body["id"].as_str().unwrap().to_string();
    let agent_id = agent(&app, Some(300)).await;

    // No body: placeholders for every parameter, standard metadata with nulls.
    let r = app.post_empty(&format!("/tools/{id}/test")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["success"], true);
    assert_eq!(r.body["status_code"], 200);
    assert_eq!(r.body["response_body"], r#"{"ok":true}"#);
    assert!(r.body["delivery_id"].is_string());
    let sent = &r.body["payload_sent"];
    assert_eq!(sent["orderNumber"], "<orderNumber>");
    assert_eq!(sent["source"], "switchboard");
    assert_eq!(sent["company_id"], app.workspace_id.to_string());
    assert_eq!(sent["call_direction"], "outbound");
    assert_eq!(sent["agent_id"], Value::Null);
    for key in [
        "company_id",
        "agent_id",
        "agent_name",
        "call_id",
        "call_direction",
        "caller_number",
        "callee_number",
        "call_metadata",
        "call_variables",
    ] {
        assert!(sent.get(key).is_some(), "{key}");
    }
    assert!(
        !r.text.contains("downstream-secret"),
        "headers are never echoed"
    );
    let seen = log.lock().unwrap().last().cloned().unwrap();
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.headers["authorization"], "Bearer downstream-secret");
    assert_eq!(seen.headers["x-team"], "ops");
    assert_eq!(seen.headers["content-type"], "application/json");
    let delivered: Value = serde_json::from_str(&seen.body).unwrap();
    assert_eq!(
        &delivered, sent,
        "payload_sent is exactly what was delivered"
    );

    // With a body: the agent, the call context and the arguments.
    let call_id = uuid::Uuid::new_v4().to_string();
    let r = app
        .post(
            &format!("/tools/{id}/test"),
            json!({"agent_id": agent_id, "arguments": {"orderNumber": "A-17"},
                   "context": {"call_id": call_id, "call_direction": "inbound", "caller_number": "+15550001111",
                               "call_metadata": {"crm": "x"}, "call_variables": {"first": "Dana"}}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let sent = &r.body["payload_sent"];
    assert_eq!(sent["orderNumber"], "A-17");
    assert_eq!(sent["agent_id"], agent_id.as_str());
    assert_eq!(sent["agent_name"], "Ava");
    assert_eq!(sent["call_id"], call_id.as_str());
    assert_eq!(sent["call_direction"], "inbound");
    assert_eq!(sent["call_variables"], json!({"first": "Dana"}));

    for (body, needle) in [
        (json!({"arguments": {"nope": "x"}}), "arguments.nope"),
        (
            json!({"arguments": {"orderNumber": {"nested": 1}}}),
            "arguments.orderNumber",
        ),
        (
            json!({"arguments": {"orderNumber": 5}}),
            "arguments.orderNumber",
        ),
        (json!({"agent_id": uuid::Uuid::new_v4()}), "agent_id"),
        (
            json!({"context": {"call_direction": "sideways"}}),
            "call_direction",
        ),
        (json!({"context": {"call_id": "not-a-uuid"}}), "call_id"),
        (json!({"extra": 1}), "extra"),
    ] {
        app.post(&format!("/tools/{id}/test"), body)
            .await
            .assert_invalid(needle);
    }
}

#[tokio::test]
async fn a_delivery_answered_500_is_not_retried() {
    let (addr, log) = receiver().await;
    let app = app_reaching_loopback().await;
    let fail = test_tool(&app, format!("http://{addr}/fail"), "POST", 5).await;
    let r = app.post_empty(&format!("/tools/{fail}/test")).await;
    assert_eq!(r.status, StatusCode::BAD_GATEWAY, "{}", r.text);
    assert_eq!(r.body["status_code"], 500);
    let sent = log
        .lock()
        .unwrap()
        .iter()
        .filter(|seen| seen.uri.starts_with("/fail"))
        .count();
    assert_eq!(sent, 1, "the webhook server saw the delivery {sent} times");
}

async fn test_tool(app: &TestApp, url: String, method: &str, timeout: i64) -> String {
    let mut body = webhook(&url);
    body["config"]["method"] = json!(method);
    body["config"]["timeout_seconds"] = json!(timeout);
    let r = app.post("/tools", body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    r.body["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn failed_deliveries_answer_502_or_504_and_redirects_are_not_followed() {
    let (addr, log) = receiver().await;
    let app = app_reaching_loopback().await;

    // GET: the payload as query parameters, objects as compact JSON, no body.
    let get = test_tool(&app, format!("http://{addr}/query?keep=1"), "GET", 5).await;
    let r = app.post_empty(&format!("/tools/{get}/test")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let seen = log.lock().unwrap().last().cloned().unwrap();
    assert_eq!(seen.method, "GET");
    assert!(seen.body.is_empty());
    let url = reqwest::Url::parse(&format!("http://x{}", seen.uri)).unwrap();
    let q: std::collections::HashMap<_, _> = url.query_pairs().into_owned().collect();
    assert_eq!(q["keep"], "1");
    assert_eq!(q["orderNumber"], "<orderNumber>");
    assert_eq!(q["call_metadata"], "{}");
    assert_eq!(q["source"], "switchboard");

    let fail = test_tool(&app, format!("http://{addr}/fail"), "POST", 5).await;
    let r = app.post_empty(&format!("/tools/{fail}/test")).await;
    assert_eq!(r.status, StatusCode::BAD_GATEWAY, "{}", r.text);
    assert_eq!(r.error_code(), "DOWNSTREAM_HTTP_ERROR");
    assert_eq!(r.body["status_code"], 500);
    assert_eq!(r.body["downstream_response"], "boom");
    assert!(r.body["payload_sent"].is_object());
    assert!(r.body["delivery_id"].is_string());
    assert!(r.body["details"].is_string());

    let before = log.lock().unwrap().len();
    let redirect = test_tool(&app, format!("http://{addr}/redirect"), "POST", 5).await;
    let r = app.post_empty(&format!("/tools/{redirect}/test")).await;
    assert_eq!(r.status, StatusCode::BAD_GATEWAY, "{}", r.text);
    assert_eq!(r.error_code(), "DOWNSTREAM_HTTP_ERROR");
    assert_eq!(r.body["status_code"], 302);
    assert_eq!(
        log.lock().unwrap().len(),
        before + 1,
        "the redirect is not followed"
    );

    let slow = test_tool(&app, format!("http://{addr}/slow"), "POST", 1).await;
    let r = app.post_empty(&format!("/tools/{slow}/test")).await;
    assert_eq!(r.status, StatusCode::GATEWAY_TIMEOUT, "{}", r.text);
    assert_eq!(r.error_code(), "WEBHOOK_TIMEOUT");
    assert_eq!(r.body["status_code"], Value::Null);

    // Nothing listens on this port.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let down = test_tool(&app, format!("http://127.0.0.1:{port}/x"), "POST", 5).await;
    let r = app.post_empty(&format!("/tools/{down}/test")).await;
    assert_eq!(r.status, StatusCode::BAD_GATEWAY, "{}", r.text);
    assert_eq!(r.error_code(), "WEBHOOK_NETWORK_ERROR");

    // The preview is sanitized and capped.
    let noisy = test_tool(&app, format!("http://{addr}/noisy"), "POST", 5).await;
    let r = app.post_empty(&format!("/tools/{noisy}/test")).await;
    let preview = r.body["response_body"].as_str().unwrap();
    assert!(preview.starts_with("ok[2J"), "{}", &preview[..10]);
    assert_eq!(
        preview.chars().count(),
        switchboard::edge::webhooks::PREVIEW_CHARS
    );

    // Function tools are not delivered.
    let f = app
        .post(
            "/tools",
            json!({"name": "f", "type": "function", "config": {}}),
        )
        .await;
    let fid = f.body["id"].as_str().unwrap();
    app.post_empty(&format!("/tools/{fid}/test"))
        .await
        .assert_invalid("function");
}
