//! Calls: `POST /calls` places a direct outbound call through the same call queue, concurrency
//! limits, do-not-call list and balance rules as campaign calls; `GET /calls` (light records),
//! `GET /calls/{id}` (with the transcript, tool events and end-of-call analysis) and
//! `POST /calls/{id}/disposition`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use switchboard_actors::call::{CallDirection, CallStatus};
use switchboard_actors::ids::{AgentId, CallId, CampaignId};
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{JsonObject, ListResponse, Pagination, PathId, Q};
use super::openapi::body_schema;
use super::state::AppState;
use crate::app::auth::Auth;
use crate::app::calls::{CreateCall, DispositionInput, place_call};
use crate::app::fields::Placed;
use crate::store::{CallDetail, CallFilter, CallRecord};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(get_one))
        .routes(routes!(disposition))
}

body_schema!(
    /// The body of `POST /calls`.
    CreateCallBody = create_body(CreateCall, &["agent_id", "to_number", "from_phone_number_id"])
);
body_schema!(
    /// The body of `POST /calls/{id}/disposition`.
    CallDispositionBody = create_body(DispositionInput, &["disposition_id"])
);

/// Place an outbound call (queued by priority, then FIFO, within the workspace's concurrency)
#[utoipa::path(post, path = "/calls", operation_id = "createCall", tag = "calls", security(("bearer" = ["calls:create"])),
    request_body = CreateCallBody,
    responses((status = 201, body = CallRecord, description = "Queued"), (status = 200, body = CallRecord, description = "The first call of a repeated idempotency_key"),
        (status = 400, description = "Invalid field, do-not-call number (code DO_NOT_CALL), or idempotency_key reused with another body"),
        (status = 402, description = "Balance does not cover the call's reservation, or the workspace is suspended")))]
async fn create(
    State(state): State<AppState>,
    auth: Auth,
    JsonObject(body): JsonObject,
) -> Result<(StatusCode, Json<CallRecord>), ApiError> {
    Ok(match place_call(&state, &auth, body).await? {
        Placed::Created(call) => (StatusCode::CREATED, Json(call)),
        Placed::Replayed(call) => (StatusCode::OK, Json(call)),
    })
}

fn status_schema() -> utoipa::openapi::schema::Object {
    super::extract::one_of(CallStatus::ALL.map(CallStatus::as_str))
}

fn direction_schema() -> utoipa::openapi::schema::Object {
    super::extract::one_of(CallDirection::ALL.map(CallDirection::as_str))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// queued, dialing, ringing, in_progress, ended or cancelled.
    #[param(schema_with = status_schema)]
    status: Option<String>,
    /// outbound or inbound.
    #[param(schema_with = direction_schema)]
    direction: Option<String>,
    campaign_id: Option<uuid::Uuid>,
    agent_id: Option<uuid::Uuid>,
    /// Calls created at or after this instant (RFC 3339).
    created_after: Option<DateTime<Utc>>,
    /// Calls created before this instant (RFC 3339).
    created_before: Option<DateTime<Utc>>,
    #[param(minimum = 1, maximum = 100)]
    limit: Option<i64>,
    #[param(minimum = 0)]
    offset: Option<i64>,
}

/// List calls, newest first
#[utoipa::path(get, path = "/calls", operation_id = "listCalls", tag = "calls", security(("bearer" = ["calls:read"])),
    params(ListQuery), responses((status = 200, body = ListResponse<CallRecord>), (status = 400)))]
async fn list(
    State(state): State<AppState>,
    auth: Auth,
    Q(q): Q<ListQuery>,
) -> Result<Json<ListResponse<CallRecord>>, ApiError> {
    let page = Pagination {
        limit: q.limit,
        offset: q.offset,
    }
    .page()?;
    let status = q
        .status
        .as_deref()
        .map(|s| {
            CallStatus::parse(s).ok_or_else(|| {
                let all = CallStatus::ALL.map(CallStatus::as_str).join(", ");
                ApiError::bad_request(format!(
                    "Invalid query parameter `status`: `{s}` is not one of {all}"
                ))
            })
        })
        .transpose()?;
    let direction = q
        .direction
        .as_deref()
        .map(|d| {
            CallDirection::parse(d).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "Invalid query parameter `direction`: `{d}` is not outbound or inbound"
                ))
            })
        })
        .transpose()?;
    if let (Some(a), Some(b)) = (q.created_after, q.created_before)
        && a >= b
    {
        return Err(ApiError::bad_request(
            "Invalid query: created_after must be before created_before",
        ));
    }
    let filter = CallFilter {
        status,
        direction,
        campaign_id: q.campaign_id.map(CampaignId::from_uuid),
        agent_id: q.agent_id.map(AgentId::from_uuid),
        created_after: q.created_after,
        created_before: q.created_before,
    };
    let mut calls = state
        .store
        .list_calls(auth.workspace_id, &filter, page)
        .await?;
    calls.items = calls
        .items
        .into_iter()
        .map(|c| super::recordings::present(&state, c))
        .collect();
    Ok(Json(ListResponse::new(calls, page)))
}

/// Get a call with its transcript, tool events and end-of-call analysis
#[utoipa::path(get, path = "/calls/{id}", operation_id = "getCall", tag = "calls", security(("bearer" = ["calls:read"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = CallDetail), (status = 404)))]
async fn get_one(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<CallDetail>, ApiError> {
    let mut detail = state
        .store
        .call_detail(auth.workspace_id, CallId::from_uuid(id))
        .await?
        .ok_or(ApiError::not_found("Call"))?;
    detail.call = super::recordings::present(&state, detail.call);
    Ok(Json(detail))
}

/// Land a disposition on an answered call (a stop disposition retires a campaign contact)
#[utoipa::path(post, path = "/calls/{id}/disposition", operation_id = "setCallDisposition", tag = "calls", security(("bearer" = ["calls:create"])),
    params(("id" = uuid::Uuid, Path)), request_body = CallDispositionBody,
    responses((status = 200, body = CallRecord), (status = 400, description = "Unknown disposition, or the call was not answered"),
        (status = 404), (status = 409, description = "Another disposition is already set")))]
async fn disposition(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    JsonObject(body): JsonObject,
) -> Result<Json<CallRecord>, ApiError> {
    Ok(Json(
        crate::app::calls::set_disposition(&state, &auth, id, body).await?,
    ))
}
