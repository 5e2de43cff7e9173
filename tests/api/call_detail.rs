//! A call's detail and its end-of-call analysis: calls placed through the simulated carrier
//! whose answered calls end with a scripted conversation (a dialer wrapped by the test), the
//! analysis asked of the stand-in model vendor.
//!
//! Past 600 lines on purpose: one resource whose every field (transcript, events, analysis,
//! disposition, retries, restart) is checked through the real engine and vendor stand-in.

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchboard::config::{Carrier, Config, DialerHook, VendorSettings};
use switchboard_actors::agent::AgentPlan;
use switchboard_actors::call::EndReason;
use switchboard_actors::contact::CallOutcome;
use switchboard_actors::conversation::{
    Conversation, Speaker, ToolEvent, ToolStatus, Turn, VendorFailure,
};
use switchboard_actors::ids::{AgentId, CallId, SipEndpointId, WorkspaceId};
use switchboard_actors::inbound::InboundPlan;
use switchboard_actors::ports::{DialProgress, DialRequest, DialResult, Dialer};
use switchboard_actors::sim::SimConfig;

use crate::campaigns::number;
use crate::helpers::{TestApp, eventually, spawn_app_with};
use crate::vendor::{Reply, VendorServer};

/// Ends every call that was picked up (by a person or a machine) with `conversation`.
struct Conversing {
    carrier: Arc<dyn Dialer>,
    conversation: Conversation,
}

#[async_trait::async_trait]
impl Dialer for Conversing {
    async fn dial(&self, request: DialRequest, progress: DialProgress) -> DialResult {
        let mut result = self.carrier.dial(request, progress).await;
        if matches!(
            result.outcome,
            CallOutcome::Answered | CallOutcome::Voicemail
        ) {
            result.conversation = self.conversation.clone();
        }
        result
    }
}

fn turn(role: Speaker, text: &str, start_ms: u64, end_ms: u64, interrupted: bool) -> Turn {
    Turn {
        role,
        text: text.into(),
        start_ms,
        end_ms,
        interrupted,
        node: None,
        unheard: None,
        digits: None,
    }
}

