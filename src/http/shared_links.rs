//! Shared links: create, list, get and revoke; `GET /s/{token}` is the public page of the shared
//! agent, answering 404 once the link expires or is revoked (the same 404 as an unknown token).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use serde_json::{Map, Value};
use switchboard_actors::ids::{AgentId, SharedLinkId};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{JsonObject, ListResponse, Pagination, PathId, Q, check_fields};
use super::openapi::body_schema;
use super::state::AppState;
use crate::app::auth::Auth;
use crate::store::SharedLink;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(get_one))
        .routes(routes!(revoke))
        .routes(routes!(page))
}

/// The spec's Shared link object.
#[derive(Debug, Serialize, ToSchema)]
pub struct SharedLinkView {
    #[schema(value_type = uuid::Uuid)]
    id: SharedLinkId,
    /// The secret part of the URL.
    token: String,
    /// The public page.
    url: String,
    #[schema(value_type = uuid::Uuid)]
    agent_id: AgentId,
    #[schema(value_type = uuid::Uuid)]
    company_id: switchboard_actors::ids::WorkspaceId,
    /// The API key that created it.
    #[schema(value_type = uuid::Uuid)]
    created_by: switchboard_actors::ids::ApiKeyId,
    expires_at: DateTime<Utc>,
    is_revoked: bool,
    /// `active`, `revoked` or `expired`.
    status: &'static str,
    created_at: DateTime<Utc>,
}

fn view(state: &AppState, link: SharedLink) -> SharedLinkView {
    let now = state.store.now();
    let status = if link.revoked_at.is_some() {
        "revoked"
    } else if link.expires_at <= now {
        "expired"
    } else {
        "active"
    };
    SharedLinkView {
        url: format!("{}/s/{}", state.public_url(), link.token),
        id: link.id,
        token: link.token,
        agent_id: link.agent_id,
        company_id: link.workspace_id,
        created_by: link.created_by,
        expires_at: link.expires_at,
        is_revoked: link.revoked_at.is_some(),
        status,
        created_at: link.created_at,
    }
}

fn missing() -> ApiError {
    ApiError::not_found("Shared link")
}

/// A shared link's fields; [`create`] reads the body.
#[derive(ToSchema)]
#[allow(dead_code)] // Read by the OpenAPI document only.
struct SharedLinkInput {
    /// The agent of this workspace to share.
    agent_id: uuid::Uuid,
    /// When the link stops working: in the future, at most 365 days ahead (default 30 days
    /// when omitted or null).
    expires_at: Option<chrono::DateTime<chrono::Utc>>,
}

body_schema!(
    /// The body of `POST /shared-links`.
    SharedLinkCreate = create_body(SharedLinkInput, &["agent_id"])
);

/// Longest a link may live.
const MAX_DAYS: i64 = 365;
const DEFAULT_DAYS: i64 = 30;

/// Share an agent: a public page until expires_at (default 30 days, at most a year)
#[utoipa::path(post, path = "/shared-links", operation_id = "createSharedLink", tag = "shared_links", security(("bearer" = ["shared_links:manage"])),
    request_body = SharedLinkCreate, responses((status = 201, body = SharedLinkView), (status = 400)))]
async fn create(
    State(state): State<AppState>,
    auth: Auth,
    JsonObject(body): JsonObject,
) -> Result<(StatusCode, Json<SharedLinkView>), ApiError> {
    check_fields(&body, &["agent_id", "expires_at"])?;
    let agent: AgentId = body
        .get("agent_id")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::missing_field("agent_id"))?
        .parse()
        .map_err(|_| ApiError::invalid_field("agent_id", "must be a UUID"))?;
    if state.store.agent(auth.workspace_id, agent).await?.is_none() {
        return Err(ApiError::invalid_field(
            "agent_id",
            "no such agent in this workspace",
        ));
    }
    let now = state.store.now();
    let expires_at = expiry(&body, now)?;
    let token: String = {
        use rand::Rng;
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        let mut rng = rand::rng();
        (0..32)
            .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
            .collect()
    };
    let link = state
        .store
        .create_shared_link(auth.workspace_id, agent, &token, auth.key_id, expires_at)
        .await?;
    Ok((StatusCode::CREATED, Json(view(&state, link))))
}

