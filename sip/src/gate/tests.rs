//! The gate on raw datagrams: what passes, what is refused and how, what is dropped.

use super::parse::split_host_port;
use super::*;
use crate::admission::AdmissionSettings;

const INVITE: &str = "INVITE sip:sales@127.0.0.1:5060 SIP/2.0\r\n\
    Via: SIP/2.0/UDP 10.0.0.9:5070;branch=z9hG4bK-1;rport\r\n\
    v: SIP/2.0/UDP 10.0.0.8;branch=z9hG4bK-0\r\n\
    Max-Forwards: 70\r\n\
    From: \"Ann\" <sip:ann@example.com>;tag=abc\r\n\
    To: <sip:sales@127.0.0.1>\r\n\
    Call-ID: c1@host\r\n\
    CSeq: 1 INVITE\r\n\
    Content-Length: 0\r\n\r\n";

fn source() -> SocketAddr {
    "127.0.0.1:5070".parse().unwrap()
}

async fn gate(max_calls: usize) -> Gate {
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let admission = Admission::new(AdmissionSettings {
        max_calls,
        outbound_reserve: 0,
        ..AdmissionSettings::default()
    });
    let limiter = Arc::new(RateLimiter::new(3));
    Gate::new(
        socket,
        admission,
        limiter,
        Arc::default(),
        Duration::from_millis(500),
        "Switchboard",
    )
}

fn answer(v: Verdict) -> (String, SocketAddr) {
    match v {
        Verdict::Answer((bytes, to)) => (String::from_utf8(bytes).unwrap(), to),
        Verdict::Pass => panic!("passed"),
        Verdict::Drop => panic!("dropped"),
    }
}

#[tokio::test]
async fn an_invite_with_room_passes_and_its_admission_is_decided() {
    let mut g = gate(10).await;
    assert!(!g.passed("c1@host", "z9hG4bK-1"));
    assert!(matches!(
        g.decide(INVITE.as_bytes(), source()),
        Verdict::Pass
    ));
    assert!(g.passed("c1@host", "z9hG4bK-1"));
    assert!(!g.passed("c1@host", "z9hG4bK-2"));
    // As the server asks, from the parsed request (its top Via rewritten on receipt).
    let parsed = rsipstack::sip::SipMessage::try_from(INVITE.as_bytes()).unwrap();
    let rsipstack::sip::SipMessage::Request(req) = parsed else {
        panic!("not a request");
    };
    assert!(g.passed_request(&req));
    // Its retransmission passes too, even once the node is full.
    g.admission = Admission::new(AdmissionSettings {
        max_calls: 0,
        ..AdmissionSettings::default()
    });
    assert!(matches!(
        g.decide(INVITE.as_bytes(), source()),
        Verdict::Pass
    ));
    assert_eq!(g.admission.stats().refused, [0; 5]);
}

#[tokio::test]
async fn a_poisoned_lock_refuses_the_invite_and_the_next_is_decided_afresh() {
    let g = gate(10).await;
    crate::admission::poison(&g.seen);
    let (refused, _) = answer(g.decide(INVITE.as_bytes(), source()));
    assert!(refused.starts_with("SIP/2.0 503 "), "{refused}");
    assert_eq!(g.admission.stats().refused, [0, 0, 0, 0, 1]);
    assert!(!g.passed("c1@host", "z9hG4bK-1"));
    // The same for the rate's lock.
    crate::admission::poison(&g.limiter.window);
    let other = INVITE.replace("z9hG4bK-1", "z9hG4bK-7");
    let (refused, _) = answer(g.decide(other.as_bytes(), source()));
    assert!(refused.starts_with("SIP/2.0 503 "), "{refused}");
    assert_eq!(g.admission.stats().refused, [0, 0, 0, 0, 2]);
    // Both locks were cleared: the next INVITE passes.
    let third = INVITE.replace("z9hG4bK-1", "z9hG4bK-8");
    assert!(matches!(
        g.decide(third.as_bytes(), source()),
        Verdict::Pass
    ));
}

#[tokio::test]
async fn a_refused_invite_gets_a_stateless_503() {
    let g = gate(0).await;
    let (first, to) = answer(g.decide(INVITE.as_bytes(), source()));
    assert_eq!(to, source(), "rport: back to the source");
    assert!(
        first.starts_with("SIP/2.0 503 Service Unavailable\r\n"),
        "{first}"
    );
    assert!(
        first.contains(
            "Via: SIP/2.0/UDP 10.0.0.9:5070;branch=z9hG4bK-1;rport=5070;received=127.0.0.1\r\n"
        ),
        "{first}"
    );
    assert!(first.contains("v: SIP/2.0/UDP 10.0.0.8;branch=z9hG4bK-0\r\n"));
    assert!(first.contains("From: \"Ann\" <sip:ann@example.com>;tag=abc\r\n"));
    assert!(first.contains("To: <sip:sales@127.0.0.1>;tag=sb"));
    assert!(first.contains("Call-ID: c1@host\r\nCSeq: 1 INVITE\r\nRetry-After: 2\r\n"));
    assert!(first.ends_with("Content-Length: 0\r\n\r\n"));
    assert_eq!(g.admission.stats().refused, [1, 0, 0, 0, 0]);
    assert!(!g.passed("c1@host", "z9hG4bK-1"));
    // The full parser reads it as a response to the INVITE.
    let parsed = rsipstack::sip::SipMessage::try_from(first.as_bytes()).unwrap();
    assert!(matches!(parsed, rsipstack::sip::SipMessage::Response(_)));

    // A retransmission: the same answer, counted once.
    let (again, _) = answer(g.decide(INVITE.as_bytes(), source()));
    assert_eq!(again, first);
    assert_eq!(g.admission.stats().refused, [1, 0, 0, 0, 0]);

    // Its ACK carries our tag and stops here.
    let tag = first
        .split("tag=sb")
        .nth(1)
        .unwrap()
        .split("\r\n")
        .next()
        .unwrap();
    let ack = INVITE
        .replacen("INVITE sip", "ACK sip", 1)
        .replace("CSeq: 1 INVITE", "CSeq: 1 ACK")
        .replace(
            "To: <sip:sales@127.0.0.1>",
            &format!("To: <sip:sales@127.0.0.1>;tag=sb{tag}"),
        );
    assert!(matches!(g.decide(ack.as_bytes(), source()), Verdict::Drop));
    // An ACK of someone else's dialog passes.
    let other = ack.replace(";tag=sb", ";tag=other");
    assert!(matches!(
        g.decide(other.as_bytes(), source()),
        Verdict::Pass
    ));
}

