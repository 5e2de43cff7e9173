//! Shared links: a public page for one agent behind a random token.

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use switchboard_actors::ids::{AgentId, ApiKeyId, SharedLinkId, WorkspaceId};

use super::db::{Row, query};
use super::{Page, Paged, Store, StoreResult, ts};

/// A stored link (the API adds `url` and `status`).
#[derive(Debug, Clone)]
pub struct SharedLink {
    pub id: SharedLinkId,
    pub workspace_id: WorkspaceId,
    pub agent_id: AgentId,
    pub token: String,
    pub created_by: ApiKeyId,
    pub expires_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

const COLUMNS: &str =
    "id, workspace_id, agent_id, token, created_by, expires_at, revoked_at, created_at";

fn link_row(r: &Row) -> StoreResult<SharedLink> {
    Ok(SharedLink {
        id: SharedLinkId::from_uuid(r.try_get("id")?),
        workspace_id: WorkspaceId::from_uuid(r.try_get("workspace_id")?),
        agent_id: AgentId::from_uuid(r.try_get("agent_id")?),
        token: r.try_get("token")?,
        created_by: ApiKeyId::from_uuid(r.try_get("created_by")?),
        expires_at: r.try_get("expires_at")?,
        revoked_at: r.try_get("revoked_at")?,
        created_at: r.try_get("created_at")?,
    })
}

fn token_hash(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

impl Store {
    pub async fn create_shared_link(
        &self,
        ws: WorkspaceId,
        agent: AgentId,
        token: &str,
        created_by: ApiKeyId,
        expires_at: DateTime<Utc>,
    ) -> StoreResult<SharedLink> {
        let id = SharedLinkId::new();
        let row = query(format!(
            "INSERT INTO shared_links (id, workspace_id, agent_id, token, token_hash, created_by, expires_at, created_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING {COLUMNS}"
        ))
        .bind(id.as_uuid())
        .bind(ws.as_uuid())
        .bind(agent.as_uuid())
        .bind(token)
        .bind(token_hash(token))
        .bind(created_by.as_uuid())
        .bind(ts(expires_at))
        .bind(ts(self.now()))
        .fetch_one(&mut self.conn().await?)
        .await?;
        link_row(&row)
    }

    pub async fn shared_link(
        &self,
        ws: WorkspaceId,
        id: SharedLinkId,
    ) -> StoreResult<Option<SharedLink>> {
        let row = query(format!(
            "SELECT {COLUMNS} FROM shared_links WHERE workspace_id = ? AND id = ?"
        ))
        .bind(ws.as_uuid())
        .bind(id.as_uuid())
        .fetch_optional(&mut self.conn().await?)
        .await?;
        row.as_ref().map(link_row).transpose()
    }

    pub async fn list_shared_links(
        &self,
        ws: WorkspaceId,
        page: Page,
    ) -> StoreResult<Paged<SharedLink>> {
        let mut conn = self.conn().await?;
        let total: i64 = query("SELECT COUNT(*) FROM shared_links WHERE workspace_id = ?")
            .bind(ws.as_uuid())
            .scalar(&mut conn)
            .await?;
        let rows = query(format!(
            "SELECT {COLUMNS} FROM shared_links WHERE workspace_id = ? ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?"
        ))
        .bind(ws.as_uuid())
        .bind(page.limit)
        .bind(page.offset)
        .fetch_all(&mut conn)
        .await?;
        let items = rows.iter().map(link_row).collect::<StoreResult<_>>()?;
        Ok(Paged { items, total })
    }

    /// Revokes a link (revoking twice keeps the first time); `None` if it is not the
    /// workspace's.
    pub async fn revoke_shared_link(
        &self,
        ws: WorkspaceId,
        id: SharedLinkId,
    ) -> StoreResult<Option<SharedLink>> {
        query(
            "UPDATE shared_links SET revoked_at = COALESCE(revoked_at, ?) WHERE workspace_id = ? AND id = ?",
        )
        .bind(ts(self.now()))
        .bind(ws.as_uuid())
        .bind(id.as_uuid())
        .execute(&mut self.conn().await?)
        .await?;
        self.shared_link(ws, id).await
    }

    /// The live link a token opens: not revoked, not expired.
    pub async fn open_shared_link(
        &self,
        token: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<SharedLink>> {
        let row = query(format!(
            "SELECT {COLUMNS} FROM shared_links WHERE token_hash = ? AND revoked_at IS NULL AND expires_at > ?"
        ))
        .bind(token_hash(token))
        .bind(ts(now))
        .fetch_optional(&mut self.conn().await?)
        .await?;
        row.as_ref().map(link_row).transpose()
    }
}
