//! Calls as the API shows them: a direct call's insert (idempotent by key), reads, listing and
//! the disposition a client sets. The engine's transactions over the same rows are in
//! `engine_calls`.

use chrono::{DateTime, Utc};
use serde::Serialize;
use switchboard_actors::call::{CallDirection, CallStatus, EndReason};
use switchboard_actors::contact::CallOutcome;
use switchboard_actors::ids::{
    AgentId, CallId, CampaignId, ContactId, DispositionId, PhoneNumberId, SipEndpointId,
    WorkspaceId,
};
use switchboard_actors::money::Cents;
use switchboard_actors::ports::{CallSpec, Funds};
use switchboard_sip::amd::AnsweredBy;
use switchboard_sip::sdp::Codec;
use utoipa::ToSchema;

use super::counts::call_buckets;
use super::db::{Exec, Json, Query, Row, begin_write, query};
use super::{
    DispositionSource, Lane, Page, Paged, Store, StoreError, StoreResult, classify, coded, corrupt,
    opt_coded, opt_id, ts,
};

fn status_schema() -> utoipa::openapi::schema::Object {
    crate::domain::schema::one_of(CallStatus::ALL.map(CallStatus::as_str))
}

fn end_reason_schema() -> utoipa::openapi::schema::Object {
    let reasons: Vec<String> = EndReason::ALL
        .iter()
        .map(|r| format!("`{r}`: {}", r.meaning()))
        .collect();
    crate::domain::schema::nullable_described(&format!(
        "Why it ended, once ended. {}",
        reasons.join(" ")
    ))
}

/// A call as the API shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CallRecord {
    #[schema(value_type = uuid::Uuid)]
    pub id: CallId,
    /// `outbound` or `inbound`.
    #[schema(value_type = String)]
    pub direction: CallDirection,
    /// `queued`; live: `dialing` (placed), `ringing` (the far end rings: a 180 or 183 came
    /// back), `in_progress` (answered, connected); then `ended`, or `cancelled` before it was
    /// placed.
    #[schema(schema_with = status_schema)]
    pub status: CallStatus,
    /// `answered`, `no_answer`, `busy`, `voicemail`, `failed` or `infra_error`, once ended.
    #[schema(value_type = Option<String>)]
    pub outcome: Option<CallOutcome>,
    /// Why it ended, once ended.
    #[schema(schema_with = end_reason_schema)]
    pub end_reason: Option<EndReason>,
    #[schema(value_type = Option<uuid::Uuid>)]
    pub agent_id: Option<AgentId>,
    #[schema(value_type = Option<uuid::Uuid>)]
    pub from_phone_number_id: Option<PhoneNumberId>,
    pub from_number: String,
    pub to_number: String,
    #[schema(value_type = Option<uuid::Uuid>)]
    pub campaign_id: Option<CampaignId>,
    #[schema(value_type = Option<uuid::Uuid>)]
    pub contact_id: Option<ContactId>,
    /// The contact's attempt this call belongs to (1 for direct calls).
    pub attempt: i64,
    /// 0-10, higher first.
    pub priority: i64,
    #[schema(value_type = Object)]
    pub metadata: serde_json::Value,
    #[schema(value_type = Object)]
    pub variables: serde_json::Value,
    pub idempotency_key: Option<String>,
    pub max_duration_secs: i64,
    /// Held against the balance while the call is queued or live.
    pub reserved_cents: i64,
    pub cost_cents: i64,
    /// Connected seconds (billed per second).
    pub duration_secs: i64,
    #[schema(value_type = Option<uuid::Uuid>)]
    pub disposition_id: Option<DispositionId>,
    /// Who landed the disposition: `api` (`POST /calls/{id}/disposition`), `analysis` (the
    /// end-of-call analysis) or `agent` (the agent, during the call).
    #[schema(value_type = Option<String>)]
    pub disposition_source: Option<DispositionSource>,
    /// A permanent signed link to the call's stereo recording (caller left, agent right).
    pub recording_url: Option<String>,
    /// The SIP endpoint an inbound call came through.
    #[schema(value_type = Option<uuid::Uuid>)]
    pub sip_endpoint_id: Option<SipEndpointId>,
    /// The audio codec of a SIP call: `pcmu`, `pcma` or `g722`.
    #[schema(value_type = Option<String>)]
    pub codec: Option<Codec>,
    /// The SIP final response of an outbound call through a trunk (200 when answered).
    pub sip_code: Option<i64>,
    /// Its reason phrase.
    pub sip_reason: Option<String>,
    /// The Q.850 cause the carrier gave in a `Reason` header, if any.
    pub q850_cause: Option<i64>,
    /// Who answered an outbound call, by answering-machine detection: `human`, `machine` or
    /// `unsure` (`unsure` counts as human).
    #[schema(value_type = Option<String>)]
    pub answered_by: Option<AnsweredBy>,
    /// The call's own ring timeout (null: the service's, 30 s by default).
    pub ring_timeout_secs: Option<i64>,
    #[serde(skip)]
    pub recorded: bool,
    pub queued_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub answered_at: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl CallRecord {
    /// The call as clients see it: with its `recording_url` (signed by `links`) when it has a
    /// recording.
    pub fn presented(mut self, links: &crate::domain::signing::RecordingLinks) -> Self {
        if self.recorded {
            self.recording_url = Some(links.url(self.id));
        }
        self
    }
}

