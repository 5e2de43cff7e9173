//! The end-of-call analysis. An answered call that ends with a transcript, while a chat model is
//! configured, gets a pending analysis in the same transaction as its end (a row of
//! `call_details`: it survives a restart). The background job runner ([`run`]) takes it up after
//! the commit, never delaying it, and asks the chat model once (one streamed completion, read
//! whole) for a JSON object `{summary, extracted, disposition}`:
//!
//! - `summary`: a few sentences on the call;
//! - `extracted`: exactly the agent's `extraction_parameters` as keys, each a value the
//!   conversation gives or null;
//! - `disposition`: one of the workspace's disposition labels, or null.
//!
//! The answer is outside input and read defensively ([`parse`]): the first JSON object in it
//! counts (fences and prose around it are passed over), other keys are dropped, a value of the
//! wrong type is null, an unknown label is no disposition. An answer with no JSON object at all
//! counts as a failed attempt, like a vendor failure: attempts are retried after 30 s, doubling,
//! and the fifth failure leaves the analysis `failed`. The chosen disposition lands through
//! [`crate::runtime::engine::land_disposition`], exactly as `POST /calls/{id}/disposition` would land it
//! (a campaign contact waiting for it retires or retries on it); a disposition already set is
//! never overwritten. Without a disposition, the engine's disposition timeout settles the
//! contact as unclassified, as it would without an analysis. Then [`analyzed`] runs.
//!
//! Past 600 lines on purpose: about a quarter is its tests (the prompt, the answer's parsing and
//! its retries), which read best beside the one job they check.

use std::sync::Arc;
use std::time::Duration;
use switchboard_actors::events::{CallAnalyzed, EventData};

use futures_util::StreamExt;
use serde_json::{Map, Value};
use switchboard_actors::conversation::{Speaker, ToolEvent, ToolStatus, Turn};
use switchboard_actors::engine::Engine;
use switchboard_actors::ids::{CallId, DispositionId, WorkspaceId};
use switchboard_actors::vendors::{ChatEvent, ChatMessage, ChatModel, ChatRequest, VendorError};
use tokio::sync::watch;

use crate::store::{
    AnalysisJob, AnalysisStatus, Disposition, DispositionSet, DispositionSource,
    ExtractionParameter, Store, StoreError, cut,
};

/// Attempts before an analysis is `failed`.
pub const MAX_ATTEMPTS: i64 = 5;
/// The wait after the first failed attempt; it doubles after each further one.
pub const FIRST_RETRY: Duration = Duration::from_secs(30);
/// How long an attempt holds its job: a process that dies mid-attempt leaves the job to be
/// taken up again after this (longer than any one vendor exchange may take).
pub const HOLD: Duration = Duration::from_secs(300);
/// Analyses run at once.
const BATCH: i64 = 8;
/// Most of the model's answer read, in bytes.
const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// Most of the transcript put in the request, in characters (the latest turns are kept).
const PROMPT_TRANSCRIPT_CHARS: usize = 24_000;
/// Most tool events put in the request.
const PROMPT_EVENTS: usize = 30;
/// Longest summary kept, in characters.
const MAX_SUMMARY_CHARS: usize = 2_000;
/// Longest extracted text value kept, in characters.
const MAX_VALUE_CHARS: usize = 1_000;
/// How many `{` of an answer are tried as the start of its JSON object.
const MAX_OBJECT_STARTS: usize = 64;

/// What the chat model answered, after [`parse`].
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    pub summary: Option<String>,
    /// Every extraction parameter's name, each with a string, number, boolean or null.
    pub extracted: Map<String, Value>,
    /// One of the labels offered, as written there.
    pub disposition: Option<String>,
}

/// The first JSON object in `text`, wherever it starts (inside a ```json fence, after a
/// sentence, ...).
pub fn first_json_object(text: &str) -> Option<Map<String, Value>> {
    text.match_indices('{')
        .take(MAX_OBJECT_STARTS)
        .find_map(|(at, _)| {
            let mut values = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Value>();
            match values.next() {
                Some(Ok(Value::Object(object))) => Some(object),
                _ => None,
            }
        })
}

/// An extracted value as kept: strings (trimmed, cut; empty is null), numbers and booleans;
/// anything else is null.
fn extracted_value(value: Option<&Value>) -> Value {
    match value {
        Some(Value::String(s)) if !s.trim().is_empty() => {
            Value::String(cut(s.trim(), MAX_VALUE_CHARS).into_owned())
        }
        Some(v @ (Value::Number(_) | Value::Bool(_))) => v.clone(),
        _ => Value::Null,
    }
}

