//! Dispositions: a workspace's call labels, ordered by position. Protected ones (the seeded
//! defaults) cannot be deleted.

use chrono::{DateTime, Utc};
use serde::Serialize;
use switchboard_actors::ids::{CallId, DispositionId, WorkspaceId};
use utoipa::ToSchema;

use super::db::{Row, begin_write, query};
use super::{CallRecord, Store, StoreResult, classify, ts};

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Disposition {
    #[schema(value_type = uuid::Uuid)]
    pub id: DispositionId,
    pub label: String,
    /// What the disposition means (at most 500 characters; empty when not given): the
    /// end-of-call analysis reads it to choose a disposition.
    pub description: String,
    /// Hex color, `#rrggbb`.
    pub color: String,
    pub position: i64,
    pub is_protected: bool,
    pub created_at: DateTime<Utc>,
}

fn disposition(r: Row) -> Result<Disposition, sqlx::Error> {
    Ok(Disposition {
        id: DispositionId::from_uuid(r.try_get("id")?),
        label: r.try_get("label")?,
        description: r.try_get("description")?,
        color: r.try_get("color")?,
        position: r.try_get("position")?,
        is_protected: r.try_get("is_protected")?,
        created_at: r.try_get("created_at")?,
    })
}

const COLUMNS: &str = "id, label, description, color, position, is_protected, created_at";

/// What deleting a disposition did.
#[derive(Debug, PartialEq, Eq)]
pub enum DeleteOutcome {
    Deleted,
    NotFound,
    Protected,
}

impl Store {
    pub async fn list_dispositions(&self, ws: WorkspaceId) -> StoreResult<Vec<Disposition>> {
        let rows = query(format!("SELECT {COLUMNS} FROM dispositions WHERE workspace_id = ? ORDER BY position, created_at"))
            .bind(ws.as_uuid())
            .fetch_all(&mut self.conn().await?)
            .await?;
        Ok(rows
            .into_iter()
            .map(disposition)
            .collect::<Result<_, _>>()?)
    }

    pub async fn disposition(
        &self,
        ws: WorkspaceId,
        id: DispositionId,
    ) -> StoreResult<Option<Disposition>> {
        let row = query(format!(
            "SELECT {COLUMNS} FROM dispositions WHERE workspace_id = ? AND id = ?"
        ))
        .bind(ws.as_uuid())
        .bind(id.as_uuid())
        .fetch_optional(&mut self.conn().await?)
        .await?;
        Ok(row.map(disposition).transpose()?)
    }

    /// Which of `ids` are dispositions of the workspace.
    pub async fn existing_dispositions(
        &self,
        ws: WorkspaceId,
        ids: &[DispositionId],
    ) -> StoreResult<Vec<Disposition>> {
        let all = self.list_dispositions(ws).await?;
        Ok(pick_dispositions(&all, ids))
    }

    /// Creates a disposition; without a position it goes last.
    pub async fn create_disposition(
        &self,
        ws: WorkspaceId,
        label: &str,
        description: &str,
        color: &str,
        position: Option<i64>,
    ) -> StoreResult<Disposition> {
        let id = DispositionId::new();
        let at = ts(self.now());
        let mut conn = self.conn().await?;
        let mut tx = begin_write(&mut conn).await?;
        let position = match position {
            Some(p) => {
                // Make room: the new disposition takes the position, later ones move down.
                query("UPDATE dispositions SET position = position + 1 WHERE workspace_id = ? AND position >= ?")
                    .bind(ws.as_uuid())
                    .bind(p)
                    .execute(&mut tx)
                    .await?;
                p
            }
            None => query(
                "SELECT COALESCE(MAX(position) + 1, 0) FROM dispositions WHERE workspace_id = ?",
            )
            .bind(ws.as_uuid())
            .scalar::<i64>(&mut tx)
            .await?,
        };
        let row = query(format!("INSERT INTO dispositions (id, workspace_id, label, description, color, position, is_protected, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, FALSE, ?, ?) RETURNING {COLUMNS}"))
            .bind(id.as_uuid())
            .bind(ws.as_uuid())
            .bind(label)
            .bind(description)
            .bind(color)
            .bind(position)
            .bind(at)
            .bind(at)
            .fetch_one(&mut tx)
            .await
            .map_err(classify)?;
        // Read back as written, inside the transaction: a delete right after the commit
        // cannot take the answer away.
        let created = disposition(row)?;
        tx.commit().await?;
        Ok(created)
    }

