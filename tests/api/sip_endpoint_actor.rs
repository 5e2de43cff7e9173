//! SIP endpoints at run time, over real SIP and the real store: the per-endpoint cap on
//! concurrent calls, changes that reach the endpoint's actor at once, and `last_call_at`
//! written in batches.

use std::net::SocketAddr;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, eventually};
use crate::sip_calls::{SECS, ended_call, endpoint, sip_app, sip_app_with};
use crate::sip_ua::Ua;

/// Calls `slug` and acknowledges its answer; the call stays up until [`Ua::bye`].
async fn answered(sip: SocketAddr, slug: &str) -> Ua {
    let mut ua = Ua::new(sip, slug).await;
    ua.invite_with_offer().await;
    let (_, r) = ua.final_reply("INVITE", SECS).await;
    assert_eq!(r.code, 200, "{}", r.text);
    ua.ack_2xx().await;
    ua
}

/// The final answer to an INVITE for `slug`, acknowledged if it is an error.
async fn answer_code(sip: SocketAddr, slug: &str) -> (u16, Option<Ua>) {
    let mut ua = Ua::new(sip, slug).await;
    ua.invite_with_offer().await;
    let (_, r) = ua.final_reply("INVITE", SECS).await;
    if r.code == 200 {
        ua.ack_2xx().await;
        (200, Some(ua))
    } else {
        ua.ack_error().await;
        (r.code, None)
    }
}

async fn hang_up(ua: Ua) {
    let mut ua = ua;
    ua.bye().await;
    let (_, r) = ua.final_reply("BYE", SECS).await;
    assert_eq!(r.code, 200, "{}", r.text);
}

/// A figure of `/metrics`.
async fn metric(app: &TestApp, name: &str) -> f64 {
    let text = app.metrics().await;
    text.lines()
        .find(|l| l.split(' ').next() == Some(name))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{name} not in {text}"))
}

#[tokio::test]
async fn an_endpoint_at_its_cap_answers_486_until_one_of_its_calls_ends() {
    let s = sip_app(0, 100).await;
    let (_, id, slug) = endpoint(&s.app, json!({}), json!({"max_concurrent_calls": 1})).await;
    let (_, _, other) = endpoint(&s.app, json!({}), json!({"max_concurrent_calls": 1})).await;
    let first = answered(s.sip, &slug).await;

    let mut ua = Ua::new(s.sip, &slug).await;
    ua.invite_with_offer().await;
    let (provisional, r) = ua.final_reply("INVITE", SECS).await;
    assert_eq!(r.code, 486, "{}", r.text);
    assert_eq!(provisional, [100], "refused before ringing");
    ua.ack_error().await;
    // Another endpoint's cap is its own.
    let elsewhere = answered(s.sip, &other).await;

    // A raised cap applies to the next INVITE.
    let r = s
        .app
        .patch(
            &format!("/sip-endpoints/{id}"),
            json!({"max_concurrent_calls": 2}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["data"]["max_concurrent_calls"], 2);
    let second = answered(s.sip, &slug).await;
    assert_eq!(answer_code(s.sip, &slug).await.0, 486);

    // Back to one: both calls still count.
    s.app
        .patch(
            &format!("/sip-endpoints/{id}"),
            json!({"max_concurrent_calls": 1}),
        )
        .await;
    hang_up(first).await;
    assert_eq!(answer_code(s.sip, &slug).await.0, 486);
    hang_up(second).await;
    hang_up(elsewhere).await;
    ended_call(&s.app, 3).await;
    // Both seats are given back as the calls end: the next call is taken.
    let next = eventually(SECS, "a seat is free", || async {
        match answer_code(s.sip, &slug).await {
            (200, ua) => ua,
            (486, _) => None,
            (code, _) => panic!("answered {code}"),
        }
    })
    .await;
    hang_up(next).await;
    // The refusals left no call record.
    ended_call(&s.app, 4).await;
    let calls = s.app.get("/calls").await;
    assert_eq!(calls.body["pagination"]["total"], 4, "{}", calls.text);
}

#[tokio::test]
async fn a_deactivated_or_deleted_endpoint_answers_404_at_once_while_its_calls_go_on() {
    let s = sip_app(0, 100).await;
    let (agent_id, id, slug) = endpoint(&s.app, json!({}), json!({})).await;
    let live = answered(s.sip, &slug).await;
    assert_eq!(metric(&s.app, "switchboard_sip_endpoint_actors").await, 1.0);

    let r = s
        .app
        .patch(&format!("/sip-endpoints/{id}"), json!({"is_active": false}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(answer_code(s.sip, &slug).await.0, 404);
    // The call under way goes on to its end; then the endpoint's actor stops.
    hang_up(live).await;
    eventually(SECS, "the closed endpoint's actor stops", || async {
        (metric(&s.app, "switchboard_sip_endpoint_actors").await == 0.0).then_some(())
    })
    .await;

    s.app
        .patch(&format!("/sip-endpoints/{id}"), json!({"is_active": true}))
        .await;
    let (code, ua) = answer_code(s.sip, &slug).await;
    assert_eq!(code, 200);
    // Its agent deactivated: 404, though the endpoint's actor runs.
    let r = s
        .app
        .patch(&format!("/agents/{agent_id}"), json!({"is_active": false}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(answer_code(s.sip, &slug).await.0, 404);
    s.app
        .patch(&format!("/agents/{agent_id}"), json!({"is_active": true}))
        .await;
    assert_eq!(answer_code(s.sip, &slug).await.0, 200);

    let r = s.app.delete(&format!("/sip-endpoints/{id}")).await;
    assert!(r.status.is_success(), "{}", r.text);
    assert_eq!(answer_code(s.sip, &slug).await.0, 404);
    hang_up(ua.expect("answered")).await;
}

#[tokio::test]
async fn last_call_at_is_written_in_batches_and_when_the_actor_stops() {
    // A batch longer than the test: the calls' starts are written only as the actor stops.
    let s = sip_app_with(0, 100, None, |c| {
        c.endpoints.flush_every = Duration::from_secs(3600);
    })
    .await;
    let (_, id, slug) = endpoint(&s.app, json!({}), json!({})).await;
    for _ in 0..3 {
        hang_up(answered(s.sip, &slug).await).await;
    }
    ended_call(&s.app, 3).await;
    let calls = s.app.get("/calls").await;
    let latest = calls.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["answered_at"].as_str())
        .max()
        .expect("answered calls")
        .to_string();
    let endpoint = s.app.get(&format!("/sip-endpoints/{id}")).await;
    assert_eq!(endpoint.body["data"]["last_call_at"], Value::Null);
    assert_eq!(
        metric(&s.app, "switchboard_sip_endpoint_last_call_writes_total").await,
        0.0
    );

    s.app
        .patch(&format!("/sip-endpoints/{id}"), json!({"is_active": false}))
        .await;
    let written = eventually(SECS, "last_call_at is written", || async {
        let e = s.app.get(&format!("/sip-endpoints/{id}")).await;
        e.body["data"]["last_call_at"].as_str().map(str::to_string)
    })
    .await;
    assert_eq!(written, latest);
    assert_eq!(
        metric(&s.app, "switchboard_sip_endpoint_last_call_writes_total").await,
        1.0
    );
}
