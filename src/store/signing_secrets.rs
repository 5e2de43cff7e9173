//! Each workspace's webhook signing secret: made on first use, rotated by the operator; every
//! delivery is signed with the one stored at its attempt.

use chrono::{DateTime, Utc};

use switchboard_actors::ids::WorkspaceId;

use super::db::{Exec, query};
use super::{Store, StoreResult, corrupt, ts};
use crate::domain::signing::SigningSecret;

/// Each workspace's webhook signing secret.
impl Store {
    /// The workspace's signing secret and when it was made; made on first use.
    pub async fn webhook_signing_secret(
        &self,
        ws: WorkspaceId,
    ) -> StoreResult<(SigningSecret, DateTime<Utc>)> {
        async fn read(
            conn: &mut (impl Exec + ?Sized),
            ws: WorkspaceId,
        ) -> Result<Option<(String, DateTime<Utc>)>, sqlx::Error> {
            query("SELECT secret, created_at FROM webhook_signing_secrets WHERE workspace_id = ?")
                .bind(ws.as_uuid())
                .fetch_optional_as(conn)
                .await
        }
        let mut conn = self.conn().await?;
        let found = match read(&mut conn, ws).await? {
            Some(found) => found,
            None => {
                query(
                    "INSERT INTO webhook_signing_secrets (workspace_id, secret, created_at) VALUES (?, ?, ?) \
                     ON CONFLICT(workspace_id) DO NOTHING",
                )
                .bind(ws.as_uuid())
                .bind(SigningSecret::generate().expose().to_owned())
                .bind(ts(self.now()))
                .execute(&mut conn)
                .await?;
                read(&mut conn, ws)
                    .await?
                    .ok_or_else(|| corrupt("webhook_signing_secrets", "vanished after insert"))?
            }
        };
        Ok((SigningSecret::from_stored(found.0), found.1))
    }

    /// Replaces the workspace's signing secret with a new one: every delivery from now on,
    /// pending retries included, is signed with it.
    pub async fn rotate_webhook_signing_secret(
        &self,
        ws: WorkspaceId,
    ) -> StoreResult<(SigningSecret, DateTime<Utc>)> {
        let secret = SigningSecret::generate();
        let now = self.now();
        query(
            "INSERT INTO webhook_signing_secrets (workspace_id, secret, created_at) VALUES (?, ?, ?) \
             ON CONFLICT(workspace_id) DO UPDATE SET secret = excluded.secret, created_at = excluded.created_at",
        )
        .bind(ws.as_uuid())
        .bind(secret.expose().to_owned())
        .bind(ts(now))
        .execute(&mut self.conn().await?)
        .await?;
        Ok((secret, now))
    }
}
