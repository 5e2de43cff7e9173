//! Tools: create (idempotent), list (all, or one agent's in execution order), get, update,
//! deactivate, attach to and detach from agents, and `POST /tools/{id}/test`, which delivers
//! one request with the production payload contract.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use switchboard_actors::ids::{AgentId, ToolId};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{
    JsonObject, ListResponse, OptionalJsonObject, Pagination, PathId, PathIds, Q, check_fields,
    replayed, request_hash,
};
use super::openapi::body_schema;
use crate::app::auth::Auth;
use crate::edge::webhooks::{self, WebhookMethod};
use crate::http::state::AppState;
use crate::store::{NewTool, Tool, ToolInsert, ToolUpdate};

mod schema;
mod test_delivery;

use crate::app::tools::{DIRECTIONS, TEST_CONTEXT};

use schema::{ToolCreate, ToolPatch, ToolTestBody};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(get_one, update, deactivate))
        .merge(test_delivery::router())
        .routes(routes!(attach, detach))
}

const CREATE_FIELDS: &[&str] = &[
    "name",
    "description",
    "type",
    "config",
    "idempotency_key",
    "extraction_parameters",
    "static_parameters",
    "include_standard_metadata",
];
const UPDATE_FIELDS: &[&str] = &["name", "description", "config", "is_active"];
/// The longest description, in characters (after trimming).
const DESCRIPTION_MAX: usize = 2000;
/// The longest idempotency key, in characters.
const IDEMPOTENCY_KEY_MAX: usize = 255;
const MIGRATED: [&str; 3] = [
    "extraction_parameters",
    "static_parameters",
    "include_standard_metadata",
];

fn str_field<'a>(body: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::invalid_field(key, "must be a string")),
    }
}

fn description(raw: Option<&str>, webhook: bool) -> Result<String, ApiError> {
    let d = raw.unwrap_or_default().trim().to_string();
    if webhook && d.is_empty() {
        return Err(ApiError::invalid_field(
            "description",
            "is required for webhook tools (it tells the model when to use the tool)",
        ));
    }
    if d.chars().count() > DESCRIPTION_MAX {
        return Err(ApiError::invalid_field(
            "description",
            format!("must be at most {DESCRIPTION_MAX} characters"),
        ));
    }
    Ok(d)
}

/// A type's config, validated (webhook) or checked to be an object (function).
async fn config_for(state: &AppState, tool_type: &str, config: &Value) -> Result<Value, ApiError> {
    if tool_type == "webhook" {
        let config = webhooks::webhook_config(&state.egress, config).await?;
        Ok(config.to_json().map_err(anyhow::Error::from)?)
    } else if config.is_object() {
        Ok(config.clone())
    } else {
        Err(ApiError::invalid_field("config", "must be an object"))
    }
}

/// Create a tool (a repeated idempotency_key with the same body returns the first tool)
#[utoipa::path(post, path = "/tools", operation_id = "createTool", tag = "tools", security(("bearer" = ["tools:create"])),
    request_body = ToolCreate,
    responses((status = 201, body = Tool), (status = 200, body = Tool, description = "The first tool of a repeated idempotency_key"), (status = 400)))]
