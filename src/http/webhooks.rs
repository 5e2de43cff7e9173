//! Agent webhooks: the deliveries of events (`GET /webhook-deliveries`, `GET
//! /webhook-deliveries/{id}`, scope `webhooks:read`) and the workspace's signing secret (`GET
//! /webhook-signing-secret`, `POST /webhook-signing-secret/rotate`, scope `webhooks:manage`).

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use switchboard_actors::events::EventKind;
use switchboard_actors::ids::{AgentId, CallId, EventId};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{ListResponse, Pagination, PathId, Q, one_of};
use super::state::AppState;
use crate::app::auth::Auth;
use crate::store::{DeliveryFilter, DeliveryStatus, WebhookDelivery};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(get_one))
        .routes(routes!(signing_secret))
        .routes(routes!(rotate))
}

fn kind_schema() -> utoipa::openapi::schema::Object {
    one_of(EventKind::ALL.map(EventKind::as_str))
}

fn status_schema() -> utoipa::openapi::schema::Object {
    one_of(DeliveryStatus::ALL.map(DeliveryStatus::as_str))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    call_id: Option<uuid::Uuid>,
    agent_id: Option<uuid::Uuid>,
    /// The event kind, e.g. `call.ended`.
    #[serde(rename = "type")]
    #[param(rename = "type", schema_with = kind_schema)]
    kind: Option<String>,
    /// pending, delivered or failed.
    #[param(schema_with = status_schema)]
    status: Option<String>,
    #[param(minimum = 1, maximum = 100)]
    limit: Option<i64>,
    #[param(minimum = 0)]
    offset: Option<i64>,
}

/// List deliveries of agent webhook events, newest first
#[utoipa::path(get, path = "/webhook-deliveries", operation_id = "listWebhookDeliveries", tag = "webhooks", security(("bearer" = ["webhooks:read"])),
    params(ListQuery), responses((status = 200, body = ListResponse<WebhookDelivery>), (status = 400)))]
async fn list(
    State(state): State<AppState>,
    auth: Auth,
    Q(q): Q<ListQuery>,
) -> Result<Json<ListResponse<WebhookDelivery>>, ApiError> {
    let page = Pagination {
        limit: q.limit,
        offset: q.offset,
    }
    .page()?;
    let kind = q
        .kind
        .as_deref()
        .map(|k| {
            EventKind::parse(k).ok_or_else(|| {
                let kinds: Vec<&str> = EventKind::ALL.map(EventKind::as_str).to_vec();
                ApiError::bad_request(format!(
                    "Invalid query parameter `type`: `{k}` is not one of {}",
                    kinds.join(", ")
                ))
            })
        })
        .transpose()?;
    let status = q
        .status
        .as_deref()
        .map(|s| {
            DeliveryStatus::parse(s).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "Invalid query parameter `status`: `{s}` is not one of pending, delivered, failed"
                ))
            })
        })
        .transpose()?;
    let filter = DeliveryFilter {
        call_id: q.call_id.map(CallId::from_uuid),
        agent_id: q.agent_id.map(AgentId::from_uuid),
        kind,
        status,
    };
    let deliveries = state
        .store
        .list_webhook_deliveries(auth.workspace_id, &filter, page)
        .await?;
    Ok(Json(ListResponse::new(deliveries, page)))
}

/// Get one delivery of an agent webhook event (its id is the event's)
#[utoipa::path(get, path = "/webhook-deliveries/{id}", operation_id = "getWebhookDelivery", tag = "webhooks", security(("bearer" = ["webhooks:read"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = WebhookDelivery), (status = 404)))]
async fn get_one(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<WebhookDelivery>, ApiError> {
    state
        .store
        .webhook_delivery(auth.workspace_id, EventId::from_uuid(id))
        .await?
        .map(Json)
        .ok_or(ApiError::not_found("Webhook delivery"))
}

/// The workspace's webhook signing secret.
#[derive(Debug, Serialize, ToSchema)]
pub struct SigningSecretView {
    /// `whsec_` and 64 hex characters; the whole string is the HMAC-SHA256 key deliveries are
    /// signed with.
    secret: String,
    /// When it was made (by its first use, or the last rotation).
    created_at: DateTime<Utc>,
}

/// Answers the secret a store call read or made.
async fn view(
    state: &AppState,
    auth: &Auth,
    rotate: bool,
) -> Result<Json<SigningSecretView>, ApiError> {
    let (secret, created_at) =
        crate::app::webhooks::signing_secret(&state.store, auth.workspace_id, rotate).await?;
    Ok(Json(SigningSecretView {
        secret: secret.expose().to_owned(),
        created_at,
    }))
}

/// Show the secret agent webhook deliveries are signed with (made on first use)
#[utoipa::path(get, path = "/webhook-signing-secret", operation_id = "getWebhookSigningSecret", tag = "webhooks", security(("bearer" = ["webhooks:manage"])),
    responses((status = 200, body = SigningSecretView)))]
async fn signing_secret(
    State(state): State<AppState>,
    auth: Auth,
) -> Result<Json<SigningSecretView>, ApiError> {
    view(&state, &auth, false).await
}

/// Replace the signing secret: every delivery from now on, pending retries included, is signed with the new one
#[utoipa::path(post, path = "/webhook-signing-secret/rotate", operation_id = "rotateWebhookSigningSecret", tag = "webhooks", security(("bearer" = ["webhooks:manage"])),
    responses((status = 200, body = SigningSecretView)))]
async fn rotate(
    State(state): State<AppState>,
    auth: Auth,
) -> Result<Json<SigningSecretView>, ApiError> {
    view(&state, &auth, true).await
}
