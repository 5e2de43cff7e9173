//! Keypad digits on real SIP calls, with neither a chat model nor speech to text: a SIPp
//! caller pressing keys (the RFC 4733 captures Debian's `sip-tester` ships) walks a flow's
//! menu to the right node, a caller's in-band tones are heard as digits, and an outbound
//! flow's digits reach the SIPp callee as events.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use switchboard_sip::audio_codec::{self, CodecType};
use switchboard_sip::dtmf::{Digit, EventReader, tones};

use crate::campaigns::number;
use crate::sip_calls::{SECS, ended_call, endpoint, sip_app_with};
use crate::sip_outbound::{Sipp, ended, new_agent, outbound_app, place, trunk};
use crate::sip_ua::{Ua, media_addr};

/// Where Debian's `sip-tester` keeps its keypad captures.
const CAPTURES: &str = "/usr/share/sip-tester";

/// Press 1 for hours, 2 to book (then a four-digit member number); the menu again otherwise.
fn menu() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/flows/bistro_keypad.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("the keypad menu")).unwrap()
}

/// The service for keypad calls (SIP on loopback, no chat model, no speech to text) with an
/// endpoint whose agent runs the menu; the endpoint's slug.
async fn menu_desk() -> (crate::sip_calls::SipApp, String) {
    let s = sip_app_with(0, 100, None, |c| {
        c.stt = None;
        c.llm = None;
    })
    .await;
    let (_, _, slug) = endpoint(
        &s.app,
        json!({"type": "flow", "flow_config": menu()}),
        json!({}),
    )
    .await;
    (s, slug)
}