async fn create(
    State(state): State<AppState>,
    auth: Auth,
    JsonObject(mut body): JsonObject,
) -> Result<(StatusCode, Json<Tool>), ApiError> {
    check_fields(&body, CREATE_FIELDS)?;
    let request_hash = request_hash(&body);
    let tool_type = str_field(&body, "type")?.unwrap_or("webhook").to_string();
    if tool_type != "webhook" && tool_type != "function" {
        return Err(ApiError::invalid_field(
            "type",
            "must be webhook or function",
        ));
    }
    let name = str_field(&body, "name")?.ok_or_else(|| ApiError::missing_field("name"))?;
    let name = webhooks::tool_name("name", name)?;
    let description = description(str_field(&body, "description")?, tool_type == "webhook")?;
    let idempotency_key = str_field(&body, "idempotency_key")?.map(str::to_string);
    if idempotency_key
        .as_ref()
        .is_some_and(|k| k.is_empty() || k.chars().count() > IDEMPOTENCY_KEY_MAX)
    {
        return Err(ApiError::invalid_field(
            "idempotency_key",
            format!("must be 1-{IDEMPOTENCY_KEY_MAX} characters"),
        ));
    }
    let mut config = match body.remove("config") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(c) => c,
    };
    // Payload settings sent beside config move into config.payload_config.
    for key in MIGRATED {
        if let Some(v) = body.remove(key) {
            if tool_type != "webhook" {
                return Err(ApiError::invalid_field(
                    key,
                    "only webhook tools have payload settings",
                ));
            }
            let Some(obj) = config.as_object_mut() else {
                return Err(ApiError::invalid_field("config", "must be an object"));
            };
            let pc = obj
                .entry("payload_config")
                .or_insert_with(|| Value::Object(Map::new()));
            let Some(pc) = pc.as_object_mut() else {
                return Err(ApiError::invalid_field(
                    "config.payload_config",
                    "must be an object",
                ));
            };
            if pc.contains_key(key) {
                return Err(ApiError::invalid_field(
                    key,
                    "also set in config.payload_config; send it once",
                ));
            }
            pc.insert(key.to_string(), v);
        }
    }
    let config = config_for(&state, &tool_type, &config).await?;
    let new = NewTool {
        name,
        description,
        tool_type,
        config,
        idempotency_key,
        request_hash: Some(request_hash.clone()),
    };
    match state.store.create_tool(auth.workspace_id, &new).await? {
        ToolInsert::Created(tool) => Ok((StatusCode::CREATED, Json(tool))),
        ToolInsert::Replayed {
            tool,
            request_hash: first,
        } => replayed(tool, first.as_deref(), &request_hash),
    }
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ToolQuery {
    /// Only the tools attached to this agent, in execution order (items then carry
    /// execution_order and config_override).
    agent_id: Option<uuid::Uuid>,
    /// 1-100 (default 50).
    #[param(minimum = 1, maximum = 100)]
    limit: Option<i64>,
    #[param(minimum = 0)]
    offset: Option<i64>,
}

/// List tools
#[utoipa::path(get, path = "/tools", operation_id = "listTools", tag = "tools", security(("bearer" = ["tools:read"])),
    params(ToolQuery), responses((status = 200, body = ListResponse<Tool>), (status = 400), (status = 404, description = "`agent_id` names no agent of the workspace")))]
async fn list(
    State(state): State<AppState>,
    auth: Auth,
    Q(q): Q<ToolQuery>,
) -> Result<Json<ListResponse<Tool>>, ApiError> {
    let page = Pagination {
        limit: q.limit,
        offset: q.offset,
    }
    .page()?;
    let agent = q.agent_id.map(AgentId::from_uuid);
    if let Some(agent) = agent
        && state.store.agent(auth.workspace_id, agent).await?.is_none()
    {
        return Err(ApiError::not_found("Agent"));
    }
    Ok(Json(ListResponse::new(
        state
            .store
            .list_tools(auth.workspace_id, agent, page)
            .await?,
        page,
    )))
}

/// Get a tool
#[utoipa::path(get, path = "/tools/{id}", operation_id = "getTool", tag = "tools", security(("bearer" = ["tools:read"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = Tool), (status = 404)))]
async fn get_one(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<Tool>, ApiError> {
    state
        .store
        .tool(auth.workspace_id, ToolId::from_uuid(id))
        .await?
        .map(Json)
        .ok_or(ApiError::not_found("Tool"))
}

/// Update a tool (config, when sent, is the complete configuration)
#[utoipa::path(patch, path = "/tools/{id}", operation_id = "updateTool", tag = "tools", security(("bearer" = ["tools:update"])),
    params(("id" = uuid::Uuid, Path)), request_body = ToolPatch,
    responses((status = 200, body = Tool), (status = 400), (status = 404)))]
async fn update(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    JsonObject(body): JsonObject,
) -> Result<Json<Tool>, ApiError> {
    check_fields(&body, UPDATE_FIELDS)?;
    if body.is_empty() {
        return Err(ApiError::bad_request(format!(
            "No writable field sent; writable fields: {}",
            UPDATE_FIELDS.join(", ")
        )));
    }
    let ws = auth.workspace_id;
    let id = ToolId::from_uuid(id);
    let tool = state
        .store
        .tool(ws, id)
        .await?
        .ok_or(ApiError::not_found("Tool"))?;
    let webhook = tool.tool_type == "webhook";
    let mut change = ToolUpdate::default();
    if let Some(name) = str_field(&body, "name")? {
        change.name = Some(webhooks::tool_name("name", name)?);
    } else if body.contains_key("name") {
        return Err(ApiError::invalid_field("name", "must be a string"));
    }
    if body.contains_key("description") {
        change.description = Some(description(str_field(&body, "description")?, webhook)?);
    }
    if let Some(config) = body.get("config") {
        change.config = Some(config_for(&state, &tool.tool_type, config).await?);
    }
    match body.get("is_active") {
        None => {}
        Some(Value::Bool(b)) => change.is_active = Some(*b),
        Some(_) => {
            return Err(ApiError::invalid_field("is_active", "must be a boolean"));
        }
    }
    state
        .store
        .update_tool(ws, id, &change)
        .await?
        .map(Json)
        .ok_or(ApiError::not_found("Tool"))
}

