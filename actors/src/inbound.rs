//! Inbound calls: the call actor that runs one answered SIP call and its agent.
//!
//! The actor is one task whose mailbox is the call's event stream (media events and the
//! dialog's end) plus its own timers. It records the call as live before the agent says a word,
//! and records its end whatever way it ends.
//!
//! The agent, first version: when the agent speaks first it plays its greeting (synthesized by
//! the [`Speech`] port at the call's sample rate); the caller speaking over it cuts it short. The
//! call ends with a BYE after `silence_timeout_secs` with neither side speaking, or at
//! `max_call_duration_secs`. What the agent says in reply comes with the conversation engine.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use switchboard_sip::media::MediaEvent;
use switchboard_sip::server::{CallEvent, EndCause, InboundCall};
use tokio::time::Instant;

use crate::clock::SharedClock;
use crate::ids::{AgentId, CallId, SipEndpointId, WorkspaceId};
use crate::ports::PortResult;

/// Who answers an inbound call and how.
#[derive(Debug, Clone)]
pub struct InboundPlan {
    /// The call's id, chosen when the INVITE is routed (it names the recording).
    pub call_id: CallId,
    pub workspace_id: WorkspaceId,
    pub endpoint_id: SipEndpointId,
    pub agent_id: AgentId,
    /// The URI called, `sip:<slug>@<host>`.
    pub sip_uri: String,
    pub greeting: String,
    pub agent_speaks_first: bool,
    pub voice: String,
    pub language: String,
    pub silence_timeout: Duration,
    /// The agent's cap on a call's length.
    pub max_duration: Duration,
    /// Whether the call is recorded.
    pub recorded: bool,
}

/// An inbound call as it starts.
#[derive(Debug, Clone)]
pub struct InboundStart {
    pub id: CallId,
    pub plan: InboundPlan,
    /// The caller's number or SIP user.
    pub from: String,
    pub codec: String,
    pub started_at: DateTime<Utc>,
}

/// An inbound call as it ends.
#[derive(Debug, Clone)]
pub struct InboundEnd {
    pub id: CallId,
    pub workspace_id: WorkspaceId,
    pub agent_id: AgentId,
    pub from: String,
    pub answered_at: DateTime<Utc>,
    pub ended_at: DateTime<Utc>,
    pub duration_secs: i64,
    /// `caller_hangup`, `silence_timeout`, `max_duration`, `ack_timeout`, `shutdown`, ...
    pub end_reason: String,
    pub packets_sent: u64,
    pub packets_received: u64,
    pub packets_lost: u64,
}

/// What inbound calls need from the store.
#[async_trait]
pub trait InboundStore: Send + Sync + 'static {
    /// Records the call as live (and the endpoint's `last_call_at`).
    async fn inbound_started(&self, call: &InboundStart) -> PortResult<()>;
    /// Records its end and charges it.
    async fn inbound_ended(&self, call: &InboundEnd) -> PortResult<()>;
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SpeechError(pub String);

/// Text to speech.
#[async_trait]
pub trait Speech: Send + Sync + 'static {
    /// Mono 16-bit audio of `text` at `sample_rate`.
    async fn speak(
        &self,
        text: &str,
        voice: &str,
        language: &str,
        sample_rate: u32,
    ) -> Result<Arc<[i16]>, SpeechError>;
}

/// Why the agent ended a call.
pub const END_SILENCE: &str = "silence_timeout";
pub const END_MAX_DURATION: &str = "max_duration";
pub const END_SHUTDOWN: &str = "shutdown";

/// Runs an answered inbound call to its end. `stop` ends it early (service shutdown).
pub async fn run_call(
    mut call: InboundCall,
    plan: InboundPlan,
    store: Arc<dyn InboundStore>,
    speech: Arc<dyn Speech>,
    clock: SharedClock,
    stop: tokio_util::sync::CancellationToken,
) {
    let id = plan.call_id;
    let answered_at = clock.now();
    let started = Instant::now();
    let start = InboundStart {
        id,
        plan: plan.clone(),
        from: call.from.clone(),
        codec: call.codec.name().to_string(),
        started_at: answered_at,
    };
    if let Err(e) = store.inbound_started(&start).await {
        tracing::warn!(error = %e, "an inbound call could not be recorded; hanging up");
        call.hangup().await;
        let _ = call.finish().await;
        return;
    }
    let mut agent_speaking = false;
    if plan.agent_speaks_first && !plan.greeting.trim().is_empty() {
        match speech
            .speak(
                &plan.greeting,
                &plan.voice,
                &plan.language,
                call.codec.sample_rate(),
            )
            .await
        {
            Ok(audio) => {
                call.media.play(audio);
                agent_speaking = true;
            }
            Err(e) => tracing::warn!(error = %e, "the greeting could not be synthesized"),
        }
    }
    let deadline = started + plan.max_duration;
    let mut caller_speaking = false;
    let mut quiet_since = Instant::now();
    let reason: String = loop {
        let silence_at = quiet_since + plan.silence_timeout;
        let watch_silence = !caller_speaking && !agent_speaking;
        tokio::select! {
            _ = stop.cancelled() => {
                call.hangup().await;
                break END_SHUTDOWN.into();
            }
            _ = tokio::time::sleep_until(deadline) => {
                call.hangup().await;
                break END_MAX_DURATION.into();
            }
            _ = tokio::time::sleep_until(silence_at), if watch_silence => {
                call.hangup().await;
                break END_SILENCE.into();
            }
            event = call.next_event() => match event {
                Some(CallEvent::Media(MediaEvent::SpeechStarted)) => {
                    caller_speaking = true;
                    if agent_speaking {
                        // The caller talks over the agent: the agent yields.
                        call.media.clear();
                    }
                }
                Some(CallEvent::Media(MediaEvent::SpeechStopped)) => {
                    caller_speaking = false;
                    quiet_since = Instant::now();
                }
                Some(CallEvent::Media(MediaEvent::PlayoutDone)) => {
                    agent_speaking = false;
                    quiet_since = Instant::now();
                }
                // Answering-machine detection runs on outbound calls only.
                Some(CallEvent::Media(MediaEvent::Amd(_) | MediaEvent::Beep(_))) => {}
                Some(CallEvent::Ended(cause)) => break cause.name().into(),
                None => break call.end_cause().unwrap_or(EndCause::Failed).name().into(),
            }
        }
    };
    let duration_secs = started.elapsed().as_secs() as i64;
    let from = call.from.clone();
    let stats = call.finish().await.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "an inbound call's media ended badly");
        Default::default()
    });
    tracing::info!(
        call = %id,
        reason = %reason,
        duration_secs,
        sent = stats.packets_sent,
        received = stats.packets_received,
        lost = stats.packets_lost,
        ignored = stats.packets_ignored,
        "inbound call ended"
    );
    let end = InboundEnd {
        id,
        workspace_id: plan.workspace_id,
        agent_id: plan.agent_id,
        from,
        answered_at,
        ended_at: clock.now(),
        duration_secs,
        end_reason: reason,
        packets_sent: stats.packets_sent,
        packets_received: stats.packets_received,
        packets_lost: stats.packets_lost,
    };
    // The end must land: retry a failing store a few times before giving up on the record.
    for attempt in 0..5 {
        match store.inbound_ended(&end).await {
            Ok(()) => return,
            Err(e) => {
                tracing::warn!(error = %e, attempt, call = %id, "recording an inbound call's end failed");
                tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
            }
        }
    }
}
