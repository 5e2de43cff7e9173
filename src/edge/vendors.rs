//! Model vendors over HTTP: the clients behind the [`ChatModel`] and [`Transcriber`] ports.
//! Both speak the OpenAI-compatible wire format, so OpenAI itself, Ollama, vLLM, llama.cpp's
//! server and faster-whisper servers all work.
//!
//! - [`OpenAiChat`]: `POST {base}/chat/completions`, streamed as server-sent events, with tools.
//! - [`OpenAiTranscriber`]: `POST {base}/audio/transcriptions`, the audio uploaded as a WAV file.
//!
//! Each talks to an [`Endpoint`] (base URL, key, model, HTTP client), and every request runs
//! under its [`Timeouts`]; any of them ends it with [`VendorError::Timeout`].
//!
//! The base URLs are the operator's configuration (`serve` flags), never a workspace's input,
//! so they do not go through the outbound URL policy of [`crate::edge::egress`]: a model on the
//! operator's own network (a local Ollama, say) is the usual case.
//!
//! API keys travel only in the `Authorization` header. They are never logged, `Debug` does not
//! show them, and an error repeating a vendor's message has them cut out; errors never carry a
//! URL.
//!
//! Past 600 lines on purpose: two clients of one wire format share their streaming and error
//! reading here, and more than a third of the file is their tests against canned answers.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use switchboard_actors::vendors::{
    ChatEvent, ChatMessage, ChatModel, ChatRequest, ChatStream, ToolCall, Transcriber, Transcript,
    Usage, VendorError,
};
use tokio::time::{Instant, timeout_at};

/// An OpenAI-compatible model endpoint: a chat model (`--llm-*`) or speech to text (`--stt-*`).
/// The URL is the operator's, so it is not held to the outbound URL policy webhooks obey.
#[derive(Clone, PartialEq, Eq)]
pub struct VendorSettings {
    /// The API base, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:11434/v1`.
    pub base_url: String,
    /// Sent as the bearer token; never logged or shown.
    pub api_key: Option<String>,
    pub model: String,
}

impl std::fmt::Debug for VendorSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VendorSettings")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("model", &self.model)
            .finish()
    }
}

impl VendorSettings {
    /// Refuses a base URL that is not `http` or `https`, and an empty model; `flag` names the
    /// setting in the message.
    pub fn check(&self, flag: &str) -> anyhow::Result<()> {
        let url = url::Url::parse(&self.base_url)
            .map_err(|e| anyhow::anyhow!("--{flag}-url is not a URL: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            anyhow::bail!("--{flag}-url must be http or https");
        }
        if self.model.trim().is_empty() {
            anyhow::bail!("--{flag}-model is empty");
        }
        Ok(())
    }
}

/// How long a vendor request may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Opening the connection (TCP and TLS), for clients built by [`Timeouts::client`].
    /// Default 3 s.
    pub connect: Duration,
    /// From sending the request to the answer's start: the first event of a chat stream, the
    /// status of a transcription (which comes once the audio is transcribed). Default 10 s.
    pub first_byte: Duration,
    /// The longest wait between two events of a chat stream. Default 10 s.
    pub idle: Duration,
    /// The whole exchange, from sending the request to the answer's last byte. Default 60 s.
    pub total: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(3),
            first_byte: Duration::from_secs(10),
            idle: Duration::from_secs(10),
            total: Duration::from_secs(60),
        }
    }
}

impl Timeouts {
    /// An HTTP client that gives up connecting after `connect`.
    pub fn client(&self) -> reqwest::Result<reqwest::Client> {
        crate::edge::tls::install_crypto();
        reqwest::Client::builder()
            .connect_timeout(self.connect)
            .build()
    }

    /// When the answer must have started, and when it must be over, for a request sent now.
    fn deadlines(&self) -> (Instant, Instant) {
        let now = Instant::now();
        let total = now + self.total;
        ((now + self.first_byte).min(total), total)
    }
}

/// Longest vendor message an error repeats, in characters.
const MAX_MESSAGE: usize = 200;
/// Largest error or transcription answer read.
const MAX_ANSWER: usize = 1 << 20;
/// Largest event of a chat stream (its text not yet split into lines included).
const MAX_EVENT: usize = 1 << 20;

/// `message` shortened and with `secret` cut out.
fn shorten(message: &str, secret: Option<&str>) -> String {
    let mut message = message.trim().to_string();
    if let Some(secret) = secret.filter(|s| !s.is_empty()) {
        message = message.replace(secret, "[redacted]");
    }
    match message.char_indices().nth(MAX_MESSAGE) {
        Some((i, _)) => format!("{}…", &message[..i]),
        None => message,
    }
}

