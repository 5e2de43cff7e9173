//! A stand-in model vendor on loopback, speaking the OpenAI-compatible API and scripted per
//! test, and the vendor clients driven against it.
//!
//! - `POST /v1/chat/completions`: the next scripted [`Reply`], streamed as server-sent events
//!   (text pieces, tool calls with their arguments in two pieces, the finish reason, the usage,
//!   `[DONE]`) after its delays, or its error status. Every request body is kept.
//! - `POST /v1/audio/transcriptions`: the next scripted text after its delay; every upload's
//!   form fields and audio are kept.
//! - `POST /v1/audio/speech`: OpenAI's `pcm` (24 kHz, 16-bit), a tone 50 ms per character.
//!
//! Past 600 lines by a little, on purpose: the stand-in and the tests of the clients against it
//! read together, one scripted answer beside the test that asks for it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures_util::StreamExt;
use serde_json::{Value, json};
use switchboard::config::VendorSettings;
use switchboard::edge::vendors::{Endpoint, OpenAiChat, OpenAiTranscriber, Timeouts};
use switchboard_actors::agent::Speech;
use switchboard_actors::vendors::{
    ChatEvent, ChatMessage, ChatModel, ChatRequest, ToolCall, ToolSpec, Transcriber, Usage,
    VendorError,
};

/// One scripted chat answer.
#[derive(Clone, Default)]
pub struct Reply {
    /// Before the answer's status and first byte.
    pub first_byte: Duration,
    /// Before every later chunk.
    pub gap: Duration,
    pub text: Vec<String>,
    pub tool_calls: Vec<ToolCall>,
    /// An error status and message instead of a stream.
    pub error: Option<(StatusCode, String)>,
}

impl Reply {
    pub fn text(pieces: &[&str]) -> Reply {
        Reply {
            text: pieces.iter().map(|p| p.to_string()).collect(),
            ..Reply::default()
        }
    }

    pub fn tool_calls(calls: &[(&str, &str, &str)]) -> Reply {
        Reply {
            tool_calls: calls
                .iter()
                .map(|(id, name, arguments)| ToolCall {
                    id: id.to_string(),
                    name: name.to_string(),
                    arguments: arguments.to_string(),
                })
                .collect(),
            ..Reply::default()
        }
    }

    pub fn error(status: StatusCode, message: &str) -> Reply {
        Reply {
            error: Some((status, message.to_string())),
            ..Reply::default()
        }
    }

    pub fn delayed(self, first_byte: Duration, gap: Duration) -> Reply {
        Reply {
            first_byte,
            gap,
            ..self
        }
    }

    /// The chunks' data, in order.
    fn chunks(&self) -> Vec<String> {
        let chunk = |delta: Value, finish: Option<&str>| {
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
            .to_string()
        };
        let mut chunks = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
        for piece in &self.text {
            chunks.push(chunk(json!({"content": piece}), None));
        }
        for (index, call) in self.tool_calls.iter().enumerate() {
            chunks.push(chunk(
                json!({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                       "function": {"name": call.name, "arguments": ""}}]}),
                None,
            ));
            let half = call.arguments.len() / 2;
            let half = (half..=call.arguments.len())
                .find(|&i| call.arguments.is_char_boundary(i))
                .unwrap_or(0);
            for piece in [&call.arguments[..half], &call.arguments[half..]] {
                chunks.push(chunk(
                    json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                    None,
                ));
            }
        }
        let finish = if self.tool_calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        };
        chunks.push(chunk(json!({}), Some(finish)));
        let completion = self.text.len() + self.tool_calls.len();
        chunks.push(
            json!({"id": "chatcmpl-1", "choices": [], "usage":
                   {"prompt_tokens": 10, "completion_tokens": completion,
                    "total_tokens": 10 + completion}})
            .to_string(),
        );
        chunks.push("[DONE]".into());
        chunks
    }
}

/// What a transcription request carried.
#[derive(Clone, Debug)]
pub struct Upload {
    pub authorization: Option<String>,
    /// The text fields (`model`, `language`, `response_format`, ...).
    pub fields: HashMap<String, String>,
    pub filename: Option<String>,
    pub sample_rate: u32,
    pub samples: usize,
}

