//! Dispositions: `GET /dispositions` ordered by position, get, create, update, delete.
//! Protected dispositions cannot be deleted.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use switchboard_actors::ids::DispositionId;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{Data, JsonObject, PathId, parse_fields};
use super::openapi::body_schema;
use super::state::AppState;
use crate::app::auth::Auth;
use crate::store::{DeleteOutcome, Disposition};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(get_one, update, delete))
}

const WRITABLE: &[&str] = &["label", "description", "color", "position"];

/// Longest description, in characters.
const DESCRIPTION_MAX: usize = 500;

#[derive(Deserialize, ToSchema)]
pub struct DispositionInput {
    /// 1-64 characters, unique in the workspace. It is trimmed and must contain a
    /// non-whitespace character, whitespace being Unicode White_Space as Rust's
    /// `char::is_whitespace` counts it, U+0085 included: a label made only of such characters
    /// is refused even though it matches the pattern.
    #[schema(min_length = 1, max_length = 64, pattern = r"\S")]
    label: Option<String>,
    /// What the disposition means, at most 500 characters (default empty). The end-of-call
    /// analysis reads it when it chooses a call's disposition.
    #[schema(max_length = 500)]
    description: Option<String>,
    /// Hex color `#rrggbb` (default `#6b7280`).
    #[schema(pattern = "^#[0-9a-fA-F]{6}$")]
    color: Option<String>,
    /// Sort position, 0-10000; new dispositions go last when omitted.
    #[schema(minimum = 0, maximum = 10000)]
    position: Option<i64>,
}

body_schema!(
    /// The body of `POST /dispositions`.
    DispositionCreate = create_body(DispositionInput, &["label"])
);
body_schema!(
    /// The body of `PATCH /dispositions/{id}`.
    DispositionPatch = patch_body(DispositionInput, WRITABLE)
);

fn check_label(label: &str) -> Result<String, ApiError> {
    let label = label.trim();
    if label.is_empty() || label.chars().count() > 64 {
        return Err(ApiError::invalid_field("label", "must be 1-64 characters"));
    }
    Ok(label.to_owned())
}

fn check_description(description: &str) -> Result<String, ApiError> {
    let description = description.trim();
    if description.chars().count() > DESCRIPTION_MAX {
        return Err(ApiError::invalid_field(
            "description",
            format!("must be at most {DESCRIPTION_MAX} characters"),
        ));
    }
    Ok(description.to_owned())
}

fn check_color(color: &str) -> Result<String, ApiError> {
    let ok = color.len() == 7
        && color.starts_with('#')
        && color[1..].bytes().all(|b| b.is_ascii_hexdigit());
    if !ok {
        return Err(ApiError::invalid_field(
            "color",
            "must be a hex color like #1a2b3c",
        ));
    }
    Ok(color.to_ascii_lowercase())
}

fn check_position(position: i64) -> Result<i64, ApiError> {
    if !(0..=10_000).contains(&position) {
        return Err(ApiError::invalid_field(
            "position",
            "must be an integer from 0 to 10000",
        ));
    }
    Ok(position)
}

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
    let input: DispositionInput = parse_fields(body, WRITABLE)?;
    let label = check_label(
        input
            .label
            .as_deref()
            .ok_or_else(|| ApiError::missing_field("label"))?,
    )?;
    let description = check_description(input.description.as_deref().unwrap_or(""))?;
    let color = check_color(input.color.as_deref().unwrap_or("#6b7280"))?;
    let position = input.position.map(check_position).transpose()?;
    let created = state
        .store
        .create_disposition(auth.workspace_id, &label, &description, &color, position)
        .await?;
    Ok((axum::http::StatusCode::CREATED, Json(created)))
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
    if body.is_empty() {
        return Err(ApiError::bad_request(format!(
            "No writable field given. Writable fields: {}",
            WRITABLE.join(", ")
        )));
    }
    let input: DispositionInput = parse_fields(body, WRITABLE)?;
    let label = input.label.as_deref().map(check_label).transpose()?;
    let description = input
        .description
        .as_deref()
        .map(check_description)
        .transpose()?;
    let color = input.color.as_deref().map(check_color).transpose()?;
    let position = input.position.map(check_position).transpose()?;
    let updated = state
        .store
        .update_disposition(
            auth.workspace_id,
            DispositionId::from_uuid(id),
            label.as_deref(),
            description.as_deref(),
            color.as_deref(),
            position,
        )
        .await?;
    updated.map(Json).ok_or(ApiError::not_found("Disposition"))
}

/// Delete a disposition (protected ones cannot be deleted)
#[utoipa::path(delete, path = "/dispositions/{id}", operation_id = "deleteDisposition", tag = "dispositions", security(("bearer" = ["dispositions:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, description = "{success: true, id}"), (status = 400), (status = 404)))]
async fn delete(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<serde_json::Value>, ApiError> {
    match state
        .store
        .delete_disposition(auth.workspace_id, DispositionId::from_uuid(id))
        .await?
    {
        DeleteOutcome::Deleted => Ok(Json(serde_json::json!({"success": true, "id": id}))),
        DeleteOutcome::NotFound => Err(ApiError::not_found("Disposition")),
        DeleteOutcome::Protected => Err(ApiError::bad_request(
            "This disposition is protected and cannot be deleted",
        )),
    }
}
