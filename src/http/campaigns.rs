//! Campaigns: create (always `draft`), list (archived hidden), get, PATCH, the transitions
//! (launch, resume, pause, stop, DELETE = archive), audit events, and contact enrollment.
//!
//! Every campaign route needs `campaigns:manage`. An archived campaign answers 404 everywhere.

use axum::Json;
use axum::extract::{FromRequest, Request, State};
use axum::http::{StatusCode, header};
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use switchboard_actors::campaign::{
    self as rules, AgentFacts, CampaignStatus, Command, IntRule, NumberFacts, Preflight,
    RegulatoryBasis, Transition, TransitionError,
};
use switchboard_actors::contact::{ContactState, ExclusionReason};
use switchboard_actors::ids::{
    AgentId, CampaignId, ContactId, DispositionId, LeadId, PhoneNumberId, WorkspaceId,
};
use switchboard_actors::phone::PhoneNumber;
use switchboard_actors::window::CallingWindow;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::error::ApiError;
use super::extract::{
    JsonObject, ListResponse, Pagination, PathId, PathIds, Q, check_fields, read_body,
};
use super::gate::Auth;
use crate::store::{
    Agent, CallRecord, CampaignEvent, CampaignRecord, CampaignSettings, CampaignStats, Contact,
    Disposition, NewContact, PhoneNumberRecord, StatusChange,
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(get_one, update, archive))
        .routes(routes!(launch))
        .routes(routes!(resume))
        .routes(routes!(pause))
        .routes(routes!(stop))
        .routes(routes!(events))
        .routes(routes!(list_contacts, enroll))
        .routes(routes!(get_contact))
}

const NOT_FOUND: ApiError = ApiError::NotFound {
    resource: "Campaign",
};

/// `retry_rules`: a read-only view of the retry settings.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetryRules {
    pub max_attempts: i64,
    pub max_infra_retries: i64,
    pub retry_no_answer_seconds: i64,
    pub retry_completed_seconds: i64,
    pub randomize_retry_time: bool,
    pub double_dial_enabled: bool,
    pub double_dial_gap_seconds: i64,
}

