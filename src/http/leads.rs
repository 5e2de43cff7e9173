//! Leads (list with filters, get, create, update, soft delete) and lead tags (CRUD, tagging
//! and untagging leads).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::Value;
use switchboard_actors::ids::{LeadId, LeadTagId};
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{Data, JsonObject, ListResponse, Pagination, PathId, PathIds, Q};
use super::openapi::body_schema;
use super::state::AppState;
use crate::app::auth::Auth;
use crate::app::dnc::{NumberIn, parse_number};
use crate::app::leads::*;
use crate::store::{Lead, LeadFilter, LeadTag};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(get_one, update, delete))
        .routes(routes!(tag))
        .routes(routes!(untag))
        .routes(routes!(list_tags, create_tag))
        .routes(routes!(get_tag, update_tag, delete_tag))
}

body_schema!(
    /// The body of `POST /leads`.
    LeadCreate = create_body(LeadInput, &["phone_number"])
);
body_schema!(
    /// The body of `PATCH /leads/{id}`.
    LeadPatch = patch_body(LeadInput, &LEAD_FIELDS[..8])
);

body_schema!(
    /// The body of `POST /lead-tags`.
    LeadTagCreate = create_body(LeadTagInput, &["name"])
);
body_schema!(
    /// The body of `PATCH /lead-tags/{id}`.
    LeadTagPatch = patch_body(LeadTagInput, TAG_FIELDS)
);

/// Create a lead
#[utoipa::path(post, path = "/leads", operation_id = "createLead", tag = "leads", security(("bearer" = ["leads:manage"])),
    request_body = LeadCreate, responses((status = 201, body = Lead), (status = 400), (status = 409, description = "A lead has this number")))]
async fn create(
    State(state): State<AppState>,
    auth: Auth,
    JsonObject(body): JsonObject,
) -> Result<(StatusCode, Json<Lead>), ApiError> {
    Ok((
        StatusCode::CREATED,
        Json(crate::app::leads::create(&state, &auth, body).await?),
    ))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LeadQuery {
    /// Only leads with this tag.
    tag_id: Option<uuid::Uuid>,
    /// Part of a name, email, company or number.
    q: Option<String>,
    /// A number in any common form.
    phone: Option<String>,
    #[param(minimum = 1, maximum = 100)]
    limit: Option<i64>,
    #[param(minimum = 0)]
    offset: Option<i64>,
}

/// List leads, newest first
#[utoipa::path(get, path = "/leads", operation_id = "listLeads", tag = "leads", security(("bearer" = ["leads:read"])),
    params(LeadQuery), responses((status = 200, body = ListResponse<Lead>), (status = 400)))]
async fn list(
    State(state): State<AppState>,
    auth: Auth,
    Q(q): Q<LeadQuery>,
) -> Result<Json<ListResponse<Lead>>, ApiError> {
    let page = Pagination {
        limit: q.limit,
        offset: q.offset,
    }
    .page()?;
    let phone_number = match q.phone.as_deref() {
        Some(p) => Some(parse_number(&state, &auth, p, NumberIn::Query("phone")).await?),
        None => None,
    };
    let filter = LeadFilter {
        tag: q.tag_id.map(LeadTagId::from_uuid),
        search: q
            .q
            .filter(|s| !s.trim().is_empty())
            .map(|s| s.trim().to_string()),
        phone_number,
    };
    Ok(Json(ListResponse::new(
        state
            .store
            .list_leads(auth.workspace_id, &filter, page)
            .await?,
        page,
    )))
}

/// Get a lead
#[utoipa::path(get, path = "/leads/{id}", operation_id = "getLead", tag = "leads", security(("bearer" = ["leads:read"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = Lead), (status = 404)))]
async fn get_one(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<Lead>, ApiError> {
    state
        .store
        .lead(auth.workspace_id, LeadId::from_uuid(id))
        .await?
        .map(Json)
        .ok_or(ApiError::not_found("Lead"))
}

/// Update a lead (only the sent fields change)
#[utoipa::path(patch, path = "/leads/{id}", operation_id = "updateLead", tag = "leads", security(("bearer" = ["leads:manage"])),
    params(("id" = uuid::Uuid, Path)), request_body = LeadPatch,
    responses((status = 200, body = Lead), (status = 400), (status = 404), (status = 409)))]