/// The text of a vendor's error: `{"message": ...}` (OpenAI and most servers), `{"detail": ...}`
/// (Python servers), a plain string, or else the JSON as it came.
fn vendor_message(error: &Value) -> String {
    let text = match error {
        Value::String(s) => Some(s.as_str()),
        Value::Object(o) => o
            .get("message")
            .or_else(|| o.get("detail"))
            .and_then(Value::as_str),
        _ => None,
    };
    text.map_or_else(|| error.to_string(), str::to_string)
}

/// A failed request: a timeout, or the connection failing.
fn transport(error: reqwest::Error) -> VendorError {
    if error.is_timeout() {
        return VendorError::Timeout;
    }
    let error = error.without_url();
    // The causes say why (refused, reset, name unknown); none of them names the URL.
    let mut text = error.to_string();
    let mut cause = std::error::Error::source(&error);
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    VendorError::Unreachable(text)
}

/// Sends `request` with `api_key` as its bearer token and waits for the answer's status until
/// `deadline`. A status other than success is an error carrying the vendor's message.
async fn send(
    request: reqwest::RequestBuilder,
    api_key: Option<&str>,
    deadline: Instant,
    total: Instant,
) -> Result<reqwest::Response, VendorError> {
    let request = match api_key {
        Some(key) => request.bearer_auth(key),
        None => request,
    };
    let response = timeout_at(deadline, request.send())
        .await
        .map_err(|_| VendorError::Timeout)?
        .map_err(transport)?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    // What the vendor says is worth waiting a little for, not past the exchange's end.
    let body = read_answer(response, total).await.unwrap_or_default();
    let message = match serde_json::from_slice::<Value>(&body) {
        Ok(json) => vendor_message(json.get("error").unwrap_or(&json)),
        Err(_) => String::from_utf8_lossy(&body).into_owned(),
    };
    let message = match shorten(&message, api_key) {
        m if m.is_empty() => status.canonical_reason().unwrap_or("").to_string(),
        m => m,
    };
    Err(VendorError::Status {
        code: status.as_u16(),
        message,
    })
}

/// The answer's body, up to [`MAX_ANSWER`] bytes, read until `deadline`.
async fn read_answer(
    mut response: reqwest::Response,
    deadline: Instant,
) -> Result<Vec<u8>, VendorError> {
    let mut body = Vec::new();
    while let Some(chunk) = timeout_at(deadline, response.chunk())
        .await
        .map_err(|_| VendorError::Timeout)?
        .map_err(transport)?
    {
        let room = MAX_ANSWER - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() == MAX_ANSWER {
            break;
        }
    }
    Ok(body)
}

/// Splits a byte stream of server-sent events into the events' data, as it arrives: lines end
/// in `\n` or `\r\n` and may be split anywhere between chunks, a blank line ends an event,
/// several `data:` lines of one event are joined with `\n`, comment lines (`:`) and other
/// fields (`event:`, `id:`, `retry:`) are passed over.
#[derive(Default)]
struct SseParser {
    /// Bytes of a line not yet ended.
    line: Vec<u8>,
    /// The data of the event being read.
    data: String,
    has_data: bool,
}

impl SseParser {
    /// The data of the events `chunk` completes.
    fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        let mut events = Vec::new();
        let mut rest = chunk;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            self.line.extend_from_slice(&rest[..end]);
            rest = &rest[end + 1..];
            let mut line = std::mem::take(&mut self.line);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if let Some(data) = self.line_ended(&line) {
                events.push(data);
            }
        }
        self.line.extend_from_slice(rest);
        events
    }

    /// The data of an event the stream ended in without its blank line.
    fn finish(&mut self) -> Option<String> {
        let line = std::mem::take(&mut self.line);
        let line = line.strip_suffix(b"\r").unwrap_or(&line);
        self.line_ended(line).or_else(|| self.line_ended(b""))
    }

    /// Bytes held for the event being read.
    fn held(&self) -> usize {
        self.line.len() + self.data.len()
    }

    fn line_ended(&mut self, line: &[u8]) -> Option<String> {
        if line.is_empty() {
            if !std::mem::take(&mut self.has_data) {
                return None;
            }
            let mut data = std::mem::take(&mut self.data);
            data.pop(); // the `\n` after the last data line
            return Some(data);
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        if field == "data" {
            self.data.push_str(value);
            self.data.push('\n');
            self.has_data = true;
        }
        None
    }
}