/// Deactivate a tool (soft delete)
#[utoipa::path(delete, path = "/tools/{id}", operation_id = "deactivateTool", tag = "tools", security(("bearer" = ["tools:update"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, description = "{success: true, id, is_active: false}"), (status = 404)))]
async fn deactivate(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<Value>, ApiError> {
    let change = ToolUpdate {
        is_active: Some(false),
        ..Default::default()
    };
    state
        .store
        .update_tool(auth.workspace_id, ToolId::from_uuid(id), &change)
        .await?
        .ok_or(ApiError::not_found("Tool"))?;
    Ok(Json(json!({"success": true, "id": id, "is_active": false})))
}

body_schema!(
    /// The body of `PUT /agents/{id}/tools/{tool_id}`.
    AttachmentBody = create_body(Attachment, &[])
);

#[derive(Deserialize, ToSchema)]
pub struct Attachment {
    /// Order among the agent's tools (0-1000, default 0; lower runs first).
    #[schema(minimum = 0, maximum = 1000)]
    execution_order: Option<i64>,
    /// Settings this agent overrides (an object).
    #[schema(value_type = Option<Object>)]
    config_override: Option<Value>,
}

/// Attach a tool to an agent (or change its order and override)
#[utoipa::path(put, path = "/agents/{id}/tools/{tool_id}", operation_id = "attachAgentTool", tag = "tools", security(("bearer" = ["tools:update"])),
    params(("id" = uuid::Uuid, Path), ("tool_id" = uuid::Uuid, Path)), request_body(content = Option<AttachmentBody>, description = "Optional: no body attaches with the defaults"),
    responses((status = 200, body = Tool), (status = 400), (status = 404)))]
async fn attach(
    State(state): State<AppState>,
    auth: Auth,
    PathIds(agent, tool): PathIds,
    OptionalJsonObject(body): OptionalJsonObject,
) -> Result<Json<Tool>, ApiError> {
    let body = body.unwrap_or_default();
    check_fields(&body, &["execution_order", "config_override"])?;
    let input: Attachment = super::extract::from_value(Value::Object(body))?;
    let order = input.execution_order.unwrap_or(0);
    if !(0..=1000).contains(&order) {
        return Err(ApiError::invalid_field(
            "execution_order",
            "must be from 0 to 1000",
        ));
    }
    let config_override = match input.config_override {
        None | Some(Value::Null) => None,
        Some(v @ Value::Object(_)) => Some(v),
        Some(_) => {
            return Err(ApiError::invalid_field(
                "config_override",
                "must be an object",
            ));
        }
    };
    let (ws, agent, tool) = (
        auth.workspace_id,
        AgentId::from_uuid(agent),
        ToolId::from_uuid(tool),
    );
    if !state
        .store
        .attach_tool(ws, agent, tool, order, config_override.as_ref())
        .await?
    {
        return Err(ApiError::not_found("Agent or tool"));
    }
    let mut found = state
        .store
        .tool(ws, tool)
        .await?
        .ok_or(ApiError::not_found("Tool"))?;
    found.execution_order = Some(order);
    found.config_override = config_override;
    Ok(Json(found))
}

/// Detach a tool from an agent
#[utoipa::path(delete, path = "/agents/{id}/tools/{tool_id}", operation_id = "detachAgentTool", tag = "tools", security(("bearer" = ["tools:update"])),
    params(("id" = uuid::Uuid, Path), ("tool_id" = uuid::Uuid, Path)),
    responses((status = 200, description = "{success: true, id}"), (status = 404)))]
async fn detach(
    State(state): State<AppState>,
    auth: Auth,
    PathIds(agent, tool): PathIds,
) -> Result<Json<Value>, ApiError> {
    let removed = state
        .store
        .detach_tool(
            auth.workspace_id,
            AgentId::from_uuid(agent),
            ToolId::from_uuid(tool),
        )
        .await?;
    super::extract::deleted(removed, tool, "Attachment")
}