/// The call's path (node ids) and the caller's keyed entries, from its detail.
fn path_and_keys(detail: &Value) -> (Vec<String>, Vec<String>) {
    let path = detail["flow_path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["node_id"].as_str().unwrap().to_string())
        .collect();
    let keys = detail["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["role"] == "user")
        .filter_map(|t| t["digits"].as_str().map(str::to_string))
        .collect();
    (path, keys)
}

/// The scenario's key presses: each capture played `gap_ms` after the one before.
fn presses(keys: &[(&str, u32)]) -> String {
    keys.iter()
        .map(|(key, gap_ms)| {
            let capture = Path::new(CAPTURES).join(format!("dtmf_2833_{key}.pcap"));
            assert!(capture.is_file(), "{capture:?} (Debian's sip-tester)");
            format!(
                r#"<pause milliseconds="{gap_ms}"/>
  <nop><action><exec play_pcap_audio="{}"/></action></nop>
"#,
                capture.display()
            )
        })
        .collect()
}

#[tokio::test]
async fn a_sipp_caller_pressing_keys_walks_a_menu_to_the_right_node() {
    let (s, slug) = menu_desk().await;
    // 2 for booking while the menu is said, then the member number 4719.
    let keys = presses(&[("2", 1500), ("4", 2500), ("7", 400), ("1", 400), ("9", 400)]);
    let sipp = Sipp::call("keypad_caller.xml", s.sip, &slug, |_| {
        vec![(
            "<!-- KEYS: the test writes the key presses here -->",
            keys.clone(),
        )]
    })
    .await;
    sipp.passed().await;
    let call = ended_call(&s.app, 1).await;
    let id = call["id"].as_str().unwrap();
    let detail = s.app.get(&format!("/calls/{id}")).await.body;
    assert_eq!(call["end_reason"], "agent_hangup", "{detail}");
    let (path, keyed) = path_and_keys(&detail);
    assert_eq!(path, ["start", "menu", "member", "booked"], "{detail}");
    assert_eq!(keyed, ["2", "4719"], "{detail}");
    let reasons: Vec<&str> = detail["flow_path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons[2], "when: caller.digits equals 2");
    let said: Vec<&str> = detail["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["role"] == "agent")
        .map(|t| t["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        said.last(),
        Some(&"Member 4719, you are booked."),
        "{detail}"
    );
}

/// One key's tone as PCMU frames: `frames` of it, then silence.
fn tone_frames(key: char, frames: u32) -> Vec<Vec<u8>> {
    let digit = Digit::from_char(key).unwrap();
    let mut encoder = audio_codec::create_encoder(CodecType::PCMU);
    (0..frames + 5)
        .map(|i| {
            let mut pcm = [0i16; 160];
            if i < frames {
                tones::tone(digit, i, 8000, &mut pcm);
            }
            let mut bytes = [0u8; 160];
            let n = encoder.encode_into(&pcm, &mut bytes).unwrap_or(0);
            bytes[..n].to_vec()
        })
        .collect()
}

#[tokio::test]
async fn a_caller_s_in_band_tone_is_heard_as_a_digit() {
    let (s, slug) = menu_desk().await;
    // The caller's offer has no telephone-event: their keys come as tones in the audio.
    let mut ua = Ua::new(s.sip, &slug).await;
    ua.invite_with_offer().await;
    let (_, ok) = ua.final_reply("INVITE", SECS).await;
    assert_eq!(ok.code, 200, "{}", ok.text);
    assert!(!ok.body().contains("telephone-event"), "{}", ok.body());
    ua.ack_2xx().await;
    let media = media_addr(ok.body());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for frame in tone_frames('1', 6) {
        ua.send_rtp(media, &frame).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ua.answer_request("BYE", SECS * 3, 200, "OK").await;
    let call = ended_call(&s.app, 1).await;
    let id = call["id"].as_str().unwrap();
    let detail = s.app.get(&format!("/calls/{id}")).await.body;
    let (path, keyed) = path_and_keys(&detail);
    assert_eq!(path, ["start", "menu", "hours"], "{detail}");
    assert_eq!(keyed, ["1"], "{detail}");
}

#[tokio::test]
async fn an_outbound_flow_s_digits_reach_the_sipp_callee_as_events() {
    // The callee's audio address is a socket of the test: what the service sends it is read.
    let media = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let port = media.local_addr().unwrap().port();
    let sipp = Sipp::start_with("answer_keypad.xml", 1, &[], move |_| {
        vec![("MEDIA_PORT", port.to_string())]
    })
    .await;
    let app = outbound_app(trunk(vec![sipp.gateway(0)])).await;
    let agent = new_agent(
        &app,
        json!({"name": "Menu walker", "type": "flow", "max_call_duration_secs": 20,
        "answering_machine_detection": {"enabled": false},
        "flow_config": {"flow_config_version": 1, "nodes": [
            {"id": "start", "type": "start", "greeting": "Hello.", "is_literal": true,
             "next_step_id": "billing", "auto_advance": true},
            {"id": "billing", "type": "conversation", "send_digits": "2#",
             "next_step_id": "bye", "auto_advance": true},
            {"id": "bye", "type": "end", "greeting": "Thank you.", "is_literal": true}
        ]}}),
    )
    .await;
    let from = number(&app, "+972501230000", "active").await;
    let id = place(&app, &agent, &from, "+972541234567", json!({})).await;
    // Read what reaches the callee until the call ends.
    let mut reader = EventReader::default();
    let mut keys = String::new();
    let mut events = 0;
    let mut buf = [0u8; 1500];
    let until = tokio::time::Instant::now() + Duration::from_secs(15);
    while let Ok(Ok((n, _))) = tokio::time::timeout_at(until, media.recv_from(&mut buf)).await {
        if n > 12 && buf[1] & 0x7f == 101 {
            events += 1;
            let timestamp = u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]);
            keys.extend(reader.read(timestamp, &buf[12..n]).map(|d| d.as_char()));
        }
        if keys.len() == 2 && events >= 14 {
            break;
        }
    }
    assert_eq!(keys, "2#", "{events} event packets");
    let call = ended(&app, &id, Duration::from_secs(20), Some(&sipp)).await;
    assert_eq!(call["end_reason"], "agent_hangup", "{call}");
    sipp.passed().await;
    let detail = app.get(&format!("/calls/{id}")).await.body;
    let sent: Vec<&str> = detail["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["role"] == "agent")
        .filter_map(|t| t["digits"].as_str())
        .collect();
    assert_eq!(sent, ["2#"], "{detail}");
}
