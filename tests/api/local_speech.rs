//! The local speech server (`speech/`) as the one vendor there is: a caller on a real SIP call
//! speaks recorded sentences to a flow decided by their words, with no chat model configured;
//! the call's transcript holds what the caller said (a word error rate under 30% on the set)
//! and the call takes the flow's path.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use switchboard::config::VendorSettings;
use switchboard_sip::audio_codec::{self, CodecType};

use crate::converse::{Live, call_slug};
use crate::helpers::eventually;
use crate::sip_calls::{SECS, endpoint, sip_app_with};
use crate::sip_ua::Ua;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The speech server, running on loopback until dropped.
struct SpeechServer {
    _child: tokio::process::Child,
    base_url: String,
}

impl SpeechServer {
    /// Starts `speech/server.py` from the virtualenv `speech/install.sh` makes (`target/speech`);
    /// `None`, with a note, when it is not installed and this is not CI.
    async fn start() -> Option<SpeechServer> {
        switchboard::edge::tls::install_crypto();
        let python = root().join("target/speech/bin/python");
        if !python.is_file() {
            assert!(
                std::env::var_os("CI").is_none(),
                "the local speech server is missing on CI: ./scripts/test installs it"
            );
            eprintln!(
                "note: the local speech server is not installed (speech/install.sh); not run"
            );
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = tokio::process::Command::new(python)
            .arg(root().join("speech/server.py"))
            .args([
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--tts",
                "none",
                "--quiet",
            ])
            .env("HF_HUB_OFFLINE", "1")
            .kill_on_drop(true)
            .spawn()
            .expect("the speech server starts");
        let base_url = format!("http://127.0.0.1:{port}/v1");
        let health = format!("http://127.0.0.1:{port}/health");
        eventually(Duration::from_secs(90), "the speech server answers", || {
            let health = health.clone();
            async move {
                let r = reqwest::get(&health).await.ok()?;
                r.status().is_success().then_some(())
            }
        })
        .await;
        Some(SpeechServer {
            _child: child,
            base_url,
        })
    }
}

/// A recorded sentence of the caller: 8 kHz mono 16-bit PCM, as PCMU frames of 20 ms.
fn pcmu_frames(path: &Path) -> Vec<Vec<u8>> {
    let mut wav = hound::WavReader::open(path).expect("a sentence's WAV");
    let spec = wav.spec();
    assert_eq!((spec.sample_rate, spec.channels), (8000, 1), "{path:?}");
    let samples: Vec<i16> = wav.samples::<i16>().map(|s| s.expect("a sample")).collect();
    let mut encoder = audio_codec::create_encoder(CodecType::PCMU);
    samples
        .chunks(160)
        .map(|frame| {
            let mut frame = frame.to_vec();
            frame.resize(160, 0);
            let mut bytes = [0u8; 160];
            let n = encoder.encode_into(&frame, &mut bytes).unwrap_or(0);
            bytes[..n].to_vec()
        })
        .collect()
}

/// Words as a check on words reads them: lowercase, no punctuation.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase().replace('\'', ""))
        .collect()
}

/// Word-level edit distance between `said` and `heard`.
fn word_errors(said: &[String], heard: &[String]) -> usize {
    let mut row: Vec<usize> = (0..=heard.len()).collect();
    for (i, s) in said.iter().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, h) in heard.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (prev + usize::from(s != h)).min(row[j] + 1).min(here + 1);
            prev = here;
        }
    }
    row[heard.len()]
}