/// The campaign object.
#[derive(Debug, Serialize, ToSchema)]
pub struct CampaignView {
    pub id: uuid::Uuid,
    pub company_id: uuid::Uuid,
    pub name: String,
    pub description: String,
    /// draft, scheduled, running, paused, paused_insufficient_credit, paused_budget, paused_infra, paused_config, completed, stopped, archived.
    pub status: String,
    pub agent_id: Option<uuid::Uuid>,
    pub agent: Option<Agent>,
    pub from_phone_number_id: Option<uuid::Uuid>,
    pub from_phone_number: Option<PhoneNumberRecord>,
    /// Snapshot of the from-number taken at launch.
    pub from_number: Option<String>,
    pub regulatory_basis: Option<String>,
    pub retry_rules: RetryRules,
    /// `{timezone, days, start, end, use_contact_timezone}`; null uses the workspace's calling hours.
    #[schema(value_type = Option<Object>)]
    pub calling_window: Option<Value>,
    pub stop_disposition_ids: Vec<uuid::Uuid>,
    pub stop_dispositions: Vec<Disposition>,
    pub stop_on_no_answer: bool,
    pub stop_on_voicemail: bool,
    pub stop_on_unclassified: bool,
    /// 1-999 (default 3).
    pub max_attempts: i64,
    /// 0-20 (default 3).
    pub max_infra_retries: i64,
    /// 30-604800 (default 3600).
    pub retry_no_answer_seconds: i64,
    /// 60-604800 (default 86400).
    pub retry_completed_seconds: i64,
    pub randomize_retry_time: bool,
    pub double_dial_enabled: bool,
    /// 10-3600 (default 30).
    pub double_dial_gap_seconds: i64,
    /// 1-100000 (default 1000).
    pub max_calls_per_day: i64,
    /// 0-86400 (default 0).
    pub min_seconds_between_calls: i64,
    /// 1-8 (default 1).
    pub max_in_flight: i64,
    /// Positive cents, or null for no cap.
    pub budget_cents: Option<i64>,
    pub starts_at: Option<DateTime<Utc>>,
    pub ends_at: Option<DateTime<Utc>>,
    pub daily_admitted_count: i64,
    pub daily_window_date: Option<NaiveDate>,
    pub last_admitted_at: Option<DateTime<Utc>>,
    pub estimate_cents: i64,
    pub spent_cents: i64,
    pub reserved_cents: i64,
    pub last_tick_at: Option<DateTime<Utc>>,
    pub last_tick_result: Option<String>,
    pub last_error: Option<String>,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub total_leads: i64,
    pub stats: CampaignStats,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub created_by: Option<uuid::Uuid>,
    /// Set when a command changed nothing (`Already running`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

async fn view(
    state: &AppState,
    ws: WorkspaceId,
    c: CampaignRecord,
) -> Result<CampaignView, ApiError> {
    let s = c.settings;
    let agent = match s.agent_id {
        Some(id) => state.store.agent(ws, id).await?,
        None => None,
    };
    let from_phone_number = match s.from_phone_number_id {
        Some(id) => state.store.phone_number(ws, id).await?,
        None => None,
    };
    let stop_dispositions = state
        .store
        .existing_dispositions(ws, &s.stop_disposition_ids)
        .await?;
    let stats = state.store.campaign_stats(ws, c.id).await?;
    Ok(CampaignView {
        id: c.id.as_uuid(),
        company_id: ws.as_uuid(),
        name: s.name,
        description: s.description,
        status: c.status.as_str().to_owned(),
        agent_id: s.agent_id.map(|a| a.as_uuid()),
        agent,
        from_phone_number_id: s.from_phone_number_id.map(|p| p.as_uuid()),
        from_phone_number,
        from_number: c.from_number,
        regulatory_basis: s.regulatory_basis.map(|b| b.as_str().to_owned()),
        retry_rules: RetryRules {
            max_attempts: s.max_attempts,
            max_infra_retries: s.max_infra_retries,
            retry_no_answer_seconds: s.retry_no_answer_seconds,
            retry_completed_seconds: s.retry_completed_seconds,
            randomize_retry_time: s.randomize_retry_time,
            double_dial_enabled: s.double_dial_enabled,
            double_dial_gap_seconds: s.double_dial_gap_seconds,
        },
        calling_window: s.calling_window.as_ref().map(CallingWindow::to_json),
        stop_disposition_ids: s.stop_disposition_ids.iter().map(|d| d.as_uuid()).collect(),
        stop_dispositions,
        stop_on_no_answer: s.stop_on_no_answer,
        stop_on_voicemail: s.stop_on_voicemail,
        stop_on_unclassified: s.stop_on_unclassified,
        max_attempts: s.max_attempts,
        max_infra_retries: s.max_infra_retries,
        retry_no_answer_seconds: s.retry_no_answer_seconds,
        retry_completed_seconds: s.retry_completed_seconds,
        randomize_retry_time: s.randomize_retry_time,
        double_dial_enabled: s.double_dial_enabled,
        double_dial_gap_seconds: s.double_dial_gap_seconds,
        max_calls_per_day: s.max_calls_per_day,
        min_seconds_between_calls: s.min_seconds_between_calls,
        max_in_flight: s.max_in_flight,
        budget_cents: s.budget_cents,
        starts_at: s.starts_at,
        ends_at: s.ends_at,
        daily_admitted_count: c.daily_admitted_count,
        daily_window_date: c.daily_window_date,
        last_admitted_at: c.last_admitted_at,
        estimate_cents: c.estimate_cents,
        spent_cents: c.spent_cents,
        reserved_cents: c.reserved_cents,
        last_tick_at: c.last_tick_at,
        last_tick_result: c.last_tick_result,
        last_error: c.last_error,
        started_at: c.started_at,
        completed_at: c.completed_at,
        total_leads: stats.total_contacts,
        stats,
        created_at: c.created_at,
        updated_at: c.updated_at,
        created_by: c.created_by.map(|k| k.as_uuid()),
        message: None,
    })
}

fn field_error(field: &str, message: &str) -> ApiError {
    ApiError::bad_request(format!("Invalid field `{field}`: {message}"))
}

fn as_bool(field: &str, v: &Value) -> Result<bool, ApiError> {
    v.as_bool()
        .ok_or_else(|| field_error(field, "must be a boolean"))
}

fn as_int(rule: IntRule, v: &Value) -> Result<i64, ApiError> {
    let n = v
        .as_i64()
        .filter(|_| v.is_i64() || v.is_u64())
        .ok_or_else(|| {
            field_error(
                rule.field,
                &format!("must be an integer from {} to {}", rule.min, rule.max),
            )
        })?;
    rule.check(n).map_err(|e| field_error(e.field, &e.message))
}

fn as_uuid(field: &str, v: &Value) -> Result<uuid::Uuid, ApiError> {
    v.as_str()
        .and_then(|s| uuid::Uuid::parse_str(s).ok())
        .ok_or_else(|| field_error(field, "must be a UUID"))
}

fn as_time(field: &str, v: &Value) -> Result<Option<DateTime<Utc>>, ApiError> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => DateTime::parse_from_rfc3339(s)
            .map(|t| Some(t.with_timezone(&Utc)))
            .map_err(|_| {
                field_error(
                    field,
                    "must be an ISO 8601 timestamp with offset, e.g. 2026-12-01T09:00:00Z",
                )
            }),
        _ => Err(field_error(field, "must be an ISO 8601 timestamp or null")),
    }
}

