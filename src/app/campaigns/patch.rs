//! A campaign's settings changed: each setting of the table (`campaign::SETTINGS`) read by its
//! kind and applied to the stored settings (PATCH, and creation with the same rules), and
//! PATCH refused for a setting its rule does not let change in the campaign's status.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use switchboard_actors::campaign::{
    self as rules, CampaignStatus, IntRule, RegulatoryBasis, SettingKind,
};
use switchboard_actors::ids::{AgentId, CampaignId, DispositionId, PhoneNumberId, WorkspaceId};
use switchboard_actors::money::Cents;
use switchboard_actors::window::CallingWindow;

use crate::app::auth::Auth;
use crate::app::campaigns::view::{CampaignView, NOT_FOUND, view};
use crate::app::error::AppError;
use crate::app::fields::check_fields;
use crate::app::state::App;
use crate::store::CampaignSettings;

use rules::DESCRIPTION_MAX;

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

/// Applies the body's writable fields to `settings`, each read by its kind in the table's order;
/// returns the keys applied, or the first field's refusal.
pub async fn apply_changes(
    state: &App,
    ws: WorkspaceId,
    settings: &mut CampaignSettings,
    body: &Map<String, Value>,
) -> Result<Vec<&'static str>, AppError> {
    let (changed, mut refused) = apply_each(state, ws, settings, body).await?;
    if refused.is_empty() {
        Ok(changed)
    } else {
        Err(refused.remove(0))
    }
}

/// Applies every writable field of the body that its rule takes, in the table's order: the keys
/// applied, and each field's refusal (a form shows them all at once). A failure of the store is
/// the error.
async fn apply_each(
    state: &App,
    ws: WorkspaceId,
    settings: &mut CampaignSettings,
    body: &Map<String, Value>,
) -> Result<(Vec<&'static str>, Vec<AppError>), AppError> {
    check_fields(body, &rules::WRITABLE_FIELDS)?;
    let mut changed = Vec::new();
    let mut refused = Vec::new();
    for setting in rules::SETTINGS.iter() {
        let Some(v) = body.get(setting.field) else {
            continue;
        };
        changed.push(setting.field);
        match apply_one(state, ws, settings, setting, v).await {
            Ok(()) => {}
            Err(e @ (AppError::InvalidField { .. } | AppError::MissingField { .. })) => {
                refused.push(e)
            }
            Err(e) => return Err(e),
        }
    }
    if let Err(e) = rules::check_schedule(settings.rules.starts_at, settings.rules.ends_at) {
        refused.push(field_error(e.field, &e.message));
    }
    Ok((changed, refused))
}

