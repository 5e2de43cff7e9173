//! The stand-in model vendors: an OpenAI-compatible HTTP server on loopback with fixed
//! latencies, which notes when each request arrived and when it was answered, on the bench's
//! own clock.
//!
//! - `POST /audio/transcriptions`: after `stt` it answers `{"text": "Please tell me about item
//!   N."}`, N counting the transcriptions from 0. The text ends in a full stop, so the agent's
//!   turn ends as soon as it arrives.
//! - `POST /chat/completions`: streamed server-sent events. After `llm` the first piece of the
//!   reply, then a piece every `chunk`: two sentences, "This is part 1 of reply R, said in full."
//!   and the same with part 2, each in two pieces; R counts the completions. It notes when it
//!   wrote the piece that completes the first sentence, and which call the request came from
//!   (the `[bench-call C]` of its system prompt) and which transcriptions its last user message
//!   holds.
//! - `POST /audio/speech`: after `tts`, OpenAI's `pcm` (24 kHz, 16-bit little-endian, mono) of
//!   a tone, `speech_secs` long; the request's text names the reply and the part it speaks.
//!
//! Every request also waits its share of `spread` (spread evenly over the requests), so the
//! answers do not all fall at the same point of the server's 20 ms media clock.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};

/// The fixed latencies and the answers' sizes.
#[derive(Debug, Clone, Copy)]
pub struct Latencies {
    pub stt: Duration,
    /// To the first piece of a reply.
    pub llm: Duration,
    /// Between the pieces of a reply.
    pub chunk: Duration,
    pub tts: Duration,
    /// Seconds of audio per spoken sentence.
    pub speech_secs: f64,
    /// Each request waits its latency plus up to this much more (its share of it differs from
    /// request to request); the vendors' time is measured, so the spread is left out of the
    /// added latency too.
    pub spread: Duration,
}

/// When a request was received in full, and when its answer (or, for a chat stream, the piece
/// that completes the first sentence) was handed to the connection.
#[derive(Debug, Clone, Copy)]
pub struct Timed {
    pub arrived: Instant,
    pub answered: Instant,
}

/// One chat completion.
#[derive(Debug, Clone)]
pub struct Chat {
    /// The call whose agent asked (its system prompt's tag), if it had one.
    pub call: Option<usize>,
    /// The transcriptions its last user message holds (their item numbers).
    pub items: Vec<u64>,
    pub arrived: Instant,
    /// When the piece completing the first sentence was written.
    pub first_sentence: Option<Instant>,
}

/// Everything the stand-ins were asked, on the bench's clock.
#[derive(Debug, Default)]
pub struct Records {
    /// Transcriptions, by item number.
    pub stt: Vec<Timed>,
    /// Chat completions, by reply number.
    pub chat: Vec<Chat>,
    /// Speech, by (reply number, part from 1).
    pub tts: HashMap<(u64, u64), Timed>,
    /// Speech requests whose text named no reply and part.
    pub tts_unmatched: u64,
}

struct Shared {
    latencies: Latencies,
    records: Mutex<Records>,
    /// The speech answer: the same tone for every sentence.
    pcm: Bytes,
}

/// The stand-ins, serving on loopback.
pub struct StandIn {
    pub base_url: String,
    shared: Arc<Shared>,
}

impl StandIn {
    pub async fn start(latencies: Latencies) -> anyhow::Result<StandIn> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr: SocketAddr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            latencies,
            records: Mutex::new(Records::default()),
            pcm: tone_pcm(latencies.speech_secs),
        });
        let app = axum::Router::new()
            .route("/audio/transcriptions", post(transcribe))
            .route("/chat/completions", post(chat))
            .route("/audio/speech", post(speak))
            .with_state(shared.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(StandIn {
            base_url: format!("http://{addr}"),
            shared,
        })
    }

    /// What was asked so far.
    pub fn records(&self) -> std::sync::MutexGuard<'_, Records> {
        lock(&self.shared.records)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `secs` of a 440 Hz tone at a third of full scale, as 24 kHz 16-bit little-endian PCM.
fn tone_pcm(secs: f64) -> Bytes {
    let n = (secs.max(0.02) * 24_000.0) as usize;
    crate::measure::tone(24_000, 440.0, n, 11_000.0)
        .into_iter()
        .flat_map(i16::to_le_bytes)
        .collect::<Vec<u8>>()
        .into()
}

async fn transcribe(State(s): State<Arc<Shared>>, _upload: Bytes) -> axum::Json<Value> {
    let arrived = Instant::now();
    let item = {
        let mut records = lock(&s.records);
        records.stt.push(Timed {
            arrived,
            answered: arrived,
        });
        records.stt.len() - 1
    };
    let wait = s.latencies.stt + share(&s, item as u64);
    tokio::time::sleep_until((arrived + wait).into()).await;
    if let Some(t) = lock(&s.records).stt.get_mut(item) {
        t.answered = Instant::now();
    }
    axum::Json(json!({ "text": transcript(item as u64) }))
}

/// What the caller said, as the stand-in hears the `item`th utterance.
pub fn transcript(item: u64) -> String {
    format!("Please tell me about item {item}.")
}