/// The `WHERE` of a call listing: the workspace, then each filter given.
fn call_conditions(q: &mut Query<'_>, ws: WorkspaceId, f: &CallFilter) {
    q.push(" WHERE workspace_id = ").push_bind(ws.as_uuid());
    if let Some(s) = f.status {
        q.push(" AND status = ").push_bind(s.as_str());
    }
    if let Some(d) = f.direction {
        q.push(" AND direction = ").push_bind(d.as_str());
    }
    if let Some(c) = f.campaign_id {
        q.push(" AND campaign_id = ").push_bind(c.as_uuid());
    }
    if let Some(a) = f.agent_id {
        q.push(" AND agent_id = ").push_bind(a.as_uuid());
    }
    if let Some(t) = f.created_after {
        q.push(" AND created_at >= ").push_bind(ts(t));
    }
    if let Some(t) = f.created_before {
        q.push(" AND created_at < ").push_bind(ts(t));
    }
}

pub(super) fn call_row(r: &Row) -> StoreResult<CallRecord> {
    let metadata: String = r.try_get("metadata")?;
    let variables: String = r.try_get("variables")?;
    Ok(CallRecord {
        id: CallId::from_uuid(r.try_get("id")?),
        direction: coded(r, "direction", CallDirection::parse)?,
        status: coded(r, "status", CallStatus::parse)?,
        outcome: opt_coded(r, "outcome", CallOutcome::parse)?,
        end_reason: opt_coded(r, "end_reason", EndReason::parse)?,
        agent_id: opt_id(r, "agent_id")?,
        from_phone_number_id: opt_id(r, "from_phone_number_id")?,
        from_number: r.try_get("from_number")?,
        to_number: r.try_get("to_number")?,
        campaign_id: opt_id(r, "campaign_id")?,
        contact_id: opt_id(r, "contact_id")?,
        attempt: r.try_get("attempt")?,
        priority: r.try_get("priority")?,
        metadata: serde_json::from_str(&metadata).map_err(|e| corrupt("metadata", e))?,
        variables: serde_json::from_str(&variables).map_err(|e| corrupt("variables", e))?,
        idempotency_key: r.try_get("idempotency_key")?,
        max_duration_secs: r.try_get("max_duration_secs")?,
        reserved_cents: r.try_get("reserved_cents")?,
        cost_cents: r.try_get("cost_cents")?,
        duration_secs: r.try_get("duration_secs")?,
        disposition_id: opt_id(r, "disposition_id")?,
        disposition_source: opt_coded(r, "disposition_source", DispositionSource::parse)?,
        recording_url: None,
        sip_endpoint_id: opt_id(r, "sip_endpoint_id")?,
        codec: opt_coded(r, "codec", Codec::from_name)?,
        sip_code: r.try_get("sip_code")?,
        sip_reason: r.try_get("sip_reason")?,
        q850_cause: r.try_get("q850_cause")?,
        answered_by: opt_coded(r, "answered_by", AnsweredBy::parse)?,
        ring_timeout_secs: r.try_get("ring_timeout_secs")?,
        recorded: r.try_get("recorded")?,
        queued_at: r.try_get("queued_at")?,
        started_at: r.try_get("started_at")?,
        answered_at: r.try_get("answered_at")?,
        ended_at: r.try_get("ended_at")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

pub(super) fn spec_row(r: &Row) -> StoreResult<CallSpec> {
    Ok(CallSpec {
        id: CallId::from_uuid(r.try_get("id")?),
        workspace_id: WorkspaceId::from_uuid(r.try_get("workspace_id")?),
        campaign_id: opt_id(r, "campaign_id")?,
        contact_id: opt_id(r, "contact_id")?,
        agent_id: opt_id(r, "agent_id")?
            .ok_or_else(|| corrupt("calls.agent_id", "missing on an outbound call"))?,
        from_phone_number_id: opt_id(r, "from_phone_number_id")?,
        from_number: r.try_get("from_number")?,
        to_number: r.try_get("to_number")?,
        priority: r.try_get("priority")?,
        attempt: r.try_get("attempt")?,
        max_duration_secs: r.try_get("max_duration_secs")?,
        reserved_cents: Cents::new(r.try_get("reserved_cents")?),
        queued_at: r.try_get("queued_at")?,
        trunk: None,
    })
}

/// A direct call to insert.
#[derive(Debug, Clone)]
pub struct NewCall {
    pub spec: CallSpec,
    pub metadata: serde_json::Value,
    pub variables: serde_json::Value,
    pub idempotency_key: Option<String>,
    pub request_hash: Option<String>,
    /// The call's own ring timeout (SIP trunks), else the service's.
    pub ring_timeout_secs: Option<i64>,
}

/// What inserting a direct call did.
#[derive(Debug)]
pub enum CallInsert {
    Created(CallRecord),
    /// The idempotency key was used before: the first call and its request hash.
    Replayed {
        call: CallRecord,
        request_hash: Option<String>,
    },
    InsufficientFunds(Funds),
}

/// Filters of `GET /calls`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallFilter {
    pub status: Option<CallStatus>,
    pub direction: Option<CallDirection>,
    pub campaign_id: Option<CampaignId>,
    pub agent_id: Option<AgentId>,
    pub created_after: Option<DateTime<Utc>>,
    pub created_before: Option<DateTime<Utc>>,
}

pub(super) const CALL_COLUMNS: &str = "id, workspace_id, direction, status, started_at, agent_id, from_phone_number_id, from_number, to_number, campaign_id, contact_id, \
     attempt, priority, metadata, variables, idempotency_key, request_hash, max_duration_secs, reserved_cents, queued_at, created_at, updated_at, node_id";
pub(super) const CALL_VALUES: &str =
    "?, ?, 'outbound', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?";

/// Binds a new call's values, in `CALL_VALUES` order: `queued`, or `dialing` from `queued_at`
/// on `node` when `dialing` is `Some(node)` (its admission took a free call slot).
pub(super) fn bind_call<'q>(
    q: Query<'q>,
    spec: &CallSpec,
    metadata: &str,
    variables: &str,
    idempotency: (Option<&str>, Option<&str>),
    dialing: Option<Option<&str>>,
) -> Query<'q> {
    let (node, dialing) = match dialing {
        Some(node) => (node.map(str::to_owned), true),
        None => (None, false),
    };
    let at = ts(spec.queued_at);
    let status = if dialing {
        CallStatus::Dialing
    } else {
        CallStatus::Queued
    };
    q.bind(spec.id.as_uuid())
        .bind(spec.workspace_id.as_uuid())
        .bind(status.as_str())
        .bind(dialing.then_some(at))
        .bind(spec.agent_id.as_uuid())
        .bind(spec.from_phone_number_id.map(|p| p.as_uuid()))
        .bind(spec.from_number.clone())
        .bind(spec.to_number.clone())
        .bind(spec.campaign_id.map(|c| c.as_uuid()))
        .bind(spec.contact_id.map(|c| c.as_uuid()))
        .bind(spec.attempt)
        .bind(spec.priority)
        .bind(Json(metadata.to_owned()))
        .bind(Json(variables.to_owned()))
        .bind(idempotency.0.map(str::to_owned))
        .bind(idempotency.1.map(str::to_owned))
        .bind(spec.max_duration_secs)
        .bind(spec.reserved_cents.get())
        .bind(at)
        .bind(at)
        .bind(at)
        .bind(node)
}

