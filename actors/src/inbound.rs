//! Inbound calls: an answered SIP call to an endpoint, recorded as live before the agent
//! ([`crate::agent::converse`], the same for both directions) says a word, and recorded as
//! ended whatever way it ends. The engine runs each as a call actor under its supervision
//! ([`crate::engine::Engine::answer`]): a call that fails inside is ended as interrupted.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use switchboard_sip::call::Call;
use tokio::time::Instant;

use crate::agent::SipLine;
use crate::agent::actor::AgentArgs;
pub use crate::agent::{AgentPlan, Speech, SpeechError};
use crate::call::EndReason;

use crate::clock::SharedClock;
use crate::conversation::Conversation;
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
    /// How the agent runs the call.
    pub agent: AgentPlan,
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
    pub codec: switchboard_sip::sdp::Codec,
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
    pub end_reason: EndReason,
    pub packets_sent: u64,
    pub packets_received: u64,
    pub packets_lost: u64,
    /// The transcript, tool events and vendor failures, stored with the end.
    pub conversation: Conversation,
}

/// What inbound calls need from the store.
#[async_trait]
pub trait InboundStore: Send + Sync + 'static {
    /// Records the call as live.
    async fn inbound_started(&self, call: &InboundStart) -> PortResult<()>;
    /// Records its end and charges it.
    async fn inbound_ended(&self, call: &InboundEnd) -> PortResult<()>;
}

/// Resilience tests: an inbound call this picks (by its plan and caller) fails inside (a
/// panic) once answered and recorded.
pub type InboundFault = Arc<dyn Fn(&InboundPlan, &str) -> bool + Send + Sync>;

/// An answered inbound call, with what it needs to run.
pub struct InboundCall {
    pub call: Call,
    pub plan: InboundPlan,
    pub store: Arc<dyn InboundStore>,
    pub speech: Arc<dyn Speech>,
    pub clock: SharedClock,
    /// Ends the call early (service shutdown).
    pub stop: tokio_util::sync::CancellationToken,
    pub fault: Option<InboundFault>,
    /// Dropped when the call is over, however it ends (its runner waits on it).
    pub done: Option<tokio::sync::oneshot::Sender<()>>,
    /// The call's actor, which the agent's actor is linked to; none: the agent runs on the
    /// call's own task.
    pub owner: Option<ractor::ActorCell>,
    /// The call's place on its endpoint, given back as the call ends.
    pub seat: Option<crate::endpoint::Seat>,
}

/// The call's agent failed: the call's supervisor ends it as interrupted.
#[derive(Debug, thiserror::Error)]
#[error("the call's agent failed")]
pub struct AgentFailed;

impl InboundCall {
    /// What ending it as interrupted needs, should it fail inside.
    pub fn facts(&self) -> InboundFacts {
        InboundFacts {
            id: self.plan.call_id,
            workspace_id: self.plan.workspace_id,
            agent_id: self.plan.agent_id,
            from: self.call.from.clone(),
            answered_at: self.clock.now(),
            store: self.store.clone(),
            clock: self.clock.clone(),
        }
    }
}

/// An inbound call as its supervisor knows it.
pub struct InboundFacts {
    pub id: CallId,
    pub workspace_id: WorkspaceId,
    pub agent_id: AgentId,
    pub from: String,
    pub answered_at: DateTime<Utc>,
    store: Arc<dyn InboundStore>,
    clock: SharedClock,
}

impl InboundFacts {
    /// Records the call's end as interrupted (it failed inside): nothing said, from the
    /// answer until now.
    pub async fn interrupted(&self) {
        let ended_at = self.clock.now();
        let end = InboundEnd {
            id: self.id,
            workspace_id: self.workspace_id,
            agent_id: self.agent_id,
            from: self.from.clone(),
            answered_at: self.answered_at,
            ended_at,
            duration_secs: (ended_at - self.answered_at).num_seconds().max(0),
            end_reason: EndReason::Interrupted,
            packets_sent: 0,
            packets_received: 0,
            packets_lost: 0,
            conversation: Conversation::default(),
        };
        record_end(self.store.as_ref(), &end).await;
    }
}

/// Runs an answered inbound call to its end; an error if its agent failed (its end is then
/// left to the supervisor).
pub async fn run_call(inbound: InboundCall) -> Result<(), AgentFailed> {
    let InboundCall {
        mut call,
        plan,
        store,
        speech,
        clock,
        stop,
        fault,
        done: _done,
        owner,
        seat,
    } = inbound;
    let id = plan.call_id;
    let answered_at = clock.now();
    let answered = Instant::now();
    let start = InboundStart {
        id,
        plan: plan.clone(),
        from: call.from.clone(),
        codec: call.codec,
        started_at: answered_at,
    };
    let recorded = store.inbound_started(&start).await;
    // Recorded (or not): the call no longer counts among those being set up.
    call.set_up();
    if let Err(e) = recorded {
        tracing::warn!(error = %e, "an inbound call could not be recorded; hanging up");
        call.hangup().await;
        let _ = call.finish().await;
        return Ok(());
    }
    if let Some(seat) = &seat {
        seat.called(answered_at);
    }
    let from = call.from.clone();
    let args = AgentArgs {
        fail: fault.is_some_and(|fault| fault(&plan, &from)),
        line: Box::new(SipLine::new(call)),
        plan: plan.agent.clone(),
        speech,
        answered,
        stop,
    };
    let ended = crate::agent::actor::run(args, owner)
        .await
        .ok_or(AgentFailed)?;
    let stats = ended.stats;
    tracing::info!(
        call = %id,
        reason = %ended.reason,
        duration_secs = ended.duration_secs,
        sent = stats.packets_sent,
        received = stats.packets_received,
        lost = stats.packets_lost,
        ignored = stats.packets_ignored,
        foreign = stats.packets_foreign,
        echo_frames = stats.echo_frames,
        "inbound call ended"
    );
    let end = InboundEnd {
        id,
        workspace_id: plan.workspace_id,
        agent_id: plan.agent_id,
        from,
        answered_at,
        ended_at: clock.now(),
        duration_secs: ended.duration_secs,
        end_reason: ended.reason,
        packets_sent: stats.packets_sent,
        packets_received: stats.packets_received,
        packets_lost: stats.packets_lost,
        conversation: ended.conversation,
    };
    record_end(store.as_ref(), &end).await;
    Ok(())
}

/// Records the call's end. The store's port keeps the write while its database cannot be
/// reached; any other failure is logged, and the next start ends the call as interrupted.
async fn record_end(store: &dyn InboundStore, end: &InboundEnd) {
    if let Err(e) = store.inbound_ended(end).await {
        tracing::error!(error = %e, call = %end.id, "recording an inbound call's end failed");
    }
}
