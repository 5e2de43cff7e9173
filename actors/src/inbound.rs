//! Inbound calls: an answered SIP call to an endpoint, recorded as live before the agent
//! ([`crate::agent::converse`], the same for both directions) says a word, and recorded as
//! ended whatever way it ends.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use switchboard_sip::call::Call;
use tokio::time::Instant;

pub use crate::agent::{AgentPlan, Speech, SpeechError};
use crate::agent::{SipLine, converse};

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
    /// The transcript, tool events and vendor failures, stored with the end.
    pub conversation: Conversation,
}

/// What inbound calls need from the store.
#[async_trait]
pub trait InboundStore: Send + Sync + 'static {
    /// Records the call as live (and the endpoint's `last_call_at`).
    async fn inbound_started(&self, call: &InboundStart) -> PortResult<()>;
    /// Records its end and charges it.
    async fn inbound_ended(&self, call: &InboundEnd) -> PortResult<()>;
}

/// Runs an answered inbound call to its end. `stop` ends it early (service shutdown).
pub async fn run_call(
    mut call: Call,
    plan: InboundPlan,
    store: Arc<dyn InboundStore>,
    speech: Arc<dyn Speech>,
    clock: SharedClock,
    stop: tokio_util::sync::CancellationToken,
) {
    let id = plan.call_id;
    let answered_at = clock.now();
    let answered = Instant::now();
    let start = InboundStart {
        id,
        plan: plan.clone(),
        from: call.from.clone(),
        codec: call.codec.name().to_string(),
        started_at: answered_at,
    };
    let recorded = store.inbound_started(&start).await;
    // Recorded (or not): the call no longer counts among those being set up.
    call.set_up();
    if let Err(e) = recorded {
        tracing::warn!(error = %e, "an inbound call could not be recorded; hanging up");
        call.hangup().await;
        let _ = call.finish().await;
        return;
    }
    let from = call.from.clone();
    let ended = converse(
        Box::new(SipLine::new(call)),
        &plan.agent,
        &speech,
        answered,
        stop,
    )
    .await;
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
        end_reason: ended.reason.as_str().to_string(),
        packets_sent: stats.packets_sent,
        packets_received: stats.packets_received,
        packets_lost: stats.packets_lost,
        conversation: ended.conversation,
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