pub(super) async fn insert_call(
    tx: &mut (impl Exec + ?Sized),
    spec: &CallSpec,
    metadata: &str,
    variables: &str,
    idempotency: (Option<&str>, Option<&str>),
) -> Result<(), sqlx::Error> {
    let q = query(format!(
        "INSERT INTO calls ({CALL_COLUMNS}) VALUES ({CALL_VALUES})"
    ));
    bind_call(q, spec, metadata, variables, idempotency, None)
        .execute(tx)
        .await?;
    Ok(())
}

pub(super) async fn funds_in(tx: &mut (impl Exec + ?Sized), ws: WorkspaceId) -> StoreResult<Funds> {
    let row: Option<(i64, bool, i64)> = query(
        "SELECT balance_cents, is_suspended, \
         (SELECT CAST(COALESCE(SUM(reserved_cents), 0) AS BIGINT) FROM calls WHERE workspace_id = w.id AND status IN ('queued', 'dialing', 'ringing', 'in_progress')) \
         FROM workspaces w WHERE id = ?",
    )
    .bind(ws.as_uuid())
    .fetch_optional_as(tx)
    .await?;
    let (balance_cents, is_suspended, reserved_cents) =
        row.ok_or_else(|| corrupt("workspace", "missing"))?;
    Ok(Funds {
        balance_cents: Cents::new(balance_cents),
        reserved_cents: Cents::new(reserved_cents),
        is_suspended,
    })
}

