//! Outbound SIP calls wired to the store: the SIP dialer's directory (a call's trunk, agent with
//! the lead memory of the number dialled, and recording) and its INVITE journal, and the
//! start-up step that ends what a crashed process left ringing or answered.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use switchboard_actors::ids::CallId;
use switchboard_actors::ports::{DialRequest, PortError, PortResult};
use switchboard_actors::sip_dialer::{OutboundDirectory, OutboundRoute};
use switchboard_sip::outbound::SipClient;

use crate::config::Config;
use crate::runtime::agent_webhooks::turns::TurnEvents;
use crate::runtime::call_tools::{CallFacts, equip};
use crate::runtime::inbound::{agent_plan, recording_path, vad_settings};
use crate::store::{CallTrunk, Store};

/// The SIP dialer's view of the store.
pub struct OutboundPort {
    pub store: Store,
    pub config: Arc<Config>,
    pub vendors: crate::runtime::vendors::Vendors,
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
        let numbers = (request.from_number.as_str(), request.to_number.as_str());
        let flow_metadata = crate::runtime::flows::call_metadata(
            &agent,
            request.call_id,
            "outbound",
            numbers,
            &route.metadata,
        );
        let variables = route.variables.clone();
        let facts = CallFacts {
            workspace_id: route.workspace_id,
            agent_id: agent.id,
            agent_name: agent.name.clone(),
            call_id: request.call_id,
            direction: "outbound",
            metadata: route.metadata,
            variables: route.variables,
        };
        equip(&mut plan, &self.store, &self.vendors, facts).await;
        crate::runtime::flows::direct(&mut plan, &agent, flow_metadata, &variables);
        plan.turns = Some(self.vendors.turns.sink(
            request.call_id,
            TurnEvents::for_call(&self.store, request.call_id, &agent),
        ));
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
            crate::runtime::lead_memory::remember(
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

/// Records that a call of a previous process was answered at `ms` (UNIX milliseconds).
async fn learned_answer(store: &Store, id: CallId, ms: u64) {
    let Some(at) = chrono::DateTime::from_timestamp_millis(ms as i64) else {
        return;
    };
    if let Err(e) = store.record_learned_answer(id, at).await {
        tracing::warn!(call = %id, error = %e, "the answer of a call of a previous process was not recorded");
    }
}

/// Ends what a previous process left of its outbound calls, from its INVITE journal: a BYE to
/// each dialog it saw answered, a CANCEL to each INVITE that only rang (and an ACK and a BYE to
/// an answer that crosses it). Run at start, before the calls are reconciled
/// as interrupted; an answer learned on the way is recorded on its call (`answered_at`); the
/// far ends that answer nothing are left to their own timers.
pub async fn abandon_stale_calls(store: &Store, client: &SipClient) -> anyhow::Result<()> {
    let left = client.left_over();
    if left.is_empty() {
        return Ok(());
    }
    let mut ends = tokio::task::JoinSet::new();
    for key in left {
        // Every INVITE the journal has not seen end is ended, whatever the store says: a
        // restart killed before its CANCEL's watch was over has already reconciled the call,
        // and the callee may still be answering. A request for a dialog that did end gets 481.
        let Some(id) = key
            .call_id
            .parse::<uuid::Uuid>()
            .ok()
            .map(CallId::from_uuid)
        else {
            client.forget(&key);
            continue;
        };
        let client = client.clone();
        let store = store.clone();
        ends.spawn(async move {
            let late = store.clone();
            let ended = client
                .abandon(&key, move |ms| {
                    tokio::spawn(async move { learned_answer(&late, id, ms).await });
                })
                .await;
            tracing::info!(call = %id, cancel = ?ended.cancel, bye = ?ended.bye, answered = ended.answered_at_ms.is_some(), "a call of a previous process was ended");
            if let Some(ms) = ended.answered_at_ms {
                learned_answer(&store, id, ms).await;
            }
        });
    }
    tracing::info!(
        calls = ends.len(),
        "ending the SIP calls a previous process left"
    );
    while ends.join_next().await.is_some() {}
    Ok(())
}
