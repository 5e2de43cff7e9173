//! Lead memory: the model of a call whose other party is a lead gets the lead's fields and the
//! summaries of its last calls in its system prompt; nothing of another workspace, of a
//! deleted lead, or of an inbound caller-ID the agent does not trust.

use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::{Method, StatusCode};
use serde_json::{Map, Value, json};
use switchboard::runtime::lead_memory::{HEADING, recall};
use switchboard::store::LeadFields;
use switchboard_actors::call::EndReason;
use switchboard_actors::conversation::{Conversation, Speaker, Turn};
use switchboard_actors::ids::{AgentId, CallId, SipEndpointId, WorkspaceId};
use switchboard_actors::inbound::{InboundEnd, InboundStart};
use switchboard_actors::money::Cents;

use crate::call_detail::inbound_plan;
use crate::campaigns::number;
use crate::helpers::{TestApp, eventually, spawn_app};
use crate::sip_calls::{SECS, endpoint, sip_app_with};
use crate::sip_outbound::{Sipp, ended, new_agent, outbound_app_with, place, trunk};
use crate::sip_ua::{Ua, media_addr};
use crate::vendor::{Reply, VendorServer};

/// The number of the project's user agent (its From).
const CALLER: &str = "+15550001111";

fn lead(number: &str, first_name: &str, notes: &str) -> LeadFields {
    LeadFields {
        phone_number: number.into(),
        first_name: first_name.into(),
        last_name: "Levi".into(),
        company: "Acme Flats".into(),
        notes: notes.into(),
        metadata: json!({}),
        ..LeadFields::default()
    }
}

/// An agent and a SIP endpoint answering with it, made with the workspace's `key`.
async fn desk(app: &TestApp, key: &str) -> (AgentId, SipEndpointId) {
    let post =
        |path: &'static str, body: Value| app.send(Method::POST, path, Some(key), Some(body));
    let agent = post("/agents", json!({"name": "Desk"})).await;
    assert_eq!(agent.status, StatusCode::CREATED, "{}", agent.text);
    let agent_id = agent.body["id"].as_str().unwrap().to_owned();
    let endpoint = post(
        "/sip-endpoints",
        json!({"name": "desk", "inbound_agent_id": agent_id}),
    )
    .await;
    assert_eq!(endpoint.status, StatusCode::CREATED, "{}", endpoint.text);
    let endpoint_id = endpoint.body["data"]["id"].as_str().unwrap();
    (
        AgentId::from_uuid(agent_id.parse().unwrap()),
        SipEndpointId::from_uuid(endpoint_id.parse().unwrap()),
    )
}