impl Store {
    /// Inserts a direct call as `queued`, with its reservation, if the workspace's balance (less
    /// what its queued and live calls reserve) covers it. A repeated idempotency key answers the
    /// first call instead.
    pub async fn create_call(&self, new: &NewCall) -> StoreResult<CallInsert> {
        let spec = &new.spec;
        if let Some(key) = &new.idempotency_key
            && let Some(found) = self.call_by_key(spec.workspace_id, key).await?
        {
            return Ok(found);
        }
        // A client waits on this write: it goes before the writes queued in the normal lane.
        let _turn = self.write_turn(Lane::Urgent).await;
        let mut conn = self.conn().await?;
        let mut tx = begin_write(&mut conn).await?;
        let funds = funds_in(&mut tx, spec.workspace_id).await?;
        if !funds.covers(spec.reserved_cents) {
            return Ok(CallInsert::InsufficientFunds(funds));
        }
        let inserted = insert_call(
            &mut tx,
            spec,
            &new.metadata.to_string(),
            &new.variables.to_string(),
            (new.idempotency_key.as_deref(), new.request_hash.as_deref()),
        )
        .await
        .map_err(classify);
        match inserted {
            Ok(()) => {}
            Err(StoreError::Conflict { .. }) if new.idempotency_key.is_some() => {
                drop(tx);
                drop(conn);
                let key = new.idempotency_key.as_deref().unwrap_or_default();
                return self
                    .call_by_key(spec.workspace_id, key)
                    .await?
                    .ok_or_else(|| corrupt("calls", "idempotency key vanished"));
            }
            Err(e) => return Err(e),
        }
        if let Some(ring) = new.ring_timeout_secs {
            query("UPDATE calls SET ring_timeout_secs = ? WHERE id = ?")
                .bind(ring)
                .bind(spec.id.as_uuid())
                .execute(&mut tx)
                .await?;
        }
        tx.commit().await?;
        drop(conn);
        let call = self
            .call(spec.workspace_id, spec.id)
            .await?
            .ok_or_else(|| corrupt("calls", "vanished after insert"))?;
        Ok(CallInsert::Created(call))
    }

    async fn call_by_key(&self, ws: WorkspaceId, key: &str) -> StoreResult<Option<CallInsert>> {
        let row = query("SELECT * FROM calls WHERE workspace_id = ? AND idempotency_key = ?")
            .bind(ws.as_uuid())
            .bind(key)
            .fetch_optional(&mut self.conn().await?)
            .await?;
        match row {
            None => Ok(None),
            Some(r) => Ok(Some(CallInsert::Replayed {
                request_hash: r.try_get("request_hash")?,
                call: call_row(&r)?,
            })),
        }
    }

    pub async fn call(&self, ws: WorkspaceId, id: CallId) -> StoreResult<Option<CallRecord>> {
        let row = query("SELECT * FROM calls WHERE workspace_id = ? AND id = ?")
            .bind(ws.as_uuid())
            .bind(id.as_uuid())
            .fetch_optional(&mut self.read_conn().await?)
            .await?;
        row.as_ref().map(call_row).transpose()
    }

    /// The workspace's calls under way (`dialing`, `ringing`, `in_progress`), newest first,
    /// at most `limit`.
    pub async fn calls_under_way(
        &self,
        ws: WorkspaceId,
        limit: i64,
    ) -> StoreResult<Vec<CallRecord>> {
        let rows = query(
            // Found by status (a few rows), then sorted, rather than every call walked in time
            // order (`+created_at`). The index is named: once `ANALYZE` has seen a workspace
            // whose calls are nearly all ended, it would otherwise judge a status lookup no
            // better than reading the whole table.
            "SELECT * FROM calls INDEXED BY calls_workspace_status \
             WHERE workspace_id = ? AND status IN ('dialing', 'ringing', 'in_progress') \
             ORDER BY +created_at DESC, id DESC LIMIT ?",
        )
        .bind(ws.as_uuid())
        .bind(limit)
        .fetch_all(&mut self.read_conn().await?)
        .await?;
        rows.iter().map(call_row).collect()
    }