#[derive(Default)]
struct Script {
    replies: Mutex<VecDeque<Reply>>,
    chat_requests: Mutex<Vec<(Option<String>, Value)>>,
    transcripts: Mutex<VecDeque<(String, Duration)>>,
    uploads: Mutex<Vec<Upload>>,
}

/// The stand-in vendor, serving until the test's runtime ends.
pub struct VendorServer {
    /// `http://127.0.0.1:<port>/v1`.
    pub base_url: String,
    script: Arc<Script>,
}

impl VendorServer {
    pub async fn start() -> VendorServer {
        let script = Arc::new(Script::default());
        let app = axum::Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/audio/transcriptions", post(transcription))
            .route("/v1/audio/speech", post(speech))
            .with_state(script.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        VendorServer {
            base_url: format!("http://{addr}/v1"),
            script,
        }
    }

    /// Queues the answer to the next chat request.
    pub fn reply(&self, reply: Reply) {
        self.script.replies.lock().unwrap().push_back(reply);
    }

    /// Queues the answer to the next transcription, given after `delay`.
    pub fn transcript(&self, text: &str, delay: Duration) {
        let mut transcripts = self.script.transcripts.lock().unwrap();
        transcripts.push_back((text.to_string(), delay));
    }

    /// The chat requests received: their `Authorization` header and body.
    pub fn chat_requests(&self) -> Vec<(Option<String>, Value)> {
        self.script.chat_requests.lock().unwrap().clone()
    }

    /// The chat requests of conversations (they offer the agent's tools, `end_call` at least),
    /// without the end-of-call analyses (which offer none).
    pub fn conversation_requests(&self) -> Vec<(Option<String>, Value)> {
        let mut requests = self.chat_requests();
        requests.retain(|(_, body)| body.get("tools").is_some());
        requests
    }

    pub fn uploads(&self) -> Vec<Upload> {
        self.script.uploads.lock().unwrap().clone()
    }

    /// Makes the service's chat model (`test-llm`) and speech to text (`test-stt`) this
    /// server, without a key.
    pub fn serve(&self, config: &mut switchboard::Config) {
        let settings = |model: &str| VendorSettings {
            base_url: self.base_url.clone(),
            api_key: None,
            model: model.into(),
        };
        config.llm = Some(settings("test-llm"));
        config.stt = Some(settings("test-stt"));
    }

    /// This server as an endpoint: `key`, `model` and `timeouts`.
    pub fn endpoint(&self, key: &str, model: &str, timeouts: Timeouts) -> Endpoint {
        let settings = VendorSettings {
            base_url: self.base_url.clone(),
            api_key: Some(key.into()),
            model: model.into(),
        };
        Endpoint::new(settings, timeouts).unwrap()
    }

    /// The chat client for this server, with `timeouts`.
    pub fn chat(&self, timeouts: Timeouts) -> OpenAiChat {
        let endpoint = self.endpoint("sk-test-secret", "test-llm", timeouts);
        OpenAiChat { endpoint }
    }
}

fn authorization(headers: &HeaderMap) -> Option<String> {
    let value = headers.get("authorization")?;
    value.to_str().ok().map(str::to_string)
}

async fn chat(State(script): State<Arc<Script>>, headers: HeaderMap, body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let seen = (authorization(&headers), request);
    script.chat_requests.lock().unwrap().push(seen);
    let next = script.replies.lock().unwrap().pop_front();
    let Some(reply) = next else {
        let error = json!({"error": {"message": "no scripted reply"}});
        return (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response();
    };
    tokio::time::sleep(reply.first_byte).await;
    if let Some((status, message)) = &reply.error {
        let error = json!({"error": {"message": message, "type": "server_error"}});
        return (*status, error.to_string()).into_response();
    }
    let gap = reply.gap;
    let chunks = reply.chunks().into_iter().enumerate();
    let events = futures_util::stream::iter(chunks).then(move |(i, data)| async move {
        if i > 0 {
            tokio::time::sleep(gap).await;
        }
        Ok::<_, std::convert::Infallible>(format!("data: {data}\n\n"))
    });
    let headers = [("content-type", "text/event-stream")];
    (headers, Body::from_stream(events)).into_response()
}

/// The parts of a `multipart/form-data` body: name, file name, content.
fn form_parts(headers: &HeaderMap, body: &[u8]) -> Vec<(String, Option<String>, Vec<u8>)> {
    let content_type = headers.get("content-type").unwrap().to_str().unwrap();
    let boundary = content_type.split("boundary=").nth(1).unwrap();
    let delimiter = format!("\r\n--{boundary}").into_bytes();
    // A leading CRLF makes the first delimiter look like the others.
    let body = [b"\r\n".as_slice(), body].concat();
    let mut parts = Vec::new();
    let mut rest = body.as_slice();
    while let Some(at) = find(rest, &delimiter) {
        rest = &rest[at + delimiter.len()..];
        if rest.starts_with(b"--") {
            break;
        }
        let rest_of_part = &rest[2..];
        let end = find(rest_of_part, &delimiter).unwrap();
        let part = &rest_of_part[..end];
        let split = find(part, b"\r\n\r\n").unwrap();
        let head = String::from_utf8_lossy(&part[..split]).into_owned();
        let quoted = |key: &str| {
            let start = head.find(&format!("{key}=\""))? + key.len() + 2;
            let len = head[start..].find('"')?;
            Some(head[start..start + len].to_string())
        };
        parts.push((
            quoted("name").unwrap(),
            quoted("filename"),
            part[split + 4..].to_vec(),
        ));
        rest = rest_of_part;
    }
    parts
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

async fn transcription(
    State(script): State<Arc<Script>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut upload = Upload {
        authorization: authorization(&headers),
        fields: HashMap::new(),
        filename: None,
        sample_rate: 0,
        samples: 0,
    };
    for (name, filename, content) in form_parts(&headers, &body) {
        if name == "file" {
            let wav = hound::WavReader::new(std::io::Cursor::new(content)).unwrap();
            upload.sample_rate = wav.spec().sample_rate;
            upload.samples = wav.len() as usize;
            upload.filename = filename;
        } else {
            let value = String::from_utf8(content).unwrap();
            upload.fields.insert(name, value);
        }
    }
    script.uploads.lock().unwrap().push(upload);
    let next = script.transcripts.lock().unwrap().pop_front();
    let (text, delay) = next.unwrap_or_default();
    tokio::time::sleep(delay).await;
    axum::Json(json!({"text": text})).into_response()
}

async fn speech(body: axum::Json<Value>) -> Response {
    let chars = body["input"].as_str().unwrap_or("").chars().count();
    // 50 ms of a 440 Hz tone per character, at 24 kHz.
    let pcm: Vec<u8> = (0..chars * 1200)
        .flat_map(|i| {
            let t = i as f64 / 24_000.0;
            ((8000.0 * (2.0 * std::f64::consts::PI * 440.0 * t).sin()) as i16).to_le_bytes()
        })
        .collect();
    pcm.into_response()
}

/// All of a completion's events, or the error that ended it.
async fn collect(chat: &OpenAiChat, request: ChatRequest) -> Result<Vec<ChatEvent>, VendorError> {
    let mut stream = chat.stream(request).await?;
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event?);
    }
    Ok(events)
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest {
        messages: vec![
            ChatMessage::System("You answer the phone.".into()),
            ChatMessage::User(text.into()),
        ],
        ..ChatRequest::default()
    }
}

#[tokio::test]
async fn a_streamed_reply_arrives_in_pieces() {
    let vendor = VendorServer::start().await;
    vendor.reply(
        Reply::text(&["Hello", ", this is", " the front desk."])
            .delayed(Duration::ZERO, Duration::from_millis(20)),
    );
    let chat = vendor.chat(Timeouts::default());
    let events = collect(&chat, ask("Hi")).await.unwrap();
    assert_eq!(
        events,
        vec![
            ChatEvent::Text("Hello".into()),
            ChatEvent::Text(", this is".into()),
            ChatEvent::Text(" the front desk.".into()),
            ChatEvent::Done {
                finish_reason: Some("stop".into()),
                usage: Some(Usage {
                    prompt_tokens: 10,
                    completion_tokens: 3
                }),
            },
        ]
    );
    let requests = vendor.chat_requests();
    let (auth, body) = &requests[0];
    assert_eq!(auth.as_deref(), Some("Bearer sk-test-secret"));
    assert_eq!(body["model"], "test-llm");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(
        body["messages"][1],
        json!({"role": "user", "content": "Hi"})
    );
    assert!(body.get("tools").is_none(), "no tools, no `tools`: {body}");
}

#[tokio::test]
async fn tool_calls_come_whole_and_their_results_go_back() {
    let vendor = VendorServer::start().await;
    vendor.reply(Reply::tool_calls(&[
        ("call_1", "check_calendar", r#"{"day":"monday"}"#),
        ("call_2", "lookup_caller", r#"{"number":"+15550100"}"#),
    ]));
    vendor.reply(Reply::text(&["Monday at ten works."]));
    let chat = vendor.chat(Timeouts::default());
    let tools = vec![ToolSpec {
        name: "check_calendar".into(),
        description: "Free slots on a day".into(),
        parameters: json!({"type": "object", "properties": {"day": {"type": "string"}}}),
    }];
    let mut request = ChatRequest {
        tools: tools.clone(),
        ..ask("Can I come Monday?")
    };
    let events = collect(&chat, request.clone()).await.unwrap();
    let calls: Vec<ToolCall> = events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::ToolCall(call) => Some(call.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 2, "{events:?}");
    assert_eq!(calls[0].name, "check_calendar");
    assert_eq!(calls[0].arguments, r#"{"day":"monday"}"#);
    assert_eq!(calls[1].id, "call_2");
    assert_eq!(calls[1].arguments, r#"{"number":"+15550100"}"#);
    assert!(matches!(
        events.last(),
        Some(ChatEvent::Done { finish_reason: Some(reason), .. }) if reason == "tool_calls"
    ));

    request.messages.push(ChatMessage::Assistant {
        text: None,
        tool_calls: calls.clone(),
    });
    for call in &calls {
        request.messages.push(ChatMessage::Tool {
            tool_call_id: call.id.clone(),
            content: "ok".into(),
        });
    }
    let events = collect(&chat, request).await.unwrap();
    assert_eq!(events[0], ChatEvent::Text("Monday at ten works.".into()));

    let requests = vendor.chat_requests();
    let first = &requests[0].1;
    assert_eq!(
        first["tools"][0],
        json!({"type": "function", "function": {
            "name": "check_calendar",
            "description": "Free slots on a day",
            "parameters": tools[0].parameters,
        }})
    );
    let messages = requests[1].1["messages"].as_array().unwrap().clone();
    assert_eq!(messages[2]["role"], "assistant");
    assert_eq!(messages[2]["tool_calls"][1]["id"], "call_2");
    assert_eq!(
        messages[2]["tool_calls"][0]["function"]["arguments"],
        r#"{"day":"monday"}"#
    );
    assert_eq!(
        messages[3],
        json!({"role": "tool", "tool_call_id": "call_1", "content": "ok"})
    );
}

#[tokio::test]
async fn a_slow_vendor_times_out_quickly() {
    let vendor = VendorServer::start().await;
    let timeouts = Timeouts {
        first_byte: Duration::from_millis(300),
        idle: Duration::from_millis(300),
        ..Timeouts::default()
    };
    let chat = vendor.chat(timeouts);

    // No answer at all in time.
    vendor.reply(Reply::text(&["late"]).delayed(Duration::from_secs(30), Duration::ZERO));
    let started = std::time::Instant::now();
    let err = collect(&chat, ask("Hi")).await.unwrap_err();
    assert_eq!(err, VendorError::Timeout);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    // The answer starts, then stalls between events.
    vendor.reply(Reply::text(&["Hel", "lo"]).delayed(Duration::ZERO, Duration::from_secs(30)));
    let started = std::time::Instant::now();
    let mut stream = chat.stream(ask("Hi")).await.unwrap();
    let mut seen = Vec::new();
    while let Some(event) = stream.next().await {
        seen.push(event);
    }
    assert_eq!(
        seen,
        vec![Err(VendorError::Timeout)],
        "the role chunk carries no text"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    // The whole exchange is capped too, however lively the stream.
    let capped = vendor.chat(Timeouts {
        total: Duration::from_millis(400),
        ..Timeouts::default()
    });
    let pieces = ["word "; 40];
    vendor.reply(Reply::text(&pieces).delayed(Duration::ZERO, Duration::from_millis(50)));
    let err = collect(&capped, ask("Hi")).await.unwrap_err();
    assert_eq!(err, VendorError::Timeout);
}

#[tokio::test]
async fn a_failing_vendor_is_an_error_naming_its_status() {
    let vendor = VendorServer::start().await;
    let chat = vendor.chat(Timeouts::default());
    let long = "y".repeat(1000);
    vendor.reply(Reply::error(
        StatusCode::INTERNAL_SERVER_ERROR,
        &format!("model crashed (key sk-test-secret) {long}"),
    ));
    let err = collect(&chat, ask("Hi")).await.unwrap_err();
    let VendorError::Status { code, message } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(*code, 500);
    assert!(
        message.starts_with("model crashed (key [redacted])"),
        "{message}"
    );
    assert!(message.chars().count() <= 201, "shortened: {message}");
    assert!(!err.to_string().contains("sk-test-secret"));

    // Nobody listening: unreachable, and the URL is not in the message.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let settings = VendorSettings {
        base_url: format!("http://{addr}/v1?token=query-secret"),
        api_key: None,
        model: "m".into(),
    };
    let nowhere = OpenAiChat {
        endpoint: Endpoint::new(settings, Timeouts::default()).unwrap(),
    };
    let err = collect(&nowhere, ask("Hi")).await.unwrap_err();
    assert!(matches!(err, VendorError::Unreachable(_)), "{err:?}");
    assert!(!err.to_string().contains("query-secret"), "{err}");
}

#[tokio::test]
async fn speech_is_transcribed_through_a_wav_upload() {
    let vendor = VendorServer::start().await;
    vendor.transcript(" I'd like to book Monday. ", Duration::from_millis(50));
    let stt = OpenAiTranscriber {
        endpoint: vendor.endpoint("sk-stt", "whisper-test", Timeouts::default()),
    };
    let audio: Vec<i16> = (0..8000).map(|i| ((i % 40) * 200 - 4000) as i16).collect();
    let transcript = stt.transcribe(&audio, 8000, "en-US").await.unwrap();
    assert_eq!(transcript.text, "I'd like to book Monday.");
    let uploads = vendor.uploads();
    let upload = &uploads[0];
    assert_eq!(upload.authorization.as_deref(), Some("Bearer sk-stt"));
    assert_eq!((upload.samples, upload.sample_rate), (8000, 8000));
    assert_eq!(upload.filename.as_deref(), Some("audio.wav"));
    assert_eq!(upload.fields["model"], "whisper-test");
    assert_eq!(upload.fields["language"], "en");
    assert_eq!(upload.fields["response_format"], "json");

    // No language: the vendor guesses; too slow an answer times out.
    vendor.transcript("late", Duration::from_secs(30));
    let impatient = OpenAiTranscriber {
        endpoint: Endpoint {
            timeouts: Timeouts {
                first_byte: Duration::from_millis(300),
                ..Timeouts::default()
            },
            ..stt.endpoint
        },
    };
    let err = impatient.transcribe(&audio, 8000, "").await.unwrap_err();
    assert_eq!(err, VendorError::Timeout);
    assert!(!vendor.uploads()[1].fields.contains_key("language"));
}

#[tokio::test]
async fn the_stand_in_speaks_as_long_as_the_text() {
    switchboard::edge::tls::install_crypto();
    let vendor = VendorServer::start().await;
    let speech = switchboard::edge::speech::OpenAiSpeech {
        base_url: vendor.base_url.clone(),
        api_key: None,
        model: "tts-test".into(),
        client: reqwest::Client::new(),
    };
    let short = speech.speak("Hi", "", "en", 8000).await.unwrap();
    let long = speech.speak("Hello there", "", "en", 8000).await.unwrap();
    assert_eq!(short.len(), 800, "100 ms at 8 kHz");
    assert_eq!(long.len(), 4400);
    assert!(switchboard_sip::vad::level_db(&long) > -30.0);
}
