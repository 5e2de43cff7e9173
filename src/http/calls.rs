//! Calls: `POST /calls` places a direct outbound call through the same call queue, concurrency
//! limits, do-not-call list and balance rules as campaign calls; `GET /calls` (light records),
//! `GET /calls/{id}` (with the transcript, tool events and end-of-call analysis) and
//! `POST /calls/{id}/disposition`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Map, Value};
use switchboard_actors::call::{
    CallDirection, CallStatus, PRIORITY_DEFAULT, PRIORITY_MAX, PRIORITY_MIN,
};
use switchboard_actors::ids::{AgentId, CallId, CampaignId, DispositionId, PhoneNumberId};
use switchboard_actors::phone::PhoneNumber;
use switchboard_actors::ports::CallSpec;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{
    JsonObject, ListResponse, Pagination, PathId, Q, parse_fields, replayed, request_hash,
};
use super::openapi::body_schema;
use super::state::AppState;
use crate::app::auth::Auth;
use crate::app::error::AppError;
use crate::store::{
    CallDetail, CallFilter, CallInsert, CallRecord, DispositionSet, DispositionSource, NewCall,
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(get_one))
        .routes(routes!(disposition))
}

const CREATE_FIELDS: &[&str] = &[
    "agent_id",
    "to_number",
    "from_phone_number_id",
    "priority",
    "metadata",
    "variables",
    "idempotency_key",
    "ring_timeout_secs",
];

/// The range of a call's own ring timeout.
const RING_TIMEOUT_SECS: std::ops::RangeInclusive<i64> = 5..=300;

/// Largest metadata or variables object, serialized.
const MAX_OBJECT_BYTES: usize = 16 * 1024;

body_schema!(
    /// The body of `POST /calls`.
    CreateCallBody = create_body(CreateCall, &["agent_id", "to_number", "from_phone_number_id"])
);
body_schema!(
    /// The body of `POST /calls/{id}/disposition`.
    CallDispositionBody = create_body(DispositionInput, &["disposition_id"])
);

#[derive(Deserialize, ToSchema)]
pub struct CreateCall {
    /// The agent that talks; it must be active and have a positive max_call_duration_secs.
    agent_id: Option<uuid::Uuid>,
    /// Who to call: E.164, or a national form of the workspace's default country.
    to_number: Option<String>,
    /// An active number of the workspace to call from.
    from_phone_number_id: Option<uuid::Uuid>,
    /// 0-10, higher is placed first (default 5, the priority of campaign calls).
    #[schema(minimum = 0, maximum = 10)]
    priority: Option<i64>,
    #[schema(value_type = Option<Object>)]
    metadata: Option<Map<String, Value>>,
    /// Values for the agent's prompt placeholders.
    #[schema(value_type = Option<Object>)]
    variables: Option<Map<String, Value>>,
    /// 1-255 characters. Repeating a key with the same body answers the first call; with a
    /// different body, 400.
    #[schema(min_length = 1, max_length = 255)]
    idempotency_key: Option<String>,
    /// How long the callee's phone may ring before the call is given up as `no_answer`
    /// (5-300 s; default: the service's ring timeout, 30 s unless the operator set another).
    #[schema(minimum = 5, maximum = 300)]
    ring_timeout_secs: Option<i64>,
}

fn required<T>(value: Option<T>, field: &str) -> Result<T, ApiError> {
    value.ok_or_else(|| ApiError::missing_field(field))
}

