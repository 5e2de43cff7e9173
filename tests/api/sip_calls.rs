//! Inbound SIP calls end to end: real SIP over UDP, TCP and TLS on loopback to the real
//! service, with the hand-driven user agent of `sip_ua` as the caller. Recordings are in
//! `sip_recordings`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchboard_sip::server::{SipSettings, SipSockets};

use crate::helpers::{TestApp, eventually, spawn_app_on};
use crate::sip_ua::{Ua, media_addr, offer, tcp_request};

pub const SECS: Duration = Duration::from_secs(5);

pub struct SipApp {
    pub app: TestApp,
    pub sip: SocketAddr,
    /// SIP over TLS, when configured.
    tls_addr: Option<SocketAddr>,
}

pub async fn sip_app(ring_ms: u64, invites_per_second: u32) -> SipApp {
    sip_app_with(ring_ms, invites_per_second, None, |_| {}).await
}

/// A service with its SIP server on loopback (over TLS too with `tls`), then `configure`d.
pub async fn sip_app_with(
    ring_ms: u64,
    invites_per_second: u32,
    tls: Option<switchboard_sip::server::TlsSettings>,
    configure: impl FnOnce(&mut switchboard::Config),
) -> SipApp {
    let loopback: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let sockets = SipSockets::bind(loopback, tls.is_some().then_some(loopback))
        .await
        .expect("SIP sockets bind");
    let sip = sockets.udp.local_addr().unwrap();
    let tls_addr = sockets.tls.as_ref().map(|l| l.local_addr().unwrap());
    let app = spawn_app_on(Some(sockets), |c| {
        c.sip = Some(SipSettings {
            tls,
            rtp_ports: (40_000, 49_999),
            ring: Duration::from_millis(ring_ms),
            t1: Duration::from_millis(50),
            invites_per_second,
            // Tests share a busy machine: the runtime's lateness says little about a server.
            admission: switchboard_sip::admission::AdmissionSettings {
                max_lag: Duration::from_secs(5),
                ..Default::default()
            },
            ..SipSettings::default()
        });
        c.sip_host = "sip.test".into();
        c.tts = switchboard::config::Tts::Tones;
        configure(c);
    })
    .await;
    SipApp { app, sip, tls_addr }
}

/// An agent and an endpoint answering with it; returns (agent id, endpoint id, slug).
pub async fn endpoint(app: &TestApp, agent: Value, endpoint: Value) -> (String, String, String) {
    let mut body = json!({"name": "Desk", "greeting_message": "Hello, you have reached the front desk.",
        "max_call_duration_secs": 60, "silence_timeout_secs": 30});
    for (k, v) in agent.as_object().unwrap() {
        body[k] = v.clone();
    }
    let a = app.post("/agents", body).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.text);
    let agent_id = a.body["id"].as_str().unwrap().to_string();
    let mut body = json!({"name": "desk", "inbound_agent_id": agent_id});
    for (k, v) in endpoint.as_object().unwrap() {
        body[k] = v.clone();
    }
    let e = app.post("/sip-endpoints", body).await;
    assert_eq!(e.status, StatusCode::CREATED, "{}", e.text);
    let d = &e.body["data"];
    (
        agent_id,
        d["id"].as_str().unwrap().to_string(),
        d["slug"].as_str().unwrap().to_string(),
    )
}

/// Calls `slug`, acknowledges the answer, and waits for the agent's BYE.
pub async fn call_until_the_agent_hangs_up(sip: SocketAddr, slug: &str) {
    let mut ua = Ua::new(sip, slug).await;
    ua.invite_with_offer().await;
    let (_, r) = ua.final_reply("INVITE", SECS).await;
    assert_eq!(r.code, 200);
    ua.ack_2xx().await;
    ua.expect_request("BYE", SECS).await;
}

/// Waits until the workspace has `n` ended calls and returns the newest.
pub async fn ended_call(app: &TestApp, n: usize) -> Value {
    eventually(Duration::from_secs(10), "the call ends", || async move {
        let list = app.get("/calls?status=ended").await;
        let calls = list.body["data"].as_array().unwrap();
        (calls.len() >= n).then(|| calls[0].clone())
    })
    .await
}

