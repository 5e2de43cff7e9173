//! The campaign commands (launch, resume, pause, stop, DELETE = archive) through the spec's
//! transition table, with the launch preflight, and the audit events they leave.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use switchboard_actors::campaign::Command;
use switchboard_actors::ids::CampaignId;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::auth::Auth;
use crate::http::error::ApiError;
use crate::http::extract::{ListResponse, Pagination, PathId, Q};
use crate::http::state::AppState;
use crate::store::CampaignEvent;

use crate::app::campaigns::commands::command;
use crate::app::campaigns::view::{CampaignView, NOT_FOUND};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(archive))
        .routes(routes!(launch))
        .routes(routes!(resume))
        .routes(routes!(pause))
        .routes(routes!(stop))
        .routes(routes!(events))
}

/// Launch a campaign (preflight: active from-number, agent with a duration cap, reachable calling window)
#[utoipa::path(post, path = "/campaigns/{id}/launch", operation_id = "launchCampaign", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = CampaignView), (status = 400), (status = 404), (status = 422)))]
pub async fn launch(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<CampaignView>, ApiError> {
    Ok(Json(command(&state, &auth, id, Command::Launch).await?))
}

/// Resume a paused campaign (same preflight as launch)
#[utoipa::path(post, path = "/campaigns/{id}/resume", operation_id = "resumeCampaign", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = CampaignView), (status = 400), (status = 404), (status = 422)))]
pub async fn resume(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<CampaignView>, ApiError> {
    Ok(Json(command(&state, &auth, id, Command::Resume).await?))
}

/// Pause a campaign (never lifted automatically)
#[utoipa::path(post, path = "/campaigns/{id}/pause", operation_id = "pauseCampaign", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = CampaignView), (status = 400), (status = 404)))]
pub async fn pause(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<CampaignView>, ApiError> {
    Ok(Json(command(&state, &auth, id, Command::Pause).await?))
}

/// Stop a campaign for good (it stays readable)
#[utoipa::path(post, path = "/campaigns/{id}/stop", operation_id = "stopCampaign", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = CampaignView), (status = 400), (status = 404)))]
pub async fn stop(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<CampaignView>, ApiError> {
    Ok(Json(command(&state, &auth, id, Command::Stop).await?))
}

#[derive(Serialize, ToSchema)]
pub struct Archived {
    success: bool,
    id: uuid::Uuid,
    status: &'static str,
}

/// Archive a campaign (from any status; frees its name)
#[utoipa::path(delete, path = "/campaigns/{id}", operation_id = "archiveCampaign", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = Archived), (status = 404)))]
pub async fn archive(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<Archived>, ApiError> {
    command(&state, &auth, id, Command::Archive).await?;
    Ok(Json(Archived {
        success: true,
        id,
        status: "archived",
    }))
}

/// A campaign's audit events, oldest first
#[utoipa::path(get, path = "/campaigns/{id}/events", operation_id = "listCampaignEvents", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path), Pagination), responses((status = 200, body = ListResponse<CampaignEvent>), (status = 404)))]
pub async fn events(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    Q(p): Q<Pagination>,
) -> Result<Json<ListResponse<CampaignEvent>>, ApiError> {
    let page = p.page()?;
    let c = state
        .store
        .campaign(auth.workspace_id, CampaignId::from_uuid(id))
        .await?
        .ok_or(NOT_FOUND)?;
    Ok(Json(ListResponse::new(
        state
            .store
            .campaign_events(auth.workspace_id, c.id, page)
            .await?,
        page,
    )))
}