/// Applies the body's writable fields to `settings`, validating each; returns the keys applied.
async fn apply_changes(
    state: &AppState,
    ws: WorkspaceId,
    settings: &mut CampaignSettings,
    body: &Map<String, Value>,
) -> Result<Vec<&'static str>, ApiError> {
    check_fields(body, &rules::WRITABLE_FIELDS)?;
    let mut changed = Vec::new();
    for &field in rules::WRITABLE_FIELDS.iter() {
        let Some(v) = body.get(field) else { continue };
        changed.push(field);
        match field {
            "name" => {
                let name = v.as_str().ok_or_else(|| field_error("name", "must be a string"))?;
                settings.name = rules::check_name(name).map_err(|e| field_error(e.field, &e.message))?;
            }
            "description" => {
                settings.description = match v {
                    Value::Null => String::new(),
                    Value::String(s) if s.chars().count() <= 2000 => s.clone(),
                    _ => return Err(field_error("description", "must be a string of at most 2000 characters")),
                }
            }
            "agent_id" => {
                settings.agent_id = match v {
                    Value::Null => None,
                    v => {
                        let id = AgentId::from_uuid(as_uuid(field, v)?);
                        state.store.agent(ws, id).await?.ok_or_else(|| field_error(field, "no such agent in this workspace"))?;
                        Some(id)
                    }
                }
            }
            "from_phone_number_id" => {
                settings.from_phone_number_id = match v {
                    Value::Null => None,
                    v => {
                        let id = PhoneNumberId::from_uuid(as_uuid(field, v)?);
                        state.store.phone_number(ws, id).await?.ok_or_else(|| field_error(field, "no such phone number in this workspace"))?;
                        Some(id)
                    }
                }
            }
            "regulatory_basis" => {
                settings.regulatory_basis = match v {
                    Value::Null => None,
                    v => Some(v.as_str().and_then(RegulatoryBasis::parse).ok_or_else(|| {
                        field_error(field, "must be one of consent, existing_customer, non_marketing, registry_screened")
                    })?),
                }
            }
            "stop_disposition_ids" => {
                let items = v.as_array().ok_or_else(|| field_error(field, "must be an array of disposition ids"))?;
                let mut ids = Vec::new();
                for item in items {
                    let id = DispositionId::from_uuid(as_uuid(field, item)?);
                    if !ids.contains(&id) {
                        ids.push(id);
                    }
                }
                let found = state.store.existing_dispositions(ws, &ids).await?;
                if found.len() != ids.len() {
                    return Err(field_error(field, "every id must be a disposition of this workspace"));
                }
                settings.stop_disposition_ids = ids;
            }
            "stop_on_no_answer" => settings.stop_on_no_answer = as_bool(field, v)?,
            "stop_on_voicemail" => settings.stop_on_voicemail = as_bool(field, v)?,
            "stop_on_unclassified" => settings.stop_on_unclassified = as_bool(field, v)?,
            "randomize_retry_time" => settings.randomize_retry_time = as_bool(field, v)?,
            "double_dial_enabled" => settings.double_dial_enabled = as_bool(field, v)?,
            "max_attempts" => settings.max_attempts = as_int(rules::MAX_ATTEMPTS, v)?,
            "max_infra_retries" => settings.max_infra_retries = as_int(rules::MAX_INFRA_RETRIES, v)?,
            "retry_no_answer_seconds" => settings.retry_no_answer_seconds = as_int(rules::RETRY_NO_ANSWER_SECONDS, v)?,
            "retry_completed_seconds" => settings.retry_completed_seconds = as_int(rules::RETRY_COMPLETED_SECONDS, v)?,
            "double_dial_gap_seconds" => settings.double_dial_gap_seconds = as_int(rules::DOUBLE_DIAL_GAP_SECONDS, v)?,
            "max_calls_per_day" => settings.max_calls_per_day = as_int(rules::MAX_CALLS_PER_DAY, v)?,
            "min_seconds_between_calls" => settings.min_seconds_between_calls = as_int(rules::MIN_SECONDS_BETWEEN_CALLS, v)?,
            "max_in_flight" => settings.max_in_flight = as_int(rules::MAX_IN_FLIGHT, v)?,
            "budget_cents" => {
                settings.budget_cents = match v {
                    Value::Null => None,
                    v if v.is_i64() || v.is_u64() => {
                        Some(rules::check_budget(v.as_i64().unwrap_or(0)).map_err(|e| field_error(e.field, &e.message))?)
                    }
                    _ => return Err(field_error(field, "must be a positive integer or null")),
                }
            }
            "calling_window" => {
                settings.calling_window = match v {
                    Value::Null => None,
                    v => Some(CallingWindow::from_json(v).map_err(|e| ApiError::bad_request(format!("Invalid field `calling_window`: {e}")))?),
                }
            }
            "starts_at" => settings.starts_at = as_time(field, v)?,
            "ends_at" => settings.ends_at = as_time(field, v)?,
            _ => {}
        }
    }
    rules::check_schedule(settings.starts_at, settings.ends_at)
        .map_err(|e| field_error(e.field, &e.message))?;
    Ok(changed)
}

/// Create a campaign (always `draft`)
#[utoipa::path(post, path = "/campaigns", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    request_body(content = Object, description = "name (required) and any writable field"),
    responses((status = 201, body = CampaignView), (status = 400), (status = 409)))]
