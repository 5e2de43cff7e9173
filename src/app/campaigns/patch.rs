//! A campaign's settings changed: each writable field's rule, applied to the stored settings
//! (PATCH, and creation with the same rules).

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use switchboard_actors::campaign::{self as rules, CampaignStatus, IntRule, RegulatoryBasis};
use switchboard_actors::ids::{AgentId, CampaignId, DispositionId, PhoneNumberId, WorkspaceId};
use switchboard_actors::window::CallingWindow;

use crate::app::auth::Auth;
use crate::app::campaigns::view::{CampaignView, NOT_FOUND, view};
use crate::app::error::AppError;
use crate::app::fields::check_fields;
use crate::app::state::App;
use crate::store::CampaignSettings;

/// The longest description, in characters.
pub const DESCRIPTION_MAX: usize = 2000;

fn field_error(field: &str, message: &str) -> AppError {
    AppError::invalid_field(field, message.to_string())
}

pub fn as_bool(field: &str, v: &Value) -> Result<bool, AppError> {
    v.as_bool()
        .ok_or_else(|| field_error(field, "must be a boolean"))
}

fn as_int(rule: IntRule, v: &Value) -> Result<i64, AppError> {
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

pub fn as_uuid(field: &str, v: &Value) -> Result<uuid::Uuid, AppError> {
    v.as_str()
        .and_then(|s| uuid::Uuid::parse_str(s).ok())
        .ok_or_else(|| field_error(field, "must be a UUID"))
}

fn as_time(field: &str, v: &Value) -> Result<Option<DateTime<Utc>>, AppError> {
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
pub async fn apply_changes(
    state: &App,
    ws: WorkspaceId,
    settings: &mut CampaignSettings,
    body: &Map<String, Value>,
) -> Result<Vec<&'static str>, AppError> {
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
                    Value::String(s) if s.chars().count() <= DESCRIPTION_MAX => s.clone(),
                    _ => return Err(field_error("description", &format!("must be a string of at most {DESCRIPTION_MAX} characters"))),
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
                    v => Some(CallingWindow::from_json(v).map_err(|e| AppError::invalid_field("calling_window", e.to_string()))?),
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

/// PATCH of a campaign: `body`'s writable fields, each by its rule; answers the campaign as it
/// now is.
pub async fn update_campaign(
    state: &App,
    auth: &Auth,
    id: CampaignId,
    body: &Map<String, Value>,
) -> Result<CampaignView, AppError> {
    let ws = auth.workspace_id;
    let current = state.store.campaign(ws, id).await?.ok_or(NOT_FOUND)?;
    check_fields(body, &rules::WRITABLE_FIELDS)?;
    crate::app::fields::some_field(body, &rules::WRITABLE_FIELDS)?;
    if current.status.is_terminal() {
        return Err(AppError::bad_request(format!(
            "Campaign is {}; a {} campaign cannot be edited",
            current.status.as_str(),
            current.status.as_str()
        )));
    }
    let mut settings = current.settings.clone();
    let changed = apply_changes(state, ws, &mut settings, body).await?;
    if !state
        .store
        .update_campaign_settings(ws, id, current.status, &settings, &changed, auth.key_id)
        .await?
    {
        return Err(AppError::Conflict {
            message: "The campaign changed status while it was being edited; retry".into(),
        });
    }
    if current.status != CampaignStatus::Draft {
        state.engine.campaign_changed(id);
    }
    let updated = state.store.campaign(ws, id).await?.ok_or(NOT_FOUND)?;
    view(state, ws, updated).await
}

/// Creates a `draft` campaign from `body` (`name` required, the PATCH rules for every field).
pub async fn create_campaign(
    state: &App,
    auth: &Auth,
    body: &Map<String, Value>,
) -> Result<CampaignView, AppError> {
    check_fields(body, &rules::WRITABLE_FIELDS)?;
    if !body.contains_key("name") {
        return Err(AppError::missing_field("name"));
    }
    let mut settings = CampaignSettings::defaults(String::new());
    apply_changes(state, auth.workspace_id, &mut settings, body).await?;
    let created = state
        .store
        .create_campaign(auth.workspace_id, &settings, auth.key_id)
        .await?;
    view(state, auth.workspace_id, created).await
}