/// A call about a flat: a viewing is booked on Monday at ten.
fn flat_call() -> Conversation {
    Conversation {
        transcript: vec![
            turn(
                Speaker::Agent,
                "Hi, this is Ava from Acme Flats. Are you still looking for a flat?",
                0,
                3_000,
                false,
            ),
            turn(
                Speaker::User,
                "Yes, something around 1200 euros a month.",
                3_500,
                6_000,
                false,
            ),
            turn(
                Speaker::Agent,
                "I can book you a viewing on Monday at",
                6_500,
                8_000,
                true,
            ),
            turn(
                Speaker::User,
                "Monday at ten works, book it.",
                8_200,
                10_000,
                false,
            ),
        ],
        events: vec![ToolEvent {
            name: "checkCalendar".into(),
            tool_id: Some(uuid::Uuid::now_v7()),
            arguments: json!({"day": "monday"}),
            status: ToolStatus::Succeeded,
            latency_ms: 140,
            response_preview: Some(r#"{"free": ["10:00", "14:00"]}"#.into()),
            raw_response_preview: None,
            status_code: Some(200),
            error: None,
            delivery_id: Some(uuid::Uuid::now_v7()),
            at_ms: 7_000,
        }],
        vendor_failures: vec![VendorFailure {
            vendor: "speech".into(),
            error: "the vendor did not answer in time".into(),
            at_ms: 9_000,
        }],
        path: Vec::new(),
    }
}

/// What the stand-in model answers about [`flat_call`]: fenced, with a key nobody asked for.
fn flat_analysis() -> Reply {
    Reply::text(&[
        "```json\n{\"summary\": \"The caller wants a flat around 1200 euros a month",
        " and booked a viewing on Monday at ten.\", \"extracted\": {\"budget\": \"1200 EUR\", ",
        "\"moveInDate\": null, \"pets\": \"two cats\"}, \"disposition\": \"Viewing booked\", ",
        "\"confidence\": 0.9}\n```",
    ])
}

/// The service with the simulated carrier (every call answered within a few seconds, ending
/// with [`flat_call`]), and the chat model `vendor` when given.
async fn app_with(vendor: Option<&VendorServer>, tune: impl FnOnce(&mut Config)) -> TestApp {
    app_mixed(vendor, "answered=1", tune).await
}

/// [`app_with`], the carrier drawing outcomes from `mix`.
pub(crate) async fn app_mixed(
    vendor: Option<&VendorServer>,
    mix: &str,
    tune: impl FnOnce(&mut Config),
) -> TestApp {
    let llm = vendor.map(llm_of);
    let app = spawn_app_with(|c| {
        configure_mix(c, llm, mix);
        tune(c);
    })
    .await;
    crate::helpers::credit(&app.store, app.workspace_id, 100_000).await;
    app
}

fn llm_of(vendor: &VendorServer) -> VendorSettings {
    VendorSettings {
        base_url: vendor.base_url.clone(),
        api_key: Some("sk-analysis-secret".into()),
        model: "analyst".into(),
    }
}

fn configure(c: &mut Config, llm: Option<VendorSettings>) {
    configure_mix(c, llm, "answered=1");
}

fn configure_mix(c: &mut Config, llm: Option<VendorSettings>, mix: &str) {
    c.carrier = Carrier::Sim(SimConfig {
        mix: mix.parse().unwrap(),
        ring_secs: "0-1".parse().unwrap(),
        talk_secs: "1-2".parse().unwrap(),
        seed: 5,
        dial_log: None,
    });
    c.dialer_hook = Some(DialerHook(Arc::new(|carrier| {
        Arc::new(Conversing {
            carrier,
            conversation: flat_call(),
        })
    })));
    c.evaluation_interval = Duration::from_secs(1);
    c.llm = llm;
}

/// An agent with two extraction parameters and a duration cap.
async fn flat_agent(app: &TestApp) -> String {
    let resp = app
        .post(
            "/agents",
            json!({"name": "Ava", "max_call_duration_secs": 120, "extraction_parameters": [
                {"name": "budget", "description": "The monthly rent the caller can pay"},
                {"name": "moveInDate", "description": "When the caller wants to move in"}]}),
        )
        .await;
    assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text);
    resp.body["id"].as_str().unwrap().to_owned()
}

/// The workspace's "Viewing booked" disposition (created).
async fn viewing_booked(app: &TestApp) -> String {
    let resp = app
        .post(
            "/dispositions",
            json!({"label": "Viewing booked", "description": "A viewing of a flat was booked"}),
        )
        .await;
    assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text);
    assert_eq!(resp.body["description"], "A viewing of a flat was booked");
    resp.body["id"].as_str().unwrap().to_owned()
}

/// Places a direct call and waits for its end; answers its id.
pub(crate) async fn direct_call(app: &TestApp, to: &str) -> String {
    let agent = flat_agent(app).await;
    let from = number(app, "+972501239000", "active").await;
    let id = crate::calls::post_call(app, &agent, &from, to).await;
    app.await_status(&format!("/calls/{id}"), "ended", Duration::from_secs(10))
        .await;
    id
}

/// Reads the call until `check` holds.
async fn call_until(app: &TestApp, id: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    eventually(Duration::from_secs(10), what, || async {
        let call = app.get(&format!("/calls/{id}")).await;
        assert_eq!(call.status, StatusCode::OK, "{}", call.text);
        check(&call.body).then_some(call.body)
    })
    .await
}

async fn analysis_is(app: &TestApp, id: &str, status: &str) -> Value {
    call_until(app, id, &format!("the analysis is {status}"), |c| {
        c["analysis_status"] == status
    })
    .await
}