/// Reads the model's answer: `None` when it holds no JSON object at all. `parameters` are the
/// extraction parameters' names, `labels` the workspace's disposition labels.
pub fn parse(text: &str, parameters: &[&str], labels: &[&str]) -> Option<Analysis> {
    let object = first_json_object(text)?;
    let summary = match object.get("summary") {
        Some(Value::String(s)) if !s.trim().is_empty() => {
            Some(cut(s.trim(), MAX_SUMMARY_CHARS).into_owned())
        }
        _ => None,
    };
    let found = object.get("extracted").and_then(Value::as_object);
    let extracted = parameters
        .iter()
        .map(|name| {
            let value = found.and_then(|f| f.get(*name));
            (name.to_string(), extracted_value(value))
        })
        .collect();
    let disposition = match object.get("disposition") {
        Some(Value::String(chosen)) => {
            let chosen = chosen.trim();
            labels
                .iter()
                .find(|l| **l == chosen)
                .or_else(|| labels.iter().find(|l| l.eq_ignore_ascii_case(chosen)))
                .map(|l| l.to_string())
        }
        _ => None,
    };
    Some(Analysis {
        summary,
        extracted,
        disposition,
    })
}

/// `mm:ss` of `ms` from the answer.
fn clock(ms: u64) -> String {
    let secs = ms / 1000;
    format!("{:02}:{:02}", secs / 60, secs % 60)
}

fn speaker(role: Speaker) -> &'static str {
    match role {
        Speaker::Agent => "agent",
        Speaker::User => "user",
    }
}

fn tool_status(status: ToolStatus) -> &'static str {
    match status {
        ToolStatus::Succeeded => "succeeded",
        ToolStatus::Failed => "failed",
        ToolStatus::TimedOut => "timed out",
        ToolStatus::Refused => "refused",
    }
}

/// The transcript as lines, the latest that fit within [`PROMPT_TRANSCRIPT_CHARS`].
fn transcript_lines(transcript: &[Turn]) -> String {
    let mut lines = Vec::new();
    let mut size = 0;
    for turn in transcript.iter().rev() {
        let cut_short = if turn.interrupted { " (cut short)" } else { "" };
        let keys = match &turn.digits {
            Some(digits) => format!("[keypad: {digits}]"),
            None => String::new(),
        };
        let line = format!(
            "[{}] {}: {}{keys}{cut_short}",
            clock(turn.start_ms),
            speaker(turn.role),
            turn.text.trim()
        );
        size += line.chars().count() + 1;
        if size > PROMPT_TRANSCRIPT_CHARS && !lines.is_empty() {
            break;
        }
        lines.push(line);
    }
    let left_out = transcript.len() - lines.len();
    if left_out > 0 {
        lines.push(format!("({left_out} earlier turns left out)"));
    }
    lines.reverse();
    lines.join("\n")
}

fn event_line(event: &ToolEvent) -> String {
    let mut line = format!(
        "- {} ({}, {} ms) with {}",
        event.name,
        tool_status(event.status),
        event.latency_ms,
        cut(&event.arguments.to_string(), 300)
    );
    if let Some(preview) = &event.response_preview {
        line.push_str(&format!(": {}", cut(preview, 300)));
    }
    if let Some(error) = &event.error {
        line.push_str(&format!(": error {}", cut(error, 200)));
    }
    line
}

/// The one request of an analysis.
pub fn request(
    transcript: &[Turn],
    events: &[ToolEvent],
    parameters: &[ExtractionParameter],
    dispositions: &[Disposition],
) -> ChatRequest {
    let extracted_rule = if parameters.is_empty() {
        "- extracted: an empty object, {}."
    } else {
        "- extracted: an object with exactly the keys listed under \"Extraction parameters\", \
         each set to the value the conversation gives (a string, number or boolean), or null \
         when the conversation does not say. Do not guess."
    };
    let disposition_rule = if dispositions.is_empty() {
        "- disposition: null."
    } else {
        "- disposition: the label of the disposition listed under \"Dispositions\" that fits \
         the call best, written exactly as listed, or null when none fits."
    };
    let system = format!(
        "You review a phone call between an AI voice agent and a person, after the call ended. \
         Answer with a single JSON object and nothing else, of the form \
         {{\"summary\": \"...\", \"extracted\": {{...}}, \"disposition\": \"...\"}}:\n\
         - summary: two to four sentences on what the call was about, what was said and \
         agreed, and what happens next.\n{extracted_rule}\n{disposition_rule}"
    );
    let mut user = String::new();
    if !parameters.is_empty() {
        user.push_str("Extraction parameters:\n");
        for p in parameters {
            user.push_str(&format!("- {}: {}\n", p.name, p.description.trim()));
        }
        user.push('\n');
    }
    if !dispositions.is_empty() {
        user.push_str("Dispositions:\n");
        for d in dispositions {
            match d.description.trim() {
                "" => user.push_str(&format!("- {}\n", d.label)),
                about => user.push_str(&format!("- {}: {about}\n", d.label)),
            }
        }
        user.push('\n');
    }
    if !events.is_empty() {
        user.push_str("Tools the agent ran:\n");
        for event in events.iter().take(PROMPT_EVENTS) {
            user.push_str(&event_line(event));
            user.push('\n');
        }
        user.push('\n');
    }
    user.push_str("Transcript (\"agent\" is the voice agent, \"user\" the other party):\n");
    user.push_str(&transcript_lines(transcript));
    ChatRequest {
        messages: vec![ChatMessage::System(system), ChatMessage::User(user)],
        tools: Vec::new(),
        temperature: Some(0.0),
        max_tokens: None,
        force: None,
    }
}

