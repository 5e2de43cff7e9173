//! Workspaces (the spec's companies): creation seeds the protected default dispositions.

use chrono::{DateTime, Utc};
use serde::Serialize;
use switchboard_actors::ids::WorkspaceId;
use switchboard_actors::window::CallingWindow;

use super::db::{Json, begin_write, query};
use super::{Store, StoreError, StoreResult, ts};

#[derive(Debug, Clone, Serialize)]
pub struct Workspace {
    pub id: WorkspaceId,
    pub name: String,
    pub default_country: String,
    pub created_at: DateTime<Utc>,
}

/// The dispositions every workspace starts with: label, color. They are protected.
pub const DEFAULT_DISPOSITIONS: [(&str, &str, &str); 7] = [
    ("Interested", "#16a34a", DESCRIPTIONS[0]),
    ("Not interested", "#dc2626", DESCRIPTIONS[1]),
    ("Callback requested", "#2563eb", DESCRIPTIONS[2]),
    ("Do not call", "#7c3aed", DESCRIPTIONS[3]),
    ("Wrong number", "#ea580c", DESCRIPTIONS[4]),
    ("Voicemail left", "#0891b2", DESCRIPTIONS[5]),
    ("Unclassified", "#6b7280", DESCRIPTIONS[6]),
];

/// What the default dispositions mean (migration 0014 gives existing workspaces the same).
const DESCRIPTIONS: [&str; 7] = [
    "The person wants what was offered, or agreed to the next step.",
    "The person declined what was offered.",
    "The person asked to be called back at another time.",
    "The person asked not to be called again.",
    "The person who answered is not the one the call was for.",
    "An answering machine took the call and the agent left a message.",
    "The call's result is unclear.",
];

impl Store {
    pub async fn create_workspace(
        &self,
        name: &str,
        default_country: &str,
    ) -> StoreResult<Workspace> {
        let id = WorkspaceId::new();
        let created_at = self.now();
        let mut conn = self.conn().await?;
        let mut tx = begin_write(&mut conn).await?;
        query("INSERT INTO workspaces (id, name, default_country, created_at, updated_at) VALUES (?, ?, ?, ?, ?)")
            .bind(id.as_uuid())
            .bind(name)
            .bind(default_country)
            .bind(ts(created_at))
            .bind(ts(created_at))
            .execute(&mut tx)
            .await?;
        for (position, (label, color, description)) in DEFAULT_DISPOSITIONS.iter().enumerate() {
            query(
                "INSERT INTO dispositions (id, workspace_id, label, description, color, position, is_protected, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, TRUE, ?, ?)",
            )
            .bind(uuid::Uuid::now_v7())
            .bind(id.as_uuid())
            .bind(label)
            .bind(description)
            .bind(color)
            .bind(position as i64)
            .bind(ts(created_at))
            .bind(ts(created_at))
            .execute(&mut tx)
            .await?;
        }
        tx.commit().await?;
        drop(conn);
        Ok(Workspace {
            id,
            name: name.to_owned(),
            default_country: default_country.to_owned(),
            created_at,
        })
    }

    pub async fn workspace(&self, id: WorkspaceId) -> StoreResult<Option<Workspace>> {
        let row =
            query("SELECT id, name, default_country, created_at FROM workspaces WHERE id = ?")
                .bind(id.as_uuid())
                .fetch_optional(&mut self.conn().await?)
                .await?;
        row.map(|r| {
            Ok(Workspace {
                id: WorkspaceId::from_uuid(r.try_get("id")?),
                name: r.try_get("name")?,
                default_country: r.try_get("default_country")?,
                created_at: r.try_get("created_at")?,
            })
        })
        .transpose()
        .map_err(StoreError::Database)
    }

    pub async fn workspace_count(&self) -> StoreResult<i64> {
        Ok(query("SELECT COUNT(*) FROM workspaces")
            .scalar(&mut self.conn().await?)
            .await?)
    }

    /// The workspace's country for reading national number forms.
    pub async fn default_country(&self, id: WorkspaceId) -> StoreResult<phonenumber::country::Id> {
        let code: Option<String> = query("SELECT default_country FROM workspaces WHERE id = ?")
            .bind(id.as_uuid())
            .scalar_optional(&mut self.read_conn().await?)
            .await?;
        let code = code.unwrap_or_else(|| "IL".into());
        switchboard_actors::phone::parse_country(&code)
            .map_err(|e| StoreError::Corrupt(e.to_string()))
    }

    /// The workspace's default calling hours (`PUT /call-windows`), if set.
    pub async fn call_window(&self, id: WorkspaceId) -> StoreResult<Option<CallingWindow>> {
        let raw: Option<Option<String>> = query("SELECT call_window FROM workspaces WHERE id = ?")
            .bind(id.as_uuid())
            .scalar_optional(&mut self.conn().await?)
            .await?;
        match raw.flatten() {
            None => Ok(None),
            Some(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| StoreError::Corrupt(format!("call_window: {e}"))),
        }
    }

    pub async fn set_call_window(
        &self,
        id: WorkspaceId,
        window: &CallingWindow,
    ) -> StoreResult<()> {
        query("UPDATE workspaces SET call_window = ?, updated_at = ? WHERE id = ?")
            .bind(Json(window.to_json().to_string()))
            .bind(ts(self.now()))
            .bind(id.as_uuid())
            .execute(&mut self.conn().await?)
            .await?;
        Ok(())
    }
}
