//! The do-not-call list: one entry per number and workspace, optionally limited to some agents
//! and optionally expiring.
//!
//! **Invariant:** an entry whose `expires_at` has passed counts as absent everywhere a number is
//! checked (lookup, blocking, the list); it can still be read, changed or removed by its id, and
//! adding the number again replaces it.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde::Serialize;
use switchboard_actors::ids::{AgentId, ApiKeyId, DncEntryId, WorkspaceId};
use utoipa::ToSchema;

use super::db::{Exec, Row, begin_write, query};
use super::{Page, Paged, Store, StoreResult, classify, coded, ts};

/// Who added a do-not-call entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DncSource {
    /// Through the API.
    Api,
    /// By an operator.
    Manual,
}

impl DncSource {
    pub const ALL: [DncSource; 2] = [DncSource::Api, DncSource::Manual];

    pub fn as_str(self) -> &'static str {
        match self {
            DncSource::Api => "api",
            DncSource::Manual => "manual",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// An agent a do-not-call entry applies to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct DncAgent {
    #[schema(value_type = uuid::Uuid)]
    pub id: AgentId,
    pub name: String,
}

/// A number that must not be called.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DncEntry {
    #[schema(value_type = uuid::Uuid)]
    pub id: DncEntryId,
    /// The workspace the entry belongs to.
    #[schema(value_type = uuid::Uuid)]
    pub company_id: WorkspaceId,
    /// E.164.
    pub phone_number: String,
    pub reason: String,
    /// `api` for entries added through the API, `manual` for entries added by an operator.
    #[schema(value_type = String)]
    pub source: DncSource,
    /// When the entry stops applying; null for never.
    pub expires_at: Option<DateTime<Utc>>,
    /// The agents the entry applies to; empty when it applies to every agent.
    pub agents: Vec<DncAgent>,
    /// The API key that added the entry.
    #[schema(value_type = Option<uuid::Uuid>)]
    pub created_by: Option<ApiKeyId>,
    pub created_at: DateTime<Utc>,
}

/// What a new entry says.
#[derive(Debug, Clone)]
pub struct NewDncEntry<'a> {
    /// Already normalized to E.164.
    pub phone_number: &'a str,
    pub reason: &'a str,
    pub source: DncSource,
    pub expires_at: Option<DateTime<Utc>>,
    pub agent_ids: &'a [AgentId],
    pub created_by: Option<ApiKeyId>,
}

/// A change to an entry; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct DncUpdate<'a> {
    pub reason: Option<&'a str>,
    /// `Some(None)` removes the expiry.
    pub expires_at: Option<Option<DateTime<Utc>>>,
    /// `Some(&[])` makes the entry apply to every agent.
    pub agent_ids: Option<&'a [AgentId]>,
}

const COLUMNS: &str =
    "id, workspace_id, phone_number, reason, source, expires_at, created_by, created_at";

fn entry(r: &Row) -> StoreResult<DncEntry> {
    let created_by: Option<uuid::Uuid> = r.try_get("created_by")?;
    Ok(DncEntry {
        id: DncEntryId::from_uuid(r.try_get("id")?),
        company_id: WorkspaceId::from_uuid(r.try_get("workspace_id")?),
        phone_number: r.try_get("phone_number")?,
        reason: r.try_get("reason")?,
        source: coded(r, "source", DncSource::parse)?,
        expires_at: r.try_get("expires_at")?,
        agents: Vec::new(),
        created_by: created_by.map(ApiKeyId::from_uuid),
        created_at: r.try_get("created_at")?,
    })
}

