//! Integrations (list and disconnect; connecting is the operator's `switchboard integration
//! connect`) and the saved versions of a flow agent's flow.

use axum::Json;
use axum::extract::State;
use serde_json::Value;
use switchboard_actors::ids::AgentId;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{Data, PathId};
use super::state::AppState;
use crate::app::auth::Auth;
#[allow(unused_imports)]
use crate::app::integrations::*;
use crate::store::{FlowVersion, Integration};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(disconnect))
        .routes(routes!(flow_versions))
}

/// List the workspace's integrations
#[utoipa::path(get, path = "/integrations", operation_id = "listIntegrations", tag = "integrations", security(("bearer" = ["integrations:read"])),
    responses((status = 200, body = Data<Vec<Integration>>)))]
async fn list(
    State(state): State<AppState>,
    auth: Auth,
) -> Result<Json<Data<Vec<Integration>>>, ApiError> {
    Ok(Json(Data {
        data: state.store.list_integrations(auth.workspace_id).await?,
    }))
}

/// Disconnect an integration (flows using it fail validation at their next save)
#[utoipa::path(delete, path = "/integrations/{id}", operation_id = "disconnectIntegration", tag = "integrations", security(("bearer" = ["integrations:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, description = "{success: true, id, status: disconnected}"), (status = 404)))]
async fn disconnect(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(
        crate::app::integrations::disconnect(&state, &auth, id).await?,
    ))
}

/// The saved versions of an agent's flow, newest first
#[utoipa::path(get, path = "/agents/{id}/flow/versions", operation_id = "listAgentFlowVersions", tag = "agents", security(("bearer" = ["flows:read"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = Data<Vec<FlowVersion>>), (status = 404)))]
async fn flow_versions(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<Data<Vec<FlowVersion>>>, ApiError> {
    let agent = AgentId::from_uuid(id);
    if state.store.agent(auth.workspace_id, agent).await?.is_none() {
        return Err(ApiError::not_found("Agent"));
    }
    Ok(Json(Data {
        data: state.store.flow_versions(auth.workspace_id, agent).await?,
    }))
}
