//! SIP endpoints: `sip:<slug>@host` addresses that route inbound calls to an agent. The slug is
//! the caller's only credential, so it carries 24 random characters; deleting an endpoint is
//! the only way to rotate it.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use switchboard_actors::ids::{AgentId, SipEndpointId};
use switchboard_actors::slug::{SipSlug, SlugPrefix};
use switchboard_sip::acl::{IpNet, IpNetError};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::error::ApiError;
use super::extract::{
    Data, JsonObject, ListResponse, Pagination, Patch, PathId, Q, deleted, parse_fields,
};
use super::gate::Auth;
use super::openapi::{body_schema, create_body, patch_body, schema_json, with_bounds};
use super::phone_numbers::workspace_agent;
use crate::store::{NewSipEndpoint, Paged, SipEndpoint, SipEndpointCreation, SipEndpointUpdate};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(get_one, update, delete))
}

const CREATE_FIELDS: &[&str] = &[
    "name",
    "inbound_agent_id",
    "slug",
    "allowed_source_ips",
    "max_concurrent_calls",
];
const UPDATE_FIELDS: &[&str] = &[
    "name",
    "inbound_agent_id",
    "is_active",
    "allowed_source_ips",
    "max_concurrent_calls",
];
/// The largest per-endpoint cap on concurrent calls.
const CAP_MAX: i64 = 10_000;
const NAME_MAX: usize = 120;
const SOURCES_MAX: usize = 100;

/// A SIP endpoint as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
pub struct SipEndpointView {
    #[schema(value_type = uuid::Uuid)]
    pub id: SipEndpointId,
    pub name: String,
    /// The prefix, a hyphen and 24 random characters; the caller's only credential.
    pub slug: String,
    #[schema(value_type = Option<uuid::Uuid>)]
    pub inbound_agent_id: Option<AgentId>,
    pub is_active: bool,
    pub last_call_at: Option<DateTime<Utc>>,
    /// Addresses and CIDR blocks calls may come from; `null` accepts any source.
    pub allowed_source_ips: Option<Vec<String>>,
    /// Calls at once (ringing or answered) past which INVITEs get 486 Busy Here; `null`: no
    /// cap of its own (the workspace's and the node's limits still apply).
    pub max_concurrent_calls: Option<i64>,
    /// `sip:<slug>@<sip host>`
    pub sip_uri: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

pub(crate) fn view(state: &AppState, e: SipEndpoint) -> SipEndpointView {
    SipEndpointView {
        sip_uri: format!("sip:{}@{}", e.slug, state.config.sip_host),
        id: e.id,
        name: e.name,
        slug: e.slug,
        inbound_agent_id: e.inbound_agent_id,
        is_active: e.is_active,
        last_call_at: e.last_call_at,
        allowed_source_ips: e.allowed_source_ips,
        max_concurrent_calls: e.max_concurrent_calls,
        created_at: e.created_at,
        updated_at: e.updated_at,
    }
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

#[derive(Deserialize, ToSchema)]
pub struct CreateInput {
    /// Label, 1-120 characters.
    #[schema(min_length = 1, max_length = 120, pattern = "^[^\\x00-\\x1f\\x7f]*$")]
    name: Option<String>,
    /// The agent answering calls.
    #[serde(default)]
    #[schema(value_type = Option<uuid::Uuid>)]
    inbound_agent_id: Patch<uuid::Uuid>,
    /// Prefix of the slug: at most 12 lowercase letters, digits and single hyphens (derived
    /// from the name when omitted).
    #[schema(min_length = 1, max_length = 12, pattern = "^[a-z0-9]+(-[a-z0-9]+)*$")]
    slug: Option<String>,
    /// Addresses or CIDR blocks calls may come from; `null` or omitted accepts any source.
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>)]
    allowed_source_ips: Patch<Vec<String>>,
    /// Calls at once (ringing or answered), 1-10000; `null` or omitted: no cap of its own.
    #[serde(default)]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 10000)]
    max_concurrent_calls: Patch<i64>,
}

#[derive(Deserialize, ToSchema)]
pub struct UpdateInput {
    /// Label, 1-120 characters.
    #[schema(min_length = 1, max_length = 120, pattern = "^[^\\x00-\\x1f\\x7f]*$")]
    name: Option<String>,
    #[serde(default)]
    #[schema(value_type = Option<uuid::Uuid>)]
    inbound_agent_id: Patch<uuid::Uuid>,
    is_active: Option<bool>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>)]
    allowed_source_ips: Patch<Vec<String>>,
    /// Calls at once, 1-10000; `null` removes the cap.
    #[serde(default)]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 10000)]
    max_concurrent_calls: Patch<i64>,
}

/// Checks a cap on concurrent calls (`None` for null: no cap).
fn check_cap(cap: Option<i64>) -> Result<Option<i64>, ApiError> {
    match cap {
        Some(n) if !(1..=CAP_MAX).contains(&n) => Err(ApiError::invalid_field(
            "max_concurrent_calls",
            format!("must be 1-{CAP_MAX}, or null for no cap"),
        )),
        cap => Ok(cap),
    }
}

fn check_name(name: &str) -> Result<String, ApiError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > NAME_MAX || name.chars().any(char::is_control) {
        return Err(ApiError::invalid_field(
            "name",
            format!("must be 1-{NAME_MAX} characters without control characters"),
        ));
    }
    Ok(name.to_owned())
}