#[tokio::test]
async fn unknown_deleted_and_inactive_slugs_all_get_the_same_404() {
    let s = sip_app(0, 100).await;
    let (_, id, slug) = endpoint(&s.app, json!({}), json!({})).await;
    let (_, inactive_id, inactive) = endpoint(&s.app, json!({}), json!({})).await;
    let r = s
        .app
        .patch(
            &format!("/sip-endpoints/{inactive_id}"),
            json!({"is_active": false}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let deleted = s.app.delete(&format!("/sip-endpoints/{id}")).await;
    assert!(deleted.status.is_success(), "{}", deleted.text);

    let mut shapes = Vec::new();
    for target in [
        slug.as_str(),
        inactive.as_str(),
        "desk-nosuchendpoint0000000000",
        "x",
    ] {
        let mut ua = Ua::new(s.sip, target).await;
        ua.invite_with_offer().await;
        let (provisional, r) = ua.final_reply("INVITE", SECS).await;
        assert_eq!(r.code, 404, "{target}: {}", r.text);
        // Every INVITE taken gets 100 Trying at once, before its slug is looked up: the
        // answers still look the same whatever the reason.
        assert_eq!(provisional, [100], "{target}");
        ua.ack_error().await;
        shapes.push(r.shape());
    }
    assert!(shapes.windows(2).all(|w| w[0] == w[1]), "{shapes:?}");
    // Over TCP too.
    let ua = Ua::new(s.sip, "desk-nosuchendpoint0000000000").await;
    let text = ua
        .invite_text(&offer(ua.media_port(), &[(0, "PCMU/8000")]))
        .replace("SIP/2.0/UDP", "SIP/2.0/TCP");
    let r = tcp_request(s.sip, &text).await.expect("a TCP answer");
    assert_eq!(r.code, 404, "{}", r.text);
}

#[tokio::test]
async fn sip_over_tls_is_served_with_the_configured_certificate() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};

    // A test CA and a certificate it signs for localhost / 127.0.0.1.
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name);
    std::fs::write(
        p("leaf.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    let openssl = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .current_dir(dir.path())
            .args(args)
            .output()
            .expect("openssl is installed");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=Test CA",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=localhost",
        "-keyout",
        "key.pem",
        "-out",
        "leaf.csr",
    ]);
    openssl(&[
        "x509",
        "-req",
        "-in",
        "leaf.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        "leaf.ext",
        "-out",
        "cert.pem",
    ]);
    let (cert, key, ca) = (p("cert.pem"), p("key.pem"), p("ca.pem"));
    let s = sip_app_with(
        0,
        100,
        Some(switchboard_sip::server::TlsSettings {
            cert_pem: std::fs::read(&cert).unwrap(),
            key_pem: std::fs::read(&key).unwrap(),
        }),
        |_| {},
    )
    .await;
    let tls_addr = s.tls_addr.expect("TLS listens");
    let (_, _, slug) = endpoint(&s.app, json!({}), json!({})).await;

    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(&ca).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let ask = |target: String| {
        let connector = connector.clone();
        async move {
            let tcp = tokio::net::TcpStream::connect(tls_addr).await.unwrap();
            let mut stream = connector
                .connect(ServerName::try_from("localhost").unwrap(), tcp)
                .await
                .expect("TLS handshake with the configured certificate");
            let ua = Ua::new(s.sip, &target).await;
            let text = ua
                .invite_text(&offer(40_000, &[(0, "PCMU/8000")]))
                .replace("SIP/2.0/UDP", "SIP/2.0/TLS");
            stream.write_all(text.as_bytes()).await.unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                let n = tokio::time::timeout(SECS, stream.read(&mut buf))
                    .await
                    .expect("an answer over TLS")
                    .unwrap();
                assert!(n > 0, "the server closed the connection");
                got.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&got).to_string();
                let finals: Vec<u16> = text
                    .split("SIP/2.0 ")
                    .skip(1)
                    .filter_map(|m| m.get(..3)?.parse().ok())
                    .filter(|c| *c >= 200)
                    .collect();
                if let Some(code) = finals.first() {
                    return *code;
                }
            }
        }
    };
    assert_eq!(ask("desk-nosuchendpoint0000000000".into()).await, 404);
    assert_eq!(ask(slug).await, 200);
}

#[tokio::test]
async fn sources_outside_the_allow_list_get_403_before_any_ringing() {
    let s = sip_app(0, 100).await;
    let (_, _, slug) = endpoint(
        &s.app,
        json!({}),
        json!({"allowed_source_ips": ["10.0.0.0/8"]}),
    )
    .await;
    let mut ua = Ua::new(s.sip, &slug).await;
    ua.invite_with_offer().await;
    let (provisional, r) = ua.final_reply("INVITE", SECS).await;
    assert_eq!(r.code, 403, "{}", r.text);
    assert_eq!(provisional, [100]);
    ua.ack_error().await;

    let (_, _, open) = endpoint(
        &s.app,
        json!({}),
        json!({"allowed_source_ips": ["127.0.0.0/8"]}),
    )
    .await;
    let mut ua = Ua::new(s.sip, &open).await;
    ua.invite_with_offer().await;
    let (provisional, r) = ua.final_reply("INVITE", SECS).await;
    assert_eq!(r.code, 200, "{}", r.text);
    assert!(provisional.contains(&180), "{provisional:?}");
    ua.ack_2xx().await;
    ua.bye().await;
    let (_, r) = ua.final_reply("BYE", SECS).await;
    assert_eq!(r.code, 200);
}