/// A restaurant's front desk, decided by the caller's words alone.
fn front_desk() -> Value {
    json!({"flow_config_version": 1, "nodes": [
        {"id": "start", "type": "start", "greeting": "Hello, Acme Bistro. Would you like to book a table, or hear our hours?", "is_literal": true, "next_step_id": "menu"},
        {"id": "menu", "type": "conversation", "greeting": "Say book, or hours.", "is_literal": true,
         "transitions": [
            {"next_step_id": "party", "when": {"variable": "caller.last_words", "contains": ["book", "table", "reserve"]}},
            {"next_step_id": "hours", "when": {"variable": "caller.last_words", "matches": "\\b(hours?|open(ing)?)\\b"}}
         ]},
        {"id": "party", "type": "conversation", "greeting": "For how many?", "is_literal": true,
         "transitions": [
            {"next_step_id": "extra", "when": {"variable": "caller.last_words", "matches": "\\b([1-9]|one|two|three|four|five|six|seven|eight)\\b"}},
            {"next_step_id": "extra", "when": {"variable": "caller.last_words", "contains": "people"}}
         ]},
        {"id": "extra", "type": "conversation", "greeting": "Booked. Anything else?", "is_literal": true,
         "transitions": [
            {"next_step_id": "hours", "when": {"variable": "caller.last_words", "matches": "\\b(hours?|open(ing)?)\\b"}},
            {"next_step_id": "bye", "when": {"variable": "caller.last_words", "contains": ["that is all", "thats all", "no", "thank you"]}}
         ]},
        {"id": "hours", "type": "conversation", "greeting": "Noon to ten. Anything else?", "is_literal": true,
         "transitions": [{"next_step_id": "bye", "when": {"variable": "caller.last_words", "contains": ["that is all", "thats all", "no", "thank you"]}}]},
        {"id": "bye", "type": "end", "greeting": "Goodbye.", "is_literal": true}
    ]})
}

/// The caller's sentences, in the order said: (WAV, what it says).
fn sentences() -> Vec<(PathBuf, String)> {
    let dir = root().join("speech/sentences/caller");
    let mut wavs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{dir:?}: {e}"))
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "wav"))
        .collect();
    wavs.sort();
    wavs.into_iter()
        .map(|wav| {
            let text = std::fs::read_to_string(wav.with_extension("txt")).expect("its transcript");
            (wav, text.trim().to_string())
        })
        .collect()
}

/// Says one sentence on the call: its frames in real time, then a second of silence.
async fn say(ua: &Ua, media: std::net::SocketAddr, frames: &[Vec<u8>]) {
    let silence = vec![0xFFu8; 160];
    for frame in frames.iter().chain(std::iter::repeat_n(&silence, 50)) {
        ua.send_rtp(media, frame).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_caller_s_recorded_words_walk_a_flow_with_the_local_speech_server_and_no_model() {
    let Some(speech) = SpeechServer::start().await else {
        return;
    };
    let s = sip_app_with(0, 100, None, |c| {
        c.stt = Some(VendorSettings {
            base_url: speech.base_url.clone(),
            api_key: None,
            model: "whisper-1".into(),
        });
        c.llm = None;
    })
    .await;
    let live = Live::open(&s.app).await;
    let (_, _, slug) = endpoint(
        &s.app,
        json!({"type": "flow", "flow_config": front_desk(), "vad_stop_secs": 0.6}),
        json!({}),
    )
    .await;
    let (mut ua, media) = call_slug(&s, &slug).await;
    let said = sentences();
    assert_eq!(said.len(), 4, "the caller's four sentences");
    // What the agent answers each sentence with; the last sends the call to its end node,
    // whose line is said before the agent's BYE.
    let answers = [
        "For how many?",
        "Booked. Anything else?",
        "Noon to ten. Anything else?",
        "Goodbye.",
    ];
    live.agent_said("Hello, Acme Bistro. Would you like to book a table, or hear our hours?")
        .await;
    for ((wav, _), answer) in said.iter().zip(answers).take(3) {
        say(&ua, media, &pcmu_frames(wav)).await;
        live.agent_said(answer).await;
    }
    say(&ua, media, &pcmu_frames(&said[3].0)).await;
    ua.answer_request("BYE", SECS * 3, 200, "OK").await;
    let call = crate::sip_calls::ended_call(&s.app, 1).await;
    let id = call["id"].as_str().unwrap();
    let detail = s.app.get(&format!("/calls/{id}")).await;
    let d = &detail.body;
    assert_eq!(call["end_reason"], "agent_hangup", "{d}");
    let path: Vec<&str> = d["flow_path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["node_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        path,
        ["start", "menu", "party", "extra", "hours", "bye"],
        "{d}"
    );
    let heard: Vec<&str> = d["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["role"] == "user")
        .map(|t| t["text"].as_str().unwrap())
        .collect();
    let (mut errors, mut total) = (0, 0);
    for ((_, text), heard) in said.iter().zip(&heard) {
        let said = words(text);
        errors += word_errors(&said, &words(heard));
        total += said.len();
    }
    assert_eq!(heard.len(), 4, "every sentence heard once: {heard:?}");
    let wer = errors as f64 / total as f64;
    eprintln!("heard {heard:?}: {errors} word errors in {total} words");
    assert!(wer < 0.30, "word error rate {wer:.2}: heard {heard:?}");
}
