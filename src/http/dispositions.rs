//! Dispositions: `GET /dispositions` ordered by position, get, create, update, delete.
//! Protected dispositions cannot be deleted.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use switchboard_actors::ids::DispositionId;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{Data, JsonObject, PathId};
use super::openapi::body_schema;
use super::state::AppState;
use crate::app::auth::Auth;
use crate::app::dispositions::{DispositionInput, WRITABLE};
use crate::store::Disposition;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(get_one, update, delete))
}

body_schema!(
    /// The body of `POST /dispositions`.
    DispositionCreate = create_body(DispositionInput, &["label"])
);
body_schema!(
    /// The body of `PATCH /dispositions/{id}`.
    DispositionPatch = patch_body(DispositionInput, WRITABLE)
);

/// List dispositions, ordered by position
#[utoipa::path(get, path = "/dispositions", operation_id = "listDispositions", tag = "dispositions", security(("bearer" = ["dispositions:read"])),
    responses((status = 200, body = Data<Vec<Disposition>>)))]
async fn list(
    State(state): State<AppState>,
    auth: Auth,
) -> Result<Json<Data<Vec<Disposition>>>, ApiError> {
    Ok(Json(Data {
        data: state.store.list_dispositions(auth.workspace_id).await?,
    }))
}

/// Get a disposition
#[utoipa::path(get, path = "/dispositions/{id}", operation_id = "getDisposition", tag = "dispositions", security(("bearer" = ["dispositions:read"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = Disposition), (status = 404)))]
async fn get_one(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<Disposition>, ApiError> {
    let found = state
        .store
        .disposition(auth.workspace_id, DispositionId::from_uuid(id))
        .await?;
    found.map(Json).ok_or(ApiError::not_found("Disposition"))
}

/// Create a disposition
#[utoipa::path(post, path = "/dispositions", operation_id = "createDisposition", tag = "dispositions", security(("bearer" = ["dispositions:manage"])),
    request_body = DispositionCreate, responses((status = 201, body = Disposition), (status = 400), (status = 409)))]
async fn create(
    State(state): State<AppState>,
    auth: Auth,
    JsonObject(body): JsonObject,
) -> Result<(axum::http::StatusCode, Json<Disposition>), ApiError> {
    Ok((
        StatusCode::CREATED,
        Json(crate::app::dispositions::create(&state, &auth, body).await?),
    ))
}

/// Update a disposition
#[utoipa::path(patch, path = "/dispositions/{id}", operation_id = "updateDisposition", tag = "dispositions", security(("bearer" = ["dispositions:manage"])),
    params(("id" = uuid::Uuid, Path)), request_body = DispositionPatch, responses((status = 200, body = Disposition), (status = 400), (status = 404), (status = 409)))]
async fn update(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    JsonObject(body): JsonObject,
) -> Result<Json<Disposition>, ApiError> {
    Ok(Json(
        crate::app::dispositions::update(&state, &auth, id, body).await?,
    ))
}

/// Delete a disposition (protected ones cannot be deleted)
#[utoipa::path(delete, path = "/dispositions/{id}", operation_id = "deleteDisposition", tag = "dispositions", security(("bearer" = ["dispositions:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, description = "{success: true, id}"), (status = 400), (status = 404)))]
async fn delete(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<serde_json::Value>, ApiError> {
    Ok(Json(
        crate::app::dispositions::delete(&state, &auth, id).await?,
    ))
}