fn check_object(field: &str, value: Option<Map<String, Value>>) -> Result<Value, ApiError> {
    let value = Value::Object(value.unwrap_or_default());
    if value.to_string().len() > MAX_OBJECT_BYTES {
        return Err(ApiError::invalid_field(
            field,
            format!("at most {MAX_OBJECT_BYTES} bytes of JSON"),
        ));
    }
    Ok(value)
}

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
    let ws = auth.workspace_id;
    let request_hash = request_hash(&body);
    let input: CreateCall = parse_fields(body, CREATE_FIELDS)?;
    let key = match input.idempotency_key {
        Some(k) if k.is_empty() || k.len() > 255 => {
            return Err(ApiError::invalid_field(
                "idempotency_key",
                "must be 1-255 characters",
            ));
        }
        other => other,
    };
    let agent_id = AgentId::from_uuid(required(input.agent_id, "agent_id")?);
    let to = required(input.to_number, "to_number")?;
    let from_id = PhoneNumberId::from_uuid(required(
        input.from_phone_number_id,
        "from_phone_number_id",
    )?);
    let priority = input.priority.unwrap_or(PRIORITY_DEFAULT);
    if !(PRIORITY_MIN..=PRIORITY_MAX).contains(&priority) {
        return Err(ApiError::invalid_field(
            "priority",
            format!("must be from {PRIORITY_MIN} to {PRIORITY_MAX}"),
        ));
    }
    if let Some(ring) = input.ring_timeout_secs
        && !RING_TIMEOUT_SECS.contains(&ring)
    {
        return Err(ApiError::invalid_field(
            "ring_timeout_secs",
            format!(
                "must be from {} to {} seconds",
                RING_TIMEOUT_SECS.start(),
                RING_TIMEOUT_SECS.end()
            ),
        ));
    }
    let metadata = check_object("metadata", input.metadata)?;
    let variables = check_object("variables", input.variables)?;
    let country = state.store.default_country(ws).await?;
    let to = PhoneNumber::parse(&to, country)
        .map_err(|e| ApiError::invalid_field("to_number", e.to_string()))?;

    let agent = state
        .store
        .agent(ws, agent_id)
        .await?
        .ok_or_else(|| ApiError::invalid_field("agent_id", "no such agent"))?;
    if !agent.is_active {
        return Err(ApiError::invalid_field(
            "agent_id",
            "the agent is deactivated",
        ));
    }
    let Some(cap) = agent.max_call_duration_secs.filter(|s| *s > 0) else {
        return Err(ApiError::invalid_field(
            "agent_id",
            "the agent has no positive max_call_duration_secs",
        ));
    };
    let number = state
        .store
        .phone_number(ws, from_id)
        .await?
        .ok_or_else(|| ApiError::invalid_field("from_phone_number_id", "no such number"))?;
    if !number.is_active || number.status != "active" {
        return Err(ApiError::invalid_field(
            "from_phone_number_id",
            format!("{} is not active (status {})", number.number, number.status),
        ));
    }
    let now = state.store.now();
    if state
        .store
        .is_blocked(ws, to.as_str(), Some(agent_id), now)
        .await?
    {
        return Err(AppError::DoNotCall {
            number: to.as_str().to_owned(),
        }
        .into());
    }
    let spec = CallSpec {
        id: CallId::new(),
        workspace_id: ws,
        campaign_id: None,
        contact_id: None,
        agent_id,
        from_phone_number_id: Some(from_id),
        from_number: number.number.clone(),
        to_number: to.as_str().to_owned(),
        priority,
        attempt: 1,
        max_duration_secs: cap,
        reserved_cents: state.config.outbound_cents_per_minute.per_minute_for(cap),
        queued_at: now,
        trunk: state.store.number_trunk(ws, from_id).await?,
    };
    let new = NewCall {
        spec: spec.clone(),
        metadata,
        variables,
        idempotency_key: key,
        request_hash: Some(request_hash.clone()),
        ring_timeout_secs: input.ring_timeout_secs,
    };
    match state.store.create_call(&new).await? {
        CallInsert::Created(call) => {
            state.engine.call_queued(spec);
            Ok((StatusCode::CREATED, Json(call)))
        }
        CallInsert::Replayed {
            call,
            request_hash: first,
        } => replayed(call, first.as_deref(), &request_hash),
        CallInsert::InsufficientFunds(funds) => Err(AppError::Billing {
            message: if funds.is_suspended {
                "The workspace is suspended; no calls are placed".into()
            } else {
                format!(
                    "Insufficient balance: {} cents available ({} reserved by queued and live calls); this call reserves {} cents",
                    funds.balance_cents - funds.reserved_cents,
                    funds.reserved_cents,
                    spec.reserved_cents
                )
            },
        }.into()),
    }
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

#[derive(Deserialize, ToSchema)]
#[schema(as = CallDispositionInput)]
pub struct DispositionInput {
    /// A disposition of the workspace.
    disposition_id: Option<uuid::Uuid>,
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
    let ws = auth.workspace_id;
    let input: DispositionInput = parse_fields(body, &["disposition_id"])?;
    let disposition = DispositionId::from_uuid(required(input.disposition_id, "disposition_id")?);
    let id = CallId::from_uuid(id);
    if state.store.call(ws, id).await?.is_none() {
        return Err(ApiError::not_found("Call"));
    }
    if state.store.disposition(ws, disposition).await?.is_none() {
        return Err(ApiError::invalid_field(
            "disposition_id",
            "no such disposition in this workspace",
        ));
    }
    let result = crate::runtime::engine::land_disposition(
        &state.store,
        &state.engine,
        ws,
        id,
        disposition,
        DispositionSource::Api,
    )
    .await?
    .ok_or(ApiError::not_found("Call"))?;
    match result {
        DispositionSet::Set(call) | DispositionSet::Unchanged(call) => {
            Ok(Json(super::recordings::present(&state, call)))
        }
        DispositionSet::Conflict(_) => Err(AppError::Conflict {
            message: "Another disposition is already set on this call".into(),
        }
        .into()),
        DispositionSet::NotAnswered(call) => Err(ApiError::bad_request(format!(
            "A disposition lands on an answered call; this call is {}{}",
            call.status,
            call.outcome.map(|o| format!(" ({o})")).unwrap_or_default()
        ))),
    }
}
