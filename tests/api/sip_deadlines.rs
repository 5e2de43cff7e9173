//! Every wait of an outbound dial has a deadline: a trunk that answers our CANCEL and never
//! ends the INVITE, a callee that rings and then says nothing, a PRACK nobody answers, a
//! gateway that stops answering while the call fails over. Each call ends, and its workspace
//! slot is free for the next (the workspace takes one call at a time here).

use std::time::Duration;

use serde_json::{Value, json};

use crate::campaigns::number;
use crate::helpers::TestApp;
use crate::sip_outbound::{Sipp, ended, new_agent, outbound_app_with, place, trunk};
use switchboard_sip::trunk::{Gateway, TrunkTransport};

/// The tests' T1 is 100 ms: one transaction expiry (32 x T1) is 3.2 s.
const EXPIRY: Duration = Duration::from_millis(3200);
/// The shortest ring timeout a call takes.
const RING: Duration = Duration::from_secs(5);
/// How long a gateway may say nothing at all before the next is tried.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);
/// Room for the scheduler of a loaded machine.
const SLACK: Duration = Duration::from_secs(4);

/// The service with `gateways` as its default trunk, one call at a time per workspace.
async fn one_at_a_time(gateways: Vec<Gateway>) -> TestApp {
    outbound_app_with(trunk(gateways), |c| {
        c.workspace_max_concurrent_calls = 1;
    })
    .await
}

/// Places two calls at once (the second waits for the first's slot) and waits for both to
/// end; each must end within `within` of its dial. The calls, in order.
async fn two_calls(app: &TestApp, sipp: Option<&Sipp>, within: Duration) -> [Value; 2] {
    let agent = new_agent(
        app,
        json!({"name": "Ava", "max_call_duration_secs": 20,
            "greeting_message": "Hello, this is Ava.",
            "answering_machine_detection": {"enabled": false}}),
    )
    .await;
    let from = number(app, "+972501230000", "active").await;
    let extra = json!({"ring_timeout_secs": RING.as_secs()});
    let first = place(app, &agent, &from, "+972541234567", extra.clone()).await;
    let second = place(app, &agent, &from, "+972541234568", extra).await;
    let a = ended(app, &first, within + SLACK, sipp).await;
    let b = ended(app, &second, within + SLACK, sipp).await;
    // The second went out once the first's slot was free, and not before.
    let at = |call: &Value, field: &str| {
        chrono::DateTime::parse_from_rfc3339(call[field].as_str().unwrap()).unwrap()
    };
    assert!(at(&b, "started_at") >= at(&a, "ended_at"), "{a}\n{b}");
    [a, b]
}

/// Two calls to SIPp playing `scenario` both end at their ring timeout and one expiry after
/// it, at the latest, as `no_answer`.
async fn given_up_after_the_cancel(scenario: &str) {
    let sipp = Sipp::start(scenario, 2, &[]).await;
    let app = one_at_a_time(vec![sipp.gateway(0)]).await;
    for call in two_calls(&app, Some(&sipp), RING + EXPIRY).await {
        assert_eq!(call["outcome"], "no_answer", "{call}");
        assert_eq!(call["end_reason"], "ring_timeout", "{call}");
    }
    sipp.passed().await;
}

#[tokio::test]
async fn a_cancel_answered_without_a_487_ends_the_call_one_expiry_later() {
    given_up_after_the_cancel("cancel_without_487.xml").await;
}

#[tokio::test]
async fn a_callee_that_rings_and_then_says_nothing_is_given_up() {
    // Not even the CANCEL is answered.
    given_up_after_the_cancel("rings_then_silent.xml").await;
}

#[tokio::test]
async fn a_prack_nobody_answers_does_not_hold_the_dial() {
    let sipp = Sipp::start("prack_unanswered.xml", 2, &[]).await;
    let app = one_at_a_time(vec![sipp.gateway(0)]).await;
    // The PRACK waits one expiry; the CANCEL then gets its 200 and the INVITE nothing.
    for call in two_calls(&app, Some(&sipp), RING + EXPIRY * 2).await {
        assert_eq!(call["status"], "ended", "{call}");
        assert_ne!(call["outcome"], "answered", "{call}");
    }
    // Each INVITE was CANCELled: the callee does not ring on.
    sipp.passed().await;
}

#[tokio::test]
async fn a_gateway_that_stops_answering_mid_failover_is_left_at_the_response_timeout() {
    let down = Sipp::start("unavailable.xml", 2, &[]).await;
    // The second gateway is there and never answers.
    let silent = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let silent_gateway = Gateway {
        host: "127.0.0.1".into(),
        port: Some(silent.local_addr().unwrap().port()),
        transport: TrunkTransport::Udp,
        priority: 20,
    };
    // The INVITE's own expiry is longer than the response timeout (5 s) here, as it is by
    // default outside the tests.
    let app = outbound_app_with(trunk(vec![down.gateway(10), silent_gateway]), |c| {
        c.workspace_max_concurrent_calls = 1;
        if let Some(sip) = c.sip.as_mut() {
            sip.transaction_expiry = Some(Duration::from_secs(32));
        }
    })
    .await;
    for call in two_calls(&app, None, RESPONSE_TIMEOUT).await {
        assert_eq!(call["outcome"], "infra_error", "{call}");
        assert_eq!(call["end_reason"], "no_response", "{call}");
    }
    let mut buf = [0u8; 2048];
    let (len, _) = silent.recv_from(&mut buf).await.unwrap();
    assert!(buf[..len].starts_with(b"INVITE "));
    down.passed().await;
}