async fn create(
    State(state): State<AppState>,
    auth: Auth,
    JsonObject(body): JsonObject,
) -> Result<(StatusCode, Json<CampaignView>), ApiError> {
    check_fields(&body, &rules::WRITABLE_FIELDS)?;
    if !body.contains_key("name") {
        return Err(ApiError::bad_request("Missing field `name`"));
    }
    let mut settings = CampaignSettings::defaults(String::new());
    apply_changes(&state, auth.workspace_id, &mut settings, &body).await?;
    let created = state
        .store
        .create_campaign(auth.workspace_id, &settings, auth.key_id)
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(view(&state, auth.workspace_id, created).await?),
    ))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// Only campaigns in this status (archived campaigns are never listed).
    status: Option<String>,
    limit: Option<i64>,
    offset: Option<i64>,
}

/// List campaigns (archived ones are hidden)
#[utoipa::path(get, path = "/campaigns", tag = "campaigns", security(("bearer" = ["campaigns:manage"])), params(ListQuery),
    responses((status = 200, body = ListResponse<CampaignView>)))]
async fn list(
    State(state): State<AppState>,
    auth: Auth,
    Q(query): Q<ListQuery>,
) -> Result<Json<ListResponse<CampaignView>>, ApiError> {
    let page = Pagination {
        limit: query.limit,
        offset: query.offset,
    }
    .page()?;
    let status = match query.status.as_deref() {
        None => None,
        Some(s) => Some(
            CampaignStatus::parse(s)
                .filter(|s| *s != CampaignStatus::Archived)
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "Invalid query parameter `status`: `{s}` is not a listable campaign status"
                    ))
                })?,
        ),
    };
    let paged = state
        .store
        .list_campaigns(auth.workspace_id, status, page)
        .await?;
    let mut items = Vec::with_capacity(paged.items.len());
    for c in paged.items {
        items.push(view(&state, auth.workspace_id, c).await?);
    }
    Ok(Json(ListResponse::new(
        crate::store::Paged {
            items,
            total: paged.total,
        },
        page,
    )))
}

/// Get a campaign
#[utoipa::path(get, path = "/campaigns/{id}", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = CampaignView), (status = 404)))]
async fn get_one(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<CampaignView>, ApiError> {
    let c = state
        .store
        .campaign(auth.workspace_id, CampaignId::from_uuid(id))
        .await?
        .ok_or(NOT_FOUND)?;
    Ok(Json(view(&state, auth.workspace_id, c).await?))
}

/// Update a campaign's writable fields (takes effect at the next evaluation)
#[utoipa::path(patch, path = "/campaigns/{id}", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path)), request_body(content = Object, description = "any subset of the writable fields"),
    responses((status = 200, body = CampaignView), (status = 400), (status = 404), (status = 409)))]
async fn update(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    JsonObject(body): JsonObject,
) -> Result<Json<CampaignView>, ApiError> {
    let ws = auth.workspace_id;
    let id = CampaignId::from_uuid(id);
    let current = state.store.campaign(ws, id).await?.ok_or(NOT_FOUND)?;
    check_fields(&body, &rules::WRITABLE_FIELDS)?;
    if body.is_empty() {
        return Err(ApiError::bad_request(format!(
            "No writable field given. Writable fields: {}",
            rules::WRITABLE_FIELDS.join(", ")
        )));
    }
    if current.status.is_terminal() {
        return Err(ApiError::bad_request(format!(
            "Campaign is {}; a {} campaign cannot be edited",
            current.status.as_str(),
            current.status.as_str()
        )));
    }
    let mut settings = current.settings.clone();
    let changed = apply_changes(&state, ws, &mut settings, &body).await?;
    if !state
        .store
        .update_campaign_settings(ws, id, current.status, &settings, &changed, auth.key_id)
        .await?
    {
        return Err(ApiError::Conflict {
            message: "The campaign changed status while it was being edited; retry".into(),
        });
    }
    if current.status != CampaignStatus::Draft {
        state.engine.campaign_changed(id);
    }
    let updated = state.store.campaign(ws, id).await?.ok_or(NOT_FOUND)?;
    Ok(Json(view(&state, ws, updated).await?))
}

/// The calling window a campaign runs in: its own, else the workspace's, else the default.
pub async fn effective_window(
    state: &AppState,
    ws: WorkspaceId,
    settings: &CampaignSettings,
) -> Result<CallingWindow, ApiError> {
    state
        .store
        .campaign_window(ws, settings)
        .await?
        .ok_or(ApiError::NotFound {
            resource: "Workspace",
        })
}

async fn preflight(
    state: &AppState,
    ws: WorkspaceId,
    c: &CampaignRecord,
) -> Result<Option<String>, ApiError> {
    let s = &c.settings;
    let agent = match s.agent_id {
        Some(id) => state.store.agent(ws, id).await?.map(|a| AgentFacts {
            is_active: a.is_active,
            max_call_duration_secs: a.max_call_duration_secs,
        }),
        None => None,
    };
    let number = match s.from_phone_number_id {
        Some(id) => state.store.phone_number(ws, id).await?,
        None => None,
    };
    let window = effective_window(state, ws, s).await?;
    let check = Preflight {
        agent_id_set: s.agent_id.is_some(),
        agent,
        from_number_id_set: s.from_phone_number_id.is_some(),
        from_number: number.as_ref().map(|n| NumberFacts {
            is_active: n.is_active,
            status: n.status.clone(),
            number: n.number.clone(),
        }),
        window: &window,
        now: state.store.now(),
        starts_at: s.starts_at,
        ends_at: s.ends_at,
    }
    .check();
    match check {
        Ok(()) => Ok(number.map(|n| n.number)),
        Err(problem) => Err(ApiError::CampaignNotReady {
            message: problem.to_string(),
        }),
    }
}

