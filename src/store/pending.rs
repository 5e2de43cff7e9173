//! Placeholders replaced by the agents and do-not-call modules.
use serde::Serialize;
use switchboard_actors::ids::{AgentId, WorkspaceId};

use super::{Store, StoreResult};

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Agent {
    #[schema(value_type = uuid::Uuid)]
    pub id: AgentId,
    pub is_active: bool,
    pub max_call_duration_secs: Option<i64>,
}

impl Store {
    pub async fn agent(&self, ws: WorkspaceId, id: AgentId) -> StoreResult<Option<Agent>> {
        let row: Option<(bool, Option<i64>)> = sqlx::query_as("SELECT is_active, max_call_duration_secs FROM agents WHERE workspace_id = ? AND id = ?")
            .bind(ws.as_uuid())
            .bind(id.as_uuid())
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|(is_active, max_call_duration_secs)| Agent {
            id,
            is_active,
            max_call_duration_secs,
        }))
    }
}
