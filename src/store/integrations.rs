//! Integrations (connected third-party accounts) and the saved versions of agents' flows.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use switchboard_actors::ids::{AgentId, IntegrationId, WorkspaceId};
use utoipa::ToSchema;

use super::db::{Json, Row, begin_write, query};
use super::{Store, StoreResult, coded, corrupt, ts};
use crate::domain::integrations::Provider;

/// Whether an integration's account can be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IntegrationStatus {
    Connected,
    /// Disconnected from the dashboard or the operator's commands (or its grant was refused):
    /// a flow's node that uses it fails until it is connected again.
    Disconnected,
}

impl IntegrationStatus {
    pub const ALL: [IntegrationStatus; 2] = [
        IntegrationStatus::Connected,
        IntegrationStatus::Disconnected,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            IntegrationStatus::Connected => "connected",
            IntegrationStatus::Disconnected => "disconnected",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

impl std::fmt::Display for IntegrationStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Serialize, ToSchema, PartialEq)]
pub struct Integration {
    #[schema(value_type = uuid::Uuid)]
    pub id: IntegrationId,
    // A provider's wire name; the document says which, from the catalog.
    #[schema(schema_with = crate::domain::integrations::provider_schema)]
    pub provider: Provider,
    /// The connected account, e.g. its email address.
    pub account: String,
    /// `connected` or `disconnected`.
    #[schema(value_type = String)]
    pub status: IntegrationStatus,
    pub connected_at: DateTime<Utc>,
    pub disconnected_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

/// One saved version of an agent's flow.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FlowVersion {
    /// 1 for the first save, then one more per save.
    pub version: i64,
    #[schema(value_type = Object)]
    pub flow_config: Value,
    pub created_at: DateTime<Utc>,
}

const COLUMNS: &str = "id, provider, account, status, connected_at, disconnected_at, created_at";

fn integration_row(r: &Row) -> StoreResult<Integration> {
    Ok(Integration {
        id: IntegrationId::from_uuid(r.try_get("id")?),
        provider: coded(r, "provider", Provider::parse)?,
        account: r.try_get("account")?,
        status: coded(r, "status", IntegrationStatus::parse)?,
        connected_at: r.try_get("connected_at")?,
        disconnected_at: r.try_get("disconnected_at")?,
        created_at: r.try_get("created_at")?,
    })
}

impl Store {
    /// Connects an account (operator command): the workspace's integration of that provider
    /// and account connected again (same id, so flows pointing at it work again), else a new
    /// one. `credentials` seals the grant for the integration's id (`None`: none is kept).
    pub async fn connect_integration(
        &self,
        ws: WorkspaceId,
        provider: &str,
        account: &str,
        credentials: impl FnOnce(IntegrationId) -> Option<String>,
    ) -> StoreResult<Integration> {
        let now = ts(self.now());
        let mut conn = self.conn().await?;
        let mut tx = begin_write(&mut conn).await?;
        let existing: Option<uuid::Uuid> = query(
            "SELECT id FROM integrations WHERE workspace_id = ? AND provider = ? AND account = ? \
             ORDER BY created_at, id LIMIT 1",
        )
        .bind(ws.as_uuid())
        .bind(provider)
        .bind(account)
        .scalar_optional(&mut tx)
        .await?;
        let id = existing.map_or_else(IntegrationId::new, IntegrationId::from_uuid);
        let sealed = credentials(id);
        let row = match existing {
            Some(_) => {
                query(format!(
                    "UPDATE integrations SET status = 'connected', connected_at = ?, \
                     disconnected_at = NULL, credentials = ? WHERE id = ? RETURNING {COLUMNS}"
                ))
                .bind(now)
                .bind(sealed)
                .bind(id.as_uuid())
                .fetch_one(&mut tx)
                .await?
            }
            None => {
                query(format!(
                    "INSERT INTO integrations (id, workspace_id, provider, account, status, connected_at, created_at, credentials) \
                     VALUES (?, ?, ?, ?, 'connected', ?, ?, ?) RETURNING {COLUMNS}"
                ))
                .bind(id.as_uuid())
                .bind(ws.as_uuid())
                .bind(provider)
                .bind(account)
                .bind(now)
                .bind(now)
                .bind(sealed)
                .fetch_one(&mut tx)
                .await?
            }
        };
        tx.commit().await?;
        integration_row(&row)
    }

