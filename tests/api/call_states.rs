//! A live call says what it is doing: `dialing`, then `ringing` once the far end rings, then
//! `in_progress` once answered, in `GET /calls/{id}`, in the `status` filter of `GET /calls`
//! and in `call.answered`; an inbound call is `in_progress` while connected.

use std::time::Duration;

use serde_json::json;

use crate::campaigns::number;
use crate::sip_calls::{endpoint, sip_app};
use crate::sip_outbound::{Sipp, ended, new_agent, outbound_app, place, trunk};
use crate::sip_ua::Ua;

/// The statuses `id` shows, in order and without repeats, polled until it ends.
async fn statuses(app: &crate::helpers::TestApp, id: &str) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        let call = app.get(&format!("/calls/{id}")).await.body;
        let status = call["status"].as_str().unwrap_or_default().to_string();
        if seen.last() != Some(&status) {
            // While it is so, the list's filter finds it under the same status (unless it
            // has moved on in between).
            let listed = app.get(&format!("/calls?status={status}")).await.body;
            let found = listed["data"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["id"] == id && c["status"] == status.as_str());
            let now = app.get(&format!("/calls/{id}")).await.body;
            assert!(
                found || now["status"] != status.as_str(),
                "{status}: {listed}"
            );
            seen.push(status.clone());
        }
        if status == "ended" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    seen
}

#[tokio::test]
async fn an_outbound_call_goes_from_dialing_to_ringing_to_in_progress() {
    // 183 at once, the 200 a second later, the BYE 1.5 s after that.
    let sipp = Sipp::start("early_media.xml", 1, &[]).await;
    let app = outbound_app(trunk(vec![sipp.gateway(0)])).await;
    let agent = new_agent(
        &app,
        json!({"name": "Ava", "max_call_duration_secs": 20,
            "greeting_message": "Hello, this is Ava.",
            "answering_machine_detection": {"enabled": false}}),
    )
    .await;
    let from = number(&app, "+972501230000", "active").await;
    let id = place(&app, &agent, &from, "+972541234567", json!({})).await;
    let seen = statuses(&app, &id).await;
    let live: Vec<&str> = seen
        .iter()
        .map(String::as_str)
        .filter(|s| *s != "queued" && *s != "dialing")
        .collect();
    assert_eq!(live, ["ringing", "in_progress", "ended"], "{seen:?}");
    let call = ended(&app, &id, Duration::from_secs(5), Some(&sipp)).await;
    assert_eq!(call["outcome"], "answered", "{call}");
    sipp.passed().await;
}

#[tokio::test]
async fn a_connected_inbound_call_is_in_progress() {
    let s = sip_app(0, 100).await;
    let (_, _, slug) = endpoint(&s.app, json!({"agent_speaks_first": false}), json!({})).await;
    let mut ua = Ua::new(s.sip, &slug).await;
    ua.invite_with_offer().await;
    let (_, r) = ua.final_reply("INVITE", Duration::from_secs(5)).await;
    assert_eq!(r.code, 200);
    ua.ack_2xx().await;
    let live = crate::helpers::eventually(Duration::from_secs(5), "the call is listed", || async {
        let listed = s.app.get("/calls?status=in_progress").await.body;
        listed["data"].as_array()?.first().cloned()
    })
    .await;
    assert_eq!(live["direction"], "inbound", "{live}");
    assert!(live["answered_at"].is_string(), "{live}");
    let dialing = s.app.get("/calls?status=dialing").await.body;
    assert_eq!(dialing["data"], json!([]), "{dialing}");
    ua.bye().await;
    assert_eq!(
        ua.final_reply("BYE", Duration::from_secs(5)).await.1.code,
        200
    );
}