/// A tool call while the model is still writing it.
#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Turns the chunks of an OpenAI-style completion into [`ChatEvent`]s: text deltas as they come,
/// tool calls gathered by their `index` and given out once the model has moved past them (at
/// its `finish_reason`, or at the end), then `Done` with the usage of the last chunk.
#[derive(Default)]
struct ChatDecoder {
    calls: BTreeMap<u64, PartialCall>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    /// Cut out of any error message the vendor sends.
    secret: Option<String>,
    done: bool,
}

impl ChatDecoder {
    /// One chunk (an event's data): a JSON completion chunk, or `[DONE]`.
    fn chunk(&mut self, data: &str, out: &mut VecDeque<Result<ChatEvent, VendorError>>) {
        if self.done {
            return;
        }
        if data.trim() == "[DONE]" {
            return self.end(out);
        }
        let chunk: Value = match serde_json::from_str(data) {
            Ok(chunk) => chunk,
            Err(e) => return self.fail(out, VendorError::Protocol(format!("a chunk: {e}"))),
        };
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            let message = shorten(&vendor_message(error), self.secret.as_deref());
            return self.fail(out, VendorError::Reported(message));
        }
        if let Some(usage) = chunk.get("usage").and_then(read_usage) {
            self.usage = Some(usage);
        }
        let choice = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|choices| {
                choices
                    .iter()
                    .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
            });
        let Some(choice) = choice else {
            return;
        };
        let delta = choice.get("delta").unwrap_or(&Value::Null);
        if let Some(text) = delta.get("content").and_then(Value::as_str)
            && !text.is_empty()
        {
            out.push_back(Ok(ChatEvent::Text(text.to_string())));
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for call in calls {
                self.tool_delta(call);
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_string());
            self.flush(out);
        }
    }

    /// A piece of a tool call. Without an `index` (some servers send whole calls), a piece
    /// with an id of its own starts a new call and any other continues the latest.
    fn tool_delta(&mut self, delta: &Value) {
        let id = delta
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty());
        let index = match delta.get("index").and_then(Value::as_u64) {
            Some(index) => index,
            None => match self.calls.last_key_value() {
                Some((&last, call)) if id.is_some_and(|id| id != call.id) => last + 1,
                Some((&last, _)) => last,
                None => 0,
            },
        };
        let call = self.calls.entry(index).or_default();
        if let Some(id) = id {
            call.id = id.to_string();
        }
        let function = delta.get("function").unwrap_or(&Value::Null);
        // The name comes once, though some servers repeat it with every piece.
        if let Some(name) = function.get("name").and_then(Value::as_str)
            && name != call.name
        {
            call.name.push_str(name);
        }
        match function.get("arguments") {
            Some(Value::String(piece)) => call.arguments.push_str(piece),
            Some(Value::Null) | None => {}
            // A server that sends the arguments as a JSON object rather than as its text.
            Some(other) => call.arguments.push_str(&other.to_string()),
        }
    }

    /// Gives out the tool calls gathered so far, in their order.
    fn flush(&mut self, out: &mut VecDeque<Result<ChatEvent, VendorError>>) {
        for (index, call) in std::mem::take(&mut self.calls) {
            if call.name.is_empty() {
                return self.fail(
                    out,
                    VendorError::Protocol("a tool call without a name".into()),
                );
            }
            out.push_back(Ok(ChatEvent::ToolCall(ToolCall {
                id: if call.id.is_empty() {
                    format!("call_{index}")
                } else {
                    call.id
                },
                name: call.name,
                arguments: if call.arguments.trim().is_empty() {
                    "{}".into()
                } else {
                    call.arguments
                },
            })));
        }
    }

    /// The end of the completion: what is left, then `Done`.
    fn end(&mut self, out: &mut VecDeque<Result<ChatEvent, VendorError>>) {
        if self.done {
            return;
        }
        self.flush(out);
        if self.done {
            return;
        }
        self.done = true;
        out.push_back(Ok(ChatEvent::Done {
            finish_reason: self.finish_reason.take(),
            usage: self.usage.take(),
        }));
    }

    fn fail(&mut self, out: &mut VecDeque<Result<ChatEvent, VendorError>>, error: VendorError) {
        self.done = true;
        self.calls.clear();
        out.push_back(Err(error));
    }
}