/// The text of one completion, read whole (at most [`MAX_ANSWER_BYTES`]).
async fn complete(model: &dyn ChatModel, request: ChatRequest) -> Result<String, VendorError> {
    let mut stream = model.stream(request).await?;
    let mut text = String::new();
    while let Some(event) = stream.next().await {
        match event? {
            ChatEvent::Text(piece) => {
                if text.len() + piece.len() > MAX_ANSWER_BYTES {
                    break;
                }
                text.push_str(&piece);
            }
            ChatEvent::ToolCall(_) => {}
            ChatEvent::Done { .. } => break,
        }
    }
    Ok(text)
}

/// The wait before the attempt after `attempt` (counted from 1): 30 s, then doubling.
pub fn retry_delay(attempt: i64) -> Duration {
    let doublings = u32::try_from(attempt.clamp(1, 16) - 1).unwrap_or(0);
    FIRST_RETRY * 2u32.pow(doublings)
}

/// Why an attempt failed.
#[derive(Debug, thiserror::Error)]
enum AttemptError {
    /// The vendor failed, or answered nothing usable: the attempt counts.
    #[error("{0}")]
    Model(String),
    /// The store failed: the job stays held and is taken up again later.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What runs analyses: the store, the chat model, and the engine a landed disposition is
/// reported to.
#[derive(Clone)]
pub struct Analyst {
    pub store: Store,
    pub model: Arc<dyn ChatModel>,
    pub engine: Engine,
}

impl Analyst {
    /// Runs every due analysis (up to a batch, at once); answers how many were taken up.
    pub async fn run_due(&self) -> Result<usize, StoreError> {
        let due = self.store.due_analyses(self.store.now(), BATCH).await?;
        let mut running = tokio::task::JoinSet::new();
        for call in due.iter().copied() {
            let analyst = self.clone();
            running.spawn(async move { analyst.attempt(call).await });
        }
        while running.join_next().await.is_some() {}
        Ok(due.len())
    }

    /// One attempt at one call's analysis.
    async fn attempt(&self, call: CallId) {
        let now = self.store.now();
        let hold = chrono::Duration::from_std(HOLD).unwrap_or_default();
        let job = match self.store.claim_analysis(call, now, now + hold).await {
            Ok(Some(job)) => job,
            Ok(None) => return,
            Err(err) => {
                tracing::warn!(%call, error = %err, "an analysis could not be taken up");
                return;
            }
        };
        let finished = match self.analyse(&job).await {
            Ok(done) => Some(done),
            Err(AttemptError::Store(err)) => {
                tracing::warn!(%call, error = %err, "an analysis could not be recorded; it runs again later");
                None
            }
            Err(AttemptError::Model(error)) => self.failed(&job, &error).await,
        };
        if let Some(done) = finished {
            analyzed(&self.store, job.workspace_id, call, &done).await;
        }
    }

    /// Records a failed attempt; answers the analysis's end when it was the last one.
    async fn failed(&self, job: &AnalysisJob, error: &str) -> Option<Analyzed> {
        let now = self.store.now();
        let last = job.attempt >= MAX_ATTEMPTS;
        let retry_at = (!last).then(|| {
            now + chrono::Duration::from_std(retry_delay(job.attempt)).unwrap_or_default()
        });
        tracing::warn!(call = %job.call_id, attempt = job.attempt, error, last, "an end-of-call analysis failed");
        match self
            .store
            .fail_analysis(job.call_id, error, retry_at, now)
            .await
        {
            Ok(()) => last.then_some(Analyzed {
                status: AnalysisStatus::Failed,
                analysis: None,
                disposition_id: None,
            }),
            Err(err) => {
                tracing::warn!(call = %job.call_id, error = %err, "a failed analysis could not be recorded");
                None
            }
        }
    }

