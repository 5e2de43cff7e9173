//! SIP endpoints: `sip:<slug>@host` addresses that route inbound calls to an agent. The slug is
//! the caller's only credential, so it carries 24 random characters; deleting an endpoint is
//! the only way to rotate it.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use switchboard_actors::ids::SipEndpointId;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{Data, JsonObject, ListResponse, Pagination, PathId, Q};
use super::openapi::{body_schema, create_body, patch_body, schema_json, with_bounds};
use super::state::AppState;
use crate::app::auth::Auth;
use crate::app::sip_endpoints::*;
use crate::store::Paged;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(get_one, update, delete))
}

body_schema!(
    /// The body of `POST /sip-endpoints`.
    SipEndpointCreate = json(with_sources(create_body(CreateInput::schema(), &["name"])))
);
body_schema!(
    /// The body of `PATCH /sip-endpoints/{id}`.
    SipEndpointPatch = json(with_sources(patch_body(UpdateInput::schema(), UPDATE_FIELDS)))
);

/// A body schema with the bounds of `allowed_source_ips` that [`check_sources`] checks.
fn with_sources(
    body: utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
) -> serde_json::Value {
    with_bounds(
        schema_json(&body),
        serde_json::json!({"allowed_source_ips": {"minItems": 1, "maxItems": SOURCES_MAX}}),
    )
}

/// List SIP endpoints, oldest first
#[utoipa::path(get, path = "/sip-endpoints", operation_id = "listSipEndpoints", tag = "sip-endpoints", security(("bearer" = ["phone_numbers:search"])),
    params(Pagination), responses((status = 200, body = ListResponse<SipEndpointView>)))]
async fn list(
    State(state): State<AppState>,
    auth: Auth,
    Q(pagination): Q<Pagination>,
) -> Result<Json<ListResponse<SipEndpointView>>, ApiError> {
    let page = pagination.page()?;
    let paged = state
        .store
        .list_sip_endpoints(auth.workspace_id, page)
        .await?;
    let paged = Paged {
        items: paged.items.into_iter().map(|e| view(&state, e)).collect(),
        total: paged.total,
    };
    Ok(Json(ListResponse::new(paged, page)))
}

/// Get a SIP endpoint
#[utoipa::path(get, path = "/sip-endpoints/{id}", operation_id = "getSipEndpoint", tag = "sip-endpoints", security(("bearer" = ["phone_numbers:search"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = Data<SipEndpointView>), (status = 404)))]
async fn get_one(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<Data<SipEndpointView>>, ApiError> {
    let found = state
        .store
        .sip_endpoint(auth.workspace_id, SipEndpointId::from_uuid(id))
        .await?
        .ok_or(ApiError::not_found("SIP endpoint"))?;
    Ok(Json(Data {
        data: view(&state, found),
    }))
}

/// Create a SIP endpoint (at most 20 per workspace per day)
#[utoipa::path(post, path = "/sip-endpoints", operation_id = "createSipEndpoint", tag = "sip-endpoints", security(("bearer" = ["phone_numbers:configure"])),
    request_body = SipEndpointCreate, responses((status = 201, body = Data<SipEndpointView>), (status = 400), (status = 429)))]
async fn create(
    State(state): State<AppState>,
    auth: Auth,
    JsonObject(body): JsonObject,
) -> Result<(StatusCode, Json<Data<SipEndpointView>>), ApiError> {
    Ok((
        StatusCode::CREATED,
        Json(Data {
            data: create_endpoint(&state, &auth, body).await?,
        }),
    ))
}

/// Update a SIP endpoint
#[utoipa::path(patch, path = "/sip-endpoints/{id}", operation_id = "updateSipEndpoint", tag = "sip-endpoints", security(("bearer" = ["phone_numbers:configure"])),
    params(("id" = uuid::Uuid, Path)), request_body = SipEndpointPatch,
    responses((status = 200, body = Data<SipEndpointView>), (status = 400), (status = 404)))]
async fn update(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    JsonObject(body): JsonObject,
) -> Result<Json<Data<SipEndpointView>>, ApiError> {
    Ok(Json(Data {
        data: crate::app::sip_endpoints::update_endpoint(&state, &auth, id, body).await?,
    }))
}

/// Delete a SIP endpoint: its URI answers 404 at once (the way to rotate access)
#[utoipa::path(delete, path = "/sip-endpoints/{id}", operation_id = "deleteSipEndpoint", tag = "sip-endpoints", security(("bearer" = ["phone_numbers:configure"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, description = "{success: true, id}"), (status = 404)))]
async fn delete(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<serde_json::Value>, ApiError> {
    Ok(Json(
        crate::app::sip_endpoints::delete_endpoint(&state, &auth, id).await?,
    ))
}