fn read_usage(usage: &Value) -> Option<Usage> {
    Some(Usage {
        prompt_tokens: usage.get("prompt_tokens")?.as_u64()?,
        completion_tokens: usage.get("completion_tokens")?.as_u64()?,
    })
}

/// A chat completion stream's bytes, read into events.
#[derive(Default)]
struct ChatParser {
    sse: SseParser,
    decoder: ChatDecoder,
    ready: VecDeque<Result<ChatEvent, VendorError>>,
}

impl ChatParser {
    /// Reads the next bytes; whether they completed an event.
    fn push(&mut self, bytes: &[u8]) -> bool {
        let events = self.sse.push(bytes);
        for data in &events {
            self.decoder.chunk(data, &mut self.ready);
        }
        if self.sse.held() > MAX_EVENT {
            let error = VendorError::Protocol("an event is too large".into());
            self.decoder.fail(&mut self.ready, error);
        }
        !events.is_empty()
    }

    /// The stream has ended.
    fn finish(&mut self) {
        if let Some(data) = self.sse.finish() {
            self.decoder.chunk(&data, &mut self.ready);
        }
        self.decoder.end(&mut self.ready);
    }
}

/// A streaming answer being read under its timeouts.
struct ChatReader {
    response: reqwest::Response,
    parser: ChatParser,
    /// When the next event must have come: the first-event deadline, then `idle` after each.
    next_by: Instant,
    total: Instant,
    idle: Duration,
    over: bool,
}

impl ChatReader {
    async fn next(&mut self) -> Option<Result<ChatEvent, VendorError>> {
        loop {
            if let Some(item) = self.parser.ready.pop_front() {
                if matches!(item, Err(_) | Ok(ChatEvent::Done { .. })) {
                    self.over = true;
                    self.parser.ready.clear();
                }
                return Some(item);
            }
            if self.over {
                return None;
            }
            match timeout_at(self.next_by.min(self.total), self.response.chunk()).await {
                Err(_) => self.parser.ready.push_back(Err(VendorError::Timeout)),
                Ok(Err(e)) => self.parser.ready.push_back(Err(transport(e))),
                Ok(Ok(Some(bytes))) => {
                    if self.parser.push(&bytes) {
                        self.next_by = Instant::now() + self.idle;
                    }
                }
                Ok(Ok(None)) => self.parser.finish(),
            }
        }
    }
}

/// An OpenAI-compatible API: where it is, its key and model, and how long to wait for it.
pub struct Endpoint {
    pub settings: VendorSettings,
    /// Build it with [`Timeouts::client`] for the connect timeout to hold.
    pub client: reqwest::Client,
    pub timeouts: Timeouts,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("settings", &self.settings)
            .field("timeouts", &self.timeouts)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// The endpoint with a client of its own, which gives up connecting after
    /// `timeouts.connect`.
    pub fn new(settings: VendorSettings, timeouts: Timeouts) -> reqwest::Result<Endpoint> {
        Ok(Endpoint {
            settings,
            client: timeouts.client()?,
            timeouts,
        })
    }

    fn key(&self) -> Option<&str> {
        self.settings.api_key.as_deref()
    }

    /// A `POST {base}/{path}`, not yet authorized (see [`send`]).
    fn post(&self, path: &str) -> reqwest::RequestBuilder {
        let base = self.settings.base_url.trim_end_matches('/');
        self.client.post(format!("{base}/{path}"))
    }
}

/// An OpenAI-compatible chat completions endpoint, streamed.
///
/// Requests carry `stream: true` and ask for the usage at the end; tools go in OpenAI's
/// `function` form, and `max_tokens` under that name (which every compatible server reads).
/// A server that answers with one JSON completion rather than a stream is read the same way.
#[derive(Debug)]
pub struct OpenAiChat {
    pub endpoint: Endpoint,
}

