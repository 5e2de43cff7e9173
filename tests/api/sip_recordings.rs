//! Recordings of inbound SIP calls: the stereo WAV (caller left, agent right) of a call from
//! the hand-driven user agent and from baresip (Debian's package), fetched over HTTP through
//! signed, expiring links.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, eventually};
use crate::sip_calls::{SECS, ended_call, endpoint, sip_app};
use crate::sip_ua::{Ua, media_addr};

#[tokio::test]
async fn the_caller_hangs_up_and_the_call_is_recorded_with_its_audio() {
    let s = sip_app(0, 100).await;
    let (agent_id, endpoint_id, slug) = endpoint(&s.app, json!({}), json!({})).await;
    let mut ua = Ua::new(s.sip, &slug).await;
    ua.invite_with_offer().await;
    let (_, r) = ua.final_reply("INVITE", SECS).await;
    assert_eq!(r.code, 200, "{}", r.text);
    ua.ack_2xx().await;
    // One second of a loud square wave, then BYE.
    ua.stream_tone(media_addr(r.body()), 50).await;
    ua.bye().await;
    let (_, bye) = ua.final_reply("BYE", SECS).await;
    assert_eq!(bye.code, 200);

    let call = ended_call(&s.app, 1).await;
    assert_eq!(call["direction"], "inbound");
    assert_eq!(call["outcome"], "answered");
    assert_eq!(call["end_reason"], "caller_hangup");
    assert_eq!(call["from_number"], "+15550001111");
    assert_eq!(call["to_number"], format!("sip:{slug}@sip.test"));
    assert_eq!(call["agent_id"], agent_id.as_str());
    assert_eq!(call["sip_endpoint_id"], endpoint_id.as_str());
    assert_eq!(call["codec"], "pcmu");
    assert!(call["ended_at"].is_string() && call["answered_at"].is_string());
    // Written with its batch, within 5 s.
    let (app, path) = (&s.app, format!("/sip-endpoints/{endpoint_id}"));
    let last = eventually(Duration::from_secs(10), "last_call_at", || async {
        let e = app.get(&path).await;
        e.body["data"]["last_call_at"].as_str().map(str::to_string)
    })
    .await;
    assert_eq!(call["answered_at"], last.as_str());

    let wav = fetch_recording(&s.app, &call).await;
    let (left, right) = channels(&wav, 8000);
    assert!(
        switchboard_sip::vad::level_db(&left) > -20.0,
        "caller channel"
    );
    assert!(
        switchboard_sip::vad::level_db(&right) > -30.0,
        "agent channel"
    );
}

/// Follows a call's recording_url (302) and downloads the WAV, checking the signature rules,
/// range requests and the link's expiry on the service's clock on the way.
pub async fn fetch_recording(app: &TestApp, call: &Value) -> Vec<u8> {
    let url = call["recording_url"]
        .as_str()
        .expect("recording_url")
        .to_string();
    assert!(url.contains("/recording?sig="), "{url}");
    switchboard::edge::tls::install_crypto();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let first = client.get(&url).send().await.unwrap();
    assert_eq!(first.status(), StatusCode::FOUND);
    let location = first.headers()["location"].to_str().unwrap().to_string();
    let again = client.get(&url).send().await.unwrap();
    assert_ne!(again.headers()["location"].to_str().unwrap(), location);

    // Altered or missing signatures, and unknown calls, all read the same.
    let id = call["id"].as_str().unwrap();
    let mut altered = url.clone();
    let last = altered.pop().unwrap();
    altered.push(if last == '0' { '1' } else { '0' });
    let unknown = url.replace(id, "01a1fc49-0000-7000-8000-000000000000");
    let unsigned = url.split('?').next().unwrap().to_string();
    let mut bodies = Vec::new();
    for bad in [altered, unknown, unsigned] {
        let r = client.get(&bad).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "{bad}");
        bodies.push(r.text().await.unwrap());
    }
    assert!(bodies.windows(2).all(|w| w[0] == w[1]), "{bodies:?}");
    assert!(bodies[0].contains("INVALID_SIGNATURE"));

    let full = client.get(&location).send().await.unwrap();
    assert_eq!(full.status(), StatusCode::OK);
    assert_eq!(full.headers()["content-type"], "audio/wav");
    assert_eq!(full.headers()["accept-ranges"], "bytes");
    let bytes = full.bytes().await.unwrap().to_vec();
    let part = client
        .get(&location)
        .header("range", "bytes=0-43")
        .send()
        .await
        .unwrap();
    assert_eq!(part.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(
        part.headers()["content-range"],
        format!("bytes 0-43/{}", bytes.len()).as_str()
    );
    assert_eq!(part.bytes().await.unwrap().to_vec(), bytes[..44].to_vec());
    let beyond = client
        .get(&location)
        .header("range", format!("bytes={}-", bytes.len()))
        .send()
        .await
        .unwrap();
    assert_eq!(beyond.status(), StatusCode::RANGE_NOT_SATISFIABLE);
    let tampered = location.replace("token=", "token=00");
    assert_eq!(
        client.get(&tampered).send().await.unwrap().status(),
        StatusCode::FORBIDDEN
    );

    // The link works for five minutes, then reads like an altered one; the permanent URL hands
    // out a fresh link.
    app.clock.advance(Duration::from_secs(290));
    assert_eq!(
        client.get(&location).send().await.unwrap().status(),
        StatusCode::OK
    );
    app.clock.advance(Duration::from_secs(11));
    let expired = client.get(&location).send().await.unwrap();
    assert_eq!(expired.status(), StatusCode::FORBIDDEN);
    assert_eq!(expired.text().await.unwrap(), bodies[0]);
    let fresh = client.get(&url).send().await.unwrap();
    assert_eq!(fresh.status(), StatusCode::FOUND);
    let fresh = fresh.headers()["location"].to_str().unwrap().to_string();
    assert_eq!(
        client.get(&fresh).send().await.unwrap().status(),
        StatusCode::OK
    );
    bytes
}

