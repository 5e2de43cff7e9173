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
use chrono::{DateTime, SubsecRound, Utc};
use serde::Deserialize;
use switchboard_actors::ids::{AgentId, DncEntryId};
use switchboard_actors::phone::PhoneNumber;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{JsonObject, ListResponse, Pagination, Patch, PathId, Q, parse_fields};
use super::openapi::body_schema;
use super::state::AppState;
use crate::app::auth::Auth;
use crate::store::{DncEntry, DncUpdate, NewDncEntry};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(get_one, update, delete))
}

const CREATE_FIELDS: &[&str] = &["phone_number", "reason", "expires_at", "agent_ids"];
const UPDATE_FIELDS: &[&str] = &["reason", "expires_at", "agent_ids"];
const MAX_REASON_CHARS: usize = 500;

#[derive(Deserialize, ToSchema)]
pub struct DncInput {
    /// The number in any common format; national forms are read in the workspace's country.
    /// Required when adding; cannot be changed afterwards.
    phone_number: Option<String>,
    /// Why the number must not be called (up to 500 characters).
    #[schema(max_length = 500)]
    reason: Option<String>,
    /// When the entry stops applying (must be in the future); null or omitted for never.
    #[serde(default)]
    #[schema(value_type = Option<DateTime<Utc>>)]
    expires_at: Patch<DateTime<Utc>>,
    /// Agents of the workspace the entry applies to; empty or omitted for every agent.
    #[schema(value_type = Option<Vec<uuid::Uuid>>)]
    agent_ids: Option<Vec<uuid::Uuid>>,
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

fn check_reason(reason: &str) -> Result<String, ApiError> {
    let reason = reason.trim();
    if reason.chars().count() > MAX_REASON_CHARS {
        return Err(ApiError::invalid_field(
            "reason",
            format!("must be at most {MAX_REASON_CHARS} characters"),
        ));
    }
    Ok(reason.to_owned())
}

fn check_expiry(expires_at: DateTime<Utc>, now: DateTime<Utc>) -> Result<DateTime<Utc>, ApiError> {
    let expires_at = expires_at.trunc_subsecs(6);
    if expires_at <= now {
        return Err(ApiError::invalid_field(
            "expires_at",
            "must be in the future",
        ));
    }
    Ok(expires_at)
}

/// Where a phone number to parse was sent, for the refusal's wording.
pub(super) enum NumberIn {
    /// A body field.
    Field(&'static str),
    /// A query parameter.
    Query(&'static str),
}

/// A phone number in any common form, read in the workspace's default country; the E.164 form.
pub(super) async fn parse_number(
    state: &AppState,
    auth: &Auth,
    input: &str,
    sent_in: NumberIn,
) -> Result<String, ApiError> {
    let country = state.store.default_country(auth.workspace_id).await?;
    PhoneNumber::parse(input, country)
        .map(|n| n.as_str().to_owned())
        .map_err(|err| match sent_in {
            NumberIn::Field(field) => ApiError::invalid_field(field, err.to_string()),
            NumberIn::Query(name) => {
                ApiError::bad_request(format!("Invalid query parameter `{name}`: {err}"))
            }
        })
}

/// Agent ids, deduplicated, all of which must be agents of the workspace.
async fn check_agents(
    state: &AppState,
    auth: &Auth,
    ids: Vec<uuid::Uuid>,
) -> Result<Vec<AgentId>, ApiError> {
    let mut agents: Vec<AgentId> = Vec::with_capacity(ids.len());
    for id in ids.into_iter().map(AgentId::from_uuid) {
        if !agents.contains(&id) {
            agents.push(id);
        }
    }
    let unknown = state
        .store
        .dnc_unknown_agents(auth.workspace_id, &agents)
        .await?;
    if let Some(first) = unknown.first() {
        return Err(ApiError::invalid_field(
            "agent_ids",
            format!("{first} is not an agent of this workspace"),
        ));
    }
    Ok(agents)
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
    let input: DncInput = parse_fields(body, CREATE_FIELDS)?;
    let raw = input
        .phone_number
        .as_deref()
        .ok_or_else(|| ApiError::missing_field("phone_number"))?;
    let number = parse_number(&state, &auth, raw, NumberIn::Field("phone_number")).await?;
    let reason = input
        .reason
        .as_deref()
        .map(check_reason)
        .transpose()?
        .unwrap_or_default();
    let expires_at = match input.expires_at {
        Patch::Value(at) => Some(check_expiry(at, state.store.now())?),
        Patch::Absent | Patch::Null => None,
    };
    let agent_ids = check_agents(&state, &auth, input.agent_ids.unwrap_or_default()).await?;
    let new = NewDncEntry {
        phone_number: &number,
        reason: &reason,
        source: "api",
        expires_at,
        agent_ids: &agent_ids,
        created_by: Some(auth.key_id),
    };
    let created = state
        .store
        .create_dnc_entry(auth.workspace_id, &new)
        .await?;
    Ok((StatusCode::CREATED, Json(created)))
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
    let id = DncEntryId::from_uuid(id);
    if body.is_empty() {
        return Err(ApiError::bad_request(format!(
            "No writable field given. Writable fields: {}",
            UPDATE_FIELDS.join(", ")
        )));
    }
    let input: DncInput = parse_fields(body, UPDATE_FIELDS)?;
    // Another workspace's id reads as missing before anything about the body is checked.
    if state
        .store
        .dnc_entry(auth.workspace_id, id)
        .await?
        .is_none()
    {
        return Err(ApiError::not_found("Do-not-call entry"));
    }
    let reason = input.reason.as_deref().map(check_reason).transpose()?;
    let expires_at = match input.expires_at {
        Patch::Absent => None,
        Patch::Null => Some(None),
        Patch::Value(at) => Some(Some(check_expiry(at, state.store.now())?)),
    };
    let agent_ids = match input.agent_ids {
        Some(ids) => Some(check_agents(&state, &auth, ids).await?),
        None => None,
    };
    let change = DncUpdate {
        reason: reason.as_deref(),
        expires_at,
        agent_ids: agent_ids.as_deref(),
    };
    let updated = state
        .store
        .update_dnc_entry(auth.workspace_id, id, &change)
        .await?;
    updated
        .map(Json)
        .ok_or(ApiError::not_found("Do-not-call entry"))
}

/// Remove a number from the do-not-call list
#[utoipa::path(delete, path = "/do-not-call/{id}", operation_id = "deleteDoNotCallEntry", tag = "do-not-call", security(("bearer" = ["do_not_call:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, description = "{success: true, id}"), (status = 404)))]
async fn delete(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<serde_json::Value>, ApiError> {
    let removed = state
        .store
        .delete_dnc_entry(auth.workspace_id, DncEntryId::from_uuid(id))
        .await?;
    super::extract::deleted(removed, id, "Do-not-call entry")
}