/// One field's value applied to `settings` by its setting's kind.
async fn apply_one(
    state: &App,
    ws: WorkspaceId,
    settings: &mut CampaignSettings,
    setting: &rules::Setting,
    v: &Value,
) -> Result<(), AppError> {
    let field = setting.field;
    match setting.kind {
        SettingKind::Name => {
            let name = v
                .as_str()
                .ok_or_else(|| field_error(field, "must be a string"))?;
            settings.name =
                rules::check_name(name).map_err(|e| field_error(e.field, &e.message))?;
        }
        SettingKind::Description => {
            settings.description = match v {
                Value::Null => String::new(),
                Value::String(s) if s.chars().count() <= DESCRIPTION_MAX => s.clone(),
                _ => {
                    return Err(field_error(
                        field,
                        &format!("must be a string of at most {DESCRIPTION_MAX} characters"),
                    ));
                }
            }
        }
        SettingKind::Agent => {
            settings.agent_id = match v {
                Value::Null => None,
                v => {
                    let id = AgentId::from_uuid(as_uuid(field, v)?);
                    state
                        .store
                        .agent(ws, id)
                        .await?
                        .ok_or_else(|| field_error(field, "no such agent in this workspace"))?;
                    Some(id)
                }
            }
        }
        SettingKind::PhoneNumber => {
            settings.from_phone_number_id = match v {
                Value::Null => None,
                v => {
                    let id = PhoneNumberId::from_uuid(as_uuid(field, v)?);
                    state.store.phone_number(ws, id).await?.ok_or_else(|| {
                        field_error(field, "no such phone number in this workspace")
                    })?;
                    Some(id)
                }
            }
        }
        SettingKind::RegulatoryBasis => settings.regulatory_basis = match v {
            Value::Null => None,
            v => Some(v.as_str().and_then(RegulatoryBasis::parse).ok_or_else(|| {
                field_error(
                    field,
                    "must be one of consent, existing_customer, non_marketing, registry_screened",
                )
            })?),
        },
        SettingKind::Dispositions => {
            settings.rules.stop_disposition_ids = dispositions(state, ws, field, v).await?;
        }
        SettingKind::Flag => {
            let value = as_bool(field, v)?;
            if let Some(slot) = settings.rules.flag_mut(field) {
                *slot = value;
            }
        }
        SettingKind::Int(rule) => {
            let value = as_int(rule, v)?;
            if let Some(slot) = settings.rules.int_mut(field) {
                *slot = value;
            }
        }
        SettingKind::Budget => {
            settings.rules.budget_cents = match v {
                Value::Null => None,
                v if v.is_i64() || v.is_u64() => Some(Cents::new(
                    rules::check_budget(v.as_i64().unwrap_or(0))
                        .map_err(|e| field_error(e.field, &e.message))?,
                )),
                _ => return Err(field_error(field, "must be a positive integer or null")),
            }
        }
        SettingKind::CallingWindow => {
            settings.calling_window = match v {
                Value::Null => None,
                v => Some(
                    CallingWindow::from_json(v)
                        .map_err(|e| AppError::invalid_field(field, e.to_string()))?,
                ),
            }
        }
        SettingKind::Time => {
            let value = as_time(field, v)?;
            if let Some(slot) = settings.rules.time_mut(field) {
                *slot = value;
            }
        }
    }
    Ok(())
}

/// Every refusal a PATCH of campaign `id` with `body` meets, field by field in the table's
/// order (the API answers the first; a form shows them all). Empty: it would be taken.
pub async fn refusals(
    state: &App,
    auth: &Auth,
    id: CampaignId,
    body: &Map<String, Value>,
) -> Result<Vec<AppError>, AppError> {
    let current = state
        .store
        .campaign(auth.workspace_id, id)
        .await?
        .ok_or(NOT_FOUND)?;
    let mut settings = current.settings.clone();
    Ok(apply_each(state, auth.workspace_id, &mut settings, body)
        .await?
        .1)
}

/// `stop_disposition_ids`: distinct dispositions of the workspace, in the order sent.
async fn dispositions(
    state: &App,
    ws: WorkspaceId,
    field: &str,
    v: &Value,
) -> Result<Vec<DispositionId>, AppError> {
    let items = v
        .as_array()
        .ok_or_else(|| field_error(field, "must be an array of disposition ids"))?;
    let mut ids = Vec::new();
    for item in items {
        let id = DispositionId::from_uuid(as_uuid(field, item)?);
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    let found = state.store.existing_dispositions(ws, &ids).await?;
    if found.len() != ids.len() {
        return Err(field_error(
            field,
            "every id must be a disposition of this workspace",
        ));
    }
    Ok(ids)
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
    let fixed = rules::SETTINGS
        .iter()
        .filter(|s| body.contains_key(s.field))
        .any(|s| !s.changeable.allows(current.status));
    if fixed {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_integer_flag_and_time_setting_of_the_table_has_its_place_in_the_settings() {
        let mut settings = CampaignSettings::defaults("x".into());
        for setting in rules::SETTINGS {
            let field = setting.field;
            match setting.kind {
                SettingKind::Int(rule) => {
                    assert_eq!(settings.rules.int_mut(field).copied(), Some(rule.default));
                }
                SettingKind::Flag => {
                    assert_eq!(settings.rules.flag_mut(field).copied(), Some(false))
                }
                SettingKind::Time => {
                    assert_eq!(settings.rules.time_mut(field).copied(), Some(None))
                }
                _ => {}
            }
        }
    }
}
