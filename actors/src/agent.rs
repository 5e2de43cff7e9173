//! The agent on an answered call, inbound or outbound: one call actor for both directions.
//!
//! [`converse`] is one task whose mailbox is the call's event stream (media events and the
//! dialog's end) plus its own timers. When the agent speaks first it plays its greeting
//! (synthesized by the [`Speech`] port at the call's sample rate); the other party speaking over
//! it cuts it short. The call ends with a BYE after `silence_timeout` with neither side
//! speaking, at `max_duration`, or when `stop` fires (service shutdown). What the agent says in
//! reply comes with the conversation engine.
//!
//! How the call started (an INVITE received, or one sent through a trunk) and how its start
//! and end are recorded belong to the callers: [`crate::inbound::run_call`] and the SIP dialer
//! ([`crate::sip_dialer`]).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use switchboard_sip::amd::{AmdSettings, AnsweredBy, BEEP_WINDOW_MS, BeepEvent};
use switchboard_sip::call::{Call, CallEvent, EndCause};

use crate::conversation::Conversation;
use switchboard_sip::media::{MediaEvent, MediaStats};
use tokio::time::Instant;

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
/// A machine answered and the agent has no voicemail message: it hung up at once.
pub const END_MACHINE: &str = "answering_machine";
/// A machine answered; the agent left its voicemail message after the beep.
pub const END_VOICEMAIL_LEFT: &str = "voicemail_left";
/// A machine answered but no beep came within the listening window: nothing was left.
pub const END_NO_BEEP: &str = "voicemail_no_beep";

/// Answering-machine detection on an outbound call.
#[derive(Debug, Clone)]
pub struct AmdPlan {
    pub settings: AmdSettings,
    /// Left after the beep when a machine answers; none: hang up at once.
    pub voicemail_message: Option<String>,
}

/// How the agent runs a call.
#[derive(Debug, Clone)]
pub struct AgentPlan {
    pub greeting: String,
    pub agent_speaks_first: bool,
    pub voice: String,
    pub language: String,
    pub silence_timeout: Duration,
    /// The agent's cap on a call's length.
    pub max_duration: Duration,
    /// Answering-machine detection (outbound calls whose agent has it on): the greeting
    /// waits for the verdict.
    pub amd: Option<AmdPlan>,
}

/// How a conversation ended.
#[derive(Debug, Clone)]
pub struct AgentEnd {
    /// `caller_hangup`, `callee_hangup`, `silence_timeout`, `max_duration`, `shutdown`, ...
    pub reason: String,
    /// Connected time, whole seconds.
    pub duration_secs: i64,
    pub stats: MediaStats,
    /// Who answered, when answering-machine detection ran and decided.
    pub answered_by: Option<AnsweredBy>,
    /// The transcript and the tools run.
    pub conversation: Conversation,
}

/// Where a call with answering-machine detection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Detection {
    /// No detection, or a person (or unsure) answered: the conversation runs.
    Off,
    /// Listening for the verdict; the agent holds its greeting.
    Listening,
    /// A machine: waiting for its beep (until the deadline) to leave the message.
    AwaitingBeep,
    /// Leaving the voicemail message; the call ends when it has played.
    LeavingMessage,
}

/// Plays `text` on the call; `false` if it could not be synthesized.
pub async fn say(call: &Call, speech: &dyn Speech, text: &str, plan: &AgentPlan) -> bool {
    match speech
        .speak(text, &plan.voice, &plan.language, call.codec.sample_rate())
        .await
    {
        Ok(audio) => {
            call.media.play(audio);
            true
        }
        Err(e) => {
            tracing::warn!(error = %e, "a prompt could not be synthesized");
            false
        }
    }
}

