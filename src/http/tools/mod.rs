//! Tools: create (idempotent), list (all, or one agent's in execution order), get, update,
//! deactivate, attach to and detach from agents, and `POST /tools/{id}/test`, which delivers
//! one request with the production payload contract.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use switchboard_actors::ids::{AgentId, ToolId};
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{
    JsonObject, ListResponse, OptionalJsonObject, Pagination, PathId, PathIds, Q,
};
use super::openapi::body_schema;
use crate::app::auth::Auth;
use crate::edge::webhooks::{self, WebhookMethod};
use crate::http::state::AppState;
use crate::store::Tool;

mod schema;
mod test_delivery;

use crate::app::fields::Placed;
use crate::app::tools::*;

use schema::{ToolCreate, ToolPatch, ToolTestBody};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(get_one, update, deactivate))
        .merge(test_delivery::router())
        .routes(routes!(attach, detach))
}

/// Create a tool (a repeated idempotency_key with the same body returns the first tool)
#[utoipa::path(post, path = "/tools", operation_id = "createTool", tag = "tools", security(("bearer" = ["tools:create"])),
    request_body = ToolCreate,
    responses((status = 201, body = Tool), (status = 200, body = Tool, description = "The first tool of a repeated idempotency_key"), (status = 400)))]
async fn create(
    State(state): State<AppState>,
    auth: Auth,
    JsonObject(body): JsonObject,
) -> Result<(StatusCode, Json<Tool>), ApiError> {
    Ok(
        match crate::app::tools::create(&state, &auth, body).await? {
            Placed::Created(tool) => (StatusCode::CREATED, Json(tool)),
            Placed::Replayed(tool) => (StatusCode::OK, Json(tool)),
        },
    )
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
    Ok(Json(
        crate::app::tools::update(&state, &auth, id, body).await?,
    ))
}

/// Deactivate a tool (soft delete)
#[utoipa::path(delete, path = "/tools/{id}", operation_id = "deactivateTool", tag = "tools", security(("bearer" = ["tools:update"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, description = "{success: true, id, is_active: false}"), (status = 404)))]
async fn deactivate(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(
        crate::app::tools::deactivate(&state, &auth, id).await?,
    ))
}

body_schema!(
    /// The body of `PUT /agents/{id}/tools/{tool_id}`.
    AttachmentBody = create_body(Attachment, &[])
);

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
    Ok(Json(
        crate::app::tools::attach(&state, &auth, agent, tool, body).await?,
    ))
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
    Ok(Json(
        crate::app::tools::detach(&state, &auth, agent, tool).await?,
    ))
}
