//! The SIP dialer: the engine's [`Dialer`] port over real SIP trunks.
//!
//! A call's trunk and agent come from the [`OutboundDirectory`] port (the service reads them
//! from its store: the calling number's carrier account, else the operator's default trunk).
//! The call is placed by [`SipClient::dial`]; an answered call runs the same agent as an
//! inbound one ([`crate::agent::converse`]). The SIP final response becomes the call's outcome
//! by the table in [`outcome_of`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use switchboard_sip::amd::AnsweredBy;
use switchboard_sip::media::VadSettings;
use switchboard_sip::outbound::{DialFailure, DialPlan, FailureKind, SipClient};
use switchboard_sip::trunk::Trunk;
use tokio_util::sync::CancellationToken;

use crate::agent::actor::AgentArgs;
use crate::agent::{AgentPlan, SipLine, Speech};
use crate::call::EndReason;
use crate::contact::CallOutcome;
use crate::ports::{DialProgress, DialRequest, DialResult, Dialer, NetworkDetails, PortResult};

/// Switchboard's own ring timer when neither the call nor the operator sets one.
pub const DEFAULT_RING_TIMEOUT: Duration = Duration::from_secs(30);
/// A gateway that sends nothing at all within this is left for the next one.
pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);

/// How one outbound call is placed and run.
#[derive(Debug, Clone)]
pub struct OutboundRoute {
    pub trunk: Trunk,
    /// The agent, capped at the request's `max_duration_secs`.
    pub agent: AgentPlan,
    /// Where to record; none for no recording.
    pub recording: Option<PathBuf>,
    pub vad: VadSettings,
    /// The call's own ring timeout, else the service's.
    pub ring_timeout: Duration,
}

/// What the dialer needs from the service for each call.
#[async_trait]
pub trait OutboundDirectory: Send + Sync + 'static {
    /// The trunk and agent of a call; `None` when no trunk serves its number.
    async fn route(&self, request: &DialRequest) -> PortResult<Option<OutboundRoute>>;
}

/// Decides whether to fail a call on purpose once it is answered (resilience tests).
pub type CallFault = Arc<dyn Fn(&DialRequest) -> bool + Send + Sync>;

/// Places calls through SIP trunks.
pub struct SipDialer {
    pub client: SipClient,
    pub directory: Arc<dyn OutboundDirectory>,
    pub speech: Arc<dyn Speech>,
    /// Ends every call (service shutdown).
    pub stop: CancellationToken,
    pub response_timeout: Duration,
    /// Resilience tests: a call for which this answers `true` panics once answered.
    pub fault: Option<CallFault>,
}

/// A run-once hook as the SIP dialer takes it (called on each 180/183; runs on the first).
fn once(hook: Box<dyn FnOnce() + Send>) -> Arc<dyn Fn() + Send + Sync> {
    let hook = std::sync::Mutex::new(Some(hook));
    Arc::new(move || {
        if let Some(hook) = hook.lock().ok().and_then(|mut h| h.take()) {
            hook();
        }
    })
}

/// The outcome of a failed dial, by the SIP final response or what stood for one.
pub fn outcome_of(failure: &DialFailure) -> (CallOutcome, EndReason) {
    match failure.kind {
        FailureKind::RingTimeout => (CallOutcome::NoAnswer, EndReason::RingTimeout),
        FailureKind::Cancelled => (CallOutcome::InfraError, EndReason::Shutdown),
        FailureKind::NoResponse => (CallOutcome::InfraError, EndReason::NoResponse),
        FailureKind::Transport => (CallOutcome::InfraError, EndReason::TransportError),
        FailureKind::Local => (CallOutcome::InfraError, EndReason::LocalError),
        FailureKind::Response => match failure.sip_code.unwrap_or(0) {
            486 | 600 => (CallOutcome::Busy, EndReason::Busy),
            408 | 480 | 487 => (CallOutcome::NoAnswer, EndReason::NoAnswer),
            404 | 410 | 484 | 485 | 604 => (CallOutcome::Failed, EndReason::InvalidNumber),
            403 | 603 | 607 | 608 => (CallOutcome::Failed, EndReason::Rejected),
            401 | 407 | 488 | 415 => (CallOutcome::Failed, EndReason::TrunkConfiguration),
            500..=599 => (CallOutcome::InfraError, EndReason::CarrierError),
            _ => (CallOutcome::Failed, EndReason::Rejected),
        },
    }
}

fn failed(
    outcome: CallOutcome,
    reason: EndReason,
    ring_secs: i64,
    network: NetworkDetails,
) -> DialResult {
    DialResult {
        outcome,
        ring_secs,
        talk_secs: 0,
        end_reason: reason,
        disposition_label: None,
        network,
        conversation: Default::default(),
    }
}