/// The request body of a streamed completion.
fn chat_body(model: &str, request: &ChatRequest) -> Value {
    let messages: Vec<Value> = request.messages.iter().map(wire_message).collect();
    let mut body = json!({
        "model": model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|tool| {
                json!({"type": "function", "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                }})
            })
            .collect();
        if let Some(name) = &request.force {
            body["tool_choice"] = json!({"type": "function", "function": {"name": name}});
        }
    }
    // Through its decimal text, so 0.7 goes out as 0.7 rather than as 0.699999988...
    if let Some(t) = request.temperature
        && let Ok(t) = t.to_string().parse::<f64>()
        && let Some(t) = serde_json::Number::from_f64(t)
    {
        body["temperature"] = Value::Number(t);
    }
    if let Some(max) = request.max_tokens {
        body["max_tokens"] = json!(max);
    }
    body
}

fn wire_message(message: &ChatMessage) -> Value {
    match message {
        ChatMessage::System(text) => json!({"role": "system", "content": text}),
        ChatMessage::User(text) => json!({"role": "user", "content": text}),
        ChatMessage::Assistant { text, tool_calls } if tool_calls.is_empty() => {
            json!({"role": "assistant", "content": text.as_deref().unwrap_or("")})
        }
        ChatMessage::Assistant { text, tool_calls } => {
            let calls: Vec<Value> = tool_calls
                .iter()
                .map(|call| {
                    json!({"id": call.id, "type": "function", "function": {
                        "name": call.name,
                        "arguments": call.arguments,
                    }})
                })
                .collect();
            json!({"role": "assistant", "content": text, "tool_calls": calls})
        }
        ChatMessage::Tool {
            tool_call_id,
            content,
        } => json!({"role": "tool", "tool_call_id": tool_call_id, "content": content}),
    }
}

#[async_trait]
impl ChatModel for OpenAiChat {
    async fn stream(&self, request: ChatRequest) -> Result<ChatStream, VendorError> {
        let endpoint = &self.endpoint;
        let (first, total) = endpoint.timeouts.deadlines();
        let post = endpoint
            .post("chat/completions")
            .json(&chat_body(&endpoint.settings.model, &request));
        let response = send(post, endpoint.key(), first, total).await?;
        let mut parser = ChatParser::default();
        parser.decoder.secret = endpoint.settings.api_key.clone();
        let is_json = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if is_json {
            // One completion, not streamed: its message is read as a single delta.
            let body = read_answer(response, total).await?;
            let mut completion: Value = serde_json::from_slice(&body)
                .map_err(|e| VendorError::Protocol(format!("the completion: {e}")))?;
            if let Some(choices) = completion.get_mut("choices").and_then(Value::as_array_mut) {
                for choice in choices.iter_mut().filter_map(Value::as_object_mut) {
                    if let Some(message) = choice.remove("message") {
                        choice.insert("delta".into(), message);
                    }
                }
            }
            parser
                .decoder
                .chunk(&completion.to_string(), &mut parser.ready);
            parser.decoder.end(&mut parser.ready);
            if let Some(Err(e)) = parser.ready.front() {
                return Err(e.clone());
            }
            return Ok(Box::pin(futures_util::stream::iter(parser.ready)));
        }
        let reader = ChatReader {
            response,
            parser,
            next_by: first,
            total,
            idle: endpoint.timeouts.idle,
            over: false,
        };
        Ok(Box::pin(futures_util::stream::unfold(
            reader,
            |mut reader| async move { reader.next().await.map(|item| (item, reader)) },
        )))
    }
}

/// An OpenAI-compatible transcription endpoint (OpenAI's `whisper-1`, faster-whisper servers,
/// ...): the audio goes up as a 16-bit mono WAV file, `response_format=json`.
#[derive(Debug)]
pub struct OpenAiTranscriber {
    pub endpoint: Endpoint,
}

/// The ISO 639 code of a language tag (`en-US` -> `en`), when it starts with one.
fn language_code(tag: &str) -> Option<String> {
    let primary = tag.trim().split(['-', '_']).next()?;
    ((2..=3).contains(&primary.len()) && primary.chars().all(|c| c.is_ascii_alphabetic()))
        .then(|| primary.to_ascii_lowercase())
}

/// A 16-bit mono PCM WAV file of `samples`.
fn wav(samples: &[i16], sample_rate: u32) -> Result<Vec<u8>, VendorError> {
    let too_long = || VendorError::Protocol("the audio is too long to upload".into());
    let data_len = samples
        .len()
        .checked_mul(2)
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| *n <= u32::MAX - 36)
        .ok_or_else(too_long)?;
    let mut out = Vec::with_capacity(44 + samples.len() * 2);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data_len).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes()); // the fmt chunk's size
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // mono
    out.extend_from_slice(&sample_rate.to_le_bytes());
    out.extend_from_slice(&sample_rate.saturating_mul(2).to_le_bytes()); // bytes per second
    out.extend_from_slice(&2u16.to_le_bytes()); // bytes per frame
    out.extend_from_slice(&16u16.to_le_bytes()); // bits per sample
    out.extend_from_slice(b"data");
    out.extend_from_slice(&data_len.to_le_bytes());
    for sample in samples {
        out.extend_from_slice(&sample.to_le_bytes());
    }
    Ok(out)
}

