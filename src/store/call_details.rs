//! A call's detail: what its conversation left (transcript, tool events, vendor failures), cut
//! to caps and written in the transaction that ends the call ([`StoredConversation`], used by
//! `engine_calls`), and its end-of-call analysis: a persisted job (`analysis_*` columns, run by
//! [`crate::runtime::analysis`]) whose summary and extracted values `GET /calls/{id}` shows.
//!
//! The caps keep one call's row to a few hundred KiB whatever a conversation holds: a turn's
//! text and a tool's response preview are cut (ending in [`TRUNCATED`]), and turns and events
//! past the caps are left out and counted (`omitted_turns`, `omitted_events`). Cutting never
//! fails, so it can never fail the end commit.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};
use switchboard_actors::call::CallStatus;
use switchboard_actors::conversation::{Conversation, ToolEvent, Turn, VendorFailure};
use switchboard_actors::flow::PathStep;
use switchboard_actors::ids::{AgentId, CallId, WorkspaceId};
use utoipa::ToSchema;

use super::analysis_status::{AnalysisSkip, AnalysisStatus};
use super::db::{Json, query};
use super::{CallRecord, Store, StoreResult, corrupt, opt_id, ts};

/// Longest text of one turn, in characters.
pub const MAX_TURN_CHARS: usize = 4_000;
/// Most turns stored for one call.
pub const MAX_TURNS: usize = 1_000;
/// Most steps of a flow call's stored path (a step is under 400 bytes).
pub const MAX_PATH_STEPS: usize = 500;
/// Largest stored transcript, as JSON.
pub const MAX_TRANSCRIPT_BYTES: usize = 128 * 1024;
/// Most tool events stored for one call.
pub const MAX_EVENTS: usize = 200;
/// Largest stored list of tool events, as JSON.
pub const MAX_EVENTS_BYTES: usize = 64 * 1024;
/// Largest arguments of one tool event, as JSON; larger ones are stored as their cut text.
pub const MAX_ARGUMENTS_BYTES: usize = 2 * 1024;
/// Longest response preview of one tool event, in characters.
pub const MAX_PREVIEW_CHARS: usize = 2_000;
/// Longest error text (of a tool event or a vendor failure), in characters.
pub const MAX_ERROR_CHARS: usize = 500;
/// Most vendor failures stored for one call.
pub const MAX_VENDOR_FAILURES: usize = 50;
/// What ends a text that was cut.
pub const TRUNCATED: &str = " [truncated]";

/// `text` cut to `max_chars` characters, ending in [`TRUNCATED`] when it was cut.
pub fn cut(text: &str, max_chars: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max_chars) {
        Some((i, _)) => Cow::Owned(format!("{}{TRUNCATED}", &text[..i])),
        None => Cow::Borrowed(text),
    }
}

/// JSON text of a value that always serializes (plain data, string keys).
fn json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "[]".into())
}

/// Keeps `items` from the first while their JSON stays within `max_bytes`; answers the JSON
/// array and how many were left out.
fn bounded<T: Serialize>(items: &[T], max_bytes: usize) -> (String, i64) {
    let mut kept = Vec::new();
    // The brackets.
    let mut size = 2;
    for item in items {
        let text = json(item);
        let added = text.len() + usize::from(!kept.is_empty());
        if size + added > max_bytes {
            break;
        }
        size += added;
        kept.push(text);
    }
    let omitted = (items.len() - kept.len()) as i64;
    (format!("[{}]", kept.join(",")), omitted)
}

fn cut_turn(turn: &Turn) -> Turn {
    Turn {
        text: cut(&turn.text, MAX_TURN_CHARS).into_owned(),
        ..turn.clone()
    }
}