/// An answered inbound call from `from` through `desk` that ended at `ended_at`, written as the
/// SIP server's port writes one, and its analysis completed with `summary` (none: the call
/// keeps no summary).
async fn past_inbound_call(
    app: &TestApp,
    ws: WorkspaceId,
    (agent_id, endpoint_id): (AgentId, SipEndpointId),
    from: &str,
    ended_at: DateTime<Utc>,
    summary: Option<&str>,
) {
    let store = app.store.clone().with_analysis(true);
    let id = CallId::new();
    let answered_at = ended_at - chrono::Duration::seconds(30);
    let plan = inbound_plan(id, ws, endpoint_id, agent_id, "sip:desk@sip.test");
    store
        .inbound_started(&InboundStart {
            id,
            plan,
            from: from.into(),
            codec: switchboard_sip::sdp::Codec::Pcmu,
            started_at: answered_at,
        })
        .await
        .unwrap();
    let said = Turn {
        role: Speaker::User,
        text: "Hello?".into(),
        start_ms: 0,
        end_ms: 900,
        interrupted: false,
        node: None,
        unheard: None,
        digits: None,
    };
    let end = InboundEnd {
        id,
        workspace_id: ws,
        agent_id,
        from: from.into(),
        answered_at,
        ended_at,
        duration_secs: 30,
        end_reason: EndReason::CallerHangup,
        packets_sent: 0,
        packets_received: 0,
        packets_lost: 0,
        conversation: Conversation {
            transcript: vec![said],
            ..Conversation::default()
        },
    };
    store.inbound_ended(&end, Cents::new(5)).await.unwrap();
    if let Some(summary) = summary {
        let later = ended_at + chrono::Duration::days(1);
        let job = store
            .claim_analysis(id, later, later + chrono::Duration::minutes(5))
            .await
            .unwrap();
        assert!(job.is_some(), "the analysis is pending");
        store
            .complete_analysis(id, Some(summary), &Map::new(), later)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn lead_memory_tells_only_the_workspaces_live_lead_and_its_last_summarized_calls() {
    const CALLER: &str = "+972541112233";
    let app = spawn_app().await;
    let ws = app.workspace_id;
    let (other, other_key) = app.other_workspace().await;
    let ours = desk(&app, &app.key).await;
    let their_desk = desk(&app, &other_key).await;
    // A deleted lead's number is free again; the live lead holds it now.
    let ghost = app
        .post(
            "/leads",
            json!({"phone_number": CALLER, "first_name": "Ghost"}),
        )
        .await;
    assert_eq!(ghost.status, StatusCode::CREATED, "{}", ghost.text);
    let ghost_id = ghost.body["id"].as_str().unwrap();
    let deleted = app.delete(&format!("/leads/{ghost_id}")).await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.text);
    assert_eq!(recall(&app.store, ws, CALLER, true).await.unwrap(), None);
    app.store
        .create_lead(ws, &lead(CALLER, "Dana", "Wants a\nflat near the park."))
        .await
        .unwrap();
    app.store
        .create_lead(
            other,
            &lead(CALLER, "Mallory", "Another workspace's secret."),
        )
        .await
        .unwrap();
    let t0 = app.store.now() - chrono::Duration::days(10);
    let day = |n: i64| t0 + chrono::Duration::days(n);
    for (n, summary) in [
        (1, Some("First call: asked about prices.")),
        (2, Some("Second call: booked a viewing.")),
        (3, None),
        (4, Some("Third call: moved the viewing.")),
        (5, Some("Fourth call: signed the lease.")),
    ] {
        past_inbound_call(&app, ws, ours, CALLER, day(n), summary).await;
    }
    past_inbound_call(
        &app,
        other,
        their_desk,
        CALLER,
        day(6),
        Some("Mallory's own call."),
    )
    .await;

    let told = recall(&app.store, ws, CALLER, true)
        .await
        .unwrap()
        .expect("the lead is known");
    assert!(told.starts_with(HEADING), "{told}");
    assert!(told.contains("- Name: Dana Levi\n"), "{told}");
    assert!(
        told.contains("- Notes: Wants a flat near the park.\n"),
        "{told}"
    );
    // The last three calls with a summary, newest first, with when and how they went.
    let fourth = told.find("Fourth call").expect("the newest call");
    let third = told.find("Third call").expect("the second newest");
    let second = told.find("Second call").expect("the third newest");
    assert!(fourth < third && third < second, "{told}");
    assert!(!told.contains("First call"), "only three calls: {told}");
    let newest = day(5).format("%Y-%m-%d %H:%M UTC").to_string();
    assert!(
        told.contains(&format!("- {newest}, inbound, answered: Fourth call")),
        "{told}"
    );
    for other_data in ["Mallory", "secret", "Ghost"] {
        assert!(!told.contains(other_data), "{other_data}: {told}");
    }

    // Without trust in caller-IDs, inbound calls are not the lead's.
    let untrusted = recall(&app.store, ws, CALLER, false)
        .await
        .unwrap()
        .expect("the lead is known");
    assert!(untrusted.contains("Dana"), "{untrusted}");
    assert!(
        untrusted.ends_with("Earlier calls: none with a summary."),
        "{untrusted}"
    );

    // The other workspace sees its own lead and calls only.
    let theirs = recall(&app.store, other, CALLER, true)
        .await
        .unwrap()
        .expect("their lead");
    assert!(theirs.contains("Mallory") && theirs.contains("Mallory's own call."));
    assert!(
        !theirs.contains("Dana") && !theirs.contains("lease"),
        "{theirs}"
    );

    // Only an exact E.164 number names a lead.
    for not_a_number in ["972541112233", "alice", "+972 54 111 2233", ""] {
        assert_eq!(
            recall(&app.store, ws, not_a_number, true).await.unwrap(),
            None
        );
    }
}

#[tokio::test]
async fn trusting_caller_ids_is_an_agent_setting_off_by_default() {
    let app = spawn_app().await;
    let created = app.post("/agents", json!({"name": "Desk"})).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert_eq!(created.body["lead_memory_trust_caller_id"], false);
    let path = format!("/agents/{}", created.body["id"].as_str().unwrap());
    for wrong in [json!("yes"), json!(1), Value::Null] {
        let resp = app
            .patch(&path, json!({"lead_memory_trust_caller_id": wrong}))
            .await;
        resp.assert_invalid("lead_memory_trust_caller_id");
    }
    let on = app
        .patch(
            &path,
            json!({"lead_memory_enabled": true, "lead_memory_trust_caller_id": true}),
        )
        .await;
    assert_eq!(on.status, StatusCode::OK, "{}", on.text);
    assert_eq!(
        app.get(&path).await.body["lead_memory_trust_caller_id"],
        true
    );
    let doc = app.get("/openapi.json").await.body;
    let agent = &doc["components"]["schemas"]["Agent"]["properties"];
    assert_eq!(agent["lead_memory_trust_caller_id"]["type"], "boolean");
}

/// Asserts that `prompt` is the agent's `agent_prompt` followed by the block on Dana Levi
/// with her `notes`.
#[track_caller]
fn assert_tells_dana(prompt: &str, agent_prompt: &str, notes: &str) {
    assert!(
        prompt.starts_with(&format!("{agent_prompt}\n\n{HEADING}")),
        "{prompt}"
    );
    assert!(prompt.contains("- Name: Dana Levi\n"), "{prompt}");
    assert!(prompt.contains(&format!("- Notes: {notes}\n")), "{prompt}");
}

/// The system message of the `n`th conversation request (0-based), once it has come.
async fn system_prompt(vendor: &VendorServer, n: usize) -> String {
    eventually(
        Duration::from_secs(20),
        &format!("the model is asked ({n})"),
        || async {
            let requests = vendor.conversation_requests();
            requests
                .get(n)
                .map(|(_, body)| body["messages"][0]["content"].as_str().unwrap().to_owned())
        },
    )
    .await
}

/// The model's answer that ends the call at once.
fn hang_up() -> Reply {
    Reply::tool_calls(&[("call_1", "end_call", "{}")])
}

#[tokio::test]
async fn an_outbound_call_to_a_lead_tells_the_model_the_lead_and_its_last_call() {
    let vendor = VendorServer::start().await;
    let sipp = Sipp::start_speaking("answer_until_bye.xml", 3).await;
    let app = outbound_app_with(trunk(vec![sipp.gateway(0)]), |c| vendor.serve(c)).await;
    let to = "+972541234567";
    // A deleted lead and another workspace's lead have the number too.
    let ghost = app
        .post("/leads", json!({"phone_number": to, "first_name": "Ghost"}))
        .await;
    assert_eq!(ghost.status, StatusCode::CREATED, "{}", ghost.text);
    let ghost_id = ghost.body["id"].as_str().unwrap();
    let deleted = app.delete(&format!("/leads/{ghost_id}")).await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.text);
    let (other, _) = app.other_workspace().await;
    app.store
        .create_lead(other, &lead(to, "Mallory", "Another workspace's secret."))
        .await
        .unwrap();
    let dana = app
        .post(
            "/leads",
            json!({"phone_number": to, "first_name": "Dana", "last_name": "Levi",
                "notes": "Looking for a two-room flat."}),
        )
        .await;
    assert_eq!(dana.status, StatusCode::CREATED, "{}", dana.text);
    let agent = new_agent(
        &app,
        json!({"name": "Ava", "max_call_duration_secs": 20, "agent_speaks_first": true,
            "greeting_message": "Hello, this is Ava.", "system_prompt": "You call about flats.",
            "vad_stop_secs": 0.5, "lead_memory_enabled": true,
            "answering_machine_detection": {"enabled": false}}),
    )
    .await;
    let from = number(&app, "+972501230000", "active").await;
    // Each call: the callee speaks, the model hears "Hello?" and hangs up, and the
    // call's analysis sums it up as `summary`.
    let call = |n: usize, summary: &'static str| {
        vendor.transcript("Hello?", Duration::ZERO);
        vendor.reply(hang_up());
        vendor.reply(Reply::text(&[&json!({"summary": summary, "extracted": {},
            "disposition": "Interested"})
        .to_string()]));
        let (app, agent, from, vendor, sipp) = (&app, &agent, &from, &vendor, &sipp);
        async move {
            let id = place(app, agent, from, to, json!({})).await;
            let prompt = system_prompt(vendor, n).await;
            let call = ended(app, &id, Duration::from_secs(20), Some(sipp)).await;
            assert_eq!(call["outcome"], "answered", "{call}");
            eventually(
                Duration::from_secs(10),
                "the analysis completes",
                || async {
                    let call = app.get(&format!("/calls/{id}")).await.body;
                    (call["analysis_status"] == "completed").then_some(())
                },
            )
            .await;
            prompt
        }
    };

    // The first call: the lead is known, no call with it yet.
    let prompt = call(0, "Dana wants to see the flat on Monday.").await;
    assert_tells_dana(
        &prompt,
        "You call about flats.",
        "Looking for a two-room flat.",
    );
    assert!(
        prompt.ends_with("Earlier calls: none with a summary."),
        "{prompt}"
    );
    for other_data in ["Mallory", "secret", "Ghost"] {
        assert!(!prompt.contains(other_data), "{other_data}: {prompt}");
    }

    // The second call is told the first.
    let prompt = call(1, "Dana moved the visit to Tuesday.").await;
    assert!(prompt.contains("- Name: Dana Levi\n"), "{prompt}");
    assert!(
        prompt.contains(
            ", outbound, answered, disposition \"Interested\": Dana wants to see the flat on Monday."
        ),
        "{prompt}"
    );

    // With lead memory off, the model gets the agent's prompt alone.
    let off = app
        .patch(
            &format!("/agents/{agent}"),
            json!({"lead_memory_enabled": false}),
        )
        .await;
    assert_eq!(off.status, StatusCode::OK, "{}", off.text);
    let prompt = call(2, "Nothing new.").await;
    assert_eq!(prompt, "You call about flats.");
    sipp.passed().await;
}

