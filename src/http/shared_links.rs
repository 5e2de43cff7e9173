//! Shared links: create, list, get and revoke; `GET /s/{token}` is the public page of the shared
//! agent, answering 404 once the link expires or is revoked (the same 404 as an unknown token).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use switchboard_actors::ids::SharedLinkId;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{JsonObject, ListResponse, Pagination, PathId, Q};
use super::openapi::body_schema;
use super::state::AppState;
use crate::app::auth::Auth;
use crate::app::shared_links::*;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(get_one))
        .routes(routes!(revoke))
        .routes(routes!(page))
}

body_schema!(
    /// The body of `POST /shared-links`.
    SharedLinkCreate = create_body(SharedLinkInput, &["agent_id"])
);

/// Share an agent: a public page until expires_at (default 30 days, at most a year)
#[utoipa::path(post, path = "/shared-links", operation_id = "createSharedLink", tag = "shared_links", security(("bearer" = ["shared_links:manage"])),
    request_body = SharedLinkCreate, responses((status = 201, body = SharedLinkView), (status = 400)))]
async fn create(
    State(state): State<AppState>,
    auth: Auth,
    JsonObject(body): JsonObject,
) -> Result<(StatusCode, Json<SharedLinkView>), ApiError> {
    Ok((
        StatusCode::CREATED,
        Json(crate::app::shared_links::create(&state, &auth, body).await?),
    ))
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
        .ok_or_else(|| missing().into())
}

/// Revoke a shared link: its page answers 404 from now on
#[utoipa::path(post, path = "/shared-links/{id}/revoke", operation_id = "revokeSharedLink", tag = "shared_links", security(("bearer" = ["shared_links:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = SharedLinkView), (status = 404)))]
async fn revoke(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<SharedLinkView>, ApiError> {
    Ok(Json(
        crate::app::shared_links::revoke(&state, &auth, id).await?,
    ))
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
        return Err(missing().into());
    }
    let Some(link) = state
        .store
        .open_shared_link(&token, state.store.now())
        .await?
    else {
        return Err(missing().into());
    };
    let Some(agent) = state.store.agent(link.workspace_id, link.agent_id).await? else {
        return Err(missing().into());
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
