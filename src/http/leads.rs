//! Leads (list with filters, get, create, update, soft delete) and lead tags (CRUD, tagging
//! and untagging leads).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use switchboard_actors::ids::{LeadId, LeadTagId};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::dnc::NumberIn;
use super::error::ApiError;
use super::extract::{
    Data, JsonObject, ListResponse, Pagination, PathId, PathIds, Q, check_fields,
};
use super::openapi::body_schema;
use super::state::AppState;
use crate::app::auth::Auth;
use crate::store::{Lead, LeadFields, LeadFilter, LeadTag};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(get_one, update, delete))
        .routes(routes!(tag))
        .routes(routes!(untag))
        .routes(routes!(list_tags, create_tag))
        .routes(routes!(get_tag, update_tag, delete_tag))
}

const LEAD_FIELDS: &[&str] = &[
    "phone_number",
    "first_name",
    "last_name",
    "email",
    "company",
    "timezone",
    "notes",
    "metadata",
    "tag_ids",
];

/// The fields of a lead as the document describes them; the handlers read the body field by
/// field ([`merge`]).
#[derive(ToSchema)]
#[allow(dead_code)] // Read by the OpenAPI document only.
pub struct LeadInput {
    /// The number in any common format; national forms are read in the workspace's country.
    phone_number: String,
    /// At most 100 characters; null clears it.
    #[schema(max_length = 100)]
    first_name: Option<String>,
    /// At most 100 characters; null clears it.
    #[schema(max_length = 100)]
    last_name: Option<String>,
    /// An email address, at most 254 characters; empty or null clears it.
    #[schema(max_length = 254, pattern = r"^$|^[^@\s]+@[^@\s]*\.[^@\s]*$")]
    email: Option<String>,
    /// At most 200 characters; null clears it.
    #[schema(max_length = 200)]
    company: Option<String>,
    /// An IANA time zone such as `America/New_York`; empty or null clears it.
    #[schema(max_length = 64)]
    timezone: Option<String>,
    /// At most 5000 characters; null clears it.
    #[schema(max_length = 5000)]
    notes: Option<String>,
    /// Any object, at most 16 KiB of JSON; null clears it.
    #[schema(value_type = Option<Object>)]
    metadata: Option<Value>,
    /// Lead tags of the workspace to put on the new lead.
    tag_ids: Option<Vec<uuid::Uuid>>,
}

body_schema!(
    /// The body of `POST /leads`.
    LeadCreate = create_body(LeadInput, &["phone_number"])
);
body_schema!(
    /// The body of `PATCH /leads/{id}`.
    LeadPatch = patch_body(LeadInput, &LEAD_FIELDS[..8])
);

/// A lead tag's fields.
#[derive(ToSchema)]
#[allow(dead_code)] // Read by the OpenAPI document only; [`tag_fields`] reads the body.
pub struct LeadTagInput {
    /// 1-50 characters, unique in the workspace.
    #[schema(min_length = 1, max_length = 50, pattern = r"\S")]
    name: String,
    /// Hex color `#rrggbb` (default `#6b7280`).
    #[schema(nullable = false, pattern = "^#[0-9a-fA-F]{6}$")]
    color: Option<String>,
}

body_schema!(
    /// The body of `POST /lead-tags`.
    LeadTagCreate = create_body(LeadTagInput, &["name"])
);
body_schema!(
    /// The body of `PATCH /lead-tags/{id}`.
    LeadTagPatch = patch_body(LeadTagInput, TAG_FIELDS)
);

/// The writable fields of a lead tag.
const TAG_FIELDS: &[&str] = &["name", "color"];

fn invalid(field: &str, rule: &str) -> ApiError {
    ApiError::invalid_field(field, rule.to_string())
}

fn text(body: &Map<String, Value>, key: &str, max: usize) -> Result<Option<String>, ApiError> {
    match body.get(key) {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(String::new())),
        Some(Value::String(s)) => {
            let s = s.trim().to_string();
            if s.chars().count() > max {
                return Err(invalid(key, &format!("must be at most {max} characters")));
            }
            Ok(Some(s))
        }
        Some(_) => Err(invalid(key, "must be a string")),
    }
}