#[tokio::test]
async fn an_offer_without_a_common_codec_gets_488_and_the_answer_follows_the_offer_order() {
    let s = sip_app(0, 100).await;
    let (_, _, slug) = endpoint(&s.app, json!({}), json!({})).await;
    let mut ua = Ua::new(s.sip, &slug).await;
    ua.invite(&offer(
        ua.media_port(),
        &[(18, "G729/8000"), (96, "opus/48000/2")],
    ))
    .await;
    let (_, r) = ua.final_reply("INVITE", SECS).await;
    assert_eq!(r.code, 488, "{}", r.text);
    ua.ack_error().await;

    for (offered, expected) in [
        (vec![(8, "PCMA/8000"), (0, "PCMU/8000")], "8 PCMA/8000"),
        (vec![(9, "G722/8000"), (0, "PCMU/8000")], "9 G722/8000"),
    ] {
        let mut ua = Ua::new(s.sip, &slug).await;
        ua.invite(&offer(ua.media_port(), &offered)).await;
        let (_, r) = ua.final_reply("INVITE", SECS).await;
        assert_eq!(r.code, 200, "{}", r.text);
        assert_eq!(r.header("Content-Type").as_deref(), Some("application/sdp"));
        assert!(
            r.body().contains(&format!("a=rtpmap:{expected}")),
            "{}",
            r.body()
        );
        ua.ack_2xx().await;
        ua.bye().await;
        let (_, bye) = ua.final_reply("BYE", SECS).await;
        assert_eq!(bye.code, 200);
    }
    let call = ended_call(&s.app, 2).await;
    assert_eq!(call["codec"], "g722");
}

#[tokio::test]
async fn a_caller_may_cancel_while_it_rings() {
    let s = sip_app(1500, 100).await;
    let (_, _, slug) = endpoint(&s.app, json!({}), json!({})).await;
    let mut ua = Ua::new(s.sip, &slug).await;
    ua.invite_with_offer().await;
    loop {
        let r = ua.reply(SECS).await.expect("ringing");
        if r.code == 180 {
            break;
        }
    }
    ua.cancel().await;
    let mut got = Vec::new();
    while got.len() < 2 {
        let r = ua.reply(SECS).await.expect("answers to CANCEL");
        if r.code >= 200 {
            got.push((r.cseq_method(), r.code));
        }
    }
    got.sort();
    assert_eq!(got, vec![("CANCEL".into(), 200), ("INVITE".into(), 487)]);
    ua.ack_error().await;
    // Nothing was answered (487 is final), so nothing was recorded as a call: a call's row is
    // written only after its 200.
    assert_eq!(s.app.get("/calls").await.body["data"], json!([]));
}

#[tokio::test]
async fn a_reinvite_keeps_the_codec_and_moves_the_media() {
    let s = sip_app(0, 100).await;
    let (_, _, slug) = endpoint(&s.app, json!({"agent_speaks_first": false}), json!({})).await;
    let mut ua = Ua::new(s.sip, &slug).await;
    ua.invite(&offer(ua.media_port(), &[(8, "PCMA/8000")]))
        .await;
    let (_, r) = ua.final_reply("INVITE", SECS).await;
    assert_eq!(r.code, 200);
    let first_answer = r.body().to_string();
    ua.ack_2xx().await;
    // Let any retransmission of the first 200 pass before the re-INVITE.
    while ua.reply(Duration::from_millis(300)).await.is_some() {}
    // The caller moves its media to a new socket and offers PCMU first this time.
    let moved = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let port = moved.local_addr().unwrap().port();
    ua.reinvite(&offer(port, &[(0, "PCMU/8000"), (8, "PCMA/8000")]))
        .await;
    let (_, r) = ua.final_reply("INVITE", SECS).await;
    assert_eq!(r.code, 200, "{}", r.text);
    assert!(r.body().contains("a=rtpmap:8 PCMA/8000"), "{}", r.body());
    assert_eq!(media_addr(r.body()), media_addr(&first_answer));
    ua.ack_reinvite().await;
    let mut buf = [0u8; 1500];
    let (n, _) = tokio::time::timeout(SECS, moved.recv_from(&mut buf))
        .await
        .expect("media at the new address")
        .unwrap();
    assert_eq!(buf[1] & 0x7f, 8, "still PCMA");
    assert_eq!(n, 12 + 160);
    // An offer without the call's codec is refused, and the call goes on.
    ua.reinvite(&offer(port, &[(9, "G722/8000")])).await;
    let (_, r) = ua.final_reply("INVITE", SECS).await;
    assert_eq!(r.code, 488, "{}", r.text);
    ua.bye().await;
    assert_eq!(ua.final_reply("BYE", SECS).await.1.code, 200);
}

