//! Agent webhook events: the kinds an agent may subscribe to (`webhook_events`), the envelope
//! every event is sent in, and the data of the kinds whose data is not the call itself.
//!
//! | kind | when | `data` |
//! |---|---|---|
//! | `call.started` | a call is placed (it starts dialing) or an inbound call is received | the call |
//! | `call.answered` | the call is connected | the call |
//! | `call.ended` | the call's end is committed | the call |
//! | `call.analyzed` | the end-of-call analysis is done | [`CallAnalyzed`] |
//! | `transcript.final` | one turn of the caller or the agent is final | [`TranscriptFinal`] |
//! | `tool.called` | the agent calls a `function` tool | [`ToolCalled`] |

pub use crate::conversation::Speaker;
use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ids::{CallId, DispositionId, EventId, ToolId};

/// A kind of agent webhook event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum EventKind {
    #[serde(rename = "call.started")]
    CallStarted,
    #[serde(rename = "call.answered")]
    CallAnswered,
    #[serde(rename = "call.ended")]
    CallEnded,
    #[serde(rename = "call.analyzed")]
    CallAnalyzed,
    #[serde(rename = "transcript.final")]
    TranscriptFinal,
    #[serde(rename = "tool.called")]
    ToolCalled,
}

impl EventKind {
    pub const ALL: [EventKind; 6] = [
        EventKind::CallStarted,
        EventKind::CallAnswered,
        EventKind::CallEnded,
        EventKind::CallAnalyzed,
        EventKind::TranscriptFinal,
        EventKind::ToolCalled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::CallStarted => "call.started",
            EventKind::CallAnswered => "call.answered",
            EventKind::CallEnded => "call.ended",
            EventKind::CallAnalyzed => "call.analyzed",
            EventKind::TranscriptFinal => "transcript.final",
            EventKind::ToolCalled => "tool.called",
        }
    }

    pub fn parse(s: &str) -> Option<EventKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Whether the event's data is the call itself (as the API shows it).
    pub fn carries_call(self) -> bool {
        matches!(
            self,
            EventKind::CallStarted | EventKind::CallAnswered | EventKind::CallEnded
        )
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What every event is sent in: the JSON body of a delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// The event's id; a retried delivery carries the same one (receivers deduplicate on it).
    pub id: EventId,
    #[serde(rename = "type")]
    pub kind: EventKind,
    /// When the event happened (the commit of the change that caused it).
    pub created_at: DateTime<Utc>,
    pub call_id: CallId,
    pub data: Value,
}

/// The data of `transcript.final`: one turn, final.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TranscriptFinal {
    pub role: Speaker,
    pub text: String,
    /// The turn's place in the call, from 1.
    pub turn: u32,
    pub started_at: DateTime<Utc>,
    pub ended_at: DateTime<Utc>,
    /// The other party spoke over the agent and it stopped: `text` is what was played.
    #[serde(default)]
    pub interrupted: bool,
}

/// The data of `call.analyzed`: what the end-of-call analysis found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallAnalyzed {
    pub summary: Option<String>,
    /// The agent's extraction parameters, by name.
    pub extracted: Map<String, Value>,
    /// The disposition's label, when the analysis chose one.
    pub disposition: Option<String>,
    pub disposition_id: Option<DispositionId>,
}

/// The data of `tool.called`: a `function` tool the agent called, with its arguments. The
/// answer's body is the tool's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCalled {
    pub call_id: CallId,
    pub tool_id: ToolId,
    pub tool_name: String,
    pub arguments: Map<String, Value>,
}

/// An event another part of the service raises, with its data: the kinds whose data is not
/// the call (those are raised by the call's own changes).
#[derive(Debug, Clone, PartialEq)]
pub enum EventData {
    CallAnalyzed(CallAnalyzed),
    TranscriptFinal(TranscriptFinal),
}

impl EventData {
    pub fn kind(&self) -> EventKind {
        match self {
            EventData::CallAnalyzed(_) => EventKind::CallAnalyzed,
            EventData::TranscriptFinal(_) => EventKind::TranscriptFinal,
        }
    }

    /// The envelope's `data`.
    pub fn to_json(&self) -> Value {
        let value = match self {
            EventData::CallAnalyzed(data) => serde_json::to_value(data),
            EventData::TranscriptFinal(data) => serde_json::to_value(data),
        };
        // Plain structs of strings, numbers and maps always serialize.
        value.unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_their_names() {
        for kind in EventKind::ALL {
            assert_eq!(EventKind::parse(kind.as_str()), Some(kind));
            assert_eq!(
                serde_json::to_value(kind).unwrap(),
                Value::String(kind.as_str().into())
            );
        }
        assert_eq!(EventKind::parse("call.exploded"), None);
        assert!(EventKind::CallEnded.carries_call());
        assert!(!EventKind::ToolCalled.carries_call());
    }

    #[test]
    fn the_envelope_names_its_kind_type() {
        let envelope = Envelope {
            id: EventId::new(),
            kind: EventKind::TranscriptFinal,
            created_at: "2026-03-08T06:00:00Z".parse().unwrap(),
            call_id: CallId::new(),
            data: serde_json::json!({"text": "hi"}),
        };
        let json = serde_json::to_value(&envelope).unwrap();
        assert_eq!(json["type"], "transcript.final");
        assert_eq!(json["created_at"], "2026-03-08T06:00:00Z");
        let keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(keys.len(), 5, "{keys:?}");
        assert_eq!(serde_json::from_value::<Envelope>(json).unwrap(), envelope);
    }
}
