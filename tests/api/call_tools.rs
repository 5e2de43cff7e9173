//! The workspace's tools on real calls: the model (the stand-in vendor) calls an agent's
//! webhook tool, which a real HTTP server on loopback answers.

use std::time::Duration;

use serde_json::{Value, json};

use crate::converse::{Live, agent_lines, call_slug, conversing_app_with};
use crate::helpers::eventually;
use crate::sip_calls::{SECS, SipApp, ended_call, endpoint};
use crate::tools::{Log, receiver, webhook};
use crate::vendor::{Reply, VendorServer};

/// The order tool of the tool tests at `url`, its one parameter named `parameter`.
fn order_tool(url: &str, parameter: &str) -> Value {
    let mut tool = webhook(url);
    tool["config"]["payload_config"]["extraction_parameters"][0]["name"] = json!(parameter);
    tool
}

/// A conversing service whose tools may reach loopback, an endpoint whose agent has the order
/// tool at `path` of the receiver attached: the service, the endpoint's slug, the tool's id
/// and the receiver's log.
async fn agent_with_a_tool(vendor: &VendorServer, path: &str) -> (SipApp, String, String, Log) {
    let s = conversing_app_with(vendor, |c| {
        c.egress_allow = vec!["127.0.0.0/8".parse().unwrap()];
    })
    .await;
    let (addr, log) = receiver().await;
    let tool = s
        .app
        .post(
            "/tools",
            order_tool(&format!("http://{addr}{path}"), "order_number"),
        )
        .await;
    assert_eq!(tool.status, 201, "{}", tool.body);
    let tool_id = tool.body["id"].as_str().unwrap().to_string();
    let (agent_id, _, slug) = endpoint(
        &s.app,
        json!({"name": "Orders", "greeting_message": "Hello.", "agent_speaks_first": true,
               "vad_stop_secs": 0.5}),
        json!({}),
    )
    .await;
    let attached = s
        .app
        .put(
            &format!("/agents/{agent_id}/tools/{tool_id}"),
            json!({"execution_order": 1,
                   "config_override": {"payload_config": {"static_parameters": {"source": "phone line"}}}}),
        )
        .await;
    assert_eq!(attached.status, 200, "{}", attached.body);
    (s, slug, tool_id, log)
}

