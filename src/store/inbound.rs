//! Inbound SIP calls: routing a slug to its endpoint and agent, recording a call's start and
//! end, and the service's own secrets (the recording URL signing key).

use chrono::{DateTime, Utc};
use switchboard_actors::call::PRIORITY_DEFAULT;
use switchboard_actors::contact::CallOutcome;
use switchboard_actors::events::EventKind;
use switchboard_actors::ids::{AgentId, SipEndpointId, WorkspaceId};
use switchboard_actors::inbound::{InboundEnd, InboundStart};
use switchboard_actors::money::Cents;
use switchboard_actors::ports::{CallEnd, CallSpec};

use super::db::query;
use super::webhooks::{CALL_EVENT_SQL, bind_call_event};
use super::{Agent, Lane, ScriptQuery, Store, StoreResult, corrupt, ts};

/// What an INVITE for a slug is checked against.
#[derive(Debug, Clone)]
pub struct SipRoute {
    pub endpoint_id: SipEndpointId,
    pub workspace_id: WorkspaceId,
    pub slug: String,
    pub agent_id: AgentId,
    /// Canonical addresses and CIDR blocks; `None` accepts any source.
    pub allowed_source_ips: Option<Vec<String>>,
    /// Calls at once; `None`: no cap of its own.
    pub max_concurrent_calls: Option<i64>,
}

impl Store {
    /// The endpoint a slug names if it takes calls: not deleted, active, with an agent; `None`
    /// otherwise (all answered alike). Whether its agent is active is asked per call
    /// ([`Store::answering_agent`]).
    pub async fn sip_route(&self, slug: &str) -> StoreResult<Option<SipRoute>> {
        let row = query(
            "SELECT id, workspace_id, slug, inbound_agent_id, allowed_source_ips, max_concurrent_calls \
             FROM sip_endpoints WHERE slug = ? AND deleted_at IS NULL AND is_active = TRUE AND inbound_agent_id IS NOT NULL",
        )
        .bind(slug)
        .fetch_optional(&mut self.route_conn().await?)
        .await?;
        let Some(r) = row else { return Ok(None) };
        let ips: Option<String> = r.try_get("allowed_source_ips")?;
        Ok(Some(SipRoute {
            endpoint_id: SipEndpointId::from_uuid(r.try_get("id")?),
            workspace_id: WorkspaceId::from_uuid(r.try_get("workspace_id")?),
            slug: r.try_get("slug")?,
            agent_id: AgentId::from_uuid(r.try_get("inbound_agent_id")?),
            allowed_source_ips: ips
                .map(|t| serde_json::from_str(&t).map_err(|e| corrupt("allowed_source_ips", e)))
                .transpose()?,
            max_concurrent_calls: r.try_get("max_concurrent_calls")?,
        }))
    }

    /// The agent answering a call to an endpoint of `ws` if it is active, and whether the
    /// workspace is suspended.
    pub async fn answering_agent(
        &self,
        ws: WorkspaceId,
        id: AgentId,
    ) -> StoreResult<Option<(Agent, bool)>> {
        let mut conn = self.route_conn().await?;
        let suspended: Option<bool> = query("SELECT is_suspended FROM workspaces WHERE id = ?")
            .bind(ws.as_uuid())
            .scalar_optional(&mut conn)
            .await?;
        let Some(suspended) = suspended else {
            return Ok(None);
        };
        let agent = Self::agent_on(conn, ws, id).await?;
        Ok(agent.filter(|a| a.is_active).map(|a| (a, suspended)))
    }

    /// Moves an endpoint's `last_call_at` to `at`, unless it is later already.
    pub async fn endpoint_last_call(
        &self,
        id: SipEndpointId,
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        let at = ts(at);
        query(
            "UPDATE sip_endpoints SET last_call_at = ? WHERE id = ? AND (last_call_at IS NULL OR last_call_at < ?)",
        )
        .bind(at)
        .bind(id.as_uuid())
        .bind(at)
        .execute(&mut self.conn().await?)
        .await?;
        Ok(())
    }