/// The numbers that follow `key` in `text` (`item 3 ... item 7` gives 3 and 7).
pub fn numbers_after(text: &str, key: &str) -> Vec<u64> {
    text.match_indices(key)
        .filter_map(|(at, _)| {
            let rest = &text[at + key.len()..];
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .collect()
}

/// The pieces of reply `reply`, in the order they are streamed, and the index of the piece
/// that completes its first sentence.
pub fn reply_pieces(reply: u64) -> (Vec<String>, usize) {
    let pieces = (1..=2)
        .flat_map(|part| {
            [
                format!("This is part {part} of reply {reply},"),
                // A sentence is complete at its full stop and the white space after it.
                if part == 1 {
                    " said in full. ".to_string()
                } else {
                    " said in full.".to_string()
                },
            ]
        })
        .collect();
    (pieces, 1)
}

/// The answer to an end-of-call analysis.
const ANALYSIS: &str = r#"{"summary": "A benchmark call.", "extracted": {}, "disposition": null}"#;

/// The `n`th request's share of the spread: evenly over `[0, spread)`, in an order that does
/// not follow the requests', so answers do not fall in step with the server's 20 ms media clock.
fn share(s: &Shared, n: u64) -> Duration {
    let ms = s.latencies.spread.as_millis() as u64;
    if ms == 0 {
        return Duration::ZERO;
    }
    Duration::from_micros((n.wrapping_mul(7919) % (ms * 10)) * 100)
}

/// One server-sent event with `data`.
pub fn sse(data: &Value) -> String {
    format!("data: {data}\n\n")
}

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "chatcmpl-bench", "object": "chat.completion.chunk",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

async fn chat(State(s): State<Arc<Shared>>, body: Bytes) -> Response {
    let arrived = Instant::now();
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let system = messages
        .iter()
        .find(|m| m["role"] == "system")
        .and_then(|m| m["content"].as_str())
        .unwrap_or("");
    let call = numbers_after(system, "[bench-call ")
        .first()
        .map(|c| *c as usize);
    let last_user = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or("");
    let items = numbers_after(last_user, "item ");
    let reply = {
        let mut records = lock(&s.records);
        records.chat.push(Chat {
            call,
            items,
            arrived,
            first_sentence: None,
        });
        records.chat.len() as u64 - 1
    };
    // A request that is not a call's turn is the end-of-call analysis: it gets a JSON object.
    let (pieces, first_sentence_piece) = match call {
        Some(_) => reply_pieces(reply),
        None => (vec![ANALYSIS.to_string()], usize::MAX),
    };
    let last = pieces.len() - 1;
    let llm = s.latencies.llm + share(&s, reply);
    let chunk_gap = s.latencies.chunk;
    let stream = futures_util::stream::unfold(0usize, move |i| {
        let s = s.clone();
        let pieces = pieces.clone();
        async move {
            if i > last {
                return None;
            }
            let at = arrived + llm + chunk_gap * i as u32;
            tokio::time::sleep_until(at.into()).await;
            let mut out = String::new();
            if i == 0 {
                out.push_str(&sse(&chunk(
                    json!({"role": "assistant", "content": ""}),
                    None,
                )));
            }
            out.push_str(&sse(&chunk(json!({"content": pieces[i]}), None)));
            if i == last {
                out.push_str(&sse(&chunk(json!({}), Some("stop"))));
                out.push_str(&sse(&json!({"id": "chatcmpl-bench", "choices": [],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}})));
                out.push_str("data: [DONE]\n\n");
            }
            if i == first_sentence_piece
                && let Some(chat) = lock(&s.records).chat.get_mut(reply as usize)
            {
                chat.first_sentence = Some(Instant::now());
            }
            Some((Ok::<_, Infallible>(Bytes::from(out)), i + 1))
        }
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Body::from_stream(stream))
        .unwrap_or_default()
}

async fn speak(State(s): State<Arc<Shared>>, body: Bytes) -> Response {
    let arrived = Instant::now();
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let text = request["input"].as_str().unwrap_or("");
    let key = numbers_after(text, "reply ")
        .first()
        .copied()
        .zip(numbers_after(text, "part ").first().copied());
    let n = key.map_or(0, |(reply, part)| reply * 2 + part);
    tokio::time::sleep_until((arrived + s.latencies.tts + share(&s, n)).into()).await;
    let answered = Instant::now();
    {
        let mut records = lock(&s.records);
        match key {
            Some(key) => {
                records.tts.insert(key, Timed { arrived, answered });
            }
            None => records.tts_unmatched += 1,
        }
    }
    Response::builder()
        .header("content-type", "application/octet-stream")
        .body(Body::from(s.pcm.clone()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reply_is_cut_into_sentences_where_the_record_says() {
        let (pieces, first) = reply_pieces(17);
        let mut sentences = switchboard_actors::turns::Sentences::default();
        let mut completed_at = None;
        let mut said = Vec::new();
        for (i, piece) in pieces.iter().enumerate() {
            let out = sentences.push(piece);
            if !out.is_empty() && completed_at.is_none() {
                completed_at = Some(i);
            }
            said.extend(out);
        }
        said.extend(sentences.finish());
        assert_eq!(completed_at, Some(first));
        assert_eq!(
            said,
            [
                "This is part 1 of reply 17, said in full.",
                "This is part 2 of reply 17, said in full."
            ]
        );
        for (part, sentence) in said.iter().enumerate() {
            assert_eq!(numbers_after(sentence, "reply "), [17]);
            assert_eq!(numbers_after(sentence, "part "), [part as u64 + 1]);
        }
        // A transcript ends the caller's turn at once, and names its item.
        let heard = transcript(42);
        assert!(!switchboard_actors::turns::sounds_unfinished(&heard));
        assert_eq!(
            numbers_after(&format!("{heard} {}", transcript(43)), "item "),
            [42, 43]
        );
    }

    #[test]
    fn events_are_one_data_line_and_a_blank_line() {
        let event = sse(&chunk(json!({"content": "Hi"}), None));
        assert!(event.starts_with("data: {"));
        assert!(event.ends_with("}\n\n"));
        assert_eq!(event.matches('\n').count(), 2);
        let data: Value = serde_json::from_str(&event["data: ".len()..event.len() - 2]).unwrap();
        assert_eq!(data["choices"][0]["delta"]["content"], "Hi");
    }
}
