//! Outbound SIP calls wired to the store: the SIP dialer's directory (a call's trunk, agent with
//! the lead memory of the number dialled, and recording) and its INVITE journal, and the
//! start-up step that ends what a crashed process left ringing or answered.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use switchboard_actors::ids::CallId;
use switchboard_actors::ports::{DialRequest, PortError, PortResult};
use switchboard_actors::sip_dialer::{OutboundDirectory, OutboundRoute};
use switchboard_sip::outbound::{InviteJournal, InviteKey, SipClient};

use crate::agent_webhooks::turns::TurnEvents;
use crate::call_tools::{CallFacts, equip};
use crate::config::Config;
use crate::inbound::{agent_plan, recording_path, vad_settings};
use crate::store::{CallTrunk, Store};

/// The SIP dialer's view of the store.
pub struct OutboundPort {
    pub store: Store,
    pub config: Arc<Config>,
    pub vendors: crate::vendors::Vendors,
}

#[async_trait]
impl OutboundDirectory for OutboundPort {
    async fn route(&self, request: &DialRequest) -> PortResult<Option<OutboundRoute>> {
        let failed = |op| move |e| PortError::failed(op, e);
        let Some(route) = self
            .store
            .call_route(request.call_id)
            .await
            .map_err(failed("call_route"))?
        else {
            return Ok(None);
        };
        let trunk = match route.trunk {
            CallTrunk::Account(trunk) => *trunk,
            CallTrunk::NoAccount => match &self.config.outbound_trunk {
                Some(trunk) => trunk.clone(),
                None => return Ok(None),
            },
            CallTrunk::None => return Ok(None),
        };
        let Some(agent) = self
            .store
            .agent(route.workspace_id, request.agent_id)
            .await
            .map_err(failed("agent"))?
        else {
            return Ok(None);
        };
        let mut plan = agent_plan(
            &agent,
            Duration::from_secs(request.max_duration_secs.max(1) as u64),
            true,
            &self.vendors,
            &route.variables,
        );
        let facts = CallFacts {
            workspace_id: route.workspace_id,
            agent_id: agent.id,
            agent_name: agent.name.clone(),
            call_id: request.call_id,
            direction: "outbound",
            metadata: route.metadata,
            variables: route.variables,
        };
        equip(&mut plan, &self.store, &self.vendors.egress, facts).await;
        plan.turns = TurnEvents::for_call(&self.store, request.call_id, &agent);
        let mut planned = OutboundRoute {
            trunk,
            agent: plan,
            recording: Some(recording_path(&self.config.data_dir, request.call_id)),
            vad: vad_settings(&agent),
            ring_timeout: route
                .ring_timeout_secs
                .map(|s| Duration::from_secs(s.max(1) as u64))
                .unwrap_or(self.config.ring_timeout),
        };
        if agent.lead_memory_enabled {
            crate::lead_memory::remember(
                &self.store,
                route.workspace_id,
                &mut planned.agent,
                &route.to_number,
                agent.lead_memory_trust_caller_id,
            )
            .await;
        }
        Ok(Some(planned))
    }
}

#[async_trait]
impl InviteJournal for OutboundPort {
    async fn invite_sent(&self, call_id: &str, key: &InviteKey) {
        let Ok(id) = call_id.parse::<uuid::Uuid>() else {
            return;
        };
        if let Err(e) = self.store.record_invite(CallId::from_uuid(id), key).await {
            tracing::warn!(call = %call_id, error = %e, "an outbound INVITE could not be written down");
        }
    }
}

/// Ends what a previous process left of its outbound calls: a CANCEL for each INVITE still
/// ringing, a BYE for each answered dialog. Run at start, before the calls are reconciled as
/// interrupted; the far ends that do not answer are left to their own timers.
pub async fn abandon_stale_calls(store: &Store, client: &SipClient) -> anyhow::Result<()> {
    let stale = store.stale_invites().await?;
    if stale.is_empty() {
        return Ok(());
    }
    tracing::info!(
        calls = stale.len(),
        "ending the SIP calls a previous process left"
    );
    let mut ends = tokio::task::JoinSet::new();
    for (id, key) in stale {
        let client = client.clone();
        ends.spawn(async move {
            let answered = client.abandon(&key).await;
            tracing::info!(call = %id, response = ?answered, "a call of a previous process was ended");
        });
    }
    while ends.join_next().await.is_some() {}
    Ok(())
}
