//! Text to speech for agents' prompts, behind the [`Speech`] port:
//!
//! - [`Espeak`]: the local `espeak-ng` program (Debian package `espeak-ng`), chosen by
//!   `--tts auto` when it is installed.
//! - [`OpenAiSpeech`]: any OpenAI-compatible `POST {base}/audio/speech` endpoint (OpenAI itself,
//!   or a self-hosted server speaking the same API), asked for raw 24 kHz PCM.
//! - [`Tones`]: the fallback when no engine is available: a soft two-note chime whose length
//!   follows the text (about 60 ms per character, 0.4 to 4 s), so callers still hear that the
//!   agent took its turn. It says no words.
//!
//! [`Cached`] keeps recent results, so a greeting is synthesized once per agent and rate rather
//! than once per call.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use switchboard_actors::agent::{Speech, SpeechError};
use switchboard_sip::media::resample;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Largest prompt synthesized, in characters.
const MAX_TEXT: usize = 4000;

fn bounded(text: &str) -> &str {
    match text.char_indices().nth(MAX_TEXT) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}

/// The local `espeak-ng` program.
pub struct Espeak {
    pub program: String,
}

impl Espeak {
    /// `espeak-ng` if it is on the PATH.
    pub fn find() -> Option<Espeak> {
        let found = std::env::var_os("PATH").is_some_and(|paths| {
            std::env::split_paths(&paths).any(|dir| dir.join("espeak-ng").is_file())
        });
        found.then(|| Espeak {
            program: "espeak-ng".into(),
        })
    }
}

/// The samples of a 16-bit mono WAV as espeak writes it to a pipe (its sizes may be left as
/// placeholders, so the data chunk is taken to run to the end).
fn wav_samples(bytes: &[u8]) -> Result<(u32, Vec<i16>), SpeechError> {
    let bad = || SpeechError("the speech engine wrote no usable WAV".into());
    if bytes.len() < 44 || &bytes[0..4] != b"RIFF" || &bytes[8..12] != b"WAVE" {
        return Err(bad());
    }
    let mut at = 12;
    let mut rate = 0u32;
    while at + 8 <= bytes.len() {
        let id = &bytes[at..at + 4];
        let size = u32::from_le_bytes([bytes[at + 4], bytes[at + 5], bytes[at + 6], bytes[at + 7]])
            as usize;
        let body = at + 8;
        if id == b"fmt " {
            if body + 16 > bytes.len() {
                return Err(bad());
            }
            let channels = u16::from_le_bytes([bytes[body + 2], bytes[body + 3]]);
            rate = u32::from_le_bytes([
                bytes[body + 4],
                bytes[body + 5],
                bytes[body + 6],
                bytes[body + 7],
            ]);
            let bits = u16::from_le_bytes([bytes[body + 14], bytes[body + 15]]);
            if channels != 1 || bits != 16 {
                return Err(bad());
            }
        } else if id == b"data" {
            if rate == 0 {
                return Err(bad());
            }
            let end = body.saturating_add(size).min(bytes.len());
            let samples = bytes[body..end]
                .chunks_exact(2)
                .map(|c| i16::from_le_bytes([c[0], c[1]]))
                .collect();
            return Ok((rate, samples));
        }
        at = body.saturating_add(size + (size & 1));
    }
    Err(bad())
}

