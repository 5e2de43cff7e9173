//! Campaigns created (always `draft`), listed (archived hidden) and read.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use switchboard_actors::campaign::CampaignStatus;
use switchboard_actors::ids::CampaignId;
use utoipa::IntoParams;

use crate::app::auth::Auth;
use crate::http::error::ApiError;
use crate::http::extract::{JsonObject, ListResponse, Pagination, PathId, Q};
use crate::http::state::AppState;

use crate::app::campaigns::patch::create_campaign;
use crate::app::campaigns::view::{CampaignView, NOT_FOUND, view, views};

/// Create a campaign (always `draft`)
#[utoipa::path(post, path = "/campaigns", operation_id = "createCampaign", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    request_body = super::patch::CampaignCreate,
    responses((status = 201, body = CampaignView), (status = 400), (status = 409)))]
pub async fn create(
    State(state): State<AppState>,
    auth: Auth,
    JsonObject(body): JsonObject,
) -> Result<(StatusCode, Json<CampaignView>), ApiError> {
    Ok((
        StatusCode::CREATED,
        Json(create_campaign(&state, &auth, &body).await?),
    ))
}

fn listable_status_schema() -> utoipa::openapi::schema::Object {
    crate::http::extract::one_of(
        CampaignStatus::ALL
            .into_iter()
            .filter(|s| *s != CampaignStatus::Archived)
            .map(CampaignStatus::as_str),
    )
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only campaigns in this status (archived campaigns are never listed).
    #[param(schema_with = listable_status_schema)]
    status: Option<String>,
    #[param(minimum = 1, maximum = 100)]
    limit: Option<i64>,
    #[param(minimum = 0)]
    offset: Option<i64>,
}

/// List campaigns (archived ones are hidden)
#[utoipa::path(get, path = "/campaigns", operation_id = "listCampaigns", tag = "campaigns", security(("bearer" = ["campaigns:manage"])), params(ListQuery),
    responses((status = 200, body = ListResponse<CampaignView>)))]
pub async fn list(
    State(state): State<AppState>,
    auth: Auth,
    Q(query): Q<ListQuery>,
) -> Result<Json<ListResponse<CampaignView>>, ApiError> {
    let page = Pagination {
        limit: query.limit,
        offset: query.offset,
    }
    .page()?;
    let status = match query.status.as_deref() {
        None => None,
        Some(s) => Some(
            CampaignStatus::parse(s)
                .filter(|s| *s != CampaignStatus::Archived)
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "Invalid query parameter `status`: `{s}` is not a listable campaign status"
                    ))
                })?,
        ),
    };
    let paged = state
        .store
        .list_campaigns(auth.workspace_id, status, page)
        .await?;
    let items = views(&state, auth.workspace_id, paged.items).await?;
    Ok(Json(ListResponse::new(
        crate::store::Paged {
            items,
            total: paged.total,
        },
        page,
    )))
}

/// Get a campaign
#[utoipa::path(get, path = "/campaigns/{id}", operation_id = "getCampaign", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = CampaignView), (status = 404)))]
pub async fn get_one(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<CampaignView>, ApiError> {
    let c = state
        .store
        .campaign(auth.workspace_id, CampaignId::from_uuid(id))
        .await?
        .ok_or(NOT_FOUND)?;
    Ok(Json(view(&state, auth.workspace_id, c).await?))
}
