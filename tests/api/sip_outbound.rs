//! Outbound calls through a SIP trunk, end to end on loopback: the real service with
//! `--carrier sip` dials SIPp (Debian's `sip-tester`) playing the scenarios in `tests/sipp/`,
//! and each call's record must say what the network answered.
//!
//! Past 600 lines on purpose: the outbound service helpers that the other SIP test files use
//! live here, beside the tests that exercise the dialer's rules one by one (the SIPp harness is
//! `sipp.rs`).

use std::net::SocketAddr;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchboard::config::Carrier;
use switchboard_sip::server::{SipSettings, SipSockets};
use switchboard_sip::trunk::{Gateway, Trunk, TrunkTransport};

use crate::campaigns::number;
use crate::helpers::{TestApp, eventually, spawn_app_on};
use crate::sip_recordings::{channels, fetch_recording};

pub use crate::sipp::{Sipp, free_port, sipp};

pub fn trunk(gateways: Vec<Gateway>) -> Trunk {
    Trunk {
        gateways,
        username: None,
        auth_username: None,
        password: None,
        from_user: None,
        request_user: None,
        from_domain: None,
        number_format: Default::default(),
        headers: vec![],
        calls_per_second: None,
        max_concurrent_calls: None,
    }
}

/// The service with `--carrier sip` and `trunk` as the operator's default trunk.
pub async fn outbound_app(trunk: Trunk) -> TestApp {
    outbound_app_with(trunk, |_| {}).await
}

pub async fn outbound_app_with(
    trunk: Trunk,
    configure: impl FnOnce(&mut switchboard::Config),
) -> TestApp {
    let loopback: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let sockets = SipSockets::bind(loopback, None).await.expect("SIP sockets");
    let app = spawn_app_on(Some(sockets), |c| {
        c.sip = Some(SipSettings {
            rtp_ports: (50_000, 59_999),
            t1: Duration::from_millis(100),
            admission: switchboard_sip::admission::AdmissionSettings {
                max_lag: Duration::from_secs(5),
                ..Default::default()
            },
            ..SipSettings::default()
        });
        c.sip_host = "sip.test".into();
        c.tts = switchboard::config::Tts::Tones;
        c.carrier = Carrier::Sip;
        c.outbound_trunk = Some(trunk);
        configure(c);
    })
    .await;
    crate::helpers::credit(&app.store, app.workspace_id, 100_000).await;
    app
}

/// A new agent made of `body`; its id.
pub async fn new_agent(app: &TestApp, body: Value) -> String {
    let agent = app.post("/agents", body).await;
    assert_eq!(agent.status, StatusCode::CREATED, "{}", agent.text);
    agent.body["id"].as_str().unwrap().to_string()
}

/// Places a call by `agent` from the number `from` to `to`; `extra` adds fields to the
/// request. The call's id.
pub async fn place(app: &TestApp, agent: &str, from: &str, to: &str, extra: Value) -> String {
    let mut body = json!({"agent_id": agent, "to_number": to, "from_phone_number_id": from});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let resp = app.post("/calls", body).await;
    assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text);
    resp.body["id"].as_str().unwrap().to_string()
}