    pub async fn update_disposition(
        &self,
        ws: WorkspaceId,
        id: DispositionId,
        label: Option<&str>,
        description: Option<&str>,
        color: Option<&str>,
        position: Option<i64>,
    ) -> StoreResult<Option<Disposition>> {
        let done = query(
            "UPDATE dispositions SET label = COALESCE(?, label), description = COALESCE(?, description), color = COALESCE(?, color), position = COALESCE(?, position), updated_at = ? WHERE workspace_id = ? AND id = ?",
        )
        .bind(label)
        .bind(description)
        .bind(color)
        .bind(position)
        .bind(ts(self.now()))
        .bind(ws.as_uuid())
        .bind(id.as_uuid())
        .execute(&mut self.conn().await?)
        .await
        .map_err(classify)?;
        if done.rows_affected() == 0 {
            return Ok(None);
        }
        self.disposition(ws, id).await
    }

    pub async fn delete_disposition(
        &self,
        ws: WorkspaceId,
        id: DispositionId,
    ) -> StoreResult<DeleteOutcome> {
        let Some(existing) = self.disposition(ws, id).await? else {
            return Ok(DeleteOutcome::NotFound);
        };
        if existing.is_protected {
            return Ok(DeleteOutcome::Protected);
        }
        query(
            "DELETE FROM dispositions WHERE workspace_id = ? AND id = ? AND is_protected = FALSE",
        )
        .bind(ws.as_uuid())
        .bind(id.as_uuid())
        .execute(&mut self.conn().await?)
        .await?;
        Ok(DeleteOutcome::Deleted)
    }
}

/// A call's disposition, as a client or the analysis sets it.
impl Store {
    /// Lands a disposition on an answered call (once; the same one again is a no-op, and
    /// another one is refused).
    pub async fn set_call_disposition(
        &self,
        ws: WorkspaceId,
        id: CallId,
        disposition: DispositionId,
        source: DispositionSource,
    ) -> StoreResult<Option<DispositionSet>> {
        let done = query(
            "UPDATE calls SET disposition_id = ?, disposition_source = ?, updated_at = ? \
             WHERE workspace_id = ? AND id = ? AND status = 'ended' AND outcome = 'answered' AND disposition_id IS NULL",
        )
        .bind(disposition.as_uuid())
        .bind(source.as_str())
        .bind(ts(self.now()))
        .bind(ws.as_uuid())
        .bind(id.as_uuid())
        .execute(&mut self.conn().await?)
        .await?;
        let Some(call) = self.call(ws, id).await? else {
            return Ok(None);
        };
        Ok(Some(if done.rows_affected() > 0 {
            DispositionSet::Set(call)
        } else if call.disposition_id == Some(disposition) {
            DispositionSet::Unchanged(call)
        } else if call.disposition_id.is_some() {
            DispositionSet::Conflict(call)
        } else {
            DispositionSet::NotAnswered(call)
        }))
    }
}

/// Who landed a disposition on a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DispositionSource {
    /// `POST /calls/{id}/disposition`.
    Api,
    /// The end-of-call analysis.
    Analysis,
    /// The agent, during the call: written with the call's end.
    Agent,
}

impl DispositionSource {
    pub const ALL: [DispositionSource; 3] = [
        DispositionSource::Api,
        DispositionSource::Analysis,
        DispositionSource::Agent,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DispositionSource::Api => "api",
            DispositionSource::Analysis => "analysis",
            DispositionSource::Agent => "agent",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// What landing a disposition did.
#[derive(Debug)]
pub enum DispositionSet {
    Set(CallRecord),
    /// The same disposition was already set.
    Unchanged(CallRecord),
    /// Another disposition is already set.
    Conflict(CallRecord),
    /// The call has not ended answered.
    NotAnswered(CallRecord),
}

/// Those of `all` that `ids` name, in the order of `ids` (an id of none left out).
pub fn pick_dispositions(all: &[Disposition], ids: &[DispositionId]) -> Vec<Disposition> {
    ids.iter()
        .filter_map(|id| all.iter().find(|d| d.id == *id).cloned())
        .collect()
}