#[async_trait]
impl Speech for Espeak {
    async fn speak(
        &self,
        text: &str,
        _voice: &str,
        language: &str,
        sample_rate: u32,
    ) -> Result<Arc<[i16]>, SpeechError> {
        // The language picks espeak's voice; anything but a plain tag falls back to English.
        let lang: String = language
            .chars()
            .take(16)
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        let lang = if lang.is_empty() {
            "en".to_string()
        } else {
            lang.to_lowercase()
        };
        let mut child = tokio::process::Command::new(&self.program)
            .args(["-v", &lang, "--stdout"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| SpeechError(format!("espeak-ng did not start: {e}")))?;
        let mut stdin = child
            .stdin
            .take()
            .ok_or_else(|| SpeechError("espeak-ng has no input".into()))?;
        let input = bounded(text).to_string();
        let writer = tokio::spawn(async move {
            let _ = stdin.write_all(input.as_bytes()).await;
        });
        let mut out = Vec::new();
        if let Some(mut stdout) = child.stdout.take() {
            stdout
                .read_to_end(&mut out)
                .await
                .map_err(|e| SpeechError(format!("espeak-ng output: {e}")))?;
        }
        let _ = writer.await;
        let status = child
            .wait()
            .await
            .map_err(|e| SpeechError(format!("espeak-ng: {e}")))?;
        if !status.success() {
            // An unknown language: say it in English rather than not at all.
            if lang != "en" {
                return self.speak(text, "", "en", sample_rate).await;
            }
            return Err(SpeechError(format!("espeak-ng exited with {status}")));
        }
        let (rate, samples) = wav_samples(&out)?;
        Ok(resample(&samples, rate, sample_rate).into())
    }
}

/// An OpenAI-compatible speech endpoint.
pub struct OpenAiSpeech {
    /// E.g. `https://api.openai.com/v1`.
    pub base_url: String,
    pub api_key: Option<String>,
    pub model: String,
    pub client: reqwest::Client,
}

/// OpenAI's `pcm` format: 24 kHz, 16-bit little-endian, mono.
const OPENAI_PCM_RATE: u32 = 24_000;

#[async_trait]
impl Speech for OpenAiSpeech {
    async fn speak(
        &self,
        text: &str,
        voice: &str,
        _language: &str,
        sample_rate: u32,
    ) -> Result<Arc<[i16]>, SpeechError> {
        let url = format!("{}/audio/speech", self.base_url.trim_end_matches('/'));
        let mut req = self.client.post(&url).json(&serde_json::json!({
            "model": self.model,
            "input": bounded(text),
            "voice": if voice.is_empty() { "alloy" } else { voice },
            "response_format": "pcm",
        }));
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        let resp = req.send().await.map_err(|e| {
            SpeechError(format!("speech endpoint unreachable: {}", e.without_url()))
        })?;
        let status = resp.status();
        if !status.is_success() {
            return Err(SpeechError(format!("speech endpoint answered {status}")));
        }
        let body = resp
            .bytes()
            .await
            .map_err(|e| SpeechError(format!("speech endpoint body: {}", e.without_url())))?;
        let samples: Vec<i16> = body
            .chunks_exact(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]))
            .collect();
        Ok(resample(&samples, OPENAI_PCM_RATE, sample_rate).into())
    }
}

/// The fallback: a chime as long as the text would take to say.
pub struct Tones;

#[async_trait]
impl Speech for Tones {
    async fn speak(
        &self,
        text: &str,
        _voice: &str,
        _language: &str,
        sample_rate: u32,
    ) -> Result<Arc<[i16]>, SpeechError> {
        let chars = bounded(text).chars().count() as f64;
        let secs = (chars * 0.06).clamp(0.4, 4.0);
        let n = (secs * f64::from(sample_rate)) as usize;
        let rate = f64::from(sample_rate);
        let samples: Vec<i16> = (0..n)
            .map(|i| {
                let t = i as f64 / rate;
                // Two notes alternating every 250 ms, faded in and out over 20 ms.
                let freq = if ((t / 0.25) as u64).is_multiple_of(2) {
                    660.0
                } else {
                    880.0
                };
                let fade = (t / 0.02).min((secs - t) / 0.02).clamp(0.0, 1.0);
                (6000.0 * fade * (2.0 * std::f64::consts::PI * freq * t).sin()) as i16
            })
            .collect();
        Ok(samples.into())
    }
}

type Key = (String, String, String, u32);

/// Keeps the last results of another engine (up to 256 prompts).
pub struct Cached {
    inner: Arc<dyn Speech>,
    entries: Mutex<HashMap<Key, Arc<[i16]>>>,
}

impl Cached {
    pub fn new(inner: Arc<dyn Speech>) -> Cached {
        Cached {
            inner,
            entries: Mutex::new(HashMap::new()),
        }
    }
}