fn cut_event(event: &ToolEvent) -> ToolEvent {
    let arguments = match json(&event.arguments) {
        text if text.len() > MAX_ARGUMENTS_BYTES => {
            // Cut on a character boundary at most MAX_ARGUMENTS_BYTES in.
            let end = (0..=MAX_ARGUMENTS_BYTES)
                .rev()
                .find(|&i| text.is_char_boundary(i))
                .unwrap_or(0);
            Value::String(format!("{}{TRUNCATED}", &text[..end]))
        }
        _ => event.arguments.clone(),
    };
    let cut_opt = |t: &Option<String>, max| t.as_deref().map(|t| cut(t, max).into_owned());
    ToolEvent {
        name: cut(&event.name, 200).into_owned(),
        arguments,
        response_preview: cut_opt(&event.response_preview, MAX_PREVIEW_CHARS),
        raw_response_preview: cut_opt(&event.raw_response_preview, MAX_PREVIEW_CHARS),
        error: cut_opt(&event.error, MAX_ERROR_CHARS),
        ..event.clone()
    }
}

fn cut_failure(failure: &VendorFailure) -> VendorFailure {
    VendorFailure {
        vendor: cut(&failure.vendor, 50).into_owned(),
        error: cut(&failure.error, MAX_ERROR_CHARS).into_owned(),
        at_ms: failure.at_ms,
    }
}

/// A conversation as stored: cut to the caps, as JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredConversation {
    pub transcript: String,
    pub events: String,
    pub vendor_failures: String,
    /// A flow call's path (at most [`MAX_PATH_STEPS`] steps).
    pub flow_path: String,
    pub omitted_turns: i64,
    pub omitted_events: i64,
}

impl StoredConversation {
    pub fn of(conversation: &Conversation) -> Self {
        let turns: Vec<Turn> = conversation
            .transcript
            .iter()
            .take(MAX_TURNS)
            .map(cut_turn)
            .collect();
        let (transcript, omitted) = bounded(&turns, MAX_TRANSCRIPT_BYTES);
        let events: Vec<ToolEvent> = conversation
            .events
            .iter()
            .take(MAX_EVENTS)
            .map(cut_event)
            .collect();
        let (events_json, events_omitted) = bounded(&events, MAX_EVENTS_BYTES);
        let failures: Vec<VendorFailure> = conversation
            .vendor_failures
            .iter()
            .take(MAX_VENDOR_FAILURES)
            .map(cut_failure)
            .collect();
        let path: Vec<&PathStep> = conversation.path.iter().take(MAX_PATH_STEPS).collect();
        Self {
            transcript,
            events: events_json,
            vendor_failures: json(&failures),
            flow_path: json(&path),
            omitted_turns: omitted + (conversation.transcript.len() - turns.len()) as i64,
            omitted_events: events_omitted + (conversation.events.len() - events.len()) as i64,
        }
    }
}

/// A call with everything it left: `GET /calls/{id}`. `GET /calls` lists calls without these
/// fields.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CallDetail {
    #[serde(flatten)]
    pub call: CallRecord,
    /// Who said what, in order (at most 1,000 turns and 128 KiB; a turn's text at most 4,000
    /// characters, a longer one ending in ` [truncated]`).
    pub transcript: Vec<Turn>,
    /// The tools and integrations the agent ran, in order (at most 200 and 64 KiB).
    pub events: Vec<ToolEvent>,
    /// Vendors (speech to text, the chat model, text to speech) that failed during the call.
    pub vendor_failures: Vec<VendorFailure>,
    /// A flow call's path through its nodes, in order: `node_id`, `node_name`, `entered_ms`
    /// (from the answer) and the `reason` of each transition (at most 500 steps; empty for
    /// other calls).
    #[schema(value_type = Vec<Object>)]
    pub flow_path: Vec<PathStep>,
    /// Turns left out by the caps.
    pub omitted_turns: i64,
    /// Tool events left out by the caps.
    pub omitted_events: i64,
    /// The end-of-call analysis: `pending`, `completed`, `failed` or `skipped` (no chat
    /// model, the call was not answered, or nothing was said); null until the call ends.
    pub analysis_status: Option<AnalysisStatus>,
    /// With `skipped`: why (`not_answered`, `nothing_said`, `no_chat_model`); else null.
    pub analysis_skipped: Option<AnalysisSkip>,
    /// Attempts the analysis has made (at most 5).
    pub analysis_attempts: i64,
    /// Why the last attempt of the analysis failed (cleared while the next one runs).
    pub analysis_error: Option<String>,
    /// A few sentences on the call, by the analysis.
    pub summary: Option<String>,
    /// The agent's `extraction_parameters`, each the value the analysis found or null; null
    /// until the analysis completes.
    #[schema(value_type = Option<Object>)]
    pub extracted: Option<Map<String, Value>>,
    pub analyzed_at: Option<DateTime<Utc>>,
}