    pub async fn list_calls(
        &self,
        ws: WorkspaceId,
        filter: &CallFilter,
        page: Page,
    ) -> StoreResult<Paged<CallRecord>> {
        let mut q = query("SELECT COUNT(*) FROM calls");
        call_conditions(&mut q, ws, filter);
        let total: i64 = q.scalar(&mut self.read_conn().await?).await?;
        let mut q = query("SELECT * FROM calls");
        call_conditions(&mut q, ws, filter);
        q.push(" ORDER BY created_at DESC, id DESC LIMIT ")
            .push_bind(page.limit)
            .push(" OFFSET ")
            .push_bind(page.offset);
        let rows = q.fetch_all(&mut self.read_conn().await?).await?;
        let items = rows.iter().map(call_row).collect::<StoreResult<_>>()?;
        Ok(Paged { items, total })
    }

    /// The newest `limit` calls that match, older than the call whose row number is `before`
    /// (newest first, ties by row number), with each one's row number to page on from. Unlike
    /// [`Store::list_calls`] it counts nothing and skips nothing, so its millionth page costs
    /// what its first does.
    pub async fn calls_before(
        &self,
        ws: WorkspaceId,
        filter: &CallFilter,
        before: Option<i64>,
        limit: i64,
    ) -> StoreResult<Vec<(i64, CallRecord)>> {
        let mut q = query("SELECT rowid AS cursor, * FROM calls");
        call_conditions(&mut q, ws, filter);
        if let Some(before) = before {
            q.push(
                " AND (created_at, rowid) < (SELECT created_at, rowid FROM calls WHERE rowid = ",
            )
            .push_bind(before)
            .push(")");
        }
        q.push(" ORDER BY created_at DESC, rowid DESC LIMIT ")
            .push_bind(limit);
        let rows = q.fetch_all(&mut self.read_conn().await?).await?;
        rows.iter()
            .map(|r| Ok((r.try_get("cursor")?, call_row(r)?)))
            .collect()
    }

    /// The workspace's campaigns and agents by name (at most `limit` of each, newest first),
    /// for choosing what to filter calls by.
    pub async fn call_filter_names(
        &self,
        ws: WorkspaceId,
        limit: i64,
    ) -> StoreResult<(Vec<(CampaignId, String)>, Vec<(AgentId, String)>)> {
        let mut conn = self.read_conn().await?;
        let campaigns: Vec<(uuid::Uuid, String)> = query(
            "SELECT id, name FROM campaigns WHERE workspace_id = ? ORDER BY created_at DESC LIMIT ?",
        )
        .bind(ws.as_uuid())
        .bind(limit)
        .fetch_all_as(&mut conn)
        .await?;
        let agents: Vec<(uuid::Uuid, String)> = query(
            "SELECT id, name FROM agents WHERE workspace_id = ? ORDER BY created_at DESC LIMIT ?",
        )
        .bind(ws.as_uuid())
        .bind(limit)
        .fetch_all_as(&mut conn)
        .await?;
        Ok((
            campaigns
                .into_iter()
                .map(|(id, name)| (CampaignId::from_uuid(id), name))
                .collect(),
            agents
                .into_iter()
                .map(|(id, name)| (AgentId::from_uuid(id), name))
                .collect(),
        ))
    }

    /// Every call of a contact of `ws`, oldest first: its attempts.
    pub async fn contact_calls(
        &self,
        ws: WorkspaceId,
        contact: ContactId,
    ) -> StoreResult<Vec<CallRecord>> {
        let rows = query(
            "SELECT * FROM calls WHERE workspace_id = ? AND contact_id = ? ORDER BY created_at, id",
        )
        .bind(ws.as_uuid())
        .bind(contact.as_uuid())
        .fetch_all(&mut self.conn().await?)
        .await?;
        rows.iter().map(call_row).collect()
    }

    /// Attempts per outcome over the calls of a campaign of `ws`.
    pub async fn campaign_outcomes(
        &self,
        ws: WorkspaceId,
        id: CampaignId,
    ) -> StoreResult<Vec<(String, i64)>> {
        Ok(query(concat!(
            // From the per-day counts the calls' triggers keep (see `counts`): a call gets its
            // outcome as it ends, and is counted then by it. A few rows a day of the campaign,
            // instead of every call.
            "SELECT kind, CAST(SUM(calls) AS BIGINT) FROM ",
            call_buckets!(),
            " WHERE kind NOT IN ('admitted', 'unknown') GROUP BY kind HAVING SUM(calls) != 0"
        ))
        .bind(id.as_uuid())
        .bind(ws.as_uuid())
        .bind(10_i64)
        .bind(10_i64)
        .fetch_all_as(&mut self.conn().await?)
        .await?)
    }
}
