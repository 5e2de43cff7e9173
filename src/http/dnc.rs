//! The do-not-call list: add, list, look up by number, get, update, remove.
//!
//! Numbers are accepted in any common format and read in the workspace's default country, so
//! `050-123-4567` and `+972 50 123 4567` are the same entry. An entry whose `expires_at` has
//! passed counts as absent: the number lookup and the list leave it out, and adding the number
//! again replaces it. It can still be read, changed or removed by its id.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use switchboard_actors::ids::DncEntryId;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{JsonObject, ListResponse, Pagination, PathId, Q};
use super::openapi::body_schema;
use super::state::AppState;
use crate::app::auth::Auth;
use crate::app::dnc::*;
use crate::store::DncEntry;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(get_one, update, delete))
}

body_schema!(
    /// The body of `POST /do-not-call`.
    DncCreate = create_body(DncInput, &["phone_number"])
);
body_schema!(
    /// The body of `PATCH /do-not-call/{id}`.
    DncPatch = patch_body(DncInput, UPDATE_FIELDS)
);

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DncQuery {
    /// Look up one number (any common format); answers the entry itself, or 404.
    phone: Option<String>,
    /// Items per page, 1-100 (default 50).
    #[param(minimum = 1, maximum = 100)]
    limit: Option<i64>,
    /// Items to skip (default 0).
    #[param(minimum = 0)]
    offset: Option<i64>,
}

/// List the do-not-call list, or look up one number
#[utoipa::path(get, path = "/do-not-call", operation_id = "listDoNotCallEntries", tag = "do-not-call", security(("bearer" = ["do_not_call:read"])),
    params(DncQuery),
    responses(
        (status = 200, description = "Without `phone`: `{data, pagination}`, most recently added first. With `phone`: the entry itself.", body = ListResponse<DncEntry>),
        (status = 400, description = "Bad query or unreadable phone number"),
        (status = 404, description = "With `phone`: the number is not on the list")))]
async fn list(
    State(state): State<AppState>,
    auth: Auth,
    Q(query): Q<DncQuery>,
) -> Result<Response, ApiError> {
    if let Some(phone) = query.phone.as_deref() {
        let number = parse_number(&state, &auth, phone, NumberIn::Query("phone")).await?;
        let found = state
            .store
            .dnc_entry_for_number(auth.workspace_id, &number, state.store.now())
            .await?;
        return found
            .map(|e| Json(e).into_response())
            .ok_or(ApiError::not_found("Do-not-call entry"));
    }
    let page = Pagination {
        limit: query.limit,
        offset: query.offset,
    }
    .page()?;
    let paged = state
        .store
        .list_dnc_entries(auth.workspace_id, state.store.now(), page)
        .await?;
    Ok(Json(ListResponse::new(paged, page)).into_response())
}

/// Get a do-not-call entry
#[utoipa::path(get, path = "/do-not-call/{id}", operation_id = "getDoNotCallEntry", tag = "do-not-call", security(("bearer" = ["do_not_call:read"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = DncEntry), (status = 404)))]
async fn get_one(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<DncEntry>, ApiError> {
    let found = state
        .store
        .dnc_entry(auth.workspace_id, DncEntryId::from_uuid(id))
        .await?;
    found
        .map(Json)
        .ok_or(ApiError::not_found("Do-not-call entry"))
}

/// Add a number to the do-not-call list
#[utoipa::path(post, path = "/do-not-call", operation_id = "createDoNotCallEntry", tag = "do-not-call", security(("bearer" = ["do_not_call:manage"])),
    request_body = DncCreate,
    responses((status = 201, body = DncEntry), (status = 400), (status = 409, description = "The number is already on the list")))]
async fn create(
    State(state): State<AppState>,
    auth: Auth,
    JsonObject(body): JsonObject,
) -> Result<(StatusCode, Json<DncEntry>), ApiError> {
    Ok((
        StatusCode::CREATED,
        Json(crate::app::dnc::create(&state, &auth, body).await?),
    ))
}

/// Update a do-not-call entry
#[utoipa::path(patch, path = "/do-not-call/{id}", operation_id = "updateDoNotCallEntry", tag = "do-not-call", security(("bearer" = ["do_not_call:manage"])),
    params(("id" = uuid::Uuid, Path)), request_body = DncPatch,
    responses((status = 200, body = DncEntry), (status = 400), (status = 404)))]
async fn update(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    JsonObject(body): JsonObject,
) -> Result<Json<DncEntry>, ApiError> {
    Ok(Json(
        crate::app::dnc::update(&state, &auth, id, body).await?,
    ))
}

/// Remove a number from the do-not-call list
#[utoipa::path(delete, path = "/do-not-call/{id}", operation_id = "deleteDoNotCallEntry", tag = "do-not-call", security(("bearer" = ["do_not_call:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, description = "{success: true, id}"), (status = 404)))]
async fn delete(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<serde_json::Value>, ApiError> {
    Ok(Json(crate::app::dnc::delete(&state, &auth, id).await?))
}