/// Waits until attempt `n` of the analysis has failed and been recorded.
async fn attempt_failed(app: &TestApp, id: &str, n: i64) -> Value {
    call_until(app, id, &format!("attempt {n} fails"), |c| {
        c["analysis_attempts"] == n && c["analysis_error"].is_string()
    })
    .await
}

#[tokio::test]
async fn the_detail_shows_the_conversation_and_the_list_stays_light() {
    // No chat model: the conversation is kept, the analysis skipped.
    let app = app_with(None, |_| {}).await;
    let id = direct_call(&app, "+972525550301").await;
    let detail = app.get(&format!("/calls/{id}")).await;
    assert_eq!(detail.status, StatusCode::OK, "{}", detail.text);
    let call = &detail.body;
    assert_eq!(call["outcome"], "answered");
    let expected = flat_call();
    assert_eq!(
        call["transcript"],
        serde_json::to_value(&expected.transcript).unwrap()
    );
    assert_eq!(
        call["transcript"][2],
        json!({"role": "agent", "text": "I can book you a viewing on Monday at",
               "start_ms": 6500, "end_ms": 8000, "interrupted": true})
    );
    assert_eq!(call["transcript"][1]["role"], "user");
    let event = &call["events"][0];
    assert_eq!(event["name"], "checkCalendar");
    assert_eq!(event["status"], "succeeded");
    assert_eq!(event["arguments"], json!({"day": "monday"}));
    assert_eq!(event["latency_ms"], 140);
    assert_eq!(event["status_code"], 200);
    assert_eq!(event["at_ms"], 7000);
    assert!(event["tool_id"].is_string() && event["delivery_id"].is_string());
    assert!(event["error"].is_null());
    assert_eq!(call["vendor_failures"][0]["vendor"], "speech");
    assert_eq!(
        (
            call["omitted_turns"].clone(),
            call["omitted_events"].clone()
        ),
        (json!(0), json!(0))
    );
    assert_eq!(call["analysis_status"], "skipped");
    assert!(call["summary"].is_null() && call["extracted"].is_null());
    assert!(call["disposition_id"].is_null() && call["disposition_source"].is_null());

    let listed = app.get("/calls").await;
    let item = &listed.body["data"][0];
    assert_eq!(item["id"], id.as_str());
    for heavy in [
        "transcript",
        "events",
        "vendor_failures",
        "summary",
        "extracted",
        "analysis_status",
    ] {
        assert!(item.get(heavy).is_none(), "the list carries `{heavy}`");
    }
    assert!(item.get("disposition_source").is_some());

    // Another workspace sees no such call.
    let (_, other) = app.other_workspace().await;
    let resp = app
        .client
        .get(app.url(&format!("/calls/{id}")))
        .bearer_auth(other)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);

    // The document describes the detail on the one route and not on the list.
    let doc = app.get("/openapi.json").await.body;
    let schema = |name: &str| doc["components"]["schemas"][name].to_string();
    let detail = schema("CallDetail");
    for field in [
        "transcript",
        "events",
        "analysis_status",
        "extracted",
        "summary",
    ] {
        assert!(detail.contains(field), "CallDetail lacks {field}: {detail}");
    }
    assert!(!schema("CallRecord").contains("transcript"));
    assert!(schema("CallRecord").contains("disposition_source"));
    let get_call = doc["paths"]["/calls/{id}"]["get"]["responses"]["200"].to_string();
    assert!(get_call.contains("CallDetail"), "{get_call}");
}

#[tokio::test]
async fn a_call_that_said_nothing_has_an_empty_detail() {
    let app = app_mixed(None, "busy=1", |_| {}).await;
    let id = direct_call(&app, "+972525550302").await;
    let call = app.get(&format!("/calls/{id}")).await.body;
    assert_eq!(call["outcome"], "busy");
    assert_eq!(call["transcript"], json!([]));
    assert_eq!(call["events"], json!([]));
    assert_eq!(call["analysis_status"], "skipped");
}

