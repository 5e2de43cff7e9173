//! What a conversing agent needs from model vendors, as ports: [`Transcriber`] (speech to text)
//! and [`ChatModel`] (streamed chat completions with tools). Text to speech is the
//! [`crate::agent::Speech`] port. The service implements them over HTTP; this crate only
//! describes them.

use std::pin::Pin;

use async_trait::async_trait;
use futures_util::Stream;

/// Why a vendor request failed. Its text never holds an API key or a URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VendorError {
    /// No answer, no first event, or no next event in time, or the whole exchange took too long.
    #[error("the vendor did not answer in time")]
    Timeout,
    /// The connection failed or broke.
    #[error("the vendor is unreachable: {0}")]
    Unreachable(String),
    /// A non-success HTTP status, with the vendor's message (shortened).
    #[error("the vendor answered {code}: {message}")]
    Status { code: u16, message: String },
    /// The vendor reported an error inside a successful answer (e.g. in the middle of a stream).
    #[error("the vendor reported an error: {0}")]
    Reported(String),
    /// The answer could not be read.
    #[error("the vendor's answer is malformed: {0}")]
    Protocol(String),
}

/// What a caller said, as text.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Transcript {
    pub text: String,
    /// The language the vendor heard, when it says.
    pub language: Option<String>,
}

/// Speech to text.
#[async_trait]
pub trait Transcriber: Send + Sync + 'static {
    /// The words of `audio` (mono 16-bit at `sample_rate`). `language` is the agent's language
    /// tag (e.g. `en-US`); empty lets the vendor guess.
    async fn transcribe(
        &self,
        audio: &[i16],
        sample_rate: u32,
        language: &str,
    ) -> Result<Transcript, VendorError>;
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// The JSON Schema of its arguments.
    pub parameters: serde_json::Value,
}

/// A tool call the model made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The vendor's id of the call; a tool result answers it.
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them: JSON text, not checked (`{}` when it wrote none).
    pub arguments: String,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatMessage {
    /// The agent's instructions.
    System(String),
    /// What the caller said.
    User(String),
    /// What the model answered: text, tool calls, or both.
    Assistant {
        text: Option<String>,
        tool_calls: Vec<ToolCall>,
    },
    /// A tool's result, answering the call `tool_call_id`.
    Tool {
        tool_call_id: String,
        content: String,
    },
}

/// A chat completion request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    /// The tools offered; none: the model only writes text.
    pub tools: Vec<ToolSpec>,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
    /// The tool the model must call (OpenAI's `tool_choice`); none: it chooses.
    pub force: Option<String>,
}

/// Tokens a completion used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// What a streamed completion yields, in order: text pieces and complete tool calls, then one
/// `Done`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatEvent {
    /// The next piece of the reply's text.
    Text(String),
    /// A tool call, once the model has finished writing it.
    ToolCall(ToolCall),
    /// The end of the completion.
    Done {
        /// Why the model stopped (`stop`, `tool_calls`, `length`, ...), when the vendor says.
        finish_reason: Option<String>,
        usage: Option<Usage>,
    },
}

/// A completion as it arrives; it ends after `Done` or after the first error.
pub type ChatStream = Pin<Box<dyn Stream<Item = Result<ChatEvent, VendorError>> + Send>>;

/// A chat model that streams its completions.
#[async_trait]
pub trait ChatModel: Send + Sync + 'static {
    /// Starts a completion. Errors before the answer starts (refused, unreachable, no answer in
    /// time) come here; later ones come through the stream.
    async fn stream(&self, request: ChatRequest) -> Result<ChatStream, VendorError>;
}