/// Applies the sent fields over `f` (the stored lead, or empty on create).
async fn merge(
    state: &AppState,
    auth: &Auth,
    body: &Map<String, Value>,
    f: &mut LeadFields,
) -> Result<(), ApiError> {
    if let Some(v) = body.get("phone_number") {
        let raw = v
            .as_str()
            .ok_or_else(|| invalid("phone_number", "must be a string"))?;
        f.phone_number =
            super::dnc::parse_number(state, auth, raw, NumberIn::Field("phone_number")).await?;
    }
    for (key, slot, max) in [
        ("first_name", &mut f.first_name, 100),
        ("last_name", &mut f.last_name, 100),
        ("company", &mut f.company, 200),
        ("notes", &mut f.notes, 5000),
    ] {
        if let Some(v) = text(body, key, max)? {
            *slot = v;
        }
    }
    if let Some(email) = text(body, "email", 254)? {
        if !email.is_empty() {
            let (local, domain) = email.split_once('@').unwrap_or_default();
            if local.is_empty() || !domain.contains('.') || email.contains(char::is_whitespace) {
                return Err(invalid("email", "must be an email address"));
            }
        }
        f.email = (!email.is_empty()).then_some(email);
    }
    if let Some(tz) = text(body, "timezone", 64)? {
        if !tz.is_empty() && tz.parse::<chrono_tz::Tz>().is_err() {
            return Err(invalid(
                "timezone",
                "must be an IANA time zone such as America/New_York",
            ));
        }
        f.timezone = (!tz.is_empty()).then_some(tz);
    }
    match body.get("metadata") {
        None => {}
        Some(Value::Null) => f.metadata = json!({}),
        Some(v @ Value::Object(_)) => {
            if v.to_string().len() > 16_384 {
                return Err(invalid("metadata", "must be at most 16 KiB of JSON"));
            }
            f.metadata = v.clone();
        }
        Some(_) => return Err(invalid("metadata", "must be an object")),
    }
    Ok(())
}

fn tag_ids(body: &Map<String, Value>) -> Result<Vec<LeadTagId>, ApiError> {
    match body.get("tag_ids") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(list)) => list
            .iter()
            .map(|v| {
                v.as_str()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| invalid("tag_ids", "must be an array of tag ids"))
            })
            .collect(),
        Some(_) => Err(invalid("tag_ids", "must be an array of tag ids")),
    }
}

async fn apply_tags(
    state: &AppState,
    auth: &Auth,
    lead: LeadId,
    tags: &[LeadTagId],
) -> Result<(), ApiError> {
    if !tags.is_empty() && !state.store.tag_lead(auth.workspace_id, lead, tags).await? {
        return Err(invalid(
            "tag_ids",
            "every tag must be a lead tag of this workspace",
        ));
    }
    Ok(())
}

/// Create a lead
#[utoipa::path(post, path = "/leads", operation_id = "createLead", tag = "leads", security(("bearer" = ["leads:manage"])),
    request_body = LeadCreate, responses((status = 201, body = Lead), (status = 400), (status = 409, description = "A lead has this number")))]
async fn create(
    State(state): State<AppState>,
    auth: Auth,
    JsonObject(body): JsonObject,
) -> Result<(StatusCode, Json<Lead>), ApiError> {
    check_fields(&body, LEAD_FIELDS)?;
    if !body.get("phone_number").is_some_and(Value::is_string) {
        return Err(ApiError::missing_field("phone_number"));
    }
    let tags = tag_ids(&body)?;
    let mut fields = LeadFields {
        metadata: json!({}),
        ..Default::default()
    };
    merge(&state, &auth, &body, &mut fields).await?;
    for tag in &tags {
        if state
            .store
            .lead_tag(auth.workspace_id, *tag)
            .await?
            .is_none()
        {
            return Err(invalid(
                "tag_ids",
                "every tag must be a lead tag of this workspace",
            ));
        }
    }
    let lead = state.store.create_lead(auth.workspace_id, &fields).await?;
    apply_tags(&state, &auth, lead.id, &tags).await?;
    let lead = state
        .store
        .lead(auth.workspace_id, lead.id)
        .await?
        .ok_or(ApiError::not_found("Lead"))?;
    Ok((StatusCode::CREATED, Json(lead)))
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
        Some(p) => {
            Some(super::dnc::parse_number(&state, &auth, p, NumberIn::Query("phone")).await?)
        }
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
    check_fields(&body, &LEAD_FIELDS[..8])?;
    if body.is_empty() {
        return Err(ApiError::bad_request(format!(
            "No writable field sent; writable fields: {}",
            LEAD_FIELDS[..8].join(", ")
        )));
    }
    let id = LeadId::from_uuid(id);
    let lead = state
        .store
        .lead(auth.workspace_id, id)
        .await?
        .ok_or(ApiError::not_found("Lead"))?;
    let mut fields = lead.fields;
    merge(&state, &auth, &body, &mut fields).await?;
    state
        .store
        .update_lead(auth.workspace_id, id, &fields)
        .await?
        .map(Json)
        .ok_or(ApiError::not_found("Lead"))
}