#[tokio::test]
async fn the_analysis_lands_a_stop_disposition_that_retires_a_campaign_contact() {
    let vendor = VendorServer::start().await;
    vendor.reply(flat_analysis());
    let app = app_with(Some(&vendor), |c| {
        // Long enough that the analysis, not the timeout, settles the contact.
        c.disposition_timeout = Duration::from_secs(60);
        c.egress_allow = vec!["127.0.0.0/8".parse().unwrap()];
    })
    .await;
    let booked = viewing_booked(&app).await;
    let agent = flat_agent(&app).await;
    // The agent's webhook hears of the analysis (the receiver may be down: the delivery waits).
    let hooked = app
        .patch(
            &format!("/agents/{agent}"),
            json!({"webhook_url": "http://127.0.0.1:9/hook", "webhook_events": ["call.analyzed"]}),
        )
        .await;
    assert_eq!(hooked.status, StatusCode::OK, "{}", hooked.text);
    let campaign = launch_campaign(
        &app,
        &agent,
        json!({"stop_disposition_ids": [booked], "max_attempts": 3}),
        "+972525550303",
    )
    .await;

    let (contact, id) = retired(&app, &campaign).await;
    assert_eq!(contact["last_disposition_id"], booked.as_str());
    let call = analysis_is(&app, &id, "completed").await;
    assert_eq!(
        call["summary"],
        "The caller wants a flat around 1200 euros a month and booked a viewing on Monday at ten."
    );
    assert_eq!(
        call["extracted"],
        json!({"budget": "1200 EUR", "moveInDate": null}),
        "exactly the agent's parameters"
    );
    assert_eq!(call["disposition_id"], booked.as_str());
    assert_eq!(call["disposition_source"], "analysis");
    assert_eq!(call["analysis_attempts"], 1);
    assert!(call["analyzed_at"].is_string());
    // The dashboard's call page shows the summary and each parameter found, or not.
    let mut web = crate::dashboard::Session::new(&app);
    web.sign_in(&app.key).await;
    let page = web.get(&format!("/app/calls/{id}")).await.text;
    assert!(
        page.contains("booked a viewing on Monday at ten."),
        "{page}"
    );
    assert!(page.contains("<dt>budget</dt><dd>1200 EUR</dd>"), "{page}");
    assert!(
        page.contains("<dt>moveInDate</dt><dd><span class=\"muted\">not found</span></dd>"),
        "{page}"
    );
    let events = app
        .get(&format!(
            "/webhook-deliveries?call_id={id}&type=call.analyzed"
        ))
        .await;
    let events = events.body["data"].as_array().expect("deliveries").clone();
    assert_eq!(events.len(), 1, "{events:?}");
    let data = &events[0]["envelope"]["data"];
    assert_eq!(data["summary"], call["summary"], "{data}");
    assert_eq!(data["extracted"], call["extracted"]);
    assert_eq!(data["disposition"], "Viewing booked");
    assert_eq!(data["disposition_id"], booked.as_str());

    // One request, carrying what the model needs.
    let requests = vendor.chat_requests();
    assert_eq!(requests.len(), 1);
    let (auth, body) = &requests[0];
    assert_eq!(auth.as_deref(), Some("Bearer sk-analysis-secret"));
    assert_eq!(body["model"], "analyst");
    assert_eq!(body["stream"], true);
    assert!(body.get("tools").is_none());
    let prompt = body["messages"].to_string();
    for needle in [
        "budget: The monthly rent the caller can pay",
        "moveInDate: When the caller wants to move in",
        "Viewing booked: A viewing of a flat was booked",
        "Not interested",
        "checkCalendar (succeeded, 140 ms)",
        "[00:03] user: Yes, something around 1200 euros a month.",
        "I can book you a viewing on Monday at (cut short)",
    ] {
        assert!(
            prompt.contains(needle),
            "the prompt lacks {needle:?}: {prompt}"
        );
    }
}