/// A `multipart/form-data` body: the text `fields`, then `wav` as the file `audio.wav` in the
/// field `file`.
fn multipart(boundary: &str, fields: &[(&str, &str)], wav: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(wav.len() + 512);
    for (name, value) in fields {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; \
             filename=\"audio.wav\"\r\nContent-Type: audio/wav\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(wav);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    body
}

#[async_trait]
impl Transcriber for OpenAiTranscriber {
    async fn transcribe(
        &self,
        audio: &[i16],
        sample_rate: u32,
        language: &str,
    ) -> Result<Transcript, VendorError> {
        if audio.is_empty() {
            return Ok(Transcript::default());
        }
        let file = wav(audio, sample_rate)?;
        let language = language_code(language);
        let endpoint = &self.endpoint;
        let model = endpoint.settings.model.as_str();
        let mut fields = vec![("model", model), ("response_format", "json")];
        if let Some(language) = &language {
            fields.push(("language", language));
        }
        let boundary = format!("switchboard-{:032x}", rand::random::<u128>());
        let post = endpoint
            .post("audio/transcriptions")
            .header(
                reqwest::header::CONTENT_TYPE,
                format!("multipart/form-data; boundary={boundary}"),
            )
            .body(multipart(&boundary, &fields, &file));
        let (first, total) = endpoint.timeouts.deadlines();
        let response = send(post, endpoint.key(), first, total).await?;
        let body = read_answer(response, total).await?;
        let answer: Value = serde_json::from_slice(&body)
            .map_err(|e| VendorError::Protocol(format!("the transcription: {e}")))?;
        if let Some(error) = answer.get("error").filter(|e| !e.is_null()) {
            let message = shorten(&vendor_message(error), endpoint.key());
            return Err(VendorError::Reported(message));
        }
        let text = answer
            .get("text")
            .and_then(Value::as_str)
            .ok_or_else(|| VendorError::Protocol("the transcription has no text".into()))?;
        Ok(Transcript {
            text: text.trim().to_string(),
            language: answer
                .get("language")
                .and_then(Value::as_str)
                .filter(|l| !l.is_empty())
                .map(str::to_string),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A completion as an OpenAI-compatible server streams it: a comment, a role-only first
    /// chunk, text with multi-byte characters, an event whose data spans two lines, fields
    /// other than `data`, two tool calls written in turns, the finish reason, the usage chunk
    /// and `[DONE]`.
    const RECORDED: &str = r#": connected

data: {"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}

data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Héllo"},"finish_reason":null}]}

event: message
id: 3
data: {"id":"c1","choices":[{"index":0,"delta":{"content":" there 👋"},"finish_reason":null}]}

data: {"id":"c1","choices":[{"index":0,
data: "delta":{"content":"!"}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"lookup","arguments":""}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"book","arguments":""}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"q\":"}}]}}]}

