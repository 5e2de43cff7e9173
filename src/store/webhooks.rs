//! Agent webhooks in the store: the outbox (an event's row is written in the transaction of the
//! change that causes it), what the dispatcher claims and records, the deliveries the API lists,
//! and each workspace's signing secret.
//!
//! A call event (`call.started`, `call.answered`, `call.ended`) is found by [`CALL_EVENT_SQL`]
//! inside the transaction of the call's change: it reads the call's row as that transaction
//! left it, with its agent's webhook URL when the agent subscribes to the kind. The row becomes
//! the envelope's `data` through the same `CallRecord` the API answers with.
//!
//! **Invariant:** an event's row commits with the change that causes it, or not at all.
//! **Invariant:** a call's pending events are claimed in `seq` order, one at a time: the next
//! is claimable only once the one before it is delivered or failed.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use switchboard_actors::events::{EventData, EventKind};
use switchboard_actors::ids::{AgentId, CallId, EventId, WorkspaceId};
use utoipa::ToSchema;

use super::calls::call_row;
use super::db::{Exec, Json, Query, Row, begin_write, query};
use super::{Engine, Page, Paged, ScriptQuery, Store, StoreResult, coded, corrupt, ts};
use crate::domain::signing::{RecordingLinks, SigningSecret};

/// The status of a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    /// Not delivered yet; attempts go on (`next_attempt_at`).
    Pending,
    /// A 2xx answered.
    Delivered,
    /// Given up: every attempt failed for the retry window (or a `tool.called` exchange failed).
    Failed,
}