async fn insert_agents(
    tx: &mut (impl Exec + ?Sized),
    id: DncEntryId,
    agent_ids: &[AgentId],
) -> StoreResult<()> {
    let unique: HashSet<AgentId> = agent_ids.iter().copied().collect();
    for agent in unique {
        query("INSERT INTO dnc_entry_agents (entry_id, agent_id) VALUES (?, ?)")
            .bind(id.as_uuid())
            .bind(agent.as_uuid())
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

impl Store {
    /// Fills in the agents of each entry.
    async fn with_dnc_agents(&self, mut entries: Vec<DncEntry>) -> StoreResult<Vec<DncEntry>> {
        if entries.is_empty() {
            return Ok(entries);
        }
        let placeholders = vec!["?"; entries.len()].join(", ");
        let mut query = query(format!(
            "SELECT ea.entry_id, a.id, a.name FROM dnc_entry_agents ea JOIN agents a ON a.id = ea.agent_id \
             WHERE ea.entry_id IN ({placeholders}) ORDER BY a.name, a.id"
        ));
        for e in &entries {
            query = query.bind(e.id.as_uuid());
        }
        let mut by_entry: HashMap<uuid::Uuid, Vec<DncAgent>> = HashMap::new();
        for r in query.fetch_all(&mut self.conn().await?).await? {
            let entry_id: uuid::Uuid = r.try_get("entry_id")?;
            by_entry.entry(entry_id).or_default().push(DncAgent {
                id: AgentId::from_uuid(r.try_get("id")?),
                name: r.try_get("name")?,
            });
        }
        for e in &mut entries {
            e.agents = by_entry.remove(&e.id.as_uuid()).unwrap_or_default();
        }
        Ok(entries)
    }

    /// Entries in force at `at`, most recently added first.
    pub async fn list_dnc_entries(
        &self,
        ws: WorkspaceId,
        at: DateTime<Utc>,
        page: Page,
    ) -> StoreResult<Paged<DncEntry>> {
        let total: i64 = query("SELECT COUNT(*) FROM dnc_entries WHERE workspace_id = ? AND (expires_at IS NULL OR expires_at > ?)")
            .bind(ws.as_uuid())
            .bind(ts(at))
            .scalar(&mut self.conn().await?)
            .await?;
        let rows = query(format!(
            "SELECT {COLUMNS} FROM dnc_entries WHERE workspace_id = ? AND (expires_at IS NULL OR expires_at > ?) \
             ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?"
        ))
        .bind(ws.as_uuid())
        .bind(ts(at))
        .bind(page.limit)
        .bind(page.offset)
        .fetch_all(&mut self.conn().await?)
        .await?;
        let items = rows.iter().map(entry).collect::<Result<Vec<_>, _>>()?;
        Ok(Paged {
            items: self.with_dnc_agents(items).await?,
            total,
        })
    }

    /// An entry by id, expired or not.
    pub async fn dnc_entry(
        &self,
        ws: WorkspaceId,
        id: DncEntryId,
    ) -> StoreResult<Option<DncEntry>> {
        let row = query(format!(
            "SELECT {COLUMNS} FROM dnc_entries WHERE workspace_id = ? AND id = ?"
        ))
        .bind(ws.as_uuid())
        .bind(id.as_uuid())
        .fetch_optional(&mut self.conn().await?)
        .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(self.with_dnc_agents(vec![entry(&row)?]).await?.pop())
    }

    /// The entry for an E.164 number, if one is in force at `at`.
    pub async fn dnc_entry_for_number(
        &self,
        ws: WorkspaceId,
        number: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<Option<DncEntry>> {
        let row = query(format!(
            "SELECT {COLUMNS} FROM dnc_entries WHERE workspace_id = ? AND phone_number = ? AND (expires_at IS NULL OR expires_at > ?)"
        ))
        .bind(ws.as_uuid())
        .bind(number)
        .bind(ts(at))
        .fetch_optional(&mut self.conn().await?)
        .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(self.with_dnc_agents(vec![entry(&row)?]).await?.pop())
    }

    /// Which of `ids` are not agents of the workspace (in the order given).
    pub async fn dnc_unknown_agents(
        &self,
        ws: WorkspaceId,
        ids: &[AgentId],
    ) -> StoreResult<Vec<AgentId>> {
        let mut unknown = Vec::new();
        for id in ids {
            let found: Option<i64> =
                query("SELECT 1 FROM agents WHERE workspace_id = ? AND id = ?")
                    .bind(ws.as_uuid())
                    .bind(id.as_uuid())
                    .scalar_optional(&mut self.conn().await?)
                    .await?;
            if found.is_none() {
                unknown.push(*id);
            }
        }
        Ok(unknown)
    }

    /// Adds a number. An expired entry for the same number is replaced; one still in force is a
    /// [`super::StoreError::Conflict`].
    pub async fn create_dnc_entry(
        &self,
        ws: WorkspaceId,
        new: &NewDncEntry<'_>,
    ) -> StoreResult<DncEntry> {
        let id = DncEntryId::new();
        let at = ts(self.now());
        let mut conn = self.conn().await?;
        let mut tx = begin_write(&mut conn).await?;
        query("DELETE FROM dnc_entries WHERE workspace_id = ? AND phone_number = ? AND expires_at IS NOT NULL AND expires_at <= ?")
            .bind(ws.as_uuid())
            .bind(new.phone_number)
            .bind(at)
            .execute(&mut tx)
            .await?;
        query(
            "INSERT INTO dnc_entries (id, workspace_id, phone_number, reason, source, expires_at, created_by, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(id.as_uuid())
        .bind(ws.as_uuid())
        .bind(new.phone_number)
        .bind(new.reason)
        .bind(new.source.as_str())
        .bind(new.expires_at.map(ts))
        .bind(new.created_by.map(|k| k.as_uuid()))
        .bind(at)
        .bind(at)
        .execute(&mut tx)
        .await
        .map_err(classify)?;
        insert_agents(&mut tx, id, new.agent_ids).await?;
        tx.commit().await?;
        drop(conn);
        self.dnc_entry(ws, id).await?.ok_or_else(|| {
            super::StoreError::Corrupt("do-not-call entry vanished after insert".into())
        })
    }

    /// Changes an entry; `None` when it is not in the workspace.
    pub async fn update_dnc_entry(
        &self,
        ws: WorkspaceId,
        id: DncEntryId,
        update: &DncUpdate<'_>,
    ) -> StoreResult<Option<DncEntry>> {
        let mut conn = self.conn().await?;
        let mut tx = begin_write(&mut conn).await?;
        let done = query(
            "UPDATE dnc_entries SET reason = COALESCE(?, reason), expires_at = CASE WHEN ? THEN ? ELSE expires_at END, updated_at = ? \
             WHERE workspace_id = ? AND id = ?",
        )
        .bind(update.reason)
        .bind(update.expires_at.is_some())
        .bind(update.expires_at.flatten().map(ts))
        .bind(ts(self.now()))
        .bind(ws.as_uuid())
        .bind(id.as_uuid())
        .execute(&mut tx)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(None);
        }
        if let Some(agent_ids) = update.agent_ids {
            query("DELETE FROM dnc_entry_agents WHERE entry_id = ?")
                .bind(id.as_uuid())
                .execute(&mut tx)
                .await?;
            insert_agents(&mut tx, id, agent_ids).await?;
        }
        tx.commit().await?;
        drop(conn);
        self.dnc_entry(ws, id).await
    }

    /// Removes an entry; `false` when it is not in the workspace.
    pub async fn delete_dnc_entry(&self, ws: WorkspaceId, id: DncEntryId) -> StoreResult<bool> {
        let mut conn = self.conn().await?;
        let mut tx = begin_write(&mut conn).await?;
        let found: Option<i64> =
            query("SELECT 1 FROM dnc_entries WHERE workspace_id = ? AND id = ?")
                .bind(ws.as_uuid())
                .bind(id.as_uuid())
                .scalar_optional(&mut tx)
                .await?;
        if found.is_none() {
            return Ok(false);
        }
        query("DELETE FROM dnc_entry_agents WHERE entry_id = ?")
            .bind(id.as_uuid())
            .execute(&mut tx)
            .await?;
        query("DELETE FROM dnc_entries WHERE workspace_id = ? AND id = ?")
            .bind(ws.as_uuid())
            .bind(id.as_uuid())
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        drop(conn);
        Ok(true)
    }

    /// The E.164 numbers that must not be called at `at` by `agent_id` (or, with `None`, by any
    /// agent): entries in force that apply to every agent or name this one.
    pub async fn blocked_numbers(
        &self,
        ws: WorkspaceId,
        agent_id: Option<AgentId>,
        at: DateTime<Utc>,
    ) -> StoreResult<HashSet<String>> {
        let numbers: Vec<String> = query(
            "SELECT e.phone_number FROM dnc_entries e WHERE e.workspace_id = ? AND (e.expires_at IS NULL OR e.expires_at > ?) \
             AND (NOT EXISTS (SELECT 1 FROM dnc_entry_agents ea WHERE ea.entry_id = e.id) \
                  OR EXISTS (SELECT 1 FROM dnc_entry_agents ea WHERE ea.entry_id = e.id AND ea.agent_id = ?))",
        )
        .bind(ws.as_uuid())
        .bind(ts(at))
        .bind(agent_id.map(|a| a.as_uuid()))
        .scalars(&mut self.conn().await?)
        .await?;
        Ok(numbers.into_iter().collect())
    }

    /// Whether the E.164 `number` must not be called at `at` by `agent_id` (see
    /// [`Store::blocked_numbers`]).
    pub async fn is_blocked(
        &self,
        ws: WorkspaceId,
        number: &str,
        agent_id: Option<AgentId>,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let found: Option<i64> = query(
            "SELECT 1 FROM dnc_entries e WHERE e.workspace_id = ? AND e.phone_number = ? AND (e.expires_at IS NULL OR e.expires_at > ?) \
             AND (NOT EXISTS (SELECT 1 FROM dnc_entry_agents ea WHERE ea.entry_id = e.id) \
                  OR EXISTS (SELECT 1 FROM dnc_entry_agents ea WHERE ea.entry_id = e.id AND ea.agent_id = ?))",
        )
        .bind(ws.as_uuid())
        .bind(number)
        .bind(ts(at))
        .bind(agent_id.map(|a| a.as_uuid()))
        .scalar_optional(&mut self.read_conn().await?)
        .await?;
        Ok(found.is_some())
    }
}