/// Validates and normalizes a source list (`None` for null: any source).
fn check_sources(list: Option<Vec<String>>) -> Result<Option<Vec<String>>, ApiError> {
    let Some(list) = list else {
        return Ok(None);
    };
    if list.is_empty() {
        return Err(ApiError::invalid_field(
            "allowed_source_ips",
            "an empty list would refuse every caller; send null to accept any source, or set is_active to false",
        ));
    }
    if list.len() > SOURCES_MAX {
        return Err(ApiError::invalid_field(
            "allowed_source_ips",
            format!("at most {SOURCES_MAX} entries"),
        ));
    }
    let mut out: Vec<String> = Vec::with_capacity(list.len());
    for (i, entry) in list.iter().enumerate() {
        let net: IpNet = entry.parse().map_err(|err: IpNetError| {
            ApiError::invalid_field(format!("allowed_source_ips[{i}]"), err.to_string())
        })?;
        let text = net.to_string();
        if !out.contains(&text) {
            out.push(text);
        }
    }
    Ok(Some(out))
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
        .ok_or(ApiError::NotFound {
            resource: "SIP endpoint",
        })?;
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

/// Creates an endpoint from `body` as `POST /sip-endpoints` reads it; its view, slug included
/// (the one time the dashboard shows it whole).
pub(crate) async fn create_endpoint(
    state: &AppState,
    auth: &Auth,
    body: Map<String, Value>,
) -> Result<SipEndpointView, ApiError> {
    let input: CreateInput = parse_fields(body, CREATE_FIELDS)?;
    let name = check_name(
        input
            .name
            .as_deref()
            .ok_or_else(|| ApiError::missing_field("name"))?,
    )?;
    let prefix = match input.slug.as_deref() {
        Some(prefix) => {
            SlugPrefix::parse(prefix).map_err(|e| ApiError::invalid_field("slug", e.to_string()))?
        }
        None => SlugPrefix::from_name(&name),
    };
    let sources = check_sources(input.allowed_source_ips.into_option().flatten())?;
    let cap = check_cap(input.max_concurrent_calls.into_option().flatten())?;
    let agent = workspace_agent(
        state,
        auth.workspace_id,
        "inbound_agent_id",
        input.inbound_agent_id,
    )
    .await?
    .flatten();
    // A slug collision needs two equal 24-character draws; one more draw settles it.
    for _ in 0..3 {
        // The operating system's CSPRNG-seeded generator.
        let slug = SipSlug::generate(&prefix, &mut rand::rng());
        let new = NewSipEndpoint {
            name: &name,
            slug: slug.as_str(),
            inbound_agent_id: agent,
            allowed_source_ips: sources.as_deref(),
            max_concurrent_calls: cap,
        };
        match state
            .store
            .create_sip_endpoint(
                auth.workspace_id,
                &new,
                state.config.sip_endpoint_daily_limit,
            )
            .await?
        {
            SipEndpointCreation::Created(e) => return Ok(view(state, e)),
            SipEndpointCreation::DailyLimit => {
                return Err(ApiError::Quota {
                    message: format!(
                        "At most {} SIP endpoints may be created per workspace per day",
                        state.config.sip_endpoint_daily_limit
                    ),
                });
            }
            SipEndpointCreation::SlugTaken => continue,
        }
    }
    Err(ApiError::Internal(anyhow::anyhow!(
        "no free SIP endpoint slug after three draws"
    )))
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
    if body.is_empty() {
        return Err(ApiError::bad_request(format!(
            "No writable field given. Writable fields: {}",
            UPDATE_FIELDS.join(", ")
        )));
    }
    let input: UpdateInput = parse_fields(body, UPDATE_FIELDS)?;
    let name = input.name.as_deref().map(check_name).transpose()?;
    let sources = match input.allowed_source_ips.into_option() {
        None => None,
        Some(list) => Some(check_sources(list)?),
    };
    let cap = input
        .max_concurrent_calls
        .into_option()
        .map(check_cap)
        .transpose()?;
    let agent = workspace_agent(
        &state,
        auth.workspace_id,
        "inbound_agent_id",
        input.inbound_agent_id,
    )
    .await?;
    let change = SipEndpointUpdate {
        name: name.as_deref(),
        inbound_agent_id: agent,
        is_active: input.is_active,
        allowed_source_ips: sources.as_ref().map(|s| s.as_deref()),
        max_concurrent_calls: cap,
    };
    let updated = state
        .store
        .update_sip_endpoint(auth.workspace_id, SipEndpointId::from_uuid(id), &change)
        .await?
        .ok_or(ApiError::NotFound {
            resource: "SIP endpoint",
        })?;
    reload(&state, updated.id).await;
    Ok(Json(Data {
        data: view(&state, updated),
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
    let id = SipEndpointId::from_uuid(id);
    let removed = state
        .store
        .delete_sip_endpoint(auth.workspace_id, id)
        .await?;
    if removed {
        reload(&state, id).await;
    }
    deleted(removed, id.as_uuid(), "SIP endpoint")
}

/// Tells the endpoint's actor, if it runs, that the endpoint changed: from the answer on, its
/// calls follow the change (a deleted or deactivated endpoint answers 404).
async fn reload(state: &AppState, id: SipEndpointId) {
    if let Some(endpoints) = &state.endpoints {
        endpoints.reload(id).await;
    }
}