async fn update(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    JsonObject(body): JsonObject,
) -> Result<Json<Lead>, ApiError> {
    Ok(Json(
        crate::app::leads::update(&state, &auth, id, body).await?,
    ))
}

/// Delete a lead (soft: it disappears from list and get)
#[utoipa::path(delete, path = "/leads/{id}", operation_id = "deleteLead", tag = "leads", security(("bearer" = ["leads:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, description = "{success: true}"), (status = 404)))]
async fn delete(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(crate::app::leads::delete(&state, &auth, id).await?))
}

body_schema!(
    /// The body of `POST /leads/{id}/tags`.
    TagBody = create_body(TagInput, &["tag_ids"])
);

/// Tag a lead
#[utoipa::path(post, path = "/leads/{id}/tags", operation_id = "tagLead", tag = "leads", security(("bearer" = ["leads:manage"])),
    params(("id" = uuid::Uuid, Path)), request_body = TagBody,
    responses((status = 200, body = Lead), (status = 400), (status = 404)))]
async fn tag(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    JsonObject(body): JsonObject,
) -> Result<Json<Lead>, ApiError> {
    Ok(Json(crate::app::leads::tag(&state, &auth, id, body).await?))
}

/// Take a tag off a lead
#[utoipa::path(delete, path = "/leads/{id}/tags/{tag_id}", operation_id = "untagLead", tag = "leads", security(("bearer" = ["leads:manage"])),
    params(("id" = uuid::Uuid, Path), ("tag_id" = uuid::Uuid, Path)),
    responses((status = 200, description = "{success: true, id}"), (status = 404)))]
async fn untag(
    State(state): State<AppState>,
    auth: Auth,
    PathIds(lead, tag): PathIds,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(
        crate::app::leads::untag(&state, &auth, lead, tag).await?,
    ))
}

/// Create a lead tag
#[utoipa::path(post, path = "/lead-tags", operation_id = "createLeadTag", tag = "leads", security(("bearer" = ["lead_tags:manage"])),
    request_body = LeadTagCreate, responses((status = 201, body = LeadTag), (status = 400), (status = 409, description = "A tag has this name")))]
async fn create_tag(
    State(state): State<AppState>,
    auth: Auth,
    JsonObject(body): JsonObject,
) -> Result<(StatusCode, Json<LeadTag>), ApiError> {
    Ok((
        StatusCode::CREATED,
        Json(crate::app::leads::create_tag(&state, &auth, body).await?),
    ))
}

/// List lead tags, by name
#[utoipa::path(get, path = "/lead-tags", operation_id = "listLeadTags", tag = "leads", security(("bearer" = ["lead_tags:read"])),
    responses((status = 200, body = Data<Vec<LeadTag>>)))]
async fn list_tags(
    State(state): State<AppState>,
    auth: Auth,
) -> Result<Json<Data<Vec<LeadTag>>>, ApiError> {
    Ok(Json(Data {
        data: state.store.list_lead_tags(auth.workspace_id).await?,
    }))
}

/// Get a lead tag
#[utoipa::path(get, path = "/lead-tags/{id}", operation_id = "getLeadTag", tag = "leads", security(("bearer" = ["lead_tags:read"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = LeadTag), (status = 404)))]
async fn get_tag(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<LeadTag>, ApiError> {
    state
        .store
        .lead_tag(auth.workspace_id, LeadTagId::from_uuid(id))
        .await?
        .map(Json)
        .ok_or(ApiError::not_found("Lead tag"))
}

/// Rename or recolor a lead tag
#[utoipa::path(patch, path = "/lead-tags/{id}", operation_id = "updateLeadTag", tag = "leads", security(("bearer" = ["lead_tags:manage"])),
    params(("id" = uuid::Uuid, Path)), request_body = LeadTagPatch,
    responses((status = 200, body = LeadTag), (status = 400), (status = 404), (status = 409)))]
async fn update_tag(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    JsonObject(body): JsonObject,
) -> Result<Json<LeadTag>, ApiError> {
    Ok(Json(
        crate::app::leads::update_tag(&state, &auth, id, body).await?,
    ))
}

/// Delete a lead tag (it comes off every lead)
#[utoipa::path(delete, path = "/lead-tags/{id}", operation_id = "deleteLeadTag", tag = "leads", security(("bearer" = ["lead_tags:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, description = "{success: true, id}"), (status = 404)))]
async fn delete_tag(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(
        crate::app::leads::delete_tag(&state, &auth, id).await?,
    ))
}