/// Runs a command against the state table; answers the campaign as it now is.
async fn command(
    state: &AppState,
    auth: &Auth,
    id: uuid::Uuid,
    command: Command,
) -> Result<CampaignView, ApiError> {
    let ws = auth.workspace_id;
    let id = CampaignId::from_uuid(id);
    // A concurrent command may win the optimistic check; decide again from the fresh status.
    for _ in 0..3 {
        let current = state.store.campaign_any(ws, id).await?.ok_or(NOT_FOUND)?;
        let transition = rules::transition(current.status, command).map_err(|e| match e {
            TransitionError::Archived => NOT_FOUND,
            other => ApiError::bad_request(other.to_string()),
        })?;
        let (to, event, from_number) = match transition {
            Transition::Unchanged(message) => {
                let mut v = view(state, ws, current).await?;
                v.message = Some(message.to_owned());
                return Ok(v);
            }
            Transition::Start(event) => {
                let from_number = preflight(state, ws, &current).await?;
                (
                    rules::start_status(state.store.now(), current.settings.starts_at),
                    event.as_str(),
                    from_number,
                )
            }
            Transition::To(to) => {
                let event = match to {
                    CampaignStatus::Paused => "paused",
                    CampaignStatus::Stopped => "stopped",
                    _ => "archived",
                };
                (to, event, None)
            }
        };
        let exclude: Option<(&[ContactState], ExclusionReason)> = match to {
            CampaignStatus::Archived => Some((
                &[
                    ContactState::Pending,
                    ContactState::Scheduled,
                    ContactState::Dialing,
                    ContactState::AwaitingDisposition,
                ],
                ExclusionReason::CampaignArchived,
            )),
            // Calls already on their way may finish; nobody new is dialled.
            CampaignStatus::Stopped => Some((
                &[ContactState::Pending, ContactState::Scheduled],
                ExclusionReason::CampaignStopped,
            )),
            _ => None,
        };
        let change = StatusChange {
            from: current.status,
            to,
            event,
            actor: Some(auth.key_id),
            from_number,
            exclude,
        };
        if state.store.change_campaign_status(ws, id, &change).await? {
            state.engine.campaign_changed(id);
            let now = state.store.campaign_any(ws, id).await?.ok_or(NOT_FOUND)?;
            return view(state, ws, now).await;
        }
    }
    Err(ApiError::Conflict {
        message: "The campaign is changing status concurrently; retry".into(),
    })
}