/// Creates, fills (one contact) and launches a campaign of `agent`; answers its id.
async fn launch_campaign(app: &TestApp, agent: &str, settings: Value, to: &str) -> String {
    let from = number(app, "+972501239001", "active").await;
    let mut body = json!({"name": "Flats", "agent_id": agent, "from_phone_number_id": from,
        "calling_window": {"timezone": "UTC", "start": "00:00", "end": "24:00"}});
    for (k, v) in settings.as_object().unwrap() {
        body[k] = v.clone();
    }
    let created = app.post("/campaigns", body).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let campaign = created.body["id"].as_str().unwrap().to_owned();
    app.enroll_and_launch(&campaign, &[to]).await;
    campaign
}

/// Waits for a one-contact campaign to complete with its contact retired; answers the contact
/// and the call.
async fn retired(app: &TestApp, campaign: &str) -> (Value, String) {
    let done = app
        .await_status(
            &format!("/campaigns/{campaign}"),
            "completed",
            Duration::from_secs(30),
        )
        .await;
    assert_eq!(done["stats"]["contacts"]["retired"], 1, "{done}");
    let contacts = app.get(&format!("/campaigns/{campaign}/contacts")).await;
    let contact = contacts.body["data"][0].clone();
    assert_eq!(contact["state"], "retired");
    let calls = app.get(&format!("/calls?campaign_id={campaign}")).await;
    assert_eq!(calls.body["pagination"]["total"], 1);
    let id = calls.body["data"][0]["id"].as_str().unwrap().to_owned();
    (contact, id)
}

#[tokio::test]
async fn a_voicemail_keeps_its_conversation_and_settles_its_contact_without_analysis() {
    let vendor = VendorServer::start().await;
    let app = app_mixed(Some(&vendor), "voicemail=1", |_| {}).await;
    let agent = flat_agent(&app).await;
    let campaign = launch_campaign(
        &app,
        &agent,
        json!({"stop_on_voicemail": true}),
        "+972525550309",
    )
    .await;
    let (_, id) = retired(&app, &campaign).await;
    let call = app.get(&format!("/calls/{id}")).await.body;
    assert_eq!(call["outcome"], "voicemail");
    assert_eq!(call["transcript"].as_array().unwrap().len(), 4);
    assert_eq!(
        call["analysis_status"], "skipped",
        "a machine is not analysed"
    );
    assert!(call["cost_cents"].as_i64().unwrap() > 0, "{call}");
    assert!(vendor.chat_requests().is_empty());
}

#[tokio::test]
async fn a_failing_vendor_is_retried_and_an_api_disposition_is_kept() {
    let vendor = VendorServer::start().await;
    vendor.reply(Reply::error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "model overloaded",
    ));
    vendor.reply(flat_analysis());
    let app = app_with(Some(&vendor), |_| {}).await;
    viewing_booked(&app).await;
    let id = direct_call(&app, "+972525550304").await;

    let failed = attempt_failed(&app, &id, 1).await;
    assert_eq!(failed["analysis_status"], "pending");
    let error = failed["analysis_error"].as_str().unwrap();
    assert!(
        error.contains("500") && error.contains("model overloaded"),
        "{error}"
    );
    assert!(!error.contains("sk-analysis-secret"));
    // Not again before the 30 s backoff. A fixed wait: a pass of the analysis job that finds
    // nothing due leaves no trace; 200 ms is four of its 50 ms passes.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(vendor.chat_requests().len(), 1);

    // Meanwhile a client sets the disposition: the analysis will not overwrite it.
    let interested = app.get("/dispositions").await.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["label"] == "Interested")
        .unwrap()["id"]
        .clone();
    let set = app
        .post(
            &format!("/calls/{id}/disposition"),
            json!({"disposition_id": interested}),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.text);
    assert_eq!(set.body["disposition_source"], "api");

    app.clock.advance(Duration::from_secs(31));
    let call = analysis_is(&app, &id, "completed").await;
    assert_eq!(vendor.chat_requests().len(), 2);
    assert_eq!(call["analysis_attempts"], 2);
    assert!(call["analysis_error"].is_null());
    assert!(call["summary"].as_str().unwrap().contains("Monday at ten"));
    assert_eq!(call["disposition_id"], interested);
    assert_eq!(call["disposition_source"], "api");
}