/// The left and right channels of a stereo 16-bit WAV at `rate`.
pub fn channels(wav: &[u8], rate: u32) -> (Vec<i16>, Vec<i16>) {
    let reader = hound::WavReader::new(std::io::Cursor::new(wav)).expect("a WAV file");
    assert_eq!(reader.spec().channels, 2);
    assert_eq!(reader.spec().sample_rate, rate);
    let samples: Vec<i16> = reader.into_samples().map(|s| s.unwrap()).collect();
    (
        samples.iter().step_by(2).copied().collect(),
        samples.iter().skip(1).step_by(2).copied().collect(),
    )
}

/// The strength of `freq` in `x` relative to its total energy (Goertzel), 0 to 1.
fn tone_share(x: &[i16], rate: f64, freq: f64) -> f64 {
    let w = 2.0 * std::f64::consts::PI * freq / rate;
    let (mut s1, mut s2) = (0.0f64, 0.0f64);
    for &v in x {
        let s = f64::from(v) + 2.0 * w.cos() * s1 - s2;
        s2 = s1;
        s1 = s;
    }
    let power = s1 * s1 + s2 * s2 - 2.0 * w.cos() * s1 * s2;
    let energy: f64 = x.iter().map(|&v| f64::from(v).powi(2)).sum();
    if energy == 0.0 {
        0.0
    } else {
        2.0 * power / (x.len() as f64 * energy)
    }
}

/// A mono 16-bit WAV: `silence` seconds of silence, then `tone` seconds of 440 Hz.
fn caller_wav(path: &std::path::Path, rate: u32, silence: f64, tone: f64) {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(path, spec).unwrap();
    let quiet = (silence * f64::from(rate)) as usize;
    let loud = (tone * f64::from(rate)) as usize;
    for i in 0..quiet + loud {
        let v = if i < quiet {
            0.0
        } else {
            9000.0 * (2.0 * std::f64::consts::PI * 440.0 * i as f64 / f64::from(rate)).sin()
        };
        w.write_sample(v as i16).unwrap();
    }
    w.finalize().unwrap();
}

#[tokio::test]
async fn baresip_calls_an_endpoint_and_the_recording_holds_both_sides() {
    let s = sip_app(0, 100).await;
    let (_, _, slug) = endpoint(&s.app, json!({"silence_timeout_secs": 30}), json!({})).await;
    let dir = tempfile::tempdir().unwrap();
    let wav = dir.path().join("caller.wav");
    // The agent greets during the caller's first 2.5 s; then the caller plays a 440 Hz tone
    // and hangs up when the file ends.
    caller_wav(&wav, 8000, 2.5, 2.0);
    let config = format!(
        "sip_listen 127.0.0.1:{port}\naudio_player aufile,{dir}/heard.wav\naudio_source aufile,{wav}\n\
         audio_alert aufile,{wav}\naudio_srate 8000\naudio_channels 1\nmodule_path /usr/lib/baresip/modules\n\
         module g711.so\nmodule aufile.so\nmodule_app account.so\nmodule_app menu.so\nrtp_ports 50000-50100\n",
        port = crate::sip_ua::free_sip_port(),
        dir = dir.path().display(),
        wav = wav.display()
    );
    std::fs::write(dir.path().join("config"), config).unwrap();
    std::fs::write(
        dir.path().join("accounts"),
        "<sip:caller@127.0.0.1>;regint=0;audio_codecs=PCMU\n",
    )
    .unwrap();
    let out = tokio::process::Command::new("baresip")
        .arg("-f")
        .arg(dir.path())
        .arg("-e")
        .arg(format!("/dial sip:{slug}@{}", s.sip))
        .arg("-t")
        .arg("8")
        .kill_on_drop(true)
        .output()
        .await
        .expect("baresip is installed (scripts/test installs it)");
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(log.contains("Call established"), "{log}");

    let call = ended_call(&s.app, 1).await;
    assert_eq!(call["end_reason"], "caller_hangup", "{call}");
    assert_eq!(call["from_number"], "caller");
    let audio = fetch_recording(&s.app, &call).await;
    let (left, right) = channels(&audio, 8000);
    let at = |secs: f64| (secs * 8000.0) as usize;
    // The caller's channel: the tone where the file has it (2.5-4.5 s), little before. The
    // caller's audio may start up to a second after the answer on a busy machine, so the
    // tone is looked for a little later too.
    let tone_at = |start: f64| {
        left.get(at(start)..at(start + 1.2))
            .map_or(0.0, |window| tone_share(window, 8000.0, 440.0))
    };
    let best = (0..=12)
        .map(|k| tone_at(3.0 + 0.1 * f64::from(k)))
        .fold(0.0, f64::max);
    assert!(
        best > 0.5,
        "440 Hz in the caller's channel: best share {best:.2} in {:.2} s of recording, level {:.1} dB",
        left.len() as f64 / 8000.0,
        switchboard_sip::vad::level_db(&left)
    );
    assert!(switchboard_sip::vad::level_db(&left[..at(2.0)]) < -40.0);
    // The agent's channel: the greeting (the chime fallback here) at the start.
    assert!(switchboard_sip::vad::level_db(&right[..at(2.0)]) > -30.0);
    assert!(tone_share(&right[..at(2.0)], 8000.0, 440.0) < 0.1);
}