/// Launch a campaign (preflight: active from-number, agent with a duration cap, reachable calling window)
#[utoipa::path(post, path = "/campaigns/{id}/launch", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = CampaignView), (status = 400), (status = 404), (status = 422)))]
async fn launch(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<CampaignView>, ApiError> {
    Ok(Json(command(&state, &auth, id, Command::Launch).await?))
}

/// Resume a paused campaign (same preflight as launch)
#[utoipa::path(post, path = "/campaigns/{id}/resume", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = CampaignView), (status = 400), (status = 404), (status = 422)))]
async fn resume(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<CampaignView>, ApiError> {
    Ok(Json(command(&state, &auth, id, Command::Resume).await?))
}

/// Pause a campaign (never lifted automatically)
#[utoipa::path(post, path = "/campaigns/{id}/pause", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = CampaignView), (status = 400), (status = 404)))]
async fn pause(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<CampaignView>, ApiError> {
    Ok(Json(command(&state, &auth, id, Command::Pause).await?))
}

/// Stop a campaign for good (it stays readable)
#[utoipa::path(post, path = "/campaigns/{id}/stop", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = CampaignView), (status = 400), (status = 404)))]
async fn stop(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<CampaignView>, ApiError> {
    Ok(Json(command(&state, &auth, id, Command::Stop).await?))
}

#[derive(Serialize, ToSchema)]
struct Archived {
    success: bool,
    id: uuid::Uuid,
    status: &'static str,
}

/// Archive a campaign (from any status; frees its name)
#[utoipa::path(delete, path = "/campaigns/{id}", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = Archived), (status = 404)))]
async fn archive(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<Archived>, ApiError> {
    command(&state, &auth, id, Command::Archive).await?;
    Ok(Json(Archived {
        success: true,
        id,
        status: "archived",
    }))
}

/// A campaign's audit events, oldest first
#[utoipa::path(get, path = "/campaigns/{id}/events", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path), Pagination), responses((status = 200, body = ListResponse<CampaignEvent>), (status = 404)))]
async fn events(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    Q(p): Q<Pagination>,
) -> Result<Json<ListResponse<CampaignEvent>>, ApiError> {
    let page = p.page()?;
    let c = state
        .store
        .campaign(auth.workspace_id, CampaignId::from_uuid(id))
        .await?
        .ok_or(NOT_FOUND)?;
    Ok(Json(ListResponse::new(
        state
            .store
            .campaign_events(auth.workspace_id, c.id, page)
            .await?,
        page,
    )))
}

/// At most this many contacts in one JSON request.
pub const MAX_JSON_CONTACTS: usize = 10_000;

#[derive(Debug, Serialize, ToSchema)]
pub struct InvalidRow {
    /// 1-based position among the submitted contacts (CSV: data rows, after the header).
    pub row: usize,
    pub error: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EnrollResult {
    pub enrolled: i64,
    pub duplicates: i64,
    pub excluded_dnc: i64,
    pub invalid: Vec<InvalidRow>,
}

struct RawContact {
    phone_number: String,
    timezone: Option<String>,
    lead_id: Option<String>,
    variables: Map<String, Value>,
    metadata: Map<String, Value>,
}

fn parse_json_contacts(
    body: Map<String, Value>,
) -> Result<Vec<Result<RawContact, String>>, ApiError> {
    check_fields(&body, &["contacts"])?;
    let items = match body.get("contacts") {
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(ApiError::bad_request(
                "Invalid field `contacts`: must be an array",
            ));
        }
        None => return Err(ApiError::bad_request("Missing field `contacts`")),
    };
    if items.len() > MAX_JSON_CONTACTS {
        return Err(ApiError::bad_request(format!(
            "Too many contacts: at most {MAX_JSON_CONTACTS} per request (send CSV for more)"
        )));
    }
    Ok(items
        .iter()
        .map(|item| {
            let obj = item.as_object().ok_or("must be an object")?;
            if let Some(k) = obj.keys().find(|k| !["phone_number", "timezone", "lead_id", "variables", "metadata"].contains(&k.as_str())) {
                return Err(format!("unknown field `{k}`; allowed: phone_number, timezone, lead_id, variables, metadata"));
            }
            let text = |k: &str| -> Result<Option<String>, String> {
                match obj.get(k) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::String(s)) => Ok(Some(s.clone())),
                    Some(_) => Err(format!("`{k}` must be a string")),
                }
            };
            let object = |k: &str| -> Result<Map<String, Value>, String> {
                match obj.get(k) {
                    None | Some(Value::Null) => Ok(Map::new()),
                    Some(Value::Object(m)) => Ok(m.clone()),
                    Some(_) => Err(format!("`{k}` must be an object")),
                }
            };
            Ok(RawContact {
                phone_number: text("phone_number")?.ok_or("missing `phone_number`")?,
                timezone: text("timezone")?,
                lead_id: text("lead_id")?,
                variables: object("variables")?,
                metadata: object("metadata")?,
            })
        })
        .collect())
}

fn parse_csv_contacts(bytes: &[u8]) -> Result<Vec<Result<RawContact, String>>, ApiError> {
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(bytes);
    let headers: Vec<String> = reader
        .headers()
        .map_err(|e| ApiError::bad_request(format!("Invalid CSV header: {e}")))?
        .iter()
        .map(|h| h.trim().to_ascii_lowercase())
        .collect();
    let phone_col = headers
        .iter()
        .position(|h| h == "phone_number")
        .ok_or_else(|| ApiError::bad_request("CSV header must name a `phone_number` column"))?;
    let tz_col = headers.iter().position(|h| h == "timezone");
    let lead_col = headers.iter().position(|h| h == "lead_id");
    Ok(reader
        .records()
        .map(|record| {
            let record = record.map_err(|e| format!("unreadable CSV row: {e}"))?;
            let cell = |i: Option<usize>| {
                i.and_then(|i| record.get(i))
                    .filter(|v| !v.is_empty())
                    .map(str::to_owned)
            };
            let mut variables = Map::new();
            for (i, name) in headers.iter().enumerate() {
                if Some(i) != Some(phone_col)
                    && Some(i) != tz_col
                    && Some(i) != lead_col
                    && !name.is_empty()
                    && let Some(v) = record.get(i)
                {
                    variables.insert(name.clone(), Value::String(v.to_owned()));
                }
            }
            Ok(RawContact {
                phone_number: cell(Some(phone_col)).ok_or("missing phone_number")?,
                timezone: cell(tz_col),
                lead_id: cell(lead_col),
                variables,
                metadata: Map::new(),
            })
        })
        .collect())
}

/// Enroll contacts (JSON `{contacts: [...]}` up to 10,000, or a `text/csv` body)
#[utoipa::path(post, path = "/campaigns/{id}/contacts", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path)),
    request_body(content = Object, description = "JSON {contacts: [{phone_number, timezone?, lead_id?, variables?, metadata?}]} or text/csv with a phone_number column"),
    responses((status = 200, body = EnrollResult), (status = 400), (status = 404), (status = 413)))]
async fn enroll(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    req: Request,
) -> Result<Json<EnrollResult>, ApiError> {
    let ws = auth.workspace_id;
    let campaign = state
        .store
        .campaign(ws, CampaignId::from_uuid(id))
        .await?
        .ok_or(NOT_FOUND)?;
    let is_csv = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.to_ascii_lowercase().starts_with("text/csv"));
    let raw = if is_csv {
        let bytes = read_body(req, state.config.max_csv_body_bytes).await?;
        parse_csv_contacts(&bytes)?
    } else {
        let JsonObject(body) = JsonObject::from_request(req, &state).await?;
        parse_json_contacts(body)?
    };
    if campaign.status.is_terminal() {
        return Err(ApiError::bad_request(format!(
            "Campaign is {}; contacts cannot be enrolled",
            campaign.status.as_str()
        )));
    }
    let country = state.store.default_country(ws).await?;
    let blocked = state
        .store
        .blocked_numbers(ws, campaign.settings.agent_id, state.store.now())
        .await?;
    // Contacts may reference the workspace's leads; any other id is an invalid row.
    let mut lead_ids: Vec<LeadId> = raw
        .iter()
        .filter_map(|r| r.as_ref().ok()?.lead_id.as_deref()?.parse().ok())
        .collect();
    lead_ids.sort_by_key(|l| l.as_uuid());
    lead_ids.dedup();
    let leads = state.store.existing_leads(ws, &lead_ids).await?;
    let mut seen = std::collections::HashSet::with_capacity(raw.len());
    let mut contacts = Vec::with_capacity(raw.len());
    let mut invalid = Vec::new();
    let mut duplicates = 0;
    for (i, item) in raw.into_iter().enumerate() {
        let row = i + 1;
        let checked = item.and_then(|c| {
            let number = PhoneNumber::parse(&c.phone_number, country).map_err(|e| e.to_string())?;
            if let Some(tz) = &c.timezone {
                tz.parse::<chrono_tz::Tz>()
                    .map_err(|_| format!("`{tz}` is not an IANA time zone"))?;
            }
            let lead_id = c
                .lead_id
                .as_deref()
                .map(|l| {
                    uuid::Uuid::parse_str(l)
                        .map(LeadId::from_uuid)
                        .map_err(|_| format!("lead_id `{l}` is not a UUID"))
                })
                .transpose()?;
            if let Some(lead) = lead_id
                && !leads.contains(&lead)
            {
                return Err(format!("lead_id `{lead}` is not a lead of this workspace"));
            }
            Ok(NewContact {
                excluded: blocked
                    .contains(number.as_str())
                    .then_some(ExclusionReason::DoNotCall),
                phone_number: number.as_str().to_owned(),
                timezone: c.timezone,
                lead_id,
                variables: Value::Object(c.variables),
                metadata: Value::Object(c.metadata),
            })
        });
        match checked {
            Ok(contact) => {
                if seen.insert(contact.phone_number.clone()) {
                    contacts.push(contact);
                } else {
                    duplicates += 1;
                }
            }
            Err(error) => invalid.push(InvalidRow { row, error }),
        }
    }
    let counts = state
        .store
        .enroll_contacts(auth.workspace_id, campaign.id, &contacts, auth.key_id)
        .await?
        .ok_or(NOT_FOUND)?;
    if campaign.status != CampaignStatus::Draft {
        state.engine.campaign_changed(campaign.id);
    }
    Ok(Json(EnrollResult {
        enrolled: counts.enrolled,
        duplicates: duplicates + counts.duplicates,
        excluded_dnc: counts.excluded,
        invalid,
    }))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ContactQuery {
    /// pending, dialing, awaiting_disposition, scheduled, retired, exhausted or excluded.
    state: Option<String>,
    limit: Option<i64>,
    offset: Option<i64>,
}

/// List a campaign's contacts
#[utoipa::path(get, path = "/campaigns/{id}/contacts", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path), ContactQuery), responses((status = 200, body = ListResponse<Contact>), (status = 404)))]
async fn list_contacts(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    Q(q): Q<ContactQuery>,
) -> Result<Json<ListResponse<Contact>>, ApiError> {
    let page = Pagination {
        limit: q.limit,
        offset: q.offset,
    }
    .page()?;
    let contact_state = q
        .state
        .as_deref()
        .map(|s| {
            ContactState::parse(s).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "Invalid query parameter `state`: `{s}` is not a contact state"
                ))
            })
        })
        .transpose()?;
    let c = state
        .store
        .campaign(auth.workspace_id, CampaignId::from_uuid(id))
        .await?
        .ok_or(NOT_FOUND)?;
    Ok(Json(ListResponse::new(
        state
            .store
            .list_contacts(auth.workspace_id, c.id, contact_state, page)
            .await?,
        page,
    )))
}