#[tokio::test]
async fn an_answer_without_json_fails_after_five_attempts() {
    let vendor = VendorServer::start().await;
    for _ in 0..5 {
        vendor.reply(Reply::text(&["I'm sorry, I can't summarize calls."]));
    }
    let app = app_with(Some(&vendor), |_| {}).await;
    let id = direct_call(&app, "+972525550305").await;
    for (attempt, wait) in [(1, 30), (2, 60), (3, 120), (4, 240)] {
        let call = attempt_failed(&app, &id, attempt).await;
        assert_eq!(call["analysis_status"], "pending");
        assert!(
            call["analysis_error"].as_str().unwrap().contains("JSON"),
            "{call}"
        );
        // Just short of the wait, nothing runs (a fixed wait: a pass of the analysis job that
        // finds nothing due leaves no trace; 200 ms is four of its 50 ms passes); then it does.
        app.clock.advance(Duration::from_secs(wait - 5));
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(vendor.chat_requests().len(), attempt as usize);
        app.clock.advance(Duration::from_secs(5));
    }
    let call = analysis_is(&app, &id, "failed").await;
    assert_eq!(call["analysis_attempts"], 5);
    assert!(call["summary"].is_null() && call["extracted"].is_null());
    assert!(call["disposition_id"].is_null());
    assert_eq!(vendor.chat_requests().len(), 5);
}

#[tokio::test]
async fn an_answer_of_the_wrong_shape_completes_with_nulls_and_no_disposition() {
    let vendor = VendorServer::start().await;
    vendor.reply(Reply::text(&[
        "Here you go: {\"summary\": 42, \"extracted\": {\"budget\": [1200], \"moveInDate\": ",
        "{\"day\": 1}}, \"disposition\": \"Booked a viewing\"}",
    ]));
    let app = app_with(Some(&vendor), |_| {}).await;
    let id = direct_call(&app, "+972525550306").await;
    let call = analysis_is(&app, &id, "completed").await;
    assert!(call["summary"].is_null());
    assert_eq!(
        call["extracted"],
        json!({"budget": null, "moveInDate": null})
    );
    assert!(
        call["disposition_id"].is_null(),
        "an unknown label lands nothing"
    );
    assert_eq!(vendor.chat_requests().len(), 1);
}

#[tokio::test]
async fn a_pending_analysis_survives_a_restart() {
    let vendor = VendorServer::start().await;
    vendor.reply(Reply::error(StatusCode::BAD_GATEWAY, "upstream down"));
    let app = app_with(Some(&vendor), |_| {}).await;
    let booked = viewing_booked(&app).await;
    let id = direct_call(&app, "+972525550307").await;
    let before = attempt_failed(&app, &id, 1).await;
    assert_eq!(before["analysis_status"], "pending");

    // Stopped with the analysis pending; started again with the model answering.
    let llm = llm_of(&vendor);
    let app = app.restart(|c| configure(c, Some(llm))).await;
    vendor.reply(flat_analysis());
    app.clock.advance(Duration::from_secs(31));
    let call = analysis_is(&app, &id, "completed").await;
    assert_eq!(call["analysis_attempts"], 2);
    assert_eq!(call["extracted"]["budget"], "1200 EUR");
    assert_eq!(call["disposition_id"], booked.as_str());
    assert_eq!(call["disposition_source"], "analysis");
}