/// A pending analysis, claimed for one attempt.
#[derive(Debug, Clone)]
pub struct AnalysisJob {
    pub call_id: CallId,
    pub workspace_id: WorkspaceId,
    pub agent_id: Option<AgentId>,
    /// This attempt's number, from 1.
    pub attempt: i64,
    pub transcript: Vec<Turn>,
    pub events: Vec<ToolEvent>,
}

fn parse_json<T: serde::de::DeserializeOwned>(what: &str, text: String) -> StoreResult<T> {
    serde_json::from_str(&text).map_err(|e| corrupt(what, e))
}

impl Store {
    /// A call of `ws` with its detail; `None` if there is no such call.
    pub async fn call_detail(
        &self,
        ws: WorkspaceId,
        id: CallId,
    ) -> StoreResult<Option<CallDetail>> {
        let Some(call) = self.call(ws, id).await? else {
            return Ok(None);
        };
        let row = query(
            "SELECT transcript, events, vendor_failures, flow_path, omitted_turns, omitted_events, analysis_status, \
             analysis_attempts, analysis_error, summary, extracted, analyzed_at FROM call_details WHERE workspace_id = ? AND call_id = ?",
        )
        .bind(ws.as_uuid())
        .bind(id.as_uuid())
        .fetch_optional(&mut self.conn().await?)
        .await?;
        let Some(r) = row else {
            // Nothing was said: nothing to analyse, once the call is over.
            let over = matches!(call.status, CallStatus::Ended | CallStatus::Cancelled);
            return Ok(Some(CallDetail {
                analysis_skipped: over.then(|| AnalysisSkip::of(&call, &[])),
                call,
                transcript: Vec::new(),
                events: Vec::new(),
                vendor_failures: Vec::new(),
                flow_path: Vec::new(),
                omitted_turns: 0,
                omitted_events: 0,
                analysis_status: over.then_some(AnalysisStatus::Skipped),
                analysis_attempts: 0,
                analysis_error: None,
                summary: None,
                extracted: None,
                analyzed_at: None,
            }));
        };
        let extracted: Option<String> = r.try_get("extracted")?;
        let status: String = r.try_get("analysis_status")?;
        let status = AnalysisStatus::parse(&status)
            .ok_or_else(|| corrupt("call_details.analysis_status", status))?;
        let transcript: Vec<Turn> =
            parse_json("call_details.transcript", r.try_get("transcript")?)?;
        Ok(Some(CallDetail {
            analysis_skipped: (status == AnalysisStatus::Skipped)
                .then(|| AnalysisSkip::of(&call, &transcript)),
            call,
            transcript,
            events: parse_json("call_details.events", r.try_get("events")?)?,
            vendor_failures: parse_json(
                "call_details.vendor_failures",
                r.try_get("vendor_failures")?,
            )?,
            flow_path: parse_json("call_details.flow_path", r.try_get("flow_path")?)?,
            omitted_turns: r.try_get("omitted_turns")?,
            omitted_events: r.try_get("omitted_events")?,
            analysis_status: Some(status),
            analysis_attempts: r.try_get("analysis_attempts")?,
            analysis_error: r.try_get("analysis_error")?,
            summary: r.try_get("summary")?,
            extracted: extracted
                .map(|t| parse_json("call_details.extracted", t))
                .transpose()?,
            analyzed_at: r.try_get("analyzed_at")?,
        }))
    }

    // The analysis job reads and writes by call id alone: it acts for every workspace and its
    // ids come from the store itself, never from a client.