#[async_trait]
impl Dialer for SipDialer {
    async fn dial(&self, request: DialRequest, mut progress: DialProgress) -> DialResult {
        let route = match self.directory.route(&request).await {
            Ok(Some(route)) => route,
            Ok(None) => {
                tracing::warn!(call = %request.call_id, from = %request.from_number, "no SIP trunk serves this number");
                return failed(
                    CallOutcome::InfraError,
                    EndReason::NoTrunk,
                    0,
                    Default::default(),
                );
            }
            Err(e) => {
                tracing::warn!(call = %request.call_id, error = %e, "the call's trunk could not be read");
                return failed(
                    CallOutcome::InfraError,
                    EndReason::RouteError,
                    0,
                    Default::default(),
                );
            }
        };
        let plan = DialPlan {
            trunk: route.trunk,
            from_number: request.from_number.clone(),
            to_number: request.to_number.clone(),
            call_id: Some(request.call_id.to_string()),
            ring_timeout: route.ring_timeout,
            response_timeout: self.response_timeout,
            recording: route.recording.clone(),
            vad: route.vad,
            on_ringing: progress.take_ringing().map(once),
        };
        let answered = match self.client.dial(plan, self.stop.child_token()).await {
            Ok(answered) => answered,
            Err(failure) => {
                let (outcome, reason) = outcome_of(&failure);
                if reason == EndReason::TrunkConfiguration {
                    tracing::warn!(call = %request.call_id, gateway = ?failure.gateway, code = ?failure.sip_code, "the trunk refused the call's credentials or media: check its configuration");
                }
                let network = NetworkDetails {
                    sip_code: failure.sip_code,
                    sip_reason: failure.reason_phrase.clone(),
                    q850_cause: failure.q850_cause,
                    answered_by: None,
                    codec: None,
                    recorded: failure.recorded,
                };
                return failed(outcome, reason, failure.elapsed.as_secs() as i64, network);
            }
        };
        let connected = tokio::time::Instant::now();
        // The answer is recorded (and `call.answered` raised) before the agent says a word.
        progress.answered_and_recorded().await;
        if let Some(fault) = &self.fault
            && fault(&request)
        {
            panic!("injected fault in call {}", request.call_id);
        }
        let codec = answered.call.codec;
        let args = AgentArgs {
            line: Box::new(SipLine::new(answered.call)),
            plan: route.agent.clone(),
            speech: self.speech.clone(),
            answered: connected,
            stop: self.stop.child_token(),
            fail: false,
        };
        // The agent runs as an actor linked to the call's: if it fails, so does the call, which
        // its supervisor ends as interrupted (this result is what the call records if it
        // comes first).
        let Some(ended) = crate::agent::actor::run(args, progress.owner()).await else {
            let network = NetworkDetails {
                sip_code: Some(200),
                sip_reason: Some("OK".into()),
                codec: Some(codec),
                ..Default::default()
            };
            return failed(CallOutcome::InfraError, EndReason::Interrupted, 0, network);
        };
        tracing::info!(
            call = %request.call_id,
            gateway = %answered.gateway,
            reason = %ended.reason,
            duration_secs = ended.duration_secs,
            sent = ended.stats.packets_sent,
            received = ended.stats.packets_received,
            lost = ended.stats.packets_lost,
            foreign = ended.stats.packets_foreign,
            echo_frames = ended.stats.echo_frames,
            "outbound call ended"
        );
        let machine = ended.answered_by == Some(AnsweredBy::Machine);
        DialResult {
            outcome: if machine {
                CallOutcome::Voicemail
            } else {
                CallOutcome::Answered
            },
            ring_secs: answered.ring.as_secs() as i64,
            talk_secs: ended.duration_secs.min(request.max_duration_secs),
            end_reason: ended.reason,
            disposition_label: None,
            network: NetworkDetails {
                sip_code: Some(200),
                sip_reason: Some("OK".into()),
                q850_cause: None,
                answered_by: ended.answered_by,
                codec: Some(codec),
                recorded: route.recording.is_some(),
            },
            conversation: ended.conversation,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(code: u16) -> DialFailure {
        DialFailure {
            kind: FailureKind::Response,
            sip_code: Some(code),
            reason_phrase: None,
            q850_cause: None,
            gateway: None,
            detail: String::new(),
            elapsed: Duration::ZERO,
            early_media: false,
            recorded: false,
        }
    }

    #[test]
    fn final_responses_map_to_outcomes_by_the_table() {
        let outcome = |code| outcome_of(&response(code)).0;
        for code in [486, 600] {
            assert_eq!(outcome(code), CallOutcome::Busy, "{code}");
        }
        for code in [408, 480, 487] {
            assert_eq!(outcome(code), CallOutcome::NoAnswer, "{code}");
        }
        for code in [
            404, 410, 484, 485, 604, 403, 603, 607, 608, 401, 407, 488, 415,
        ] {
            assert_eq!(outcome(code), CallOutcome::Failed, "{code}");
        }
        for code in [500, 502, 503, 504] {
            assert_eq!(outcome(code), CallOutcome::InfraError, "{code}");
        }
        let mut ring = response(487);
        ring.kind = FailureKind::RingTimeout;
        assert_eq!(
            outcome_of(&ring),
            (CallOutcome::NoAnswer, EndReason::RingTimeout)
        );
        let mut timeout = response(0);
        timeout.kind = FailureKind::NoResponse;
        assert_eq!(outcome_of(&timeout).0, CallOutcome::InfraError);
    }
}
