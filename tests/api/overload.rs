//! Overload: SIPp offers inbound calls far beyond what the node may take; the excess is
//! refused at once with 503 and Retry-After, the admitted calls complete, and the server keeps
//! answering OPTIONS and the API during the flood.

use std::time::{Duration, Instant};

use serde_json::json;
use switchboard_sip::admission::AdmissionSettings;

use crate::helpers::eventually;
use crate::sip_calls::{SECS, endpoint, sip_app_with};
use crate::sip_outbound::sipp;
use crate::sip_ua::{Ua, free_sip_port};

/// The calls (by Call-ID) whose `method` got a `code` answer in SIPp's message log
/// (retransmitted answers count once).
fn answered(messages: &str, method: &str, code: u16) -> usize {
    let status = format!("SIP/2.0 {code} ");
    let cseq = format!(" {method}\r\n");
    messages
        .split("\n\n")
        .filter(|m| m.contains(&status) && m.contains(&cseq))
        .filter_map(|m| {
            m.lines()
                .find(|l| l.to_ascii_lowercase().starts_with("call-id:"))
                .map(str::to_string)
        })
        .collect::<std::collections::HashSet<_>>()
        .len()
}

/// INVITEs refused for capacity, by the service's metrics.
fn refused_for_capacity(metrics: &str) -> f64 {
    metrics
        .lines()
        .find(|l| l.starts_with("switchboard_sip_invites_refused_total{reason=\"capacity\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test]
async fn a_flood_of_calls_is_refused_early_while_admitted_calls_complete() {
    // Room for 12 inbound calls (15 on the node, 3 kept for outbound ones).
    let s = sip_app_with(0, 100_000, None, |c| {
        if let Some(sip) = c.sip.as_mut() {
            sip.admission = AdmissionSettings {
                max_calls: 15,
                outbound_reserve: 3,
                max_setups: 64,
                // Debug builds on a busy machine are slow: only capacity refuses here.
                max_lag: Duration::from_secs(5),
                retry_after_secs: 3,
            };
        }
    })
    .await;
    let (_, _, slug) = endpoint(
        &s.app,
        json!({"agent_speaks_first": false, "silence_timeout_secs": 30}),
        json!({}),
    )
    .await;

    // 60 calls a second for 4 s, each held 1 s: about five times the room.
    let dir = tempfile::tempdir().unwrap();
    let messages = dir.path().join("messages.log");
    let port = free_sip_port();
    let mut sipp = sipp(dir.path())
        .args(["-sn", "uac", "-s", &slug])
        .arg(s.sip.to_string())
        .args(["-i", "127.0.0.1", "-p", &port.to_string()])
        .args(["-r", "60", "-m", "240", "-d", "1000", "-l", "200"])
        .args(["-nostdin", "-timeout", "40s", "-max_recv_loops", "10000"])
        .args(["-trace_msg", "-message_file"])
        .arg(&messages)
        .spawn()
        .expect("sipp runs (Debian package sip-tester; ./scripts/test installs it)");

    // Once the flood has the server refusing calls, it still answers OPTIONS and the API
    // promptly.
    eventually(
        Duration::from_secs(20),
        "calls are refused for capacity",
        || async { (refused_for_capacity(&s.app.metrics().await) > 0.0).then_some(()) },
    )
    .await;
    let mut probe = Ua::new(s.sip, &slug).await;
    probe.send_raw(probe.options_text().as_bytes()).await;
    assert_eq!(probe.final_reply("OPTIONS", SECS).await.1.code, 200);
    let asked = Instant::now();
    let calls = s.app.get("/calls?limit=5").await;
    assert_eq!(calls.status, 200);
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "the API took {:?} during the flood",
        asked.elapsed()
    );

    let status = tokio::time::timeout(Duration::from_secs(60), sipp.wait())
        .await
        .expect("sipp finished in time")
        .expect("sipp ran");
    // SIPp counts the refused calls as failed.
    assert!(!status.success());
    let log = std::fs::read_to_string(&messages).unwrap_or_default();
    let admitted = answered(&log, "INVITE", 200);
    let refused = answered(&log, "INVITE", 503);
    assert!(admitted >= 24, "{admitted} admitted of 240");
    assert!(refused >= 100, "{refused} refused of 240");
    assert!(
        admitted + refused >= 235,
        "{admitted} admitted and {refused} refused of 240"
    );
    // Every refusal says when to come back, and came before any ringing.
    let refusals: Vec<&str> = log
        .split("\n\n")
        .filter(|m| m.contains("SIP/2.0 503 ") && m.contains(" INVITE\r\n"))
        .collect();
    assert!(refusals.iter().all(|m| m.contains("Retry-After: 3")));
    // Every admitted call completed: its BYE was answered, and it is on record as ended.
    let byes = answered(&log, "BYE", 200);
    assert_eq!(byes, admitted, "BYEs answered");
    eventually(
        Duration::from_secs(15),
        "every admitted call ends",
        || async {
            let list = s.app.get("/calls?status=ended&limit=1").await;
            (list.body["pagination"]["total"] == admitted).then_some(())
        },
    )
    .await;
    let all = s.app.get("/calls?limit=1").await;
    assert_eq!(
        all.body["pagination"]["total"], admitted,
        "a refused call left a record"
    );

    // The refusals were counted by reason, and the server is back to no calls.
    let metrics = s.app.metrics().await;
    let refused_counted = refused_for_capacity(&metrics);
    assert!(
        refused_counted >= refused as f64,
        "{refused_counted} counted, {refused} seen"
    );
    assert!(metrics.contains("switchboard_sip_calls 0"), "{metrics}");
}