#[tokio::test]
async fn a_finished_call_is_answered_again_until_the_transaction_expiry_and_then_let_go() {
    // RFC 3261's T1, with which the transaction layer would otherwise wait 32 x T1 (16 s).
    let s = sip_app_with(0, 100, None, |c| {
        if let Some(sip) = c.sip.as_mut() {
            sip.t1 = Duration::from_millis(500);
            sip.transaction_expiry = Some(Duration::from_secs(2));
        }
    })
    .await;
    let (_, _, slug) = endpoint(&s.app, json!({"agent_speaks_first": false}), json!({})).await;
    let mut ua = Ua::new(s.sip, &slug).await;
    let invite = ua.invite_text(&offer(ua.media_port(), &[(0, "PCMU/8000")]));
    ua.send_raw(invite.as_bytes()).await;
    let (_, r) = ua.final_reply("INVITE", SECS).await;
    assert_eq!(r.code, 200);
    ua.ack_2xx().await;
    while ua.reply(Duration::from_millis(300)).await.is_some() {}
    let bye = ua.bye_text("z9hG4bKbye1");
    ua.send_raw(bye.as_bytes()).await;
    assert_eq!(ua.final_reply("BYE", SECS).await.1.code, 200);

    // Retransmissions of the INVITE and of the BYE get their answers again.
    ua.send_raw(invite.as_bytes()).await;
    let (_, again) = ua.final_reply("INVITE", SECS).await;
    assert_eq!(again.code, 200);
    assert_eq!(again.body(), r.body(), "the same answer");
    ua.send_raw(bye.as_bytes()).await;
    assert_eq!(ua.final_reply("BYE", SECS).await.1.code, 200);
    ended_call(&s.app, 1).await;

    // At the expiry the transaction layer lets go of both: no answer kept, no timer armed.
    eventually(
        Duration::from_secs(6),
        "the transactions let go of",
        || async {
            let text = s.app.metrics().await;
            (text.contains("switchboard_sip_transaction_timers 0\n")
                && text.contains("switchboard_sip_transactions{table=\"finished\"} 0\n"))
            .then_some(())
        },
    )
    .await;
    // The call's media ran on the media workers, which carry nothing once it is over.
    let (streams, text) = s.app.metric_values("switchboard_media_streams").await;
    assert!(
        !streams.is_empty() && streams.iter().all(|n| *n == 0.0),
        "{text}"
    );
    let (passes, text) = s
        .app
        .metric_values("switchboard_media_frame_lag_seconds_count")
        .await;
    assert!(passes.iter().sum::<f64>() > 10.0, "{text}");
}

#[tokio::test]
async fn the_agent_hangs_up_on_silence_and_without_an_ack() {
    let s = sip_app(0, 100).await;
    let (_, _, slug) = endpoint(
        &s.app,
        json!({"silence_timeout_secs": 1, "agent_speaks_first": false}),
        json!({}),
    )
    .await;
    call_until_the_agent_hangs_up(s.sip, &slug).await;
    let call = ended_call(&s.app, 1).await;
    assert_eq!(call["end_reason"], "silence_timeout");

    // No ACK for the 200: after the transaction expiry (32 x T1, 1.6 s here) the service gives
    // up with a BYE.
    let (_, _, patient) = endpoint(
        &s.app,
        json!({"silence_timeout_secs": 60, "agent_speaks_first": false}),
        json!({}),
    )
    .await;
    let mut ua = Ua::new(s.sip, &patient).await;
    ua.invite_with_offer().await;
    let (_, r) = ua.final_reply("INVITE", SECS).await;
    assert_eq!(r.code, 200);
    ua.expect_request("BYE", Duration::from_secs(10)).await;
    let call = ended_call(&s.app, 2).await;
    assert_eq!(call["end_reason"], "ack_timeout");
}