#[tokio::test]
async fn a_retransmission_of_a_refused_invite_stays_refused_when_room_appears() {
    let mut g = gate(0).await;
    let _ = answer(g.decide(INVITE.as_bytes(), source()));
    g.admission = Admission::new(AdmissionSettings::default());
    let _ = answer(g.decide(INVITE.as_bytes(), source()));
    // A new transaction (new branch) is admitted.
    let new = INVITE.replace("z9hG4bK-1", "z9hG4bK-2");
    assert!(matches!(g.decide(new.as_bytes(), source()), Verdict::Pass));
}

#[tokio::test]
async fn past_the_source_rate_an_invite_is_dropped_and_forgotten() {
    let g = gate(10).await;
    for n in 0..3 {
        let invite = INVITE.replace("z9hG4bK-1", &format!("z9hG4bK-{n}"));
        assert!(matches!(
            g.decide(invite.as_bytes(), source()),
            Verdict::Pass
        ));
    }
    let invite = INVITE.replace("z9hG4bK-1", "z9hG4bK-9");
    assert!(matches!(
        g.decide(invite.as_bytes(), source()),
        Verdict::Drop
    ));
    assert!(!g.passed("c1@host", "z9hG4bK-9"));
    // Another source has its own count.
    let other: SocketAddr = "127.0.0.2:5070".parse().unwrap();
    assert!(matches!(g.decide(invite.as_bytes(), other), Verdict::Pass));
}

#[tokio::test]
async fn without_rport_the_answer_goes_to_the_sent_by_port() {
    let g = gate(0).await;
    let invite = INVITE.replace(";rport", "");
    let (resp, to) = answer(g.decide(invite.as_bytes(), "127.0.0.1:40000".parse().unwrap()));
    assert_eq!(to, "127.0.0.1:5070".parse().unwrap());
    assert!(
        resp.contains("branch=z9hG4bK-1;received=127.0.0.1\r\n"),
        "{resp}"
    );
}

#[tokio::test]
async fn what_the_gate_cannot_read_passes_to_the_full_parser() {
    let g = gate(0).await;
    let cases = [
        // In-dialog re-INVITE.
        INVITE.replace(
            "To: <sip:sales@127.0.0.1>",
            "To: <sip:sales@127.0.0.1>;tag=x",
        ),
        // Folded header.
        INVITE.replace("Call-ID: c1@host\r\n", "Call-ID:\r\n c1@host\r\n"),
        // No branch, no From tag, no Call-ID, two Call-IDs.
        INVITE.replace(";branch=z9hG4bK-1", ""),
        INVITE.replace(";tag=abc", ""),
        INVITE.replace("Call-ID: c1@host\r\n", ""),
        INVITE.replace("Call-ID: c1@host\r\n", "Call-ID: a\r\ni: b\r\n"),
        // CSeq of another method, a request line of another version, no end of headers.
        INVITE.replace("1 INVITE", "1 BYE"),
        INVITE.replace("SIP/2.0\r\nVia", "SIP/3.0\r\nVia"),
        INVITE.trim_end().to_string(),
        "OPTIONS sip:x SIP/2.0\r\n\r\n".to_string(),
        String::new(),
    ];
    for case in cases {
        assert!(
            matches!(g.decide(case.as_bytes(), source()), Verdict::Pass),
            "{case:?}"
        );
    }
    assert_eq!(g.admission.stats().refused, [0; 5]);
}

#[test]
fn ipv6_sent_by() {
    assert_eq!(split_host_port(b"[::1]:5070"), (&b"[::1]"[..], Some(5070)));
    assert_eq!(split_host_port(b"[::1]"), (&b"[::1]"[..], None));
    assert_eq!(split_host_port(b"host"), (&b"host"[..], None));
    let (via, to) = top_via(
        b"SIP/2.0/UDP [::1]:5070;branch=z9hG4bK-1",
        "[::1]:5070".parse().unwrap(),
    );
    assert_eq!(via, b"SIP/2.0/UDP [::1]:5070;branch=z9hG4bK-1");
    assert_eq!(to, "[::1]:5070".parse().unwrap());
}