#[tokio::test]
async fn an_inbound_caller_id_is_used_only_by_an_agent_that_trusts_it() {
    let vendor = VendorServer::start().await;
    let s = sip_app_with(0, 100, None, |c| vendor.serve(c)).await;
    s.app
        .store
        .create_lead(
            s.app.workspace_id,
            &lead(CALLER, "Dana", "Calls about her lease."),
        )
        .await
        .unwrap();
    // Three agents, each on its own endpoint, called at once.
    let agents = [
        (
            "Trusting.",
            json!({"lead_memory_enabled": true, "lead_memory_trust_caller_id": true}),
        ),
        ("Untrusting.", json!({"lead_memory_enabled": true})),
        (
            "Forgetful.",
            json!({"lead_memory_enabled": false, "lead_memory_trust_caller_id": true}),
        ),
    ];
    let mut calls = Vec::new();
    for (prompt, settings) in &agents {
        let mut agent = json!({"system_prompt": prompt, "agent_speaks_first": false,
            "greeting_message": "", "vad_stop_secs": 0.5});
        for (k, v) in settings.as_object().unwrap() {
            agent[k] = v.clone();
        }
        let (_, _, slug) = endpoint(&s.app, agent, json!({})).await;
        vendor.transcript("Hello, it's me.", Duration::ZERO);
        vendor.reply(Reply::text(&["Hi."]));
        let sip = s.sip;
        calls.push(async move {
            let mut ua = Ua::new(sip, &slug).await;
            ua.invite_with_offer().await;
            let (_, ok) = ua.final_reply("INVITE", SECS).await;
            assert_eq!(ok.code, 200, "{}", ok.text);
            ua.ack_2xx().await;
            // No greeting marks when the agent listens (after reading the lead's memory): a
            // moment for its start before the caller speaks.
            tokio::time::sleep(Duration::from_millis(300)).await;
            ua.stream_tone(media_addr(ok.body()), 50).await;
            ua
        });
    }
    let uas = futures_util::future::join_all(calls).await;
    eventually(Duration::from_secs(20), "each agent is asked", || async {
        (vendor.conversation_requests().len() >= agents.len()).then_some(())
    })
    .await;
    for ua in &uas {
        ua.bye().await;
    }
    let prompts: Vec<String> = vendor
        .conversation_requests()
        .iter()
        .map(|(_, body)| body["messages"][0]["content"].as_str().unwrap().to_owned())
        .collect();
    let of = |agent: &str| {
        prompts
            .iter()
            .find(|p| p.starts_with(agent))
            .unwrap_or_else(|| panic!("{agent} was not asked: {prompts:?}"))
            .clone()
    };
    let trusting = of("Trusting.");
    assert_tells_dana(&trusting, "Trusting.", "Calls about her lease.");
    assert!(
        trusting.contains(&format!("- Phone number: {CALLER}\n")),
        "{trusting}"
    );
    assert_eq!(of("Untrusting."), "Untrusting.");
    assert_eq!(of("Forgetful."), "Forgetful.");
}