impl DeliveryStatus {
    pub const ALL: [DeliveryStatus; 3] = [
        DeliveryStatus::Pending,
        DeliveryStatus::Delivered,
        DeliveryStatus::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// One event's delivery, as the API shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WebhookDelivery {
    /// The event's id (the envelope's `id`).
    #[schema(value_type = uuid::Uuid)]
    pub id: EventId,
    /// The event kind, e.g. `call.ended`.
    #[serde(rename = "type")]
    #[schema(value_type = String)]
    pub kind: EventKind,
    #[schema(value_type = uuid::Uuid)]
    pub call_id: CallId,
    #[schema(value_type = uuid::Uuid)]
    pub agent_id: AgentId,
    /// The agent's webhook URL when the event happened.
    pub url: String,
    /// `pending`, `delivered` or `failed`.
    #[schema(value_type = String)]
    pub status: DeliveryStatus,
    pub attempts: i64,
    pub last_attempt_at: Option<DateTime<Utc>>,
    /// When the next attempt is due (while pending).
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// The HTTP status of the last attempt's answer, if one came.
    pub last_status_code: Option<i64>,
    /// Why the last attempt failed.
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub delivered_at: Option<DateTime<Utc>>,
    /// The body sent: `{id, type, created_at, call_id, data}`.
    #[schema(value_type = Object)]
    pub envelope: Value,
}

fn delivery_row(r: &Row) -> StoreResult<WebhookDelivery> {
    let envelope: String = r.try_get("envelope")?;
    Ok(WebhookDelivery {
        id: EventId::from_uuid(r.try_get("id")?),
        kind: coded(r, "type", EventKind::parse)?,
        call_id: CallId::from_uuid(r.try_get("call_id")?),
        agent_id: AgentId::from_uuid(r.try_get("agent_id")?),
        url: r.try_get("url")?,
        status: coded(r, "status", DeliveryStatus::parse)?,
        attempts: r.try_get("attempts")?,
        last_attempt_at: r.try_get("last_attempt_at")?,
        next_attempt_at: r.try_get("next_attempt_at")?,
        last_status_code: r.try_get("last_status_code")?,
        last_error: r.try_get("last_error")?,
        created_at: r.try_get("created_at")?,
        delivered_at: r.try_get("delivered_at")?,
        envelope: serde_json::from_str(&envelope).map_err(|e| corrupt("envelope", e))?,
    })
}

/// Filters of `GET /webhook-deliveries`.
#[derive(Debug, Clone, Default)]
pub struct DeliveryFilter {
    pub call_id: Option<CallId>,
    pub agent_id: Option<AgentId>,
    pub kind: Option<EventKind>,
    pub status: Option<DeliveryStatus>,
}

/// A pending delivery the dispatcher claimed.
#[derive(Debug, Clone)]
pub struct DueDelivery {
    pub id: EventId,
    pub workspace_id: WorkspaceId,
    pub agent_id: AgentId,
    pub call_id: CallId,
    pub kind: EventKind,
    pub url: String,
    /// The exact body to send.
    pub envelope: String,
    /// Attempts before this one.
    pub attempts: i64,
    pub created_at: DateTime<Utc>,
}

/// How one attempt went, to record.
#[derive(Debug, Clone)]
pub struct AttemptRecord {
    pub at: DateTime<Utc>,
    pub status_code: Option<u16>,
    /// `None`: delivered.
    pub error: Option<String>,
    /// After a failure: when to try again; `None` gives up (`failed`).
    pub next_attempt_at: Option<DateTime<Utc>>,
}

/// Finds a call event's recipient inside the transaction of the call's change: the call's row
/// (every column, as the API reads it), the event's kind and the agent's webhook URL, when
/// the agent has a URL and subscribes to the kind; no row otherwise. The subscription is the
/// kind, quoted, inside the text of the agent's `webhook_events` array: kinds are lowercase
/// words and dots, so the pattern matches that kind alone, the same way on both databases. Binds: the kind, the
/// call's id, the kind.
pub(super) const CALL_EVENT_SQL: &str = "SELECT c.*, ? AS event_kind, (a.doc ->> 'webhook_url') AS event_url \
     FROM calls c JOIN agents a ON a.id = c.agent_id AND a.workspace_id = c.workspace_id \
     WHERE c.id = ? AND (a.doc ->> 'webhook_url') IS NOT NULL \
     AND (a.doc ->> 'webhook_events') LIKE '%\"' || ? || '\"%'";

/// Binds [`CALL_EVENT_SQL`]'s values.
pub(super) fn bind_call_event(q: ScriptQuery, call: CallId, kind: EventKind) -> ScriptQuery {
    q.bind(kind.as_str())
        .bind(call.as_uuid())
        .bind(kind.as_str())
}

/// An outbox row to write.
#[derive(Debug, Clone)]
pub(super) struct NewEvent {
    id: EventId,
    workspace_id: WorkspaceId,
    agent_id: AgentId,
    call_id: CallId,
    kind: EventKind,
    url: String,
    envelope: String,
    created_at: DateTime<Utc>,
}

impl NewEvent {
    fn new(
        (workspace_id, agent_id, call_id): (WorkspaceId, AgentId, CallId),
        kind: EventKind,
        url: String,
        data: Value,
        now: DateTime<Utc>,
    ) -> StoreResult<Self> {
        let id = EventId::new();
        let envelope = switchboard_actors::events::Envelope {
            id,
            kind,
            created_at: now,
            call_id,
            data,
        };
        Ok(Self {
            id,
            workspace_id,
            agent_id,
            call_id,
            kind,
            url,
            envelope: serde_json::to_string(&envelope).map_err(|e| corrupt("envelope", e))?,
            created_at: now,
        })
    }
}

/// The call events among a script's rows: each row [`CALL_EVENT_SQL`] returned becomes an
/// event whose data is the call as the API shows it.
pub(super) fn call_events(
    rows: &[Row],
    links: Option<&RecordingLinks>,
    now: DateTime<Utc>,
) -> StoreResult<Vec<NewEvent>> {
    let mut events = Vec::new();
    for row in rows {
        if !row.has_column("event_kind") {
            continue;
        }
        let kind: String = row.try_get("event_kind")?;
        let kind = EventKind::parse(&kind).ok_or_else(|| corrupt("event kind", &kind))?;
        let url: String = row.try_get("event_url")?;
        let workspace_id = WorkspaceId::from_uuid(row.try_get("workspace_id")?);
        let call = call_row(row)?;
        let agent_id = call
            .agent_id
            .ok_or_else(|| corrupt("calls.agent_id", "missing on a call with an event"))?;
        let call_id = call.id;
        let call = match links {
            Some(links) => call.presented(links),
            None => call,
        };
        let data = serde_json::to_value(call).map_err(|e| corrupt("call", e))?;
        events.push(NewEvent::new(
            (workspace_id, agent_id, call_id),
            kind,
            url,
            data,
            now,
        )?);
    }
    Ok(events)
}

const INSERT_EVENT: &str = "INSERT INTO webhook_deliveries (id, workspace_id, agent_id, call_id, type, url, envelope, status, next_attempt_at, created_at) \
     VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)";

/// The statements writing `count` outbox rows (each followed by `; `).
pub(super) fn insert_events_sql(count: usize) -> String {
    format!("{INSERT_EVENT}; ").repeat(count)
}

/// Binds the rows of [`insert_events_sql`], in order.
pub(super) fn bind_events(mut q: ScriptQuery, events: &[NewEvent]) -> ScriptQuery {
    for e in events {
        let at = ts(e.created_at);
        q = q
            .bind(e.id.as_uuid())
            .bind(e.workspace_id.as_uuid())
            .bind(e.agent_id.as_uuid())
            .bind(e.call_id.as_uuid())
            .bind(e.kind.as_str())
            .bind(e.url.clone())
            .bind(Json(e.envelope.clone()))
            .bind(at)
            .bind(at);
    }
    q
}

/// Writes `events` on `conn` (inside the caller's transaction).
async fn insert_events(conn: &mut (impl Exec + ?Sized), events: &[NewEvent]) -> StoreResult<()> {
    for event in events {
        bind_events(query(INSERT_EVENT.to_owned()), std::slice::from_ref(event))
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Enqueues an event raised outside the call's own changes (`call.analyzed`,
/// `transcript.final`) on `conn`, inside the caller's transaction when one is open: the event
/// then commits or rolls back with the caller's change. Written only if the call's agent has a
/// webhook URL and subscribes to the kind; answers the event's id, or `None`.
///
/// After the caller's commit, [`Store::outbox_written`] sends it at once; otherwise the
/// dispatcher finds it at its next look (within a second).
pub async fn enqueue_event(
    conn: &mut (impl Exec + ?Sized),
    now: DateTime<Utc>,
    call: CallId,
    data: &EventData,
) -> StoreResult<Option<EventId>> {
    let kind = data.kind();
    let row = bind_call_event(query(CALL_EVENT_SQL.to_owned()), call, kind)
        .fetch_optional(&mut *conn)
        .await?;
    let Some(row) = row else { return Ok(None) };
    let event = NewEvent::new(
        (
            WorkspaceId::from_uuid(row.try_get("workspace_id")?),
            AgentId::from_uuid(row.try_get("agent_id")?),
            call,
        ),
        kind,
        row.try_get("event_url")?,
        data.to_json(),
        now,
    )?;
    insert_events(conn, std::slice::from_ref(&event)).await?;
    Ok(Some(event.id))
}

/// Columns of a claimed delivery.
const DUE_COLUMNS: &str =
    "id, workspace_id, agent_id, call_id, type, url, envelope, attempts, created_at";

impl Store {
    /// Wakes the dispatcher: an event was committed. The store's own writes call it; a caller
    /// that committed [`enqueue_event`] in its own transaction may too.
    pub fn outbox_written(&self) {
        self.outbox.notify_one();
    }

    /// Resolves when [`Store::outbox_written`] is called (the dispatcher's wake-up).
    pub async fn outbox_notified(&self) {
        self.outbox.notified().await;
    }

    /// Writes the events of `calls` (each a call and a kind) inside the caller's transaction,
    /// each only if the call's agent subscribes; answers how many were written.
    pub(super) async fn emit_call_events(
        &self,
        conn: &mut (impl Exec + ?Sized),
        calls: &[(CallId, EventKind)],
    ) -> StoreResult<usize> {
        let now = self.now();
        let mut events = Vec::new();
        for (call, kind) in calls {
            let q = bind_call_event(query(CALL_EVENT_SQL.to_owned()), *call, *kind);
            let rows = q.fetch_all(&mut *conn).await?;
            events.extend(call_events(&rows, self.links.as_ref(), now)?);
        }
        insert_events(conn, &events).await?;
        Ok(events.len())
    }

    /// Enqueues `data` for `call` in its own transaction (see [`enqueue_event`]) and wakes the
    /// dispatcher.
    pub async fn enqueue_call_event(
        &self,
        call: CallId,
        data: &EventData,
    ) -> StoreResult<Option<EventId>> {
        let mut conn = self.conn().await?;
        let mut tx = begin_write(&mut conn).await?;
        let id = enqueue_event(&mut tx, self.now(), call, data).await?;
        tx.commit().await?;
        drop(conn);
        if id.is_some() {
            self.outbox_written();
        }
        Ok(id)
    }

    /// Claims up to `limit` due deliveries, each the oldest pending event of its call, by
    /// moving their `next_attempt_at` to `lease_until`: while an attempt runs nobody claims it
    /// again, and a process that dies mid-attempt leaves it due once the lease ends.
    pub async fn claim_due_deliveries(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: i64,
    ) -> StoreResult<Vec<DueDelivery>> {
        // SQLite's single writer runs one claim at a time. On PostgreSQL claims run at once
        // (several dispatchers, several nodes): each locks the rows it takes and passes over
        // those another holds, and a row another claimed meanwhile is read again as it now
        // is (no longer due), so no delivery is taken twice.
        let lock = match self.engine() {
            Engine::Postgres => " FOR UPDATE OF d SKIP LOCKED",
            Engine::Sqlite => "",
        };
        let rows = query(format!(
            "UPDATE webhook_deliveries SET next_attempt_at = ? WHERE seq IN ( \
               SELECT d.seq FROM webhook_deliveries d \
               WHERE d.status = 'pending' AND d.next_attempt_at <= ? \
               AND NOT EXISTS (SELECT 1 FROM webhook_deliveries p \
                               WHERE p.status = 'pending' AND p.call_id = d.call_id AND p.seq < d.seq) \
               ORDER BY d.next_attempt_at, d.seq LIMIT ?{lock}) \
             RETURNING {DUE_COLUMNS}"
        ))
        .bind(ts(lease_until))
        .bind(ts(now))
        .bind(limit)
        .fetch_all(&mut self.conn().await?)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(DueDelivery {
                    id: EventId::from_uuid(r.try_get("id")?),
                    workspace_id: WorkspaceId::from_uuid(r.try_get("workspace_id")?),
                    agent_id: AgentId::from_uuid(r.try_get("agent_id")?),
                    call_id: CallId::from_uuid(r.try_get("call_id")?),
                    kind: coded(r, "type", EventKind::parse)?,
                    url: r.try_get("url")?,
                    envelope: r.try_get("envelope")?,
                    attempts: r.try_get("attempts")?,
                    created_at: r.try_get("created_at")?,
                })
            })
            .collect()
    }

    /// When the earliest claimable delivery (the oldest pending event of its call) is due.
    pub async fn next_delivery_due(&self) -> StoreResult<Option<DateTime<Utc>>> {
        Ok(query(
            "SELECT MIN(d.next_attempt_at) FROM webhook_deliveries d \
             JOIN (SELECT MIN(seq) AS seq FROM webhook_deliveries WHERE status = 'pending' GROUP BY call_id) h \
             ON h.seq = d.seq",
        )
        .scalar(&mut self.conn().await?)
        .await?)
    }

    /// Records an attempt of a claimed delivery: delivered, failed for good, or due again.
    pub async fn record_attempt(&self, id: EventId, attempt: &AttemptRecord) -> StoreResult<()> {
        let status = match (&attempt.error, attempt.next_attempt_at) {
            (None, _) => DeliveryStatus::Delivered,
            (Some(_), Some(_)) => DeliveryStatus::Pending,
            (Some(_), None) => DeliveryStatus::Failed,
        };
        let at = ts(attempt.at);
        query(
            "UPDATE webhook_deliveries SET status = ?, attempts = attempts + 1, last_attempt_at = ?, \
             last_status_code = ?, last_error = ?, next_attempt_at = ?, \
             delivered_at = CASE WHEN ? = 'delivered' THEN ? ELSE NULL END \
             WHERE id = ? AND status = 'pending'",
        )
        .bind(status.as_str())
        .bind(at)
        .bind(attempt.status_code.map(i64::from))
        .bind(attempt.error.clone())
        .bind(match status {
            DeliveryStatus::Pending => attempt.next_attempt_at.map(ts),
            _ => None,
        })
        .bind(status.as_str())
        .bind(at)
        .bind(id.as_uuid())
        .execute(&mut self.conn().await?)
        .await?;
        Ok(())
    }

    /// Records a `tool.called` exchange, which happened once and is never retried: delivered
    /// when `attempt.error` is `None`, else failed.
    pub async fn record_tool_call(
        &self,
        (workspace_id, agent_id, call_id): (WorkspaceId, AgentId, CallId),
        url: &str,
        envelope: &switchboard_actors::events::Envelope,
        attempt: &AttemptRecord,
    ) -> StoreResult<()> {
        let body = serde_json::to_string(envelope).map_err(|e| corrupt("envelope", e))?;
        let status = match attempt.error {
            None => DeliveryStatus::Delivered,
            Some(_) => DeliveryStatus::Failed,
        };
        let at = ts(attempt.at);
        query(
            "INSERT INTO webhook_deliveries (id, workspace_id, agent_id, call_id, type, url, envelope, status, \
             attempts, last_attempt_at, last_status_code, last_error, created_at, delivered_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?)",
        )
        .bind(envelope.id.as_uuid())
        .bind(workspace_id.as_uuid())
        .bind(agent_id.as_uuid())
        .bind(call_id.as_uuid())
        .bind(envelope.kind.as_str())
        .bind(url)
        .bind(Json(body))
        .bind(status.as_str())
        .bind(at)
        .bind(attempt.status_code.map(i64::from))
        .bind(attempt.error.clone())
        .bind(ts(envelope.created_at))
        .bind((status == DeliveryStatus::Delivered).then_some(at))
        .execute(&mut self.conn().await?)
        .await?;
        Ok(())
    }

    /// What a delivery is sent with: the workspace's signing secret and the agent's extra
    /// headers as they are now (a rotated secret or changed headers apply to retries too).
    pub async fn delivery_context(
        &self,
        ws: WorkspaceId,
        agent: AgentId,
    ) -> StoreResult<(SigningSecret, BTreeMap<String, String>)> {
        let (secret, _) = self.webhook_signing_secret(ws).await?;
        let headers: Option<String> =
            query("SELECT doc ->> 'webhook_headers' FROM agents WHERE workspace_id = ? AND id = ?")
                .bind(ws.as_uuid())
                .bind(agent.as_uuid())
                .scalar_optional(&mut self.conn().await?)
                .await?
                .flatten();
        let headers = match headers {
            Some(json) => {
                serde_json::from_str(&json).map_err(|e| corrupt("agent webhook_headers", e))?
            }
            None => BTreeMap::new(),
        };
        Ok((secret, headers))
    }

    /// A delivery of the workspace.
    pub async fn webhook_delivery(
        &self,
        ws: WorkspaceId,
        id: EventId,
    ) -> StoreResult<Option<WebhookDelivery>> {
        let row = query("SELECT * FROM webhook_deliveries WHERE workspace_id = ? AND id = ?")
            .bind(ws.as_uuid())
            .bind(id.as_uuid())
            .fetch_optional(&mut self.conn().await?)
            .await?;
        row.as_ref().map(delivery_row).transpose()
    }

    /// The workspace's deliveries, newest first.
    pub async fn list_webhook_deliveries(
        &self,
        ws: WorkspaceId,
        filter: &DeliveryFilter,
        page: Page,
    ) -> StoreResult<Paged<WebhookDelivery>> {
        fn conditions(q: &mut Query<'_>, ws: WorkspaceId, f: &DeliveryFilter) {
            q.push(" WHERE workspace_id = ").push_bind(ws.as_uuid());
            if let Some(c) = f.call_id {
                q.push(" AND call_id = ").push_bind(c.as_uuid());
            }
            if let Some(a) = f.agent_id {
                q.push(" AND agent_id = ").push_bind(a.as_uuid());
            }
            if let Some(k) = f.kind {
                q.push(" AND type = ").push_bind(k.as_str());
            }
            if let Some(s) = f.status {
                q.push(" AND status = ").push_bind(s.as_str());
            }
        }
        let mut q = query("SELECT COUNT(*) FROM webhook_deliveries");
        conditions(&mut q, ws, filter);
        let total: i64 = q.scalar(&mut self.conn().await?).await?;
        let mut q = query("SELECT * FROM webhook_deliveries");
        conditions(&mut q, ws, filter);
        q.push(" ORDER BY created_at DESC, seq DESC LIMIT ")
            .push_bind(page.limit)
            .push(" OFFSET ")
            .push_bind(page.offset);
        let rows = q.fetch_all(&mut self.conn().await?).await?;
        let items = rows.iter().map(delivery_row).collect::<StoreResult<_>>()?;
        Ok(Paged { items, total })
    }
}
