//! Where a call's end-of-call analysis stands, and why one did not run.

use serde::Serialize;
use switchboard_actors::contact::CallOutcome;
use switchboard_actors::conversation::{Conversation, Turn};
use utoipa::ToSchema;

use super::calls::CallRecord;

/// Where a call's end-of-call analysis stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AnalysisStatus {
    /// Waiting for its (next) attempt.
    Pending,
    Completed,
    /// Every attempt failed.
    Failed,
    /// Not run: no chat model is configured, or the call was not answered or has no transcript.
    Skipped,
}

impl AnalysisStatus {
    pub const ALL: [AnalysisStatus; 4] = [
        AnalysisStatus::Pending,
        AnalysisStatus::Completed,
        AnalysisStatus::Failed,
        AnalysisStatus::Skipped,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AnalysisStatus::Pending => "pending",
            AnalysisStatus::Completed => "completed",
            AnalysisStatus::Failed => "failed",
            AnalysisStatus::Skipped => "skipped",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == s)
    }

    /// The analysis a call's end starts: pending for an answered call with a transcript while
    /// a chat model is configured (`enabled`), else skipped.
    pub fn at_end(enabled: bool, outcome: CallOutcome, conversation: &Conversation) -> Self {
        if enabled && outcome == CallOutcome::Answered && !conversation.transcript.is_empty() {
            AnalysisStatus::Pending
        } else {
            AnalysisStatus::Skipped
        }
    }
}

/// Why an end-of-call analysis did not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AnalysisSkip {
    /// The call was not answered by a person (no answer, busy, voicemail, a failure).
    NotAnswered,
    /// Nothing was said on the call.
    NothingSaid,
    /// No chat model is configured (`--llm-url`).
    NoChatModel,
}

impl AnalysisSkip {
    /// Why `call`, with `transcript`, was not analysed: the rules of [`AnalysisStatus::at_end`]
    /// read back, the first that holds.
    pub fn of(call: &CallRecord, transcript: &[Turn]) -> AnalysisSkip {
        if call.outcome != Some(CallOutcome::Answered) {
            AnalysisSkip::NotAnswered
        } else if transcript.is_empty() {
            AnalysisSkip::NothingSaid
        } else {
            AnalysisSkip::NoChatModel
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(text: &str) -> Turn {
        serde_json::from_value(serde_json::json!(
            {"role": "user", "text": text, "start_ms": 0, "end_ms": 0, "interrupted": false}
        ))
        .expect("a turn")
    }

    #[test]
    fn an_analysis_starts_only_for_an_answered_call_with_words() {
        let said = Conversation {
            transcript: vec![turn("Hi")],
            ..Conversation::default()
        };
        let at_end = AnalysisStatus::at_end;
        assert_eq!(
            at_end(true, CallOutcome::Answered, &said),
            AnalysisStatus::Pending
        );
        assert_eq!(
            at_end(false, CallOutcome::Answered, &said),
            AnalysisStatus::Skipped
        );
        assert_eq!(
            at_end(true, CallOutcome::Voicemail, &said),
            AnalysisStatus::Skipped
        );
        assert_eq!(
            at_end(true, CallOutcome::Answered, &Conversation::default()),
            AnalysisStatus::Skipped
        );
    }
}
