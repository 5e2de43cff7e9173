//! API keys: stored as SHA-256 hashes, looked up by hash, compared in constant time.

use chrono::{DateTime, Utc};
use serde::Serialize;
use switchboard_actors::ids::{ApiKeyId, WorkspaceId};

use super::db::query;
use super::{Store, StoreError, StoreResult, ts};
use crate::domain::auth::{self, Scopes};

/// A key as listed (never with its secret).
#[derive(Debug, Clone, Serialize)]
pub struct ApiKey {
    pub id: ApiKeyId,
    pub workspace_id: WorkspaceId,
    pub name: String,
    /// The first characters of the key, to tell keys apart.
    pub prefix: String,
    pub scopes: Vec<String>,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

/// What a presented key resolves to.
#[derive(Debug, Clone)]
pub enum KeyCheck {
    Valid {
        key_id: ApiKeyId,
        workspace_id: WorkspaceId,
        scopes: Scopes,
    },
    /// Unknown or revoked.
    Invalid,
    Expired,
}

impl Store {
    /// Creates a key; returns it with its secret, which is not stored.
    pub async fn create_key(
        &self,
        workspace_id: WorkspaceId,
        name: &str,
        scopes: &Scopes,
        expires_at: Option<DateTime<Utc>>,
    ) -> StoreResult<(ApiKey, String)> {
        let new = auth::generate_key();
        let id = ApiKeyId::new();
        let created_at = self.now();
        query("INSERT INTO api_keys (id, workspace_id, name, key_hash, key_prefix, scopes, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
            .bind(id.as_uuid())
            .bind(workspace_id.as_uuid())
            .bind(name)
            .bind(&new.hash[..])
            .bind(&new.prefix)
            .bind(scopes.to_text())
            .bind(expires_at.map(ts))
            .bind(ts(created_at))
            .execute(&mut self.conn().await?)
            .await?;
        let key = ApiKey {
            id,
            workspace_id,
            name: name.to_owned(),
            prefix: new.prefix,
            scopes: scopes.to_list(),
            expires_at,
            revoked_at: None,
            created_at,
        };
        Ok((key, new.secret))
    }

    pub async fn list_keys(&self, workspace_id: WorkspaceId) -> StoreResult<Vec<ApiKey>> {
        let rows = query(
            "SELECT id, workspace_id, name, key_prefix, scopes, expires_at, revoked_at, created_at FROM api_keys WHERE workspace_id = ? ORDER BY created_at",
        )
        .bind(workspace_id.as_uuid())
        .fetch_all(&mut self.conn().await?)
        .await?;
        rows.into_iter()
            .map(|r| {
                let scopes: String = r.try_get("scopes")?;
                let scopes =
                    Scopes::parse(&scopes).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                Ok(ApiKey {
                    id: ApiKeyId::from_uuid(r.try_get("id")?),
                    workspace_id: WorkspaceId::from_uuid(r.try_get("workspace_id")?),
                    name: r.try_get("name")?,
                    prefix: r.try_get("key_prefix")?,
                    scopes: scopes.to_list(),
                    expires_at: r.try_get("expires_at")?,
                    revoked_at: r.try_get("revoked_at")?,
                    created_at: r.try_get("created_at")?,
                })
            })
            .collect()
    }

    /// Revokes a key; `false` when no such live key exists.
    // By id alone: the operator's `keys revoke` command acts across workspaces.
    pub async fn revoke_key(&self, id: ApiKeyId) -> StoreResult<bool> {
        let done = query("UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL")
            .bind(ts(self.now()))
            .bind(id.as_uuid())
            .execute(&mut self.conn().await?)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Resolves a presented secret.
    pub async fn check_key(&self, secret: &str) -> StoreResult<KeyCheck> {
        if !auth::looks_like_key(secret) {
            return Ok(KeyCheck::Invalid);
        }
        let hash = auth::hash_key(secret);
        let row = query("SELECT id, workspace_id, key_hash, scopes, expires_at, revoked_at FROM api_keys WHERE key_hash = ?")
            .bind(&hash[..])
            .fetch_optional(&mut self.read_conn().await?)
            .await?;
        let Some(row) = row else {
            return Ok(KeyCheck::Invalid);
        };
        let stored: Vec<u8> = row.try_get("key_hash")?;
        if !auth::constant_time_eq(&stored, &hash) {
            return Ok(KeyCheck::Invalid);
        }
        let revoked_at: Option<DateTime<Utc>> = row.try_get("revoked_at")?;
        if revoked_at.is_some() {
            return Ok(KeyCheck::Invalid);
        }
        let expires_at: Option<DateTime<Utc>> = row.try_get("expires_at")?;
        if expires_at.is_some_and(|at| at <= self.now()) {
            return Ok(KeyCheck::Expired);
        }
        let scopes: String = row.try_get("scopes")?;
        Ok(KeyCheck::Valid {
            key_id: ApiKeyId::from_uuid(row.try_get("id")?),
            workspace_id: WorkspaceId::from_uuid(row.try_get("workspace_id")?),
            scopes: Scopes::parse(&scopes).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        })
    }

    /// On an empty database: a `default` workspace and an all-scope key (returned once).
    pub async fn bootstrap(&self) -> StoreResult<Option<(WorkspaceId, String)>> {
        if self.workspace_count().await? > 0 {
            return Ok(None);
        }
        let workspace = self.create_workspace("default", "IL").await?;
        let (_, secret) = self
            .create_key(workspace.id, "bootstrap", &Scopes::All, None)
            .await?;
        Ok(Some((workspace.id, secret)))
    }

    /// Charges one request of `key` to the one-minute window `window` (its UNIX minute),
    /// counted for every node on this database: the requests the window holds with this one,
    /// or `None` when it already holds `limit` (the request is refused, and not counted).
    pub async fn charge_key_window(
        &self,
        key: ApiKeyId,
        window: i64,
        limit: i64,
    ) -> StoreResult<Option<i64>> {
        Ok(query(
            "INSERT INTO api_rate_windows (key_id, window_start, requests) VALUES (?, ?, 1) \
             ON CONFLICT (key_id, window_start) DO UPDATE SET requests = api_rate_windows.requests + 1 \
             WHERE api_rate_windows.requests < ? RETURNING requests",
        )
        .bind(key.as_uuid())
        .bind(window)
        .bind(limit)
        .scalar_optional(&mut self.conn().await?)
        .await?)
    }

    /// Drops the rate windows that ended before `window`.
    pub async fn prune_key_windows(&self, window: i64) -> StoreResult<u64> {
        let done = query("DELETE FROM api_rate_windows WHERE window_start < ?")
            .bind(window)
            .execute(&mut self.conn().await?)
            .await?;
        Ok(done.rows_affected())
    }
}
