//! Tools, their attachment to agents, and the log of webhook deliveries.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use switchboard_actors::ids::{AgentId, DeliveryId, ToolId, WorkspaceId};
use utoipa::ToSchema;

use super::db::{Json, Row, query};
use super::{Page, Paged, Store, StoreError, StoreResult, classify, coded, corrupt, ts};

/// What a tool is: a `webhook` the service calls, or a `function` the agent webhook answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolType {
    Webhook,
    Function,
}

impl ToolType {
    pub const ALL: [ToolType; 2] = [ToolType::Webhook, ToolType::Function];

    pub fn as_str(self) -> &'static str {
        match self {
            ToolType::Webhook => "webhook",
            ToolType::Function => "function",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// The spec's Tool object. Listed for one agent, it also carries that agent's
/// `execution_order` and `config_override`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Tool {
    #[schema(value_type = uuid::Uuid)]
    pub id: ToolId,
    /// camelCase.
    pub name: String,
    pub description: String,
    /// `webhook` or `function`.
    #[serde(rename = "type")]
    #[schema(value_type = String)]
    pub tool_type: ToolType,
    #[schema(value_type = Object)]
    pub config: Value,
    pub is_active: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_order: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub config_override: Option<Value>,
}

const COLUMNS: &str =
    "t.id, t.name, t.description, t.type, t.config, t.is_active, t.created_at, t.updated_at";

fn tool_row(r: &Row, attached: bool) -> StoreResult<Tool> {
    let config: String = r.try_get("config")?;
    let (execution_order, config_override) = if attached {
        let o: Option<String> = r.try_get("config_override")?;
        (
            Some(r.try_get("execution_order")?),
            o.map(|t| serde_json::from_str(&t).map_err(|e| corrupt("config_override", e)))
                .transpose()?,
        )
    } else {
        (None, None)
    };
    Ok(Tool {
        id: ToolId::from_uuid(r.try_get("id")?),
        name: r.try_get("name")?,
        description: r.try_get("description")?,
        tool_type: coded(r, "type", ToolType::parse)?,
        config: serde_json::from_str(&config).map_err(|e| corrupt("tools.config", e))?,
        is_active: r.try_get("is_active")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
        execution_order,
        config_override,
    })
}

/// A tool to insert.
#[derive(Debug, Clone)]
pub struct NewTool {
    pub name: String,
    pub description: String,
    pub tool_type: ToolType,
    pub config: Value,
    pub idempotency_key: Option<String>,
    pub request_hash: Option<String>,
}

/// What creating a tool did.
#[derive(Debug)]
pub enum ToolInsert {
    Created(Tool),
    /// The idempotency key was used before: the first tool, and the hash of its request.
    Replayed {
        tool: Tool,
        request_hash: Option<String>,
    },
}

/// A change to a tool; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct ToolUpdate {
    pub name: Option<String>,
    pub description: Option<String>,
    pub config: Option<Value>,
    pub is_active: Option<bool>,
}

/// One delivery to log.
#[derive(Debug, Clone)]
pub struct Delivery<'a> {
    pub workspace_id: WorkspaceId,
    pub tool_id: ToolId,
    pub kind: &'a str,
    pub method: &'a str,
    pub url: &'a str,
    pub outcome: &'a str,
    pub status_code: Option<u16>,
    pub duration_ms: i64,
    pub at: DateTime<Utc>,
}