fn expiry(body: &Map<String, Value>, now: DateTime<Utc>) -> Result<DateTime<Utc>, ApiError> {
    let bad = || {
        ApiError::invalid_field(
            "expires_at",
            format!("must be a future RFC 3339 time at most {MAX_DAYS} days ahead"),
        )
    };
    match body.get("expires_at") {
        None | Some(Value::Null) => Ok(now + Duration::days(DEFAULT_DAYS)),
        Some(Value::String(s)) => {
            let at = DateTime::parse_from_rfc3339(s)
                .map_err(|_| bad())?
                .with_timezone(&Utc);
            if at <= now || at > now + Duration::days(MAX_DAYS) {
                return Err(bad());
            }
            Ok(at)
        }
        Some(_) => Err(bad()),
    }
}

/// List shared links, newest first
#[utoipa::path(get, path = "/shared-links", operation_id = "listSharedLinks", tag = "shared_links", security(("bearer" = ["shared_links:read"])),
    params(Pagination), responses((status = 200, body = ListResponse<SharedLinkView>), (status = 400)))]
async fn list(
    State(state): State<AppState>,
    auth: Auth,
    Q(p): Q<Pagination>,
) -> Result<Json<ListResponse<SharedLinkView>>, ApiError> {
    let page = p.page()?;
    let links = state
        .store
        .list_shared_links(auth.workspace_id, page)
        .await?;
    let total = links.total;
    let items = links.items.into_iter().map(|l| view(&state, l)).collect();
    Ok(Json(ListResponse::new(
        crate::store::Paged { items, total },
        page,
    )))
}

/// Get a shared link
#[utoipa::path(get, path = "/shared-links/{id}", operation_id = "getSharedLink", tag = "shared_links", security(("bearer" = ["shared_links:read"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = SharedLinkView), (status = 404)))]
async fn get_one(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<SharedLinkView>, ApiError> {
    state
        .store
        .shared_link(auth.workspace_id, SharedLinkId::from_uuid(id))
        .await?
        .map(|l| Json(view(&state, l)))
        .ok_or_else(missing)
}

/// Revoke a shared link: its page answers 404 from now on
#[utoipa::path(post, path = "/shared-links/{id}/revoke", operation_id = "revokeSharedLink", tag = "shared_links", security(("bearer" = ["shared_links:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = SharedLinkView), (status = 404)))]
async fn revoke(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<SharedLinkView>, ApiError> {
    state
        .store
        .revoke_shared_link(auth.workspace_id, SharedLinkId::from_uuid(id))
        .await?
        .map(|l| Json(view(&state, l)))
        .ok_or_else(missing)
}

fn escape(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '<' => "&lt;".to_string(),
            '>' => "&gt;".to_string(),
            '&' => "&amp;".to_string(),
            '"' => "&quot;".to_string(),
            '\'' => "&#39;".to_string(),
            c => c.to_string(),
        })
        .collect()
}

/// The public page of a shared agent (no API key; 404 once expired or revoked)
#[utoipa::path(get, path = "/s/{token}", operation_id = "getSharedPage", tag = "shared_links", security(()),
    params(("token" = String, Path)), responses((status = 200, description = "text/html"), (status = 404)))]
async fn page(
    State(state): State<AppState>,
    Path(token): Path<String>,
) -> Result<Response, ApiError> {
    if token.len() != 32 || !token.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(missing());
    }
    let Some(link) = state
        .store
        .open_shared_link(&token, state.store.now())
        .await?
    else {
        return Err(missing());
    };
    let Some(agent) = state.store.agent(link.workspace_id, link.agent_id).await? else {
        return Err(missing());
    };
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"robots\" content=\"noindex\"><title>{name}</title>\
         <style>body{{font-family:system-ui,sans-serif;max-width:40em;margin:3em auto;padding:0 1em;color:#1f2937}}\
         .greeting{{background:#f3f4f6;border-radius:8px;padding:1em}}small{{color:#6b7280}}</style></head>\
         <body><h1>{name}</h1><p>{description}</p><p class=\"greeting\">{greeting}</p>\
         <p><small>Language {language} · voice {voice} · link valid until {until}</small></p></body></html>",
        name = escape(&agent.name),
        description = escape(&agent.description),
        greeting = escape(&agent.greeting_message),
        language = escape(&agent.language),
        voice = escape(&agent.voice),
        until = link.expires_at.format("%Y-%m-%d %H:%M UTC"),
    );
    Ok((
        [
            (header::CACHE_CONTROL, "no-store"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; style-src 'unsafe-inline'",
            ),
        ],
        Html(html),
    )
        .into_response())
}