/// Why a contact is, or is not, being dialled now.
#[derive(Debug, Serialize, ToSchema)]
pub struct ContactStatus {
    /// `call_in_progress`, `awaiting_disposition`, `retry_scheduled`, `outside_calling_window`,
    /// `daily_cap_reached`, `waiting_for_a_slot`, `campaign_<status>`, `retired`, `exhausted`,
    /// `excluded:<reason>`.
    pub reason: String,
    /// When that changes, if known.
    pub until: Option<DateTime<Utc>>,
    pub message: String,
}

/// A contact with its calls (every dial of every attempt) and why it is where it is.
#[derive(Debug, Serialize, ToSchema)]
pub struct ContactDetail {
    #[serde(flatten)]
    pub contact: Contact,
    /// Every call placed for the contact, oldest first.
    pub calls: Vec<CallRecord>,
    pub dialing_status: ContactStatus,
}

async fn contact_status(
    state: &AppState,
    c: &CampaignRecord,
    contact: &Contact,
    calls: &[CallRecord],
) -> Result<ContactStatus, ApiError> {
    let now = state.store.now();
    let status = |reason: &str, until: Option<DateTime<Utc>>, message: String| ContactStatus {
        reason: reason.to_owned(),
        until,
        message,
    };
    let contact_state = ContactState::parse(&contact.state);
    match contact_state {
        Some(ContactState::Dialing) => {
            return Ok(status(
                "call_in_progress",
                None,
                "A call of this attempt is queued or live".into(),
            ));
        }
        Some(ContactState::AwaitingDisposition) => {
            let until = calls.last().and_then(|k| k.ended_at).and_then(|t| {
                chrono::Duration::from_std(state.config.disposition_timeout)
                    .ok()
                    .map(|d| t + d)
            });
            return Ok(status(
                "awaiting_disposition",
                until,
                "The call was answered; waiting for a disposition (unclassified after the timeout)"
                    .into(),
            ));
        }
        Some(ContactState::Retired) => {
            return Ok(status(
                "retired",
                None,
                "A stop outcome or disposition landed; never dialled again".into(),
            ));
        }
        Some(ContactState::Exhausted) => {
            return Ok(status(
                "exhausted",
                None,
                format!(
                    "All {} attempts were made; raising max_attempts does not revive it",
                    contact.attempts
                ),
            ));
        }
        Some(ContactState::Excluded) => {
            let why = contact.excluded_reason.clone().unwrap_or_default();
            return Ok(status(
                &format!("excluded:{why}"),
                None,
                format!("Excluded ({why}); never dialled again"),
            ));
        }
        _ => {}
    }
    if c.status != CampaignStatus::Running {
        return Ok(status(
            &format!("campaign_{}", c.status.as_str()),
            None,
            format!("The campaign is {}; nobody is admitted", c.status.as_str()),
        ));
    }
    let window = effective_window(state, c.workspace_id, &c.settings).await?;
    let zone = switchboard_actors::policy::contact_zone(
        &window,
        contact.timezone.as_deref(),
        &contact.phone_number,
    );
    if !window.is_open_at(now, zone) {
        let horizon = c
            .settings
            .ends_at
            .unwrap_or(now + chrono::Duration::days(8));
        return Ok(status(
            "outside_calling_window",
            window.next_open(now, horizon, zone),
            format!("Outside the calling window in {zone}"),
        ));
    }
    if let Some(at) = contact.next_attempt_at
        && at > now
    {
        return Ok(status(
            "retry_scheduled",
            Some(at),
            "Waiting for the retry time".into(),
        ));
    }
    let today = switchboard_actors::policy::local_date(now, window.timezone);
    if c.daily_window_date == Some(today) && c.daily_admitted_count >= c.settings.max_calls_per_day
    {
        return Ok(status(
            "daily_cap_reached",
            Some(switchboard_actors::policy::next_local_midnight(
                now,
                window.timezone,
            )),
            format!(
                "max_calls_per_day ({}) reached for {today}",
                c.settings.max_calls_per_day
            ),
        ));
    }
    Ok(status(
        "waiting_for_a_slot",
        None,
        format!(
            "Due; admitted as pacing allows (last evaluation: {})",
            c.last_tick_result.as_deref().unwrap_or("none yet")
        ),
    ))
}

/// Get one contact of a campaign, with its calls and why it is or is not being dialled now
#[utoipa::path(get, path = "/campaigns/{id}/contacts/{contact_id}", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path), ("contact_id" = uuid::Uuid, Path)), responses((status = 200, body = ContactDetail), (status = 404)))]
async fn get_contact(
    State(state): State<AppState>,
    auth: Auth,
    PathIds(id, contact_id): PathIds,
) -> Result<Json<ContactDetail>, ApiError> {
    let c = state
        .store
        .campaign(auth.workspace_id, CampaignId::from_uuid(id))
        .await?
        .ok_or(NOT_FOUND)?;
    let contact = state
        .store
        .contact(auth.workspace_id, c.id, ContactId::from_uuid(contact_id))
        .await?
        .ok_or(ApiError::NotFound {
            resource: "Contact",
        })?;
    let calls = state
        .store
        .contact_calls(auth.workspace_id, contact.id)
        .await?;
    let dialing_status = contact_status(&state, &c, &contact, &calls).await?;
    Ok(Json(ContactDetail {
        contact,
        calls,
        dialing_status,
    }))
}