impl Store {
    pub async fn create_tool(&self, ws: WorkspaceId, new: &NewTool) -> StoreResult<ToolInsert> {
        if let Some(key) = &new.idempotency_key
            && let Some(found) = self.tool_by_key(ws, key).await?
        {
            return Ok(found);
        }
        let id = ToolId::new();
        let now = ts(self.now());
        let inserted = query(
            "INSERT INTO tools (id, workspace_id, name, description, type, config, idempotency_key, request_hash, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(id.as_uuid())
        .bind(ws.as_uuid())
        .bind(&new.name)
        .bind(&new.description)
        .bind(new.tool_type.as_str())
        .bind(Json(new.config.to_string()))
        .bind(&new.idempotency_key)
        .bind(&new.request_hash)
        .bind(now)
        .bind(now)
        .execute(&mut self.conn().await?)
        .await
        .map_err(classify);
        match inserted {
            Ok(_) => {}
            Err(StoreError::Conflict { .. }) if new.idempotency_key.is_some() => {
                let key = new.idempotency_key.as_deref().unwrap_or_default();
                return self
                    .tool_by_key(ws, key)
                    .await?
                    .ok_or_else(|| corrupt("tools", "idempotency key vanished"));
            }
            Err(e) => return Err(e),
        }
        let tool = self
            .tool(ws, id)
            .await?
            .ok_or_else(|| corrupt("tools", "vanished after insert"))?;
        Ok(ToolInsert::Created(tool))
    }

    async fn tool_by_key(&self, ws: WorkspaceId, key: &str) -> StoreResult<Option<ToolInsert>> {
        let row = query(format!(
            "SELECT {COLUMNS}, t.request_hash FROM tools t WHERE t.workspace_id = ? AND t.idempotency_key = ?"
        ))
        .bind(ws.as_uuid())
        .bind(key)
        .fetch_optional(&mut self.conn().await?)
        .await?;
        match row {
            None => Ok(None),
            Some(r) => Ok(Some(ToolInsert::Replayed {
                request_hash: r.try_get("request_hash")?,
                tool: tool_row(&r, false)?,
            })),
        }
    }

    pub async fn tool(&self, ws: WorkspaceId, id: ToolId) -> StoreResult<Option<Tool>> {
        let row = query(format!(
            "SELECT {COLUMNS} FROM tools t WHERE t.workspace_id = ? AND t.id = ?"
        ))
        .bind(ws.as_uuid())
        .bind(id.as_uuid())
        .fetch_optional(&mut self.conn().await?)
        .await?;
        row.map(|r| tool_row(&r, false)).transpose()
    }

    /// The workspace's tools, oldest first; or one agent's, in execution order.
    pub async fn list_tools(
        &self,
        ws: WorkspaceId,
        agent: Option<AgentId>,
        page: Page,
    ) -> StoreResult<Paged<Tool>> {
        let mut conn = self.conn().await?;
        let (total, rows) = match agent {
            None => {
                let total: i64 = query("SELECT COUNT(*) FROM tools WHERE workspace_id = ?")
                    .bind(ws.as_uuid())
                    .scalar(&mut conn)
                    .await?;
                let rows = query(format!(
                    "SELECT {COLUMNS} FROM tools t WHERE t.workspace_id = ? ORDER BY t.created_at, t.id LIMIT ? OFFSET ?"
                ))
                .bind(ws.as_uuid())
                .bind(page.limit)
                .bind(page.offset)
                .fetch_all(&mut conn)
                .await?;
                (total, rows)
            }
            Some(agent) => {
                let total: i64 = query(
                    "SELECT COUNT(*) FROM agent_tools WHERE workspace_id = ? AND agent_id = ?",
                )
                .bind(ws.as_uuid())
                .bind(agent.as_uuid())
                .scalar(&mut conn)
                .await?;
                let rows = query(format!(
                    "SELECT {COLUMNS}, a.execution_order, a.config_override FROM agent_tools a \
                     JOIN tools t ON t.id = a.tool_id AND t.workspace_id = a.workspace_id \
                     WHERE a.workspace_id = ? AND a.agent_id = ? \
                     ORDER BY a.execution_order, a.created_at LIMIT ? OFFSET ?"
                ))
                .bind(ws.as_uuid())
                .bind(agent.as_uuid())
                .bind(page.limit)
                .bind(page.offset)
                .fetch_all(&mut conn)
                .await?;
                (total, rows)
            }
        };
        let items = rows
            .iter()
            .map(|r| tool_row(r, agent.is_some()))
            .collect::<StoreResult<_>>()?;
        Ok(Paged { items, total })
    }

    /// The active tools attached to `agent`, in execution order, each with the agent's
    /// `config_override`: what a call of the agent may use.
    pub async fn call_tools(&self, ws: WorkspaceId, agent: AgentId) -> StoreResult<Vec<Tool>> {
        let rows = query(format!(
            "SELECT {COLUMNS}, a.execution_order, a.config_override FROM agent_tools a \
             JOIN tools t ON t.id = a.tool_id AND t.workspace_id = a.workspace_id \
             WHERE a.workspace_id = ? AND a.agent_id = ? AND t.is_active \
             ORDER BY a.execution_order, a.created_at"
        ))
        .bind(ws.as_uuid())
        .bind(agent.as_uuid())
        .fetch_all(&mut self.conn().await?)
        .await?;
        rows.iter().map(|r| tool_row(r, true)).collect()
    }

    pub async fn update_tool(
        &self,
        ws: WorkspaceId,
        id: ToolId,
        u: &ToolUpdate,
    ) -> StoreResult<Option<Tool>> {
        let done = query(
            "UPDATE tools SET name = COALESCE(?, name), description = COALESCE(?, description), \
             config = COALESCE(?, config), is_active = COALESCE(?, is_active), updated_at = ? \
             WHERE workspace_id = ? AND id = ?",
        )
        .bind(&u.name)
        .bind(&u.description)
        .bind(u.config.as_ref().map(|c| Json(c.to_string())))
        .bind(u.is_active)
        .bind(ts(self.now()))
        .bind(ws.as_uuid())
        .bind(id.as_uuid())
        .execute(&mut self.conn().await?)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(None);
        }
        self.tool(ws, id).await
    }