    async fn analyse(&self, job: &AnalysisJob) -> Result<Analyzed, AttemptError> {
        let ws = job.workspace_id;
        let parameters = match job.agent_id {
            Some(agent) => self
                .store
                .agent(ws, agent)
                .await?
                .map(|a| a.extraction_parameters)
                .unwrap_or_default(),
            None => Vec::new(),
        };
        let dispositions = self.store.list_dispositions(ws).await?;
        let request = request(&job.transcript, &job.events, &parameters, &dispositions);
        let answer = complete(self.model.as_ref(), request)
            .await
            .map_err(|e| AttemptError::Model(e.to_string()))?;
        let names: Vec<&str> = parameters.iter().map(|p| p.name.as_str()).collect();
        let labels: Vec<&str> = dispositions.iter().map(|d| d.label.as_str()).collect();
        let analysis = parse(&answer, &names, &labels)
            .ok_or_else(|| AttemptError::Model("the model's answer holds no JSON object".into()))?;
        // The disposition first: if the process stops before the analysis is recorded, the
        // next attempt finds it set and leaves it.
        let chosen = analysis
            .disposition
            .as_ref()
            .and_then(|label| dispositions.iter().find(|d| &d.label == label));
        if let Some(d) = chosen {
            let landed = crate::runtime::engine::land_disposition(
                &self.store,
                &self.engine,
                ws,
                job.call_id,
                d.id,
                DispositionSource::Analysis,
            )
            .await?;
            if let Some(DispositionSet::Conflict(_) | DispositionSet::NotAnswered(_)) = landed {
                tracing::info!(call = %job.call_id, "the call already has a disposition; the analysis leaves it");
            }
        }
        self.store
            .complete_analysis(
                job.call_id,
                analysis.summary.as_deref(),
                &analysis.extracted,
                self.store.now(),
            )
            .await?;
        Ok(Analyzed {
            status: AnalysisStatus::Completed,
            disposition_id: chosen.map(|d| d.id),
            analysis: Some(analysis),
        })
    }
}

/// An analysis that is over, as [`analyzed`] hears of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Analyzed {
    /// `Completed` or `Failed`.
    pub status: AnalysisStatus,
    /// What the model answered, once completed.
    pub analysis: Option<Analysis>,
    /// The id of the disposition the analysis chose (it landed unless the call already had
    /// one).
    pub disposition_id: Option<DispositionId>,
}

/// A call's end-of-call analysis is over (`completed` or `failed`), its result recorded. A
/// completed one raises the `call.analyzed` event of the call's agent webhook (the summary, the
/// extracted values, the chosen disposition's label and id); a failed one raises none. It does
/// not fail the analysis, which is already recorded.
pub async fn analyzed(store: &Store, workspace: WorkspaceId, call: CallId, done: &Analyzed) {
    tracing::info!(%workspace, %call, status = done.status.as_str(), disposition = ?done.disposition_id, "call analyzed");
    let Some(analysis) = &done.analysis else {
        return;
    };
    let data = EventData::CallAnalyzed(CallAnalyzed {
        summary: analysis.summary.clone(),
        extracted: analysis.extracted.clone(),
        disposition: analysis.disposition.clone(),
        disposition_id: done.disposition_id,
    });
    if let Err(err) = store.enqueue_call_event(call, &data).await {
        tracing::warn!(%call, error = %err, "the call.analyzed event could not be written");
    }
}

/// Runs due analyses every `interval` until `stop` turns true. Without a chat model nothing is
/// analysed: analyses left pending by an earlier run are marked skipped.
pub async fn run(
    store: Store,
    analyst: Option<Analyst>,
    interval: Duration,
    stop: watch::Receiver<bool>,
) {
    let Some(analyst) = analyst else {
        match store.skip_pending_analyses(store.now()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(count = n, "no chat model: pending analyses skipped"),
            Err(err) => tracing::warn!(error = %err, "pending analyses could not be skipped"),
        }
        return;
    };
    crate::runtime::schedule::every(interval, stop, || async {
        if let Err(err) = analyst.run_due().await {
            tracing::warn!(error = %err, "due analyses could not be read");
        }
    })
    .await;
}

#[cfg(test)]
mod tests;