    /// Calls whose analysis may run now, earliest due first.
    pub async fn due_analyses(&self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<CallId>> {
        let ids: Vec<uuid::Uuid> = query(
            "SELECT call_id FROM call_details WHERE analysis_due_at IS NOT NULL AND analysis_due_at <= ? \
             ORDER BY analysis_due_at LIMIT ?",
        )
        .bind(ts(now))
        .bind(limit)
        .scalars(&mut self.conn().await?)
        .await?;
        Ok(ids.into_iter().map(CallId::from_uuid).collect())
    }

    /// Takes a due analysis for one attempt: counts the attempt and holds the job until
    /// `hold_until` (another runner, or this one after a restart, takes it up again only then).
    /// `None` if it is no longer pending and due.
    pub async fn claim_analysis(
        &self,
        call: CallId,
        now: DateTime<Utc>,
        hold_until: DateTime<Utc>,
    ) -> StoreResult<Option<AnalysisJob>> {
        let row = query(
            "UPDATE call_details SET analysis_attempts = analysis_attempts + 1, analysis_due_at = ?, analysis_error = NULL, updated_at = ? \
             WHERE call_id = ? AND analysis_status = 'pending' AND analysis_due_at <= ? \
             RETURNING workspace_id, analysis_attempts, transcript, events, \
             (SELECT agent_id FROM calls WHERE calls.id = call_details.call_id) AS agent_id",
        )
        .bind(ts(hold_until))
        .bind(ts(now))
        .bind(call.as_uuid())
        .bind(ts(now))
        .fetch_optional(&mut self.conn().await?)
        .await?;
        let Some(r) = row else { return Ok(None) };
        let transcript: String = r.try_get("transcript")?;
        let events: String = r.try_get("events")?;
        Ok(Some(AnalysisJob {
            call_id: call,
            workspace_id: WorkspaceId::from_uuid(r.try_get("workspace_id")?),
            agent_id: opt_id(&r, "agent_id")?,
            attempt: r.try_get("analysis_attempts")?,
            transcript: parse_json("call_details.transcript", transcript)?,
            events: parse_json("call_details.events", events)?,
        }))
    }

    /// Records a completed analysis: its summary and extracted values.
    pub async fn complete_analysis(
        &self,
        call: CallId,
        summary: Option<&str>,
        extracted: &Map<String, Value>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let at = ts(now);
        query(
            "UPDATE call_details SET analysis_status = 'completed', analysis_due_at = NULL, analysis_error = NULL, \
             summary = ?, extracted = ?, analyzed_at = ?, updated_at = ? WHERE call_id = ? AND analysis_status = 'pending'",
        )
        .bind(summary)
        .bind(Json(Value::Object(extracted.clone()).to_string()))
        .bind(at)
        .bind(at)
        .bind(call.as_uuid())
        .execute(&mut self.conn().await?)
        .await?;
        Ok(())
    }

    /// Records a failed attempt: the analysis runs again at `retry_at`, or, without one, has
    /// failed for good.
    pub async fn fail_analysis(
        &self,
        call: CallId,
        error: &str,
        retry_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let status = match retry_at {
            Some(_) => AnalysisStatus::Pending,
            None => AnalysisStatus::Failed,
        };
        query(
            "UPDATE call_details SET analysis_status = ?, analysis_due_at = ?, analysis_error = ?, updated_at = ? \
             WHERE call_id = ? AND analysis_status = 'pending'",
        )
        .bind(status.as_str())
        .bind(retry_at.map(ts))
        .bind(cut(error, MAX_ERROR_CHARS).as_ref())
        .bind(ts(now))
        .bind(call.as_uuid())
        .execute(&mut self.conn().await?)
        .await?;
        Ok(())
    }

    /// Marks every pending analysis skipped (the service runs without a chat model); answers
    /// how many there were.
    pub async fn skip_pending_analyses(&self, now: DateTime<Utc>) -> StoreResult<u64> {
        let done = query(
            "UPDATE call_details SET analysis_status = 'skipped', analysis_due_at = NULL, updated_at = ? \
             WHERE analysis_status = 'pending'",
        )
        .bind(ts(now))
        .execute(&mut self.conn().await?)
        .await?;
        Ok(done.rows_affected())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_actors::conversation::{Speaker, ToolStatus};

    fn turn(text: &str) -> Turn {
        Turn {
            role: Speaker::User,
            text: text.into(),
            start_ms: 0,
            end_ms: 10,
            interrupted: false,
            node: None,
            unheard: None,
            digits: None,
        }
    }

    fn event(arguments: Value) -> ToolEvent {
        ToolEvent {
            name: "lookup".into(),
            tool_id: None,
            arguments,
            status: ToolStatus::Succeeded,
            latency_ms: 5,
            response_preview: Some("é".repeat(3_000)),
            raw_response_preview: None,
            status_code: Some(200),
            error: None,
            delivery_id: None,
            at_ms: 20,
        }
    }

    #[test]
    fn texts_are_cut_on_character_boundaries_with_a_marker() {
        assert_eq!(cut("hello", 5), "hello");
        assert_eq!(cut("héllo", 2), format!("hé{TRUNCATED}"));
        assert_eq!(cut("", 0), "");
    }

    #[test]
    fn a_small_conversation_is_stored_whole() {
        let conversation = Conversation {
            transcript: vec![turn("Hi"), turn("Bye")],
            events: vec![event(serde_json::json!({"day": "monday"}))],
            vendor_failures: Vec::new(),
            path: Vec::new(),
        };
        let stored = StoredConversation::of(&conversation);
        let turns: Vec<Turn> = serde_json::from_str(&stored.transcript).unwrap();
        assert_eq!(turns, conversation.transcript);
        let events: Vec<ToolEvent> = serde_json::from_str(&stored.events).unwrap();
        assert_eq!(events[0].arguments, conversation.events[0].arguments);
        assert_eq!(
            events[0]
                .response_preview
                .as_deref()
                .unwrap()
                .chars()
                .count(),
            MAX_PREVIEW_CHARS + TRUNCATED.len()
        );
        assert_eq!((stored.omitted_turns, stored.omitted_events), (0, 0));
        assert_eq!(stored.vendor_failures, "[]");
    }

    #[test]
    fn a_huge_conversation_is_cut_to_its_caps() {
        let long = "word ".repeat(2_000);
        let conversation = Conversation {
            transcript: (0..2_000).map(|_| turn(&long)).collect(),
            events: (0..300)
                .map(|_| event(Value::String("x".repeat(10_000))))
                .collect(),
            vendor_failures: (0..100)
                .map(|i| VendorFailure {
                    vendor: "speech".into(),
                    error: "e".repeat(1_000),
                    at_ms: i,
                })
                .collect(),
            path: Vec::new(),
        };
        let stored = StoredConversation::of(&conversation);
        assert!(stored.transcript.len() <= MAX_TRANSCRIPT_BYTES);
        let turns: Vec<Turn> = serde_json::from_str(&stored.transcript).unwrap();
        assert!(!turns.is_empty());
        assert!(turns[0].text.ends_with(TRUNCATED));
        assert_eq!(turns.len() as i64 + stored.omitted_turns, 2_000);
        assert!(stored.events.len() <= MAX_EVENTS_BYTES);
        let events: Vec<ToolEvent> = serde_json::from_str(&stored.events).unwrap();
        assert!(
            events[0]
                .arguments
                .as_str()
                .is_some_and(|a| a.ends_with(TRUNCATED) && a.len() < MAX_ARGUMENTS_BYTES + 20)
        );
        assert_eq!(events.len() as i64 + stored.omitted_events, 300);
        let failures: Vec<VendorFailure> = serde_json::from_str(&stored.vendor_failures).unwrap();
        assert_eq!(failures.len(), MAX_VENDOR_FAILURES);
        assert!(failures[0].error.chars().count() <= MAX_ERROR_CHARS + TRUNCATED.len());
    }
}