    /// Records an answered inbound call as live, with the call's `call.started` and `call.answered` events (it is received answered).
    pub async fn inbound_started(&self, call: &InboundStart) -> StoreResult<()> {
        let body = format!(
            "INSERT INTO calls (id, workspace_id, direction, status, agent_id, from_number, to_number, priority, \
             max_duration_secs, queued_at, started_at, answered_at, created_at, updated_at, sip_endpoint_id, codec, recorded, node_id) \
             VALUES (?, ?, 'inbound', 'in_progress', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?); \
             {CALL_EVENT_SQL}; {CALL_EVENT_SQL}"
        );
        let call = call.clone();
        let node = self.node().map(str::to_owned);
        let bind = move |q: ScriptQuery| {
            let at = ts(call.started_at);
            let p = &call.plan;
            let q = q
                .bind(call.id.as_uuid())
                .bind(p.workspace_id.as_uuid())
                .bind(p.agent_id.as_uuid())
                .bind(call.from.clone())
                .bind(p.sip_uri.clone())
                .bind(PRIORITY_DEFAULT)
                .bind(p.agent.max_duration.as_secs() as i64)
                .bind(at)
                .bind(at)
                .bind(at)
                .bind(at)
                .bind(at)
                .bind(p.endpoint_id.as_uuid())
                .bind(call.codec.name())
                .bind(p.recorded)
                .bind(node.clone());
            let q = bind_call_event(q, call.id, EventKind::CallStarted);
            bind_call_event(q, call.id, EventKind::CallAnswered)
        };
        self.emitting_write(Lane::Normal, body, Box::new(bind), |done| {
            done.changed(0) == 1
        })
        .await?;
        Ok(())
    }

    /// Records an inbound call's end and charges its connected seconds at `cents_per_minute`;
    /// `Some(true)` when the charge left the balance under the auto top-up threshold.
    pub async fn inbound_ended(
        &self,
        call: &InboundEnd,
        cents_per_minute: Cents,
    ) -> StoreResult<Option<bool>> {
        let cost = cents_per_minute.per_minute_for(call.duration_secs);
        let spec = CallSpec {
            id: call.id,
            workspace_id: call.workspace_id,
            campaign_id: None,
            contact_id: None,
            agent_id: call.agent_id,
            from_phone_number_id: None,
            from_number: call.from.clone(),
            to_number: String::new(),
            priority: PRIORITY_DEFAULT,
            attempt: 1,
            max_duration_secs: 0,
            reserved_cents: Cents::ZERO,
            queued_at: call.answered_at,
            trunk: None,
        };
        let end = CallEnd {
            outcome: CallOutcome::Answered,
            started_at: None,
            answered_at: Some(call.answered_at),
            ended_at: call.ended_at,
            billable_secs: call.duration_secs,
            cost_cents: cost,
            end_reason: call.end_reason,
            disposition_label: None,
            network: Default::default(),
            conversation: call.conversation.clone(),
        };
        let description = format!(
            "Call from {} ({} s at the inbound rate)",
            call.from, call.duration_secs
        );
        self.end_call(&spec, &end, &description, Lane::Normal).await
    }

    /// Whether a call's recording is complete (the call has ended).
    // By id alone: a recording URL is public and carries its own signature, not a workspace.
    pub async fn recording_ready(&self, id: switchboard_actors::ids::CallId) -> StoreResult<bool> {
        let found: Option<i64> =
            query("SELECT 1 FROM calls WHERE id = ? AND recorded AND status = 'ended'")
                .bind(id.as_uuid())
                .scalar_optional(&mut self.conn().await?)
                .await?;
        Ok(found.is_some())
    }

    /// The secret named `name`, made from `make` and kept on first use.
    pub async fn service_secret(
        &self,
        name: &str,
        make: impl FnOnce() -> Vec<u8>,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<u8>> {
        let mut conn = self.conn().await?;
        query(
            "INSERT INTO service_secrets (name, value, created_at) VALUES (?, ?, ?) ON CONFLICT(name) DO NOTHING",
        )
        .bind(name)
        .bind(make())
        .bind(ts(now))
        .execute(&mut conn)
        .await?;
        let value: Vec<u8> = query("SELECT value FROM service_secrets WHERE name = ?".to_string())
            .bind(name)
            .scalar(&mut conn)
            .await?;
        Ok(value)
    }
}