    /// Attaches a tool to an agent (or changes its order and override); `false` if either is
    /// not the workspace's.
    pub async fn attach_tool(
        &self,
        ws: WorkspaceId,
        agent: AgentId,
        tool: ToolId,
        execution_order: i64,
        config_override: Option<&Value>,
    ) -> StoreResult<bool> {
        let done = query(
            "INSERT INTO agent_tools (workspace_id, agent_id, tool_id, execution_order, config_override, created_at) \
             SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM agents WHERE workspace_id = ? AND id = ?) \
             AND EXISTS (SELECT 1 FROM tools WHERE workspace_id = ? AND id = ?) \
             ON CONFLICT (agent_id, tool_id) DO UPDATE SET execution_order = excluded.execution_order, \
             config_override = excluded.config_override",
        )
        .bind(ws.as_uuid())
        .bind(agent.as_uuid())
        .bind(tool.as_uuid())
        .bind(execution_order)
        .bind(config_override.map(|c| Json(c.to_string())))
        .bind(ts(self.now()))
        .bind(ws.as_uuid())
        .bind(agent.as_uuid())
        .bind(ws.as_uuid())
        .bind(tool.as_uuid())
        .execute(&mut self.conn().await?)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    pub async fn detach_tool(
        &self,
        ws: WorkspaceId,
        agent: AgentId,
        tool: ToolId,
    ) -> StoreResult<bool> {
        let done = query(
            "DELETE FROM agent_tools WHERE workspace_id = ? AND agent_id = ? AND tool_id = ?",
        )
        .bind(ws.as_uuid())
        .bind(agent.as_uuid())
        .bind(tool.as_uuid())
        .execute(&mut self.conn().await?)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Logs a delivery and returns its id.
    pub async fn log_delivery(&self, d: &Delivery<'_>) -> StoreResult<DeliveryId> {
        let id = DeliveryId::new();
        query(
            "INSERT INTO tool_deliveries (id, workspace_id, tool_id, kind, method, url, outcome, status_code, duration_ms, created_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(id.as_uuid())
        .bind(d.workspace_id.as_uuid())
        .bind(d.tool_id.as_uuid())
        .bind(d.kind)
        .bind(d.method)
        .bind(d.url)
        .bind(d.outcome)
        .bind(d.status_code.map(i64::from))
        .bind(d.duration_ms)
        .bind(ts(d.at))
        .execute(&mut self.conn().await?)
        .await?;
        Ok(id)
    }
}