/// Delete a lead (soft: it disappears from list and get)
#[utoipa::path(delete, path = "/leads/{id}", operation_id = "deleteLead", tag = "leads", security(("bearer" = ["leads:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, description = "{success: true}"), (status = 404)))]
async fn delete(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<Value>, ApiError> {
    if !state
        .store
        .delete_lead(auth.workspace_id, LeadId::from_uuid(id))
        .await?
    {
        return Err(ApiError::not_found("Lead"));
    }
    Ok(Json(json!({"success": true})))
}

body_schema!(
    /// The body of `POST /leads/{id}/tags`.
    TagBody = create_body(TagInput, &["tag_ids"])
);

#[derive(Deserialize, ToSchema)]
pub struct TagInput {
    #[schema(min_items = 1)]
    /// Lead tag ids to put on the lead.
    #[allow(dead_code)]
    tag_ids: Vec<uuid::Uuid>,
}

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
    check_fields(&body, &["tag_ids"])?;
    let tags = tag_ids(&body)?;
    if tags.is_empty() {
        return Err(invalid("tag_ids", "must list at least one tag"));
    }
    let id = LeadId::from_uuid(id);
    if state.store.lead(auth.workspace_id, id).await?.is_none() {
        return Err(ApiError::not_found("Lead"));
    }
    apply_tags(&state, &auth, id, &tags).await?;
    state
        .store
        .lead(auth.workspace_id, id)
        .await?
        .map(Json)
        .ok_or(ApiError::not_found("Lead"))
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
    let removed = state
        .store
        .untag_lead(
            auth.workspace_id,
            LeadId::from_uuid(lead),
            LeadTagId::from_uuid(tag),
        )
        .await?;
    super::extract::deleted(removed, tag, "Tag on this lead")
}

fn tag_fields(
    body: &Map<String, Value>,
    create: bool,
) -> Result<(Option<String>, Option<String>), ApiError> {
    check_fields(body, TAG_FIELDS)?;
    let name = match body.get("name") {
        None if create => return Err(ApiError::missing_field("name")),
        None => None,
        Some(Value::String(s)) if (1..=50).contains(&s.trim().chars().count()) => {
            Some(s.trim().to_string())
        }
        Some(_) => return Err(invalid("name", "must be 1-50 characters")),
    };
    let color = match body.get("color") {
        None => create.then(|| "#6b7280".to_string()),
        Some(Value::String(c))
            if c.len() == 7
                && c.starts_with('#')
                && c[1..].bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            Some(c.to_ascii_lowercase())
        }
        Some(_) => return Err(invalid("color", "must be a hex color such as #22c55e")),
    };
    Ok((name, color))
}

/// Create a lead tag
#[utoipa::path(post, path = "/lead-tags", operation_id = "createLeadTag", tag = "leads", security(("bearer" = ["lead_tags:manage"])),
    request_body = LeadTagCreate, responses((status = 201, body = LeadTag), (status = 400), (status = 409, description = "A tag has this name")))]
async fn create_tag(
    State(state): State<AppState>,
    auth: Auth,
    JsonObject(body): JsonObject,
) -> Result<(StatusCode, Json<LeadTag>), ApiError> {
    let (name, color) = tag_fields(&body, true)?;
    let tag = state
        .store
        .create_lead_tag(
            auth.workspace_id,
            &name.unwrap_or_default(),
            &color.unwrap_or_default(),
        )
        .await?;
    Ok((StatusCode::CREATED, Json(tag)))
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
    let (name, color) = tag_fields(&body, false)?;
    if name.is_none() && color.is_none() {
        return Err(ApiError::bad_request(
            "No writable field sent; writable fields: name, color",
        ));
    }
    state
        .store
        .update_lead_tag(
            auth.workspace_id,
            LeadTagId::from_uuid(id),
            name.as_deref(),
            color.as_deref(),
        )
        .await?
        .map(Json)
        .ok_or(ApiError::not_found("Lead tag"))
}

/// Delete a lead tag (it comes off every lead)
#[utoipa::path(delete, path = "/lead-tags/{id}", operation_id = "deleteLeadTag", tag = "leads", security(("bearer" = ["lead_tags:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, description = "{success: true, id}"), (status = 404)))]
async fn delete_tag(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<Value>, ApiError> {
    let removed = state
        .store
        .delete_lead_tag(auth.workspace_id, LeadTagId::from_uuid(id))
        .await?;
    super::extract::deleted(removed, id, "Lead tag")
}
