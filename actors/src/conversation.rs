//! What a conversation leaves on its call: the transcript (who said what, when, and whether
//! it was cut short) and the events of the tools and integrations the agent ran. The call
//! actor builds them while the call runs; the call's end commit stores them, and
//! `GET /calls/{id}` shows them.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Who spoke a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Speaker {
    /// The agent.
    Agent,
    /// The other party: the caller of an inbound call, the callee of an outbound one.
    User,
}

/// One turn of the transcript.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Turn {
    pub role: Speaker,
    /// What was said; for an interrupted agent turn, only the words that were played.
    pub text: String,
    /// Milliseconds from the answer to the turn's first audio.
    pub start_ms: u64,
    /// Milliseconds from the answer to the turn's last audio.
    pub end_ms: u64,
    /// The other party spoke over the agent and the agent stopped.
    pub interrupted: bool,
    /// A flow call's node when the turn was written down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// A caller's turn whose words could not be heard, and why (its `text` is empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unheard: Option<Unheard>,
    /// Keypad digits (`0`-`9`, `*`, `#`, `A`-`D`): the caller's entry (its `text` is empty;
    /// a terminator key that completed it is not kept), or what the agent sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digits: Option<String>,
}

/// Why a caller's turn has no words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Unheard {
    /// No speech to text is configured (`--stt-url`): the caller spoke, nobody transcribed it.
    NoSpeechToText,
    /// Speech to text failed on it (the call's `vendor_failures` say how).
    TranscriptionFailed,
}

/// How a tool or integration run went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// It answered (a 2xx for a webhook).
    Succeeded,
    /// It answered with an error, or could not be reached.
    Failed,
    /// It did not answer within its timeout.
    TimedOut,
    /// The outbound URL policy refused its target.
    Refused,
}

/// One run of a tool or integration during the call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolEvent {
    /// The tool's name as the model called it.
    pub name: String,
    /// The tool's id (absent for built-in functions such as `end_call`).
    pub tool_id: Option<Uuid>,
    /// The arguments the model gave, as JSON.
    pub arguments: serde_json::Value,
    pub status: ToolStatus,
    /// Milliseconds from the dispatch to its answer.
    pub latency_ms: u64,
    /// The downstream answer, sanitized and shortened.
    pub response_preview: Option<String>,
    /// An integration's answer as the provider gave it, before the flow's view of it
    /// (calendar times in the zone), shortened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_response_preview: Option<String>,
    /// The HTTP status the tool's endpoint answered, if it answered.
    pub status_code: Option<u16>,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// The delivery's id, as logged with its dispatch.
    pub delivery_id: Option<Uuid>,
    /// Milliseconds from the answer to the dispatch.
    pub at_ms: u64,
}

impl ToolEvent {
    /// The record of a run that went as `status` at once: nothing was dispatched.
    pub fn at_once(
        name: &str,
        arguments: serde_json::Value,
        status: ToolStatus,
        error: Option<String>,
    ) -> ToolEvent {
        ToolEvent {
            name: name.to_string(),
            tool_id: None,
            arguments,
            status,
            latency_ms: 0,
            response_preview: None,
            raw_response_preview: None,
            status_code: None,
            error,
            delivery_id: None,
            at_ms: 0,
        }
    }
}

/// A vendor (speech to text, model, text to speech) that failed during the call: the agent
/// said its apology line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VendorFailure {
    /// `transcriber`, `chat_model` or `speech`.
    pub vendor: String,
    pub error: String,
    /// Milliseconds from the answer.
    pub at_ms: u64,
}

/// Where a call's turns go as each becomes final: the service raises `transcript.final` for
/// them.
#[async_trait::async_trait]
pub trait TurnSink: Send + Sync + std::fmt::Debug + 'static {
    /// Turn `number` (from 1) of the transcript is final. Returns at once (the turn is handed
    /// on, not written here).
    fn final_turn(&self, number: u32, turn: &Turn);

    /// `role` is saying `text` now: a turn under way, not final and not yet in the transcript.
    /// The agent: what it has said of its turn so far, then what is playing or queued to play,
    /// told as each sentence starts. The caller: their words so far, told as each utterance of
    /// the turn is transcribed. The turn's `final_turn` follows. Nothing by default.
    fn speaking(&self, _role: Speaker, _text: &str) {}

    /// Resolves once every turn handed on so far has been dealt with (before the call's end
    /// is recorded, so its events come before `call.ended`).
    async fn flush(&self);
}

/// Everything a conversation leaves on its call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Conversation {
    pub transcript: Vec<Turn>,
    pub events: Vec<ToolEvent>,
    pub vendor_failures: Vec<VendorFailure>,
    /// A flow call's path through its nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub path: Vec<crate::agent::director::PathStep>,
}

impl Conversation {
    /// Records (and logs) a vendor's failure `at_ms` into the call.
    pub fn vendor_failed(
        &mut self,
        vendor: &str,
        what: &str,
        error: &dyn std::fmt::Display,
        at_ms: u64,
    ) {
        tracing::warn!(vendor, error = %error, "{what}");
        self.vendor_failures.push(VendorFailure {
            vendor: vendor.to_string(),
            error: error.to_string(),
            at_ms,
        });
    }

    /// Nothing was said or run (a call that never conversed).
    pub fn is_empty(&self) -> bool {
        self.transcript.is_empty()
            && self.events.is_empty()
            && self.vendor_failures.is_empty()
            && self.path.is_empty()
    }
}