#[tokio::test]
async fn malformed_input_and_floods_never_stop_valid_calls() {
    let s = sip_app(0, 10).await;
    let (_, _, slug) = endpoint(&s.app, json!({}), json!({})).await;
    let ua = Ua::new(s.sip, &slug).await;
    // Garbage, an oversized datagram, requests missing mandatory headers, a broken SDP.
    ua.send_raw(b"\x00\xff\xfe garbage \r\n\r\n").await;
    ua.send_raw(&vec![b'A'; 60_000]).await;
    let full = ua.invite_text(&offer(ua.media_port(), &[(0, "PCMU/8000")]));
    for header in ["Call-ID", "CSeq", "From", "Via", "Contact"] {
        let broken: String = full
            .split("\r\n")
            .filter(|l| !l.starts_with(&format!("{header}:")))
            .collect::<Vec<_>>()
            .join("\r\n");
        ua.send_raw(broken.as_bytes()).await;
    }
    let mut bad_sdp = Ua::new(s.sip, &slug).await;
    bad_sdp
        .invite("v=0\r\nm=audio notaport RTP/AVP 0\r\n")
        .await;
    let (_, r) = bad_sdp.final_reply("INVITE", SECS).await;
    assert_eq!(r.code, 400, "{}", r.text);
    bad_sdp.ack_error().await;

    // A flood from one source over UDP: past 10 INVITEs a second they go unanswered (nothing
    // reflected, nothing for a scanner to tell apart).
    let mut flood = Ua::from_ip(s.sip, "desk-flood000000000000000000", "127.0.0.2").await;
    for i in 0..30 {
        flood.branch = format!("z9hG4bKflood{i}");
        flood.call_id = format!("flood{i}@test");
        flood.invite_with_offer().await;
    }
    let mut codes = Vec::new();
    while let Some(r) = flood.reply(Duration::from_millis(500)).await {
        if r.code >= 200 {
            codes.push(r.code);
        }
    }
    assert!(codes.iter().all(|c| *c == 404), "{codes:?}");
    assert!((5..=12).contains(&codes.len()), "{codes:?}");

    // Another source still gets through, and OPTIONS is answered.
    let mut ok = Ua::new(s.sip, &slug).await;
    ok.invite_with_offer().await;
    let (_, r) = ok.final_reply("INVITE", SECS).await;
    assert_eq!(r.code, 200, "{}", r.text);
    ok.ack_2xx().await;
    ok.bye().await;
    assert_eq!(ok.final_reply("BYE", SECS).await.1.code, 200);
    ok.send_raw(ok.options_text().as_bytes()).await;
    assert_eq!(ok.final_reply("OPTIONS", SECS).await.1.code, 200);
}

/// Two inbound calls at once; one fails inside (a panic once answered). It ends as
/// interrupted, its dialog gets a BYE, and the other runs to its normal end.
#[tokio::test]
async fn an_inbound_call_that_fails_inside_ends_interrupted_and_disturbs_no_other() {
    std::panic::set_hook(Box::new(|info| eprintln!("{info}")));
    let faulty = Arc::new(std::sync::Mutex::new(String::new()));
    let picks = faulty.clone();
    let fault: switchboard_actors::inbound::InboundFault = Arc::new(move |plan, _| {
        let slug = picks.lock().unwrap().clone();
        !slug.is_empty() && plan.sip_uri.starts_with(&format!("sip:{slug}@"))
    });
    let s = sip_app_with(0, 100, None, |c| {
        c.inbound_fault = Some(switchboard::config::InboundFaultHook(fault));
    })
    .await;
    let quiet = json!({"silence_timeout_secs": 2, "agent_speaks_first": false});
    let (_, _, failing) = endpoint(&s.app, quiet.clone(), json!({})).await;
    let (_, _, fine) = endpoint(&s.app, quiet, json!({})).await;
    *faulty.lock().unwrap() = failing.clone();
    tokio::join!(
        call_until_the_agent_hangs_up(s.sip, &failing),
        call_until_the_agent_hangs_up(s.sip, &fine)
    );
    let list = eventually(Duration::from_secs(10), "both calls end", || async {
        let list = s.app.get("/calls?status=ended").await;
        let calls = list.body["data"].as_array().unwrap().clone();
        (calls.len() == 2).then_some(calls)
    })
    .await;
    let mut reasons: Vec<&str> = list
        .iter()
        .map(|c| c["end_reason"].as_str().unwrap())
        .collect();
    reasons.sort();
    assert_eq!(reasons, ["interrupted", "silence_timeout"], "{list:?}");
}