#[tokio::test]
async fn a_restart_without_a_model_skips_what_was_pending() {
    let vendor = VendorServer::start().await;
    vendor.reply(Reply::error(StatusCode::BAD_GATEWAY, "upstream down"));
    let app = app_with(Some(&vendor), |_| {}).await;
    let id = direct_call(&app, "+972525550308").await;
    attempt_failed(&app, &id, 1).await;
    let app = app.restart(|c| configure(c, None)).await;
    analysis_is(&app, &id, "skipped").await;
}

/// The plan of inbound call `id` to `endpoint_id` (at `sip_uri`), answered by `agent_id`
/// without a model, unrecorded: what the store keeps of a plan.
pub fn inbound_plan(
    id: CallId,
    workspace_id: WorkspaceId,
    endpoint_id: SipEndpointId,
    agent_id: AgentId,
    sip_uri: &str,
) -> InboundPlan {
    InboundPlan {
        call_id: id,
        workspace_id,
        endpoint_id,
        agent_id,
        sip_uri: sip_uri.into(),
        agent: AgentPlan {
            greeting: String::new(),
            agent_speaks_first: false,
            voice: "alloy".into(),
            language: "en-US".into(),
            silence_timeout: Duration::from_secs(30),
            max_duration: Duration::from_secs(600),
            amd: None,
            mind: None,
            turns: None,
        },
        recorded: false,
    }
}

#[tokio::test]
async fn an_inbound_call_keeps_its_conversation_with_its_end() {
    use switchboard_actors::inbound::{InboundEnd, InboundStart};
    use switchboard_actors::money::Cents;

    let app = app_with(None, |_| {}).await;
    let agent_id = flat_agent(&app).await;
    let agent = AgentId::from_uuid(agent_id.parse().unwrap());
    let endpoint = app
        .post(
            "/sip-endpoints",
            json!({"name": "Front desk", "inbound_agent_id": agent_id}),
        )
        .await;
    assert_eq!(endpoint.status, StatusCode::CREATED, "{}", endpoint.text);
    let endpoint = &endpoint.body["data"];
    // The store's side of an inbound call, as the SIP server's port records it, on a store
    // that analyses calls (a chat model is configured).
    let store = app.store.clone().with_analysis(true);
    let id = CallId::new();
    let now = store.now();
    let plan = inbound_plan(
        id,
        app.workspace_id,
        SipEndpointId::from_uuid(endpoint["id"].as_str().unwrap().parse().unwrap()),
        agent,
        endpoint["sip_uri"].as_str().unwrap(),
    );
    store
        .inbound_started(&InboundStart {
            id,
            plan,
            from: "alice".into(),
            codec: switchboard_sip::sdp::Codec::Pcmu,
            started_at: now,
        })
        .await
        .unwrap();
    let live = app.get(&format!("/calls/{id}")).await.body;
    assert!(live["analysis_status"].is_null(), "not over yet: {live}");
    let end = InboundEnd {
        id,
        workspace_id: app.workspace_id,
        agent_id: agent,
        from: "alice".into(),
        answered_at: now,
        ended_at: now + chrono::Duration::seconds(11),
        duration_secs: 11,
        end_reason: EndReason::CallerHangup,
        packets_sent: 0,
        packets_received: 0,
        packets_lost: 0,
        conversation: flat_call(),
    };
    store.inbound_ended(&end, Cents::new(5)).await.unwrap();
    // Ending it again (a retried end) writes nothing twice.
    assert_eq!(
        store.inbound_ended(&end, Cents::new(5)).await.unwrap(),
        None
    );
    let call = app.get(&format!("/calls/{id}")).await.body;
    assert_eq!(call["direction"], "inbound");
    assert_eq!(call["transcript"].as_array().unwrap().len(), 4);
    assert_eq!(call["events"][0]["name"], "checkCalendar");
    // The service runs without a chat model, so nothing takes the analysis up.
    assert_eq!(call["analysis_status"], "pending");
}
