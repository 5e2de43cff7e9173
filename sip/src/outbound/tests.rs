//! The dialer's pure parts: headers read, session timers, URIs.

use rsipstack::sip as rsip;

use super::attempt::q850_cause;
use super::resolve::{host_port, uri, uri_user};
use super::session_timer::{SessionTimer, expiry_margin, session_timer};
use super::*;

fn response(headers: &[(&str, &str)]) -> rsip::Response {
    let mut text = String::from(
        "SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bK1\r\nFrom: <sip:a@b>;tag=1\r\nTo: <sip:c@d>;tag=2\r\nCall-ID: x\r\nCSeq: 1 INVITE\r\n",
    );
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("Content-Length: 0\r\n\r\n");
    rsip::Response::try_from(text.as_str()).expect("a valid response")
}

#[test]
fn q850_causes_are_read_from_reason() {
    let r = response(&[("Reason", "Q.850;cause=17;text=\"User busy\"")]);
    assert_eq!(q850_cause(&r), Some(17));
    let r = response(&[("Reason", "SIP;cause=486, Q.850;cause=34")]);
    assert_eq!(q850_cause(&r), Some(34));
    assert_eq!(q850_cause(&response(&[])), None);
}

#[test]
fn session_timers_name_the_refresher() {
    let t = session_timer(&response(&[
        ("Session-Expires", "90;refresher=uac"),
        ("Allow", "INVITE, ACK, BYE, UPDATE"),
    ]));
    assert_eq!(
        t,
        Some(SessionTimer {
            interval: Duration::from_secs(90),
            we_refresh: true,
            use_update: true
        })
    );
    let t = session_timer(&response(&[("Session-Expires", "1800;refresher=uas")]));
    assert_eq!(
        t.map(|t| (t.we_refresh, t.use_update)),
        Some((false, false))
    );
    assert_eq!(session_timer(&response(&[])), None);
    assert_eq!(
        expiry_margin(Duration::from_secs(90)),
        Duration::from_secs(60)
    );
    assert_eq!(
        expiry_margin(Duration::from_secs(1800)),
        Duration::from_secs(1768)
    );
}

#[test]
fn tech_prefixes_are_escaped_in_uris() {
    assert_eq!(uri_user("1234#972501234567"), "1234%23972501234567");
    assert_eq!(host_port("2001:db8::1", Some(5060)), "[2001:db8::1]:5060");
    assert!(uri("sip:1234%23972501234567@gw.example.net").is_ok());
}