: still thinking
data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"day\":"}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"x\"}"}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\"mon\"}"}}]}}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: {"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}

data: [DONE]

"#;

    fn recorded_events() -> Vec<Result<ChatEvent, VendorError>> {
        vec![
            Ok(ChatEvent::Text("Héllo".into())),
            Ok(ChatEvent::Text(" there 👋".into())),
            Ok(ChatEvent::Text("!".into())),
            Ok(ChatEvent::ToolCall(ToolCall {
                id: "call_a".into(),
                name: "lookup".into(),
                arguments: r#"{"q":"x"}"#.into(),
            })),
            Ok(ChatEvent::ToolCall(ToolCall {
                id: "call_b".into(),
                name: "book".into(),
                arguments: r#"{"day":"mon"}"#.into(),
            })),
            Ok(ChatEvent::Done {
                finish_reason: Some("tool_calls".into()),
                usage: Some(Usage {
                    prompt_tokens: 12,
                    completion_tokens: 7,
                }),
            }),
        ]
    }

    /// What a stream arriving in `chunks` reads as.
    fn decode(chunks: &[&[u8]]) -> Vec<Result<ChatEvent, VendorError>> {
        let mut parser = ChatParser::default();
        parser.decoder.secret = Some("sk-secret".into());
        for chunk in chunks {
            parser.push(chunk);
        }
        parser.finish();
        parser.ready.into_iter().collect()
    }

    #[test]
    fn a_recorded_stream_reads_the_same_however_it_is_cut() {
        for recording in [RECORDED.to_string(), RECORDED.replace('\n', "\r\n")] {
            let bytes = recording.as_bytes();
            assert_eq!(decode(&[bytes]), recorded_events());
            for at in 0..=bytes.len() {
                assert_eq!(
                    decode(&[&bytes[..at], &bytes[at..]]),
                    recorded_events(),
                    "cut at byte {at}"
                );
            }
            let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
            assert_eq!(decode(&bytewise), recorded_events());
        }
    }

    #[test]
    fn a_stream_may_end_without_its_last_blank_line_or_done() {
        let cut = RECORDED.trim_end();
        assert_eq!(decode(&[cut.as_bytes()]), recorded_events());
        let without_done = RECORDED.replace("data: [DONE]\n", "");
        assert_eq!(
            decode(&[without_done.trim_end().as_bytes()]),
            recorded_events()
        );
        let only_text = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}";
        assert_eq!(
            decode(&[only_text.as_bytes()]),
            vec![
                Ok(ChatEvent::Text("Hi".into())),
                Ok(ChatEvent::Done {
                    finish_reason: Some("stop".into()),
                    usage: None
                })
            ]
        );
    }

    #[test]
    fn nothing_follows_done() {
        let events = decode(&[b"data: [DONE]\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"late\"}}]}\n\n"]);
        assert_eq!(
            events,
            vec![Ok(ChatEvent::Done {
                finish_reason: None,
                usage: None
            })]
        );
    }

    #[test]
    fn whole_tool_calls_without_an_index_are_told_apart_by_their_ids() {
        let stream = concat!(
            r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"a","function":{"name":"one","arguments":{"n":1}}}]}}]}"#,
            "\n\n",
            r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"b","function":{"name":"two"}}]},"finish_reason":"tool_calls"}]}"#,
            "\n\n",
        );
        let events = decode(&[stream.as_bytes()]);
        assert_eq!(
            events[..2],
            [
                Ok(ChatEvent::ToolCall(ToolCall {
                    id: "a".into(),
                    name: "one".into(),
                    arguments: r#"{"n":1}"#.into()
                })),
                Ok(ChatEvent::ToolCall(ToolCall {
                    id: "b".into(),
                    name: "two".into(),
                    arguments: "{}".into()
                })),
            ]
        );
    }

    #[test]
    fn a_tool_call_without_a_name_is_an_error() {
        let stream = r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#;
        let events = decode(&[stream.as_bytes()]);
        assert!(
            matches!(events[..], [Err(VendorError::Protocol(_))]),
            "{events:?}"
        );
    }

    #[test]
    fn an_error_in_the_stream_ends_it_without_the_key() {
        let long = "x".repeat(500);
        let stream = format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"Hi\"}}}}]}}\n\n\
             data: {{\"error\":{{\"message\":\"overloaded for key sk-secret {long}\",\"type\":\"server_error\"}}}}\n\n\
             data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"more\"}}}}]}}\n\n"
        );
        let events = decode(&[stream.as_bytes()]);
        assert_eq!(events.len(), 2, "{events:?}");
        assert_eq!(events[0], Ok(ChatEvent::Text("Hi".into())));
        let Err(VendorError::Reported(message)) = &events[1] else {
            panic!("{events:?}");
        };
        assert!(message.starts_with("overloaded for key [redacted] xxx"));
        assert_eq!(
            message.chars().count(),
            MAX_MESSAGE + 1,
            "cut, with an ellipsis"
        );
        assert!(
            !events[1]
                .as_ref()
                .unwrap_err()
                .to_string()
                .contains("sk-secret")
        );
    }

    #[test]
    fn bad_vendor_data_is_an_error_not_a_panic() {
        for stream in [
            "data: not json\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0}]}}]}\n\n",
        ] {
            let events = decode(&[stream.as_bytes()]);
            assert!(
                matches!(events[..], [Err(VendorError::Protocol(_))]),
                "{stream}: {events:?}"
            );
        }
        // Shapes it does not know are passed over.
        let odd =
            "data: {\"choices\":\"none\",\"usage\":{\"prompt_tokens\":\"many\"}}\n\ndata: 42\n\n";
        assert_eq!(
            decode(&[odd.as_bytes()]),
            vec![Ok(ChatEvent::Done {
                finish_reason: None,
                usage: None
            })]
        );
        let mut parser = ChatParser::default();
        parser.push(b"data: ");
        parser.push(&vec![b'x'; MAX_EVENT + 1]);
        assert!(matches!(
            parser.ready.pop_front(),
            Some(Err(VendorError::Protocol(_)))
        ));
    }

    #[test]
    fn vendor_messages_are_read_from_the_usual_error_shapes() {
        assert_eq!(
            vendor_message(&json!({"message": "bad model", "type": "invalid_request_error"})),
            "bad model"
        );
        assert_eq!(vendor_message(&json!({"detail": "Not Found"})), "Not Found");
        assert_eq!(vendor_message(&json!("quota")), "quota");
        assert_eq!(vendor_message(&json!({"code": 7})), r#"{"code":7}"#);
        assert_eq!(
            shorten("  key k3y here ", Some("k3y")),
            "key [redacted] here"
        );
    }

    #[test]
    fn requests_are_in_openai_wire_form() {
        let request = ChatRequest {
            messages: vec![
                ChatMessage::System("Be brief.".into()),
                ChatMessage::User("Book Monday".into()),
                ChatMessage::Assistant {
                    text: None,
                    tool_calls: vec![ToolCall {
                        id: "call_1".into(),
                        name: "book".into(),
                        arguments: r#"{"day":"mon"}"#.into(),
                    }],
                },
                ChatMessage::Tool {
                    tool_call_id: "call_1".into(),
                    content: "booked".into(),
                },
                ChatMessage::Assistant {
                    text: Some("Done.".into()),
                    tool_calls: vec![],
                },
            ],
            tools: vec![switchboard_actors::vendors::ToolSpec {
                name: "book".into(),
                description: "Books a day".into(),
                parameters: json!({"type": "object"}),
            }],
            temperature: Some(0.7),
            max_tokens: Some(200),
            force: None,
        };
        assert_eq!(
            chat_body("m", &request),
            json!({
                "model": "m",
                "stream": true,
                "stream_options": {"include_usage": true},
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Book Monday"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_1", "type": "function",
                         "function": {"name": "book", "arguments": "{\"day\":\"mon\"}"}}
                    ]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "booked"},
                    {"role": "assistant", "content": "Done."},
                ],
                "tools": [{"type": "function", "function": {
                    "name": "book", "description": "Books a day", "parameters": {"type": "object"}
                }}],
                "temperature": 0.7,
                "max_tokens": 200,
            })
        );
        let bare = chat_body("m", &ChatRequest::default());
        assert!(bare.get("tools").is_none());
        assert!(bare.get("temperature").is_none());
        assert!(bare.get("max_tokens").is_none());
    }

    #[test]
    fn audio_goes_up_as_a_wav_file_in_a_form() {
        let samples = [0i16, 1, -1, i16::MAX, i16::MIN];
        let file = wav(&samples, 16_000).unwrap();
        let reader = hound::WavReader::new(std::io::Cursor::new(&file)).unwrap();
        let spec = reader.spec();
        assert_eq!(
            (spec.channels, spec.sample_rate, spec.bits_per_sample),
            (1, 16_000, 16)
        );
        let read: Vec<i16> = reader.into_samples().map(Result::unwrap).collect();
        assert_eq!(read, samples);

        let body = multipart("B", &[("model", "whisper-1"), ("language", "en")], b"WAV");
        assert_eq!(
            String::from_utf8(body).unwrap(),
            "--B\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n\
             --B\r\nContent-Disposition: form-data; name=\"language\"\r\n\r\nen\r\n\
             --B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"audio.wav\"\r\n\
             Content-Type: audio/wav\r\n\r\nWAV\r\n--B--\r\n"
        );
    }

    #[test]
    fn the_agents_language_tag_gives_the_iso_code() {
        assert_eq!(language_code("en-US").as_deref(), Some("en"));
        assert_eq!(language_code("he").as_deref(), Some("he"));
        assert_eq!(language_code("PT_br").as_deref(), Some("pt"));
        assert_eq!(language_code("yue-HK").as_deref(), Some("yue"));
        assert_eq!(language_code(""), None);
        assert_eq!(language_code("auto"), None);
        assert_eq!(language_code("e1-US"), None);
    }

    #[test]
    fn debug_never_shows_the_key() {
        let settings = VendorSettings {
            base_url: "http://127.0.0.1:1/v1".into(),
            api_key: Some("sk-secret".into()),
            model: "m".into(),
        };
        let chat = OpenAiChat {
            endpoint: Endpoint::new(settings, Timeouts::default()).unwrap(),
        };
        let shown = format!("{chat:?}");
        assert!(
            shown.contains("[redacted]") && !shown.contains("sk-secret"),
            "{shown}"
        );
    }
}