#[tokio::test]
async fn a_webhook_tool_runs_once_with_the_schema_the_call_started_with() {
    let vendor = VendorServer::start().await;
    vendor.transcript("Where is my order A17?", Duration::ZERO);
    vendor.reply(Reply::tool_calls(&[(
        "call_1",
        "lookUpOrder",
        r#"{"orderNumber": "A17"}"#,
    )]));
    vendor.reply(Reply::text(&["Your order ships tomorrow."]));
    // The tool takes 2 s to answer: long enough for the filler line.
    let (s, slug, tool_id, log) = agent_with_a_tool(&vendor, "/order?delay_ms=2000").await;
    let live = Live::open(&s.app).await;
    let (mut ua, media) = call_slug(&s, &slug).await;

    // Edited while the call runs: another URL and another parameter. The call keeps the
    // tool as it was when it started.
    let (moved, moved_log) = receiver().await;
    let edited = s
        .app
        .patch(
            &format!("/tools/{tool_id}"),
            json!({"config": order_tool(&format!("http://{moved}/moved"), "order_id")["config"]}),
        )
        .await;
    assert_eq!(edited.status, 200, "{}", edited.body);

    // The caller asks once the greeting has played, and hangs up once the agent has answered.
    live.agent_said("Hello.").await;
    ua.stream_tone(media, 75).await;
    live.agent_said("One moment, please. Your order ships tomorrow.")
        .await;
    ua.bye().await;
    let (_, bye) = ua.final_reply("BYE", SECS).await;
    assert_eq!(bye.code, 200);
    let call = ended_call(&s.app, 1).await;
    let call_id = call["id"].as_str().unwrap().to_string();

    // The model was offered the tool as it was, and got its answer in a second request.
    let requests = vendor.conversation_requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let offered: Vec<&Value> = requests[0].1["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["function"])
        .filter(|f| f["name"] == "lookUpOrder")
        .collect();
    assert_eq!(offered.len(), 1, "{:?}", requests[0].1["tools"]);
    assert_eq!(
        offered[0]["parameters"],
        json!({"type": "object", "required": ["orderNumber"],
               "properties": {"orderNumber": {"type": "string", "description": "The order number"}}})
    );
    let messages = requests[1].1["messages"].as_array().unwrap();
    let asked = messages
        .iter()
        .find(|m| m["role"] == "assistant" && m["tool_calls"].is_array())
        .unwrap_or_else(|| panic!("no tool call in the context: {messages:?}"));
    assert_eq!(asked["tool_calls"][0]["id"], "call_1");
    let answer = messages
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap_or_else(|| panic!("no tool result in the context: {messages:?}"));
    assert_eq!(answer["tool_call_id"], "call_1");
    assert_eq!(answer["content"], r#"{"ok":true}"#);

    // Delivered exactly once, to the URL the call started with, with the call's own metadata.
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(moved_log.lock().unwrap().is_empty());
    assert!(seen[0].uri.starts_with("/order"), "{}", seen[0].uri);
    assert_eq!(seen[0].headers["authorization"], "Bearer downstream-secret");
    let payload: Value = serde_json::from_str(&seen[0].body).unwrap();
    assert_eq!(
        payload,
        json!({
            "company_id": s.app.workspace_id.to_string(),
            "agent_id": call["agent_id"],
            "agent_name": "Orders",
            "call_id": call_id,
            "call_direction": "inbound",
            "caller_number": "+15550001111",
            "callee_number": null,
            "call_metadata": {},
            "call_variables": {},
            "source": "phone line",
            "orderNumber": "A17"
        })
    );

    // The call records the run with its delivery, and the agent's filler while it ran.
    let detail = s.app.get(&format!("/calls/{call_id}")).await;
    let events = detail.body["events"].as_array().expect("events");
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert_eq!(event["name"], "lookUpOrder");
    assert_eq!(event["tool_id"], tool_id.as_str());
    assert_eq!(event["status"], "succeeded");
    assert_eq!(event["status_code"], 200);
    assert_eq!(event["arguments"], json!({"orderNumber": "A17"}));
    assert_eq!(event["response_preview"], r#"{"ok":true}"#);
    assert!(event["latency_ms"].as_u64().unwrap() >= 2000, "{event}");
    let delivery: uuid::Uuid = event["delivery_id"].as_str().unwrap().parse().unwrap();
    let row = crate::database::text_row(
        &s.app.db_url,
        "SELECT kind, outcome, CAST(status_code AS TEXT) FROM tool_deliveries WHERE id = $1",
        delivery,
    )
    .await;
    assert_eq!(row[0].as_deref(), Some("call"));
    assert_eq!(row[1].as_deref(), Some("delivered"));
    let agent_said = agent_lines(&detail.body);
    assert_eq!(
        agent_said,
        ["Hello.", "One moment, please. Your order ships tomorrow."],
        "{}",
        detail.body["transcript"]
    );

    // A new call offers the tool as it is now.
    vendor.transcript("Where is my order A18?", Duration::ZERO);
    vendor.reply(Reply::text(&["Let me see."]));
    let (mut ua, media) = call_slug(&s, &slug).await;
    live.agent_said("Hello.").await;
    ua.stream_tone(media, 75).await;
    // The caller hangs up once the model has been asked.
    eventually(
        Duration::from_secs(20),
        "the model is asked again",
        || async { (vendor.conversation_requests().len() >= 3).then_some(()) },
    )
    .await;
    ua.bye().await;
    let _ = ua.final_reply("BYE", SECS).await;
    let requests = vendor.conversation_requests();
    assert_eq!(requests.len(), 3);
    let tool = requests[2].1["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "lookUpOrder")
        .cloned()
        .expect("the tool is offered");
    assert!(
        tool["function"]["parameters"]["properties"]
            .get("orderId")
            .is_some(),
        "{tool}"
    );
}