#[async_trait]
impl Speech for Cached {
    async fn speak(
        &self,
        text: &str,
        voice: &str,
        language: &str,
        sample_rate: u32,
    ) -> Result<Arc<[i16]>, SpeechError> {
        let key = (
            text.to_string(),
            voice.to_string(),
            language.to_string(),
            sample_rate,
        );
        if let Some(hit) = self.entries.lock().ok().and_then(|e| e.get(&key).cloned()) {
            return Ok(hit);
        }
        let audio = self.inner.speak(text, voice, language, sample_rate).await?;
        if let Ok(mut entries) = self.entries.lock() {
            if entries.len() >= 256 {
                entries.clear();
            }
            entries.insert(key, audio.clone());
        }
        Ok(audio)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipe_wavs_with_placeholder_sizes_are_read() {
        let mut wav = Vec::new();
        wav.extend_from_slice(b"RIFF\xff\xff\xff\x7fWAVEfmt ");
        wav.extend_from_slice(&16u32.to_le_bytes());
        wav.extend_from_slice(&1u16.to_le_bytes());
        wav.extend_from_slice(&1u16.to_le_bytes());
        wav.extend_from_slice(&22050u32.to_le_bytes());
        wav.extend_from_slice(&44100u32.to_le_bytes());
        wav.extend_from_slice(&2u16.to_le_bytes());
        wav.extend_from_slice(&16u16.to_le_bytes());
        wav.extend_from_slice(b"data\xff\xff\xff\x7f");
        wav.extend_from_slice(&[1, 0, 2, 0, 3, 0]);
        let (rate, samples) = wav_samples(&wav).unwrap();
        assert_eq!(rate, 22050);
        assert_eq!(samples, vec![1, 2, 3]);
        assert!(wav_samples(b"not a wav at all, not at all, not at all, really").is_err());
    }

    /// A stand-in for an OpenAI-compatible speech server: checks the request and answers one
    /// second of 24 kHz PCM.
    async fn speech_server() -> (
        String,
        tokio::sync::mpsc::UnboundedReceiver<serde_json::Value>,
    ) {
        use axum::routing::post;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let app = axum::Router::new().route(
            "/v1/audio/speech",
            post(
                move |headers: axum::http::HeaderMap, body: axum::Json<serde_json::Value>| {
                    let tx = tx.clone();
                    async move {
                        let auth = headers
                            .get("authorization")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("")
                            .to_string();
                        let _ = tx.send(serde_json::json!({"auth": auth, "body": body.0}));
                        if auth != "Bearer test-key" {
                            return (axum::http::StatusCode::UNAUTHORIZED, Vec::new());
                        }
                        let pcm: Vec<u8> = (0..24_000)
                            .flat_map(|i| (((i % 24) as i16 - 12) * 1000).to_le_bytes())
                            .collect();
                        (axum::http::StatusCode::OK, pcm)
                    }
                },
            ),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{addr}/v1"), rx)
    }

    #[tokio::test]
    async fn the_openai_compatible_client_asks_for_pcm_and_resamples_it() {
        crate::edge::tls::install_crypto();
        let (base, mut seen) = speech_server().await;
        let speech = OpenAiSpeech {
            base_url: base.clone(),
            api_key: Some("test-key".into()),
            model: "tts-test".into(),
            client: reqwest::Client::new(),
        };
        let audio = speech
            .speak("Hello there", "nova", "en", 8000)
            .await
            .unwrap();
        assert_eq!(audio.len(), 8000, "one second at 8 kHz");
        let req = seen.recv().await.unwrap();
        assert_eq!(req["body"]["model"], "tts-test");
        assert_eq!(req["body"]["input"], "Hello there");
        assert_eq!(req["body"]["voice"], "nova");
        assert_eq!(req["body"]["response_format"], "pcm");
        let wrong = OpenAiSpeech {
            api_key: Some("other".into()),
            ..speech
        };
        let err = wrong.speak("Hi", "", "en", 8000).await.unwrap_err();
        assert!(err.0.contains("401"), "{err}");
        assert!(!err.0.contains("other"), "the key never shows: {err}");
    }

    #[tokio::test]
    async fn espeak_speaks_when_installed() {
        let Some(espeak) = Espeak::find() else {
            // CI installs espeak-ng through scripts/test, so there its absence is a failure; a
            // developer's machine without it uses the fallback and skips this check.
            assert!(
                std::env::var_os("CI").is_none(),
                "espeak-ng is not installed (scripts/test installs it)"
            );
            eprintln!("espeak-ng is not installed: skipping its speech check");
            return;
        };
        let audio = espeak
            .speak("Hello, front desk.", "", "en-US", 16000)
            .await
            .unwrap();
        assert!(audio.len() > 8000, "at least half a second of speech");
        assert!(switchboard_sip::vad::level_db(&audio) > -40.0);
        // An unknown language falls back to English rather than to nothing.
        let audio = espeak.speak("Hello", "", "xx-unknown", 8000).await.unwrap();
        assert!(!audio.is_empty());
    }

    #[tokio::test]
    async fn the_fallback_is_as_long_as_the_text_and_audible() {
        let short = Tones.speak("Hi", "", "en", 8000).await.unwrap();
        let long = Tones
            .speak(&"word ".repeat(10), "", "en", 16000)
            .await
            .unwrap();
        let longest = Tones
            .speak(&"word ".repeat(100), "", "en", 16000)
            .await
            .unwrap();
        assert_eq!(short.len(), 3200); // 0.4 s floor
        assert_eq!(long.len(), 48000); // 50 chars * 60 ms at 16 kHz
        assert_eq!(longest.len(), 64000); // the 4 s ceiling
        assert!(switchboard_sip::vad::level_db(&long) > -20.0);
    }
}