/// Runs the agent on an answered call until it ends, then stops its media. `answered`
/// is when the call was connected (its duration counts from there).
pub async fn converse(
    mut call: Call,
    plan: &AgentPlan,
    speech: &dyn Speech,
    answered: Instant,
    stop: tokio_util::sync::CancellationToken,
) -> AgentEnd {
    let mut agent_speaking = false;
    let mut detection = Detection::Off;
    let mut answered_by = None;
    if let Some(amd) = &plan.amd {
        call.media.control().detect_answering_machine(amd.settings);
        detection = Detection::Listening;
    } else if plan.agent_speaks_first && !plan.greeting.trim().is_empty() {
        agent_speaking = say(&call, speech, &plan.greeting, plan).await;
    }
    let deadline = answered + plan.max_duration;
    let mut beep_deadline = deadline;
    let mut peer_speaking = false;
    let mut quiet_since = Instant::now();
    let reason: String = loop {
        let silence_at = quiet_since + plan.silence_timeout;
        let watch_silence = !peer_speaking && !agent_speaking && detection == Detection::Off;
        tokio::select! {
            _ = stop.cancelled() => {
                call.hangup().await;
                break END_SHUTDOWN.into();
            }
            _ = tokio::time::sleep_until(deadline) => {
                call.hangup().await;
                break END_MAX_DURATION.into();
            }
            _ = tokio::time::sleep_until(beep_deadline), if detection == Detection::AwaitingBeep => {
                call.hangup().await;
                break END_NO_BEEP.into();
            }
            _ = tokio::time::sleep_until(silence_at), if watch_silence => {
                call.hangup().await;
                break END_SILENCE.into();
            }
            event = call.next_event() => match event {
                Some(CallEvent::Media(MediaEvent::SpeechStarted)) => {
                    peer_speaking = true;
                    if agent_speaking && detection == Detection::Off {
                        // The other party talks over the agent: the agent yields.
                        call.media.clear();
                    }
                }
                Some(CallEvent::Media(MediaEvent::SpeechStopped)) => {
                    peer_speaking = false;
                    quiet_since = Instant::now();
                }
                Some(CallEvent::Media(MediaEvent::PlayoutDone)) => {
                    agent_speaking = false;
                    quiet_since = Instant::now();
                    if detection == Detection::LeavingMessage {
                        call.hangup().await;
                        break END_VOICEMAIL_LEFT.into();
                    }
                }
                Some(CallEvent::Media(MediaEvent::Amd(verdict))) => {
                    if detection != Detection::Listening {
                        continue;
                    }
                    answered_by = Some(verdict.answered_by);
                    tracing::info!(answered_by = verdict.answered_by.as_str(), reason = %verdict.reason, after_ms = verdict.after_ms, "answering-machine detection");
                    if verdict.answered_by.counts_as_human() {
                        detection = Detection::Off;
                        quiet_since = Instant::now();
                        if plan.agent_speaks_first && !plan.greeting.trim().is_empty() {
                            agent_speaking = say(&call, speech, &plan.greeting, plan).await;
                        }
                    } else if plan.amd.as_ref().is_some_and(|a| a.voicemail_message.is_some()) {
                        detection = Detection::AwaitingBeep;
                        beep_deadline = Instant::now()
                            + Duration::from_millis(u64::from(BEEP_WINDOW_MS));
                    } else {
                        call.hangup().await;
                        break END_MACHINE.into();
                    }
                }
                Some(CallEvent::Media(MediaEvent::Beep(BeepEvent::Ended { .. }))) => {
                    if detection != Detection::AwaitingBeep {
                        continue;
                    }
                    let message = plan.amd.as_ref().and_then(|a| a.voicemail_message.as_deref());
                    if let Some(message) = message
                        && say(&call, speech, message, plan).await
                    {
                        agent_speaking = true;
                        detection = Detection::LeavingMessage;
                    } else {
                        call.hangup().await;
                        break END_MACHINE.into();
                    }
                }
                Some(CallEvent::Media(MediaEvent::Beep(BeepEvent::Started { .. }))) => {}
                Some(CallEvent::Ended(cause)) => break cause.name(call.direction).into(),
                None => {
                    let cause = call.end_cause().unwrap_or(EndCause::Failed);
                    break cause.name(call.direction).into();
                }
            }
        }
    };
    let duration_secs = answered.elapsed().as_secs() as i64;
    let stats = call.finish().await.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "a call's media ended badly");
        Default::default()
    });
    AgentEnd {
        reason,
        duration_secs,
        stats,
        answered_by,
        conversation: Conversation::default(),
    }
}