    /// An integration wherever it belongs, with its workspace and sealed credentials: what a
    /// flow's node needs to tell a foreign or disconnected integration from one it may use.
    pub async fn integration_for_run(
        &self,
        id: IntegrationId,
    ) -> StoreResult<Option<(WorkspaceId, Integration, Option<String>)>> {
        let row = query(format!(
            "SELECT workspace_id, credentials, {COLUMNS} FROM integrations WHERE id = ?"
        ))
        .bind(id.as_uuid())
        .fetch_optional(&mut self.read_conn().await?)
        .await?;
        row.map(|r| {
            Ok((
                WorkspaceId::from_uuid(r.try_get("workspace_id")?),
                integration_row(&r)?,
                r.try_get("credentials")?,
            ))
        })
        .transpose()
    }

    pub async fn list_integrations(&self, ws: WorkspaceId) -> StoreResult<Vec<Integration>> {
        let rows = query(format!(
            "SELECT {COLUMNS} FROM integrations WHERE workspace_id = ? ORDER BY created_at, id"
        ))
        .bind(ws.as_uuid())
        .fetch_all(&mut self.conn().await?)
        .await?;
        rows.iter().map(integration_row).collect()
    }

    pub async fn integration(
        &self,
        ws: WorkspaceId,
        id: IntegrationId,
    ) -> StoreResult<Option<Integration>> {
        let row = query(format!(
            "SELECT {COLUMNS} FROM integrations WHERE workspace_id = ? AND id = ?"
        ))
        .bind(ws.as_uuid())
        .bind(id.as_uuid())
        .fetch_optional(&mut self.conn().await?)
        .await?;
        row.as_ref().map(integration_row).transpose()
    }

    /// Disconnects an integration (again: unchanged); `None` when it is not the workspace's.
    pub async fn disconnect_integration(
        &self,
        ws: WorkspaceId,
        id: IntegrationId,
    ) -> StoreResult<Option<Integration>> {
        query(
            "UPDATE integrations SET status = 'disconnected', disconnected_at = COALESCE(disconnected_at, ?) \
             WHERE workspace_id = ? AND id = ?",
        )
        .bind(ts(self.now()))
        .bind(ws.as_uuid())
        .bind(id.as_uuid())
        .execute(&mut self.conn().await?)
        .await?;
        self.integration(ws, id).await
    }

    /// Saves a new version of an agent's flow and returns its number.
    pub async fn record_flow_version(
        &self,
        ws: WorkspaceId,
        agent: AgentId,
        flow: &Value,
    ) -> StoreResult<i64> {
        let version: i64 = query(
            "INSERT INTO agent_flow_versions (agent_id, version, workspace_id, flow_config, created_at) \
             SELECT ?, COALESCE(MAX(version), 0) + 1, ?, ?, ? FROM agent_flow_versions WHERE agent_id = ? \
             RETURNING version",
        )
        .bind(agent.as_uuid())
        .bind(ws.as_uuid())
        .bind(Json(flow.to_string()))
        .bind(ts(self.now()))
        .bind(agent.as_uuid())
        .scalar(&mut self.conn().await?)
        .await?;
        Ok(version)
    }

    /// An agent's flow versions, newest first.
    pub async fn flow_versions(
        &self,
        ws: WorkspaceId,
        agent: AgentId,
    ) -> StoreResult<Vec<FlowVersion>> {
        let rows = query(
            "SELECT version, flow_config, created_at FROM agent_flow_versions \
             WHERE workspace_id = ? AND agent_id = ? ORDER BY version DESC",
        )
        .bind(ws.as_uuid())
        .bind(agent.as_uuid())
        .fetch_all(&mut self.conn().await?)
        .await?;
        rows.iter()
            .map(|r| {
                let text: String = r.try_get("flow_config")?;
                Ok(FlowVersion {
                    version: r.try_get("version")?,
                    flow_config: serde_json::from_str(&text)
                        .map_err(|e| corrupt("agent_flow_versions", e))?,
                    created_at: r.try_get("created_at")?,
                })
            })
            .collect()
    }
}
