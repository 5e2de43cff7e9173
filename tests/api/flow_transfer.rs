//! A flow's transfer node on a live SIP call: the agent says its line, sends REFER to the
//! caller's side, and ends its leg once the transfer is accepted; a refused REFER takes the
//! node's error edge.

use std::time::Duration;

use serde_json::{Value, json};

use crate::converse::{Live, call_slug, conversing_app_with};
use crate::helpers::eventually;
use crate::sip_calls::{ended_call, endpoint};
use crate::vendor::{Reply, VendorServer};

fn transferring() -> Value {
    json!({"nodes": [
        {"id": "start", "type": "start", "greeting": "Hi, this is Ada.", "is_literal": true, "next_step_id": "help"},
        {"id": "help", "type": "conversation", "instructions": "Help the caller.",
         "transitions": [{"next_step_id": "desk", "condition": "the caller wants a person"}]},
        {"id": "desk", "type": "transfer", "destination": "+4930123456",
         "greeting": "Putting you through now.", "is_literal": true, "error_next_step_id": "sorry"},
        {"id": "sorry", "type": "end", "greeting": "Sorry, nobody can take your call. Goodbye!", "is_literal": true}
    ], "flow_config_version": 1})
}

/// Calls a flow agent that hands the caller to the desk; the UA answers the REFER `code`.
/// The call's detail once it has ended, and the REFER received.
async fn call_and_answer_refer(code: u16, reason: &str) -> (Value, String) {
    let vendor = VendorServer::start().await;
    vendor.transcript("Can I talk to a person?", Duration::ZERO);
    vendor.reply(Reply::tool_calls(&[("c1", "go_to_desk", "{}")]));
    vendor.reply(Reply::text(&[
        "{\"summary\": \"The caller asked for a person.\", \"extracted\": {}}",
    ]));
    let s = conversing_app_with(&vendor, |_| {}).await;
    let (_, _, slug) = endpoint(
        &s.app,
        json!({"type": "flow", "flow_config": transferring(), "vad_stop_secs": 0.5}),
        json!({}),
    )
    .await;
    let live = Live::open(&s.app).await;
    let (mut ua, media) = call_slug(&s, &slug).await;
    live.agent_said("Hi, this is Ada.").await;
    ua.stream_tone(media, 75).await;
    let refer = ua
        .answer_request("REFER", Duration::from_secs(15), code, reason)
        .await;
    ua.expect_request("BYE", Duration::from_secs(15)).await;
    let call = ended_call(&s.app, 1).await;
    let id = call["id"].as_str().unwrap().to_string();
    let detail = eventually(Duration::from_secs(10), "the call's analysis", || async {
        let d = s.app.get(&format!("/calls/{id}")).await.body;
        (d["analysis_status"] == "completed").then_some(d)
    })
    .await;
    (detail, refer)
}

fn transfer_event(detail: &Value) -> Value {
    detail["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "transfer")
        .cloned()
        .expect("the transfer is in the call's events")
}

fn path_nodes(detail: &Value) -> Vec<String> {
    detail["flow_path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["node_id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_transfer_node_refers_the_caller_and_ends_the_agent_s_leg() {
    let (detail, refer) = call_and_answer_refer(202, "Accepted").await;
    let refer_to = crate::sip_ua::header_of(&refer, "Refer-To");
    assert!(
        refer_to.starts_with("<sip:+4930123456@127.0.0.1:"),
        "{refer_to}"
    );
    assert_eq!(detail["end_reason"], "transferred", "{detail}");
    let event = transfer_event(&detail);
    assert_eq!(event["status"], "succeeded", "{event}");
    assert_eq!(event["status_code"], 202);
    assert_eq!(event["arguments"], "+4930123456");
    assert_eq!(path_nodes(&detail), ["start", "help", "desk"]);
    let last = detail["transcript"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["text"], "Putting you through now.");
}

#[tokio::test]
async fn a_refused_transfer_takes_the_node_s_error_edge() {
    let (detail, _) = call_and_answer_refer(405, "Method Not Allowed").await;
    assert_eq!(detail["end_reason"], "agent_hangup", "{detail}");
    let event = transfer_event(&detail);
    assert_eq!(event["status"], "failed", "{event}");
    assert!(event["error"].as_str().unwrap().contains("405"), "{event}");
    assert_eq!(path_nodes(&detail), ["start", "help", "desk", "sorry"]);
    let last = detail["transcript"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["text"], "Sorry, nobody can take your call. Goodbye!");
}
