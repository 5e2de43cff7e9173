//! Dashboard sessions: a signed-in browser's cookie token (kept as its SHA-256) and CSRF
//! token, tied to the API key it was exchanged for.

use chrono::{DateTime, Utc};
use switchboard_actors::ids::{ApiKeyId, CampaignId, WorkspaceId};

use super::counts::call_buckets;
use super::db::query;
use super::{Store, StoreError, StoreResult, coded, ts};
use crate::domain::auth::Scopes;
use crate::domain::integrations::Provider;

/// A live session, as a request sees it: its key's workspace and scopes as they are now.
#[derive(Debug, Clone)]
pub struct DashboardSession {
    pub workspace_id: WorkspaceId,
    pub key_id: ApiKeyId,
    pub scopes: Scopes,
    pub csrf: String,
    pub expires_at: DateTime<Utc>,
}

impl Store {
    /// Starts a session for `key_id` until `expires_at` (and forgets expired ones).
    pub async fn create_dashboard_session(
        &self,
        token_hash: &[u8; 32],
        workspace_id: WorkspaceId,
        key_id: ApiKeyId,
        csrf: &str,
        expires_at: DateTime<Utc>,
    ) -> StoreResult<()> {
        let now = ts(self.now());
        let mut conn = self.conn().await?;
        query("DELETE FROM dashboard_sessions WHERE expires_at <= ?")
            .bind(now)
            .execute(&mut conn)
            .await?;
        query(
            "INSERT INTO dashboard_sessions (token_hash, workspace_id, key_id, csrf, created_at, expires_at) \
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(&token_hash[..])
        .bind(workspace_id.as_uuid())
        .bind(key_id.as_uuid())
        .bind(csrf)
        .bind(now)
        .bind(ts(expires_at))
        .execute(&mut conn)
        .await?;
        Ok(())
    }

    /// The session of a cookie token, if it has not expired and its key is neither revoked
    /// nor expired.
    pub async fn dashboard_session(
        &self,
        token_hash: &[u8; 32],
    ) -> StoreResult<Option<DashboardSession>> {
        let now = ts(self.now());
        let row = query(
            "SELECT s.workspace_id, s.key_id, s.csrf, s.expires_at, k.scopes FROM dashboard_sessions s \
             JOIN api_keys k ON k.id = s.key_id AND k.workspace_id = s.workspace_id \
             WHERE s.token_hash = ? AND s.expires_at > ? AND k.revoked_at IS NULL \
             AND (k.expires_at IS NULL OR k.expires_at > ?)",
        )
        .bind(&token_hash[..])
        .bind(now)
        .bind(now)
        .fetch_optional(&mut self.read_conn().await?)
        .await?;
        row.map(|r| {
            let scopes: String = r.try_get("scopes")?;
            Ok(DashboardSession {
                workspace_id: WorkspaceId::from_uuid(r.try_get("workspace_id")?),
                key_id: ApiKeyId::from_uuid(r.try_get("key_id")?),
                scopes: Scopes::parse(&scopes).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                csrf: r.try_get("csrf")?,
                expires_at: r.try_get("expires_at")?,
            })
        })
        .transpose()
    }

    /// Ends a session (signing out).
    pub async fn end_dashboard_session(&self, token_hash: &[u8; 32]) -> StoreResult<()> {
        query("DELETE FROM dashboard_sessions WHERE token_hash = ?")
            .bind(&token_hash[..])
            .execute(&mut self.conn().await?)
            .await?;
        Ok(())
    }
}

/// A campaign's calls counted over time, in buckets of `step` seconds (each bucket keyed by the
/// Unix time it starts at).
#[derive(Debug, Default)]
pub struct Timeline {
    /// Calls admitted (created) per bucket.
    pub admitted: Vec<(i64, i64)>,
    /// Calls ended per bucket and outcome.
    pub ended: Vec<(i64, String, i64)>,
}

/// The buckets a timeline can be counted in (seconds), each named by a prefix of the stored
/// ISO 8601 times (its length is the `width` that `campaign_call_buckets` keeps counts at), and
/// what completes a prefix into a time.
pub const TIMELINE_STEPS: [(i64, usize, &str); 5] = [
    (10, 18, "0Z"),
    (60, 16, ":00Z"),
    (600, 15, "0:00Z"),
    (3600, 13, ":00:00Z"),
    (86_400, 10, "T00:00:00Z"),
];

impl Store {
    /// The campaign's calls by when they were admitted and when, and how, they ended, in
    /// buckets of `step` seconds (one of [`TIMELINE_STEPS`]; others are read as a day).
    pub async fn campaign_timeline(
        &self,
        ws: WorkspaceId,
        id: CampaignId,
        step: i64,
    ) -> StoreResult<Timeline> {
        let (_, len, pad) = TIMELINE_STEPS
            .iter()
            .copied()
            .find(|(s, _, _)| *s == step)
            .unwrap_or(TIMELINE_STEPS[4]);
        let at = |prefix: &str| {
            DateTime::parse_from_rfc3339(&format!("{prefix}{pad}"))
                .map(|t| t.timestamp())
                .map_err(|e| StoreError::Corrupt(format!("a call's time {prefix:?}: {e}")))
        };
        // The counts the calls' triggers keep (see `counts`): a few hundred rows at most.
        let rows: Vec<(String, String, i64)> = query(concat!(
            "SELECT bucket, kind, CAST(SUM(calls) AS BIGINT) FROM ",
            call_buckets!(),
            " GROUP BY bucket, kind HAVING SUM(calls) != 0 ORDER BY bucket"
        ))
        .bind(id.as_uuid())
        .bind(ws.as_uuid())
        .bind(len as i64)
        .bind(len as i64)
        .fetch_all_as(&mut self.read_conn().await?)
        .await?;
        let mut timeline = Timeline::default();
        for (bucket, kind, n) in rows {
            let at = at(&bucket)?;
            if kind == "admitted" {
                timeline.admitted.push((at, n));
            } else {
                timeline.ended.push((at, kind, n));
            }
        }
        Ok(timeline)
    }
}

/// An OAuth handshake the dashboard started, as its answer finds it.
#[derive(Debug, Clone)]
pub struct OAuthHandshake {
    /// The SHA-256 of the session cookie that started it.
    pub session_hash: Vec<u8>,
    pub workspace_id: WorkspaceId,
    pub provider: Provider,
    pub verifier: String,
    pub expires_at: DateTime<Utc>,
}

impl Store {
    /// Keeps a handshake under its state's hash until `expires_at` (and forgets expired ones).
    pub async fn begin_oauth_handshake(
        &self,
        state_hash: &[u8; 32],
        handshake: &OAuthHandshake,
    ) -> StoreResult<()> {
        let mut conn = self.conn().await?;
        query("DELETE FROM oauth_handshakes WHERE expires_at <= ?")
            .bind(ts(self.now()))
            .execute(&mut conn)
            .await?;
        query(
            "INSERT INTO oauth_handshakes (state_hash, session_hash, workspace_id, provider, verifier, expires_at) \
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(&state_hash[..])
        .bind(&handshake.session_hash)
        .bind(handshake.workspace_id.as_uuid())
        .bind(handshake.provider.name())
        .bind(&handshake.verifier)
        .bind(ts(handshake.expires_at))
        .execute(&mut conn)
        .await?;
        Ok(())
    }

    /// Takes the handshake of a state: it answers once.
    pub async fn take_oauth_handshake(
        &self,
        state_hash: &[u8; 32],
    ) -> StoreResult<Option<OAuthHandshake>> {
        let row = query(
            "DELETE FROM oauth_handshakes WHERE state_hash = ? \
             RETURNING session_hash, workspace_id, provider, verifier, expires_at",
        )
        .bind(&state_hash[..])
        .fetch_optional(&mut self.conn().await?)
        .await?;
        row.map(|r| -> StoreResult<OAuthHandshake> {
            Ok(OAuthHandshake {
                session_hash: r.try_get("session_hash")?,
                workspace_id: WorkspaceId::from_uuid(r.try_get("workspace_id")?),
                provider: coded(&r, "provider", Provider::parse)?,
                verifier: r.try_get("verifier")?,
                expires_at: r.try_get("expires_at")?,
            })
        })
        .transpose()
    }
}
