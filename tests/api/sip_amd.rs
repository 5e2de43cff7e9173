//! Answering-machine detection on outbound calls, end to end: the service dials baresip
//! (Debian's package) answering with speech synthesized by espeak-ng and sox, and each call's
//! record must say who answered and what the agent did about it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use switchboard_sip::trunk::{Gateway, TrunkTransport};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::campaigns::number;
use crate::helpers::TestApp;
use crate::sip_outbound::{ended, free_port, new_agent, outbound_app, place, trunk};
use crate::sip_recordings::{channels, fetch_recording};

/// A baresip callee at `number` that answers at once and plays `wav` (8 kHz mono).
struct Baresip {
    _child: tokio::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Baresip {
    async fn answering(number: &str, build: impl FnOnce(&Path) -> PathBuf) -> Baresip {
        let dir = tempfile::tempdir().unwrap();
        let wav = build(dir.path());
        let port = free_port();
        let config = format!(
            "sip_listen 127.0.0.1:{port}\naudio_player aufile,{dir}/heard.wav\naudio_source aufile,{wav}\n\
             audio_alert aufile,{wav}\naudio_srate 8000\naudio_channels 1\nmodule_path /usr/lib/baresip/modules\n\
             module g711.so\nmodule aufile.so\nmodule_app account.so\nmodule_app menu.so\nrtp_ports 51000-51100\n",
            dir = dir.path().display(),
            wav = wav.display()
        );
        std::fs::write(dir.path().join("config"), config).unwrap();
        std::fs::write(
            dir.path().join("accounts"),
            format!("<sip:{number}@127.0.0.1>;regint=0;answermode=auto;audio_codecs=PCMU\n"),
        )
        .unwrap();
        let mut child = tokio::process::Command::new("baresip")
            .arg("-f")
            .arg(dir.path())
            .args(["-t", "40"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("baresip is installed (scripts/test installs it)");
        // It listens once it says it is ready; what it says after that is read and dropped.
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut said = Vec::new();
        let ready = tokio::time::timeout(Duration::from_secs(10), async {
            while let Ok(Some(line)) = lines.next_line().await {
                if line.contains("baresip is ready.") {
                    return true;
                }
                said.push(line);
            }
            false
        })
        .await;
        assert!(
            ready == Ok(true),
            "baresip did not say it was ready within 10 s; it said {said:?}"
        );
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Baresip {
            _child: child,
            port,
            _dir: dir,
        }
    }

    fn gateway(&self) -> Gateway {
        Gateway {
            host: "127.0.0.1".into(),
            port: Some(self.port),
            transport: TrunkTransport::Udp,
            priority: 0,
        }
    }
}

/// Speech by espeak-ng, then `tail` (sox's synth arguments, e.g. a beep), then silence, as
/// one 8 kHz WAV in `dir`.
fn speech_wav(dir: &Path, text: &str, tail: Option<&str>, silence_secs: u32) -> PathBuf {
    let run = |cmd: &mut std::process::Command| {
        let status = cmd.status().expect("espeak-ng and sox are installed");
        assert!(status.success(), "{cmd:?}");
    };
    let raw = dir.join("speech.wav");
    run(std::process::Command::new("espeak-ng")
        .arg("-w")
        .arg(&raw)
        .arg(text));
    let speech = dir.join("speech8k.wav");
    run(std::process::Command::new("sox")
        .arg(&raw)
        .args(["-r", "8000", "-c", "1", "-b", "16"])
        .arg(&speech));
    let mut parts = vec![speech];
    if let Some(tail) = tail {
        let beep = dir.join("tail.wav");
        run(std::process::Command::new("sox")
            .args(["-n", "-r", "8000", "-c", "1", "-b", "16"])
            .arg(&beep)
            .args(["synth"])
            .args(tail.split_whitespace()));
        parts.push(beep);
    }
    let silence = dir.join("silence.wav");
    run(std::process::Command::new("sox")
        .args(["-n", "-r", "8000", "-c", "1", "-b", "16"])
        .arg(&silence)
        .args(["trim", "0", &silence_secs.to_string()]));
    parts.push(silence);
    let out = dir.join("callee.wav");
    run(std::process::Command::new("sox").args(&parts).arg(&out));
    out
}

async fn amd_call(app: &TestApp, voicemail_message: Option<&str>) -> Value {
    let agent = new_agent(
        app,
        json!({"name": "Ava", "max_call_duration_secs": 40, "agent_speaks_first": true,
            "silence_timeout_secs": 4, "voicemail_message": voicemail_message,
            "greeting_message": "Hello, this is Ava from the clinic."}),
    )
    .await;
    let from = number(app, "+972501230000", "active").await;
    let id = place(app, &agent, &from, "+972541234567", json!({})).await;
    ended(app, &id, Duration::from_secs(45), None).await
}

/// A voicemail greeting, its beep, then silence.
fn machine_greeting(dir: &Path) -> PathBuf {
    speech_wav(
        dir,
        "Hi, you have reached the voicemail of Dana Levi. I cannot take your call right now. \
         Please leave your name, your number and a short message after the tone.",
        Some("0.6 sine 1000"),
        10,
    )
}

#[tokio::test]
async fn a_voicemail_greeting_is_detected_and_the_message_is_left_after_the_beep() {
    let callee = Baresip::answering("+972541234567", machine_greeting).await;
    let app = outbound_app(trunk(vec![callee.gateway()])).await;
    let call = amd_call(
        &app,
        Some("This is Ava from the clinic. Please call us back."),
    )
    .await;
    assert_eq!(call["answered_by"], "machine", "{call}");
    assert_eq!(call["outcome"], "voicemail", "{call}");
    assert_eq!(call["end_reason"], "voicemail_left", "{call}");
    // The recording's callee channel holds the greeting baresip played.
    let wav = fetch_recording(&app, &call).await;
    let (callee, _) = channels(&wav, 8000);
    let level = switchboard_sip::vad::level_db(&callee[..callee.len().min(8000 * 4)]);
    assert!(
        level > -35.0,
        "the callee's greeting is in the recording: {level:.1} dB"
    );
}

#[tokio::test]
async fn a_machine_without_a_voicemail_message_is_hung_up_at_once() {
    let callee = Baresip::answering("+972541234567", machine_greeting).await;
    let app = outbound_app(trunk(vec![callee.gateway()])).await;
    let call = amd_call(&app, None).await;
    assert_eq!(call["answered_by"], "machine", "{call}");
    assert_eq!(call["outcome"], "voicemail", "{call}");
    assert_eq!(call["end_reason"], "answering_machine", "{call}");
    assert!(call["duration_secs"].as_i64().unwrap() <= 6, "{call}");
}

#[tokio::test]
async fn a_person_saying_hello_is_answered_by_the_agent() {
    let callee =
        Baresip::answering("+972541234567", |dir| speech_wav(dir, "Hello?", None, 15)).await;
    let app = outbound_app(trunk(vec![callee.gateway()])).await;
    let call = amd_call(&app, Some("Please call us back.")).await;
    assert_eq!(call["answered_by"], "human", "{call}");
    assert_eq!(call["outcome"], "answered", "{call}");
    assert_eq!(call["end_reason"], "silence_timeout", "{call}");
}