/// Waits for the call to end; if it does not within `within`, fails with what SIPp saw.
pub async fn ended(app: &TestApp, id: &str, within: Duration, sipp: Option<&Sipp>) -> Value {
    let deadline = std::time::Instant::now() + within;
    loop {
        let call = app.get(&format!("/calls/{id}")).await.body;
        if call["status"] == "ended" {
            return call;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the call did not end: {call}\n{}",
            sipp.map(Sipp::messages).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Places a call to SIPp and waits for its end.
pub async fn call(app: &TestApp, sipp: &Sipp, extra: Value) -> Value {
    let agent = new_agent(
        app,
        json!({"name": "Ava", "max_call_duration_secs": 20, "agent_speaks_first": true,
            "greeting_message": "Hello, this is Ava from the clinic, calling about your appointment tomorrow.",
            // SIPp echoes our own audio back: nothing for the detector to hear.
            "answering_machine_detection": {"enabled": false}}),
    )
    .await;
    let from = number(app, "+972501230000", "active").await;
    let id = place(app, &agent, &from, "+972541234567", extra).await;
    ended(app, &id, Duration::from_secs(30), Some(sipp)).await
}

#[tokio::test]
async fn a_busy_callee_ends_the_call_busy_with_its_q850_cause() {
    let sipp = Sipp::start("busy.xml", 1, &[]).await;
    let app = outbound_app(trunk(vec![sipp.gateway(0)])).await;
    let call = call(&app, &sipp, json!({})).await;
    assert_eq!(call["outcome"], "busy", "{call}");
    assert_eq!(call["sip_code"], 486);
    assert_eq!(call["sip_reason"], "Busy Here");
    assert_eq!(call["q850_cause"], 17);
    assert_eq!(call["duration_secs"], 0);
    assert_eq!(call["cost_cents"], 0);
    sipp.passed().await;
}

#[tokio::test]
async fn an_answered_call_carries_audio_both_ways_into_the_recording() {
    let sipp = Sipp::start("answer.xml", 1, &[]).await;
    let app = outbound_app(trunk(vec![sipp.gateway(0)])).await;
    let call = call(&app, &sipp, json!({})).await;
    assert_eq!(call["outcome"], "answered", "{call}");
    assert_eq!(call["sip_code"], 200);
    assert_eq!(call["end_reason"], "callee_hangup");
    assert_eq!(call["codec"], "pcmu");
    assert!(call["duration_secs"].as_i64().unwrap() >= 2, "{call}");
    sipp.passed().await;
    // The agent's greeting went out (right channel) and came back echoed (left channel).
    let wav = fetch_recording(&app, &call).await;
    let (callee, agent) = channels(&wav, 8000);
    let (callee, agent) = (rms(&callee), rms(&agent));
    assert!(agent > 500.0, "the agent's channel is silent: {agent}");
    assert!(
        callee > 500.0,
        "the callee's channel (the echo) is silent: {callee}"
    );
}

/// The RMS level of a channel.
fn rms(channel: &[i16]) -> f64 {
    let energy: f64 = channel.iter().map(|s| f64::from(*s).powi(2)).sum();
    (energy / channel.len().max(1) as f64).sqrt()
}

fn md5_hex(text: &str) -> String {
    use md5::{Digest, Md5};
    Md5::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test]
async fn a_proxy_challenge_is_answered_with_the_trunks_credentials() {
    // The digest RFC 2617 gives for the retry, computed here for SIPp to compare.
    let sipp = Sipp::start_with("auth_proxy.xml", 1, &[], |port| {
        let ha1 = md5_hex("acct-1001:trunk.test:s3cret-pass");
        let ha2 = md5_hex(&format!("INVITE:sip:+972541234567@127.0.0.1:{port}"));
        vec![(
            "EXPECTED_DIGEST",
            md5_hex(&format!("{ha1}:5c0a4b1e6e2f:{ha2}")),
        )]
    })
    .await;
    answered_with_credentials(sipp).await;
}

/// Places a call through a trunk with credentials to `sipp`, which challenges it: answered.
async fn answered_with_credentials(sipp: Sipp) {
    let mut t = trunk(vec![sipp.gateway(0)]);
    t.username = Some("acct-1001".into());
    t.password = Some(switchboard_sip::trunk::Secret::new("s3cret-pass"));
    let app = outbound_app(t).await;
    let call = call(&app, &sipp, json!({})).await;
    assert_eq!(call["outcome"], "answered", "{call}\n{}", sipp.messages());
    sipp.passed().await;
}

#[tokio::test]
async fn a_digest_challenge_is_answered_with_the_trunks_credentials() {
    let sipp = Sipp::start("auth_www.xml", 1, &[]).await;
    answered_with_credentials(sipp).await;
}

#[tokio::test]
async fn an_unanswered_call_is_cancelled_at_the_ring_timeout() {
    let sipp = Sipp::start("no_answer.xml", 1, &[]).await;
    let app = outbound_app(trunk(vec![sipp.gateway(0)])).await;
    let started = std::time::Instant::now();
    let call = call(&app, &sipp, json!({"ring_timeout_secs": 5})).await;
    assert_eq!(call["outcome"], "no_answer", "{call}");
    assert_eq!(call["end_reason"], "ring_timeout");
    assert_eq!(call["sip_code"], 487);
    assert_eq!(call["ring_timeout_secs"], 5);
    assert!(started.elapsed() >= Duration::from_secs(5));
    sipp.passed().await;
}

#[tokio::test]
async fn a_503_from_the_first_gateway_moves_the_call_to_the_second() {
    let down = Sipp::start("unavailable.xml", 1, &[]).await;
    let up = Sipp::start("answer.xml", 1, &[]).await;
    let app = outbound_app(trunk(vec![up.gateway(20), down.gateway(10)])).await;
    let call = call(&app, &up, json!({})).await;
    assert_eq!(call["outcome"], "answered", "{call}");
    down.passed().await;
    up.passed().await;
}

#[tokio::test]
async fn an_answer_that_crosses_our_cancel_is_acked_and_hung_up() {
    let sipp = Sipp::start("answer_races_cancel.xml", 1, &[]).await;
    let app = outbound_app(trunk(vec![sipp.gateway(0)])).await;
    let call = call(&app, &sipp, json!({"ring_timeout_secs": 5})).await;
    assert_eq!(call["outcome"], "no_answer", "{call}");
    assert_eq!(call["end_reason"], "ring_timeout");
    assert_eq!(call["duration_secs"], 0);
    sipp.passed().await;
}

#[tokio::test]
async fn early_media_with_100rel_is_acknowledged_and_the_call_answers() {
    let sipp = Sipp::start("early_media.xml", 1, &[]).await;
    let app = outbound_app(trunk(vec![sipp.gateway(0)])).await;
    let call = call(&app, &sipp, json!({"ring_timeout_secs": 8})).await;
    assert_eq!(call["outcome"], "answered", "{call}\n{}", sipp.messages());
    assert_eq!(call["outcome"], "answered", "{call}");
    assert_eq!(call["end_reason"], "callee_hangup");
    sipp.passed().await;
}

#[tokio::test]
async fn a_short_session_timer_is_refreshed_by_us() {
    let sipp = Sipp::start("session_timer.xml", 1, &[]).await;
    let app = outbound_app(trunk(vec![sipp.gateway(0)])).await;
    let call = call(&app, &sipp, json!({})).await;
    assert_eq!(call["outcome"], "answered", "{call}");
    assert_eq!(call["end_reason"], "callee_hangup", "{call}");
    assert!(call["duration_secs"].as_i64().unwrap() >= 4, "{call}");
    sipp.passed().await;
}

/// Three calls at once; the one to `+972541230002` fails inside (a panic once answered). It
/// ends as interrupted, its dialog gets a BYE, and the two others run to their normal end.
#[tokio::test]
async fn a_call_that_fails_inside_ends_interrupted_and_disturbs_no_other() {
    // The injected fault is a panic. Symbolizing its backtrace (RUST_BACKTRACE) in a debug build
    // holds this test's runtime, server included, for long enough that the other calls'
    // INVITEs are retransmitted: its message is enough here.
    std::panic::set_hook(Box::new(|info| eprintln!("{info}")));
    let sipp = Sipp::start("answer_until_bye.xml", 3, &[]).await;
    let fault: switchboard_actors::sip_dialer::CallFault =
        std::sync::Arc::new(|request| request.to_number == "+972541230002");
    let app = outbound_app_with(trunk(vec![sipp.gateway(0)]), |c| {
        c.call_fault = Some(switchboard::config::CallFaultHook(fault));
    })
    .await;
    let agent = new_agent(
        &app,
        json!({"name": "Ava", "max_call_duration_secs": 4, "silence_timeout_secs": 30,
            "greeting_message": "Hello, this is Ava calling about your appointment.",
            "answering_machine_detection": {"enabled": false}}),
    )
    .await;
    let from = number(&app, "+972501230000", "active").await;
    let mut ids = Vec::new();
    for n in 1..=3 {
        let to = format!("+97254123000{n}");
        ids.push(place(&app, &agent, &from, &to, json!({})).await);
    }
    let mut calls = Vec::new();
    for id in &ids {
        calls.push(ended(&app, id, Duration::from_secs(30), Some(&sipp)).await);
    }
    assert_eq!(calls[1]["end_reason"], "interrupted", "{}", calls[1]);
    assert_eq!(calls[1]["outcome"], "infra_error");
    for call in [&calls[0], &calls[2]] {
        assert_eq!(call["outcome"], "answered", "{call}");
        assert_eq!(call["end_reason"], "max_duration", "{call}");
        assert!(call["duration_secs"].as_i64().unwrap() >= 3, "{call}");
    }
    // Every dialog, the failed one included, was ended with a BYE that SIPp answered.
    sipp.passed().await;
}

/// A campaign through the SIP dialer, in real time: a busy callee is retried once and
/// exhausted, an unanswered one is double-dialled within each attempt (four calls), and a
/// machine ends the third as voicemail, which `stop_on_voicemail` retires. The budget's money
/// adds up.
#[tokio::test]
async fn a_campaign_runs_its_rules_through_the_sip_dialer() {
    let sipp = Sipp::start("campaign.xml", 7, &["-timeout", "150s"]).await;
    let app = outbound_app_with(trunk(vec![sipp.gateway(0)]), |c| {
        c.ring_timeout = Duration::from_secs(3);
        c.evaluation_interval = Duration::from_secs(1);
    })
    .await;
    let agent = new_agent(
        &app,
        json!({"name": "Ava", "max_call_duration_secs": 30, "agent_speaks_first": true,
            "greeting_message": "Hello, this is Ava from the clinic."}),
    )
    .await;
    let from = number(&app, "+972501230000", "active").await;
    let created = app
        .post(
            "/campaigns",
            json!({"name": "Recall", "agent_id": agent, "from_phone_number_id": from,
                "max_attempts": 2, "retry_no_answer_seconds": 30, "double_dial_enabled": true,
                "double_dial_gap_seconds": 10, "stop_on_voicemail": true, "max_in_flight": 2,
                "budget_cents": 5000,
                "calling_window": {"timezone": "UTC", "start": "00:00", "end": "24:00"}}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let id = created.body["id"].as_str().unwrap().to_owned();
    app.enroll_and_launch(&id, &["+972541230001", "+972541230002", "+972541230003"])
        .await;
    let done = app
        .await_status(
            &format!("/campaigns/{id}"),
            "completed",
            Duration::from_secs(120),
        )
        .await;
    assert_eq!(done["stats"]["contacts"]["exhausted"], 2, "{done}");
    assert_eq!(done["stats"]["contacts"]["retired"], 1, "{done}");
    assert_eq!(done["reserved_cents"], 0);
    let calls = app
        .get(&format!("/calls?campaign_id={id}&limit=100"))
        .await
        .body;
    let calls = calls["data"].as_array().unwrap();
    let outcomes = |to: &str| -> Vec<String> {
        let mut mine: Vec<&Value> = calls.iter().filter(|c| c["to_number"] == to).collect();
        mine.sort_by_key(|c| c["queued_at"].as_str().unwrap().to_string());
        mine.iter()
            .map(|c| c["outcome"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(outcomes("+972541230001"), ["busy", "busy"]);
    assert_eq!(
        outcomes("+972541230002"),
        ["no_answer", "no_answer", "no_answer", "no_answer"]
    );
    assert_eq!(outcomes("+972541230003"), ["voicemail"]);
    let machine = calls
        .iter()
        .find(|c| c["to_number"] == "+972541230003")
        .unwrap();
    assert_eq!(machine["answered_by"], "machine", "{machine}");
    let spent: i64 = calls
        .iter()
        .map(|c| c["cost_cents"].as_i64().unwrap())
        .sum();
    assert_eq!(done["spent_cents"], spent);
    sipp.passed().await;
}

/// Switchboard calling Switchboard over loopback: a campaign on one instance dials, through a
/// trunk whose `request_user` is the slug, a SIP endpoint of a second instance. Each side's
/// agent speaks, both record, and the two call records agree on the codec and the duration.
#[tokio::test]
async fn a_campaign_calls_the_sip_endpoint_of_another_instance() {
    let callee = crate::sip_calls::sip_app(0, 100).await;
    let (_, endpoint_id, slug) = crate::sip_calls::endpoint(
        &callee.app,
        json!({"max_call_duration_secs": 6, "silence_timeout_secs": 30}),
        json!({}),
    )
    .await;
    let mut t = trunk(vec![Gateway {
        host: "127.0.0.1".into(),
        port: Some(callee.sip.port()),
        transport: TrunkTransport::Udp,
        priority: 0,
    }]);
    t.request_user = Some(slug.clone());
    let caller = outbound_app_with(t, |c| c.evaluation_interval = Duration::from_secs(1)).await;
    let agent = new_agent(
        &caller,
        json!({"name": "Ava", "max_call_duration_secs": 30, "agent_speaks_first": true,
            "greeting_message": "Hello, this is Ava from the clinic, calling about your appointment.",
            "answering_machine_detection": {"enabled": false}}),
    )
    .await;
    let from = number(&caller, "+972501230000", "active").await;
    let created = caller
        .post(
            "/campaigns",
            json!({"name": "Desk", "agent_id": agent, "from_phone_number_id": from,
                "calling_window": {"timezone": "UTC", "start": "00:00", "end": "24:00"}}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let id = created.body["id"].as_str().unwrap().to_owned();
    caller.enroll_and_launch(&id, &["+972541230001"]).await;

    let path = format!("/calls?campaign_id={id}&status=ended");
    let placed = eventually(Duration::from_secs(30), "the campaign's call ends", || {
        let path = path.clone();
        let caller = &caller;
        async move {
            let calls = caller.get(&path).await.body;
            calls["data"].as_array().and_then(|c| c.first().cloned())
        }
    })
    .await;
    let placed = caller
        .get(&format!("/calls/{}", placed["id"].as_str().unwrap()))
        .await
        .body;
    let answered = crate::sip_calls::ended_call(&callee.app, 1).await;

    assert_eq!(placed["outcome"], "answered", "{placed}");
    assert_eq!(placed["sip_code"], 200, "{placed}");
    // The callee's agent ended the call at its maximum duration: a hang-up seen from here.
    assert_eq!(placed["end_reason"], "callee_hangup", "{placed}");
    assert_eq!(placed["to_number"], "+972541230001");
    assert_eq!(answered["direction"], "inbound");
    assert_eq!(answered["outcome"], "answered", "{answered}");
    assert_eq!(answered["end_reason"], "max_duration", "{answered}");
    assert_eq!(answered["sip_endpoint_id"], endpoint_id.as_str());
    assert_eq!(answered["to_number"], format!("sip:{slug}@sip.test"));
    assert_eq!(answered["from_number"], "+972501230000");
    assert_eq!(placed["codec"], answered["codec"], "{placed}\n{answered}");
    assert_eq!(placed["codec"], "pcmu");
    let (a, b) = (
        placed["duration_secs"].as_i64().unwrap(),
        answered["duration_secs"].as_i64().unwrap(),
    );
    assert!((6..=7).contains(&b), "{answered}");
    assert!((a - b).abs() <= 1, "durations differ: {a} s and {b} s");

    // Each recording holds both agents: its own on one channel, the other's on the other.
    for (app, call) in [(&caller, &placed), (&callee.app, &answered)] {
        let wav = fetch_recording(app, call).await;
        let (far, near) = channels(&wav, 8000);
        for (side, samples) in [("far", &far), ("near", &near)] {
            assert!(
                switchboard_sip::vad::level_db(samples) > -40.0,
                "the {side} channel of {} is silent",
                call["direction"]
            );
        }
    }
}

/// An outbound call converses like an inbound one, its agent's prompt filled with the call's
/// `variables`: SIPp echoes the greeting back, the echo is taken for the callee's words, and the
/// model is asked with the filled prompt.
#[tokio::test]
async fn an_outbound_call_converses_with_the_calls_variables_in_its_prompt() {
    let vendor = crate::vendor::VendorServer::start().await;
    vendor.transcript("Hello?", Duration::ZERO);
    vendor.reply(crate::vendor::Reply::text(&[
        "Hi Dana, this is the clinic.",
    ]));
    // The callee speaks after the greeting has started (an echo of it is not the callee).
    let sipp = Sipp::start_speaking("answer.xml", 1).await;
    let app = outbound_app_with(trunk(vec![sipp.gateway(0)]), |c| {
        vendor.serve(c);
        c.egress_allow = vec!["127.0.0.0/8".parse().unwrap()];
    })
    .await;
    let (hook, receiver) = crate::webhooks::receiver(&app).await;
    let agent = new_agent(
        &app,
        json!({"name": "Ava", "max_call_duration_secs": 20, "agent_speaks_first": true,
            "webhook_url": format!("http://{hook}/hook"),
            "webhook_events": ["call.answered", "transcript.final"],
            "greeting_message": "Hello {{name}}, this is Ava from the clinic.",
            "system_prompt": "You call {{name}} about {{topic}}.", "vad_stop_secs": 0.5,
            "answering_machine_detection": {"enabled": false}}),
    )
    .await;
    let from = number(&app, "+972501230000", "active").await;
    let id = place(
        &app,
        &agent,
        &from,
        "+972541234567",
        json!({"variables": {"name": "Dana", "topic": "her visit on Tuesday"}}),
    )
    .await;
    let call = ended(&app, &id, Duration::from_secs(30), Some(&sipp)).await;
    assert_eq!(call["outcome"], "answered", "{call}");
    // The conversation reached the call's end through the dialer and the engine: the
    // greeting, as far as it played before the callee spoke over it.
    let greeting = &call["transcript"][0];
    assert_eq!(greeting["role"], "agent", "{call}");
    let said = greeting["text"].as_str().unwrap_or_default();
    assert!(said.starts_with("Hello Dana,"), "{call}");
    assert!(
        greeting["end_ms"].as_u64() > greeting["start_ms"].as_u64(),
        "{call}"
    );
    let requests = vendor.conversation_requests();
    assert!(!requests.is_empty(), "the model was never asked: {call}");
    let messages = &requests[0].1["messages"];
    assert_eq!(
        messages[0]["content"], "You call Dana about her visit on Tuesday.",
        "{messages}"
    );
    let heard = messages[1]["content"].as_str().unwrap_or_default();
    assert!(heard.starts_with(said), "{messages}");
    // The answer's event comes before any turn's.
    crate::webhooks::wait_for(&receiver, 2).await;
    let kinds = receiver.kinds();
    assert_eq!(
        kinds[..2],
        ["call.answered", "transcript.final"],
        "{kinds:?}"
    );
}
