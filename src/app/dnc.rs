//! The do-not-call list: what adding, changing and removing an entry do and refuse.

use crate::app::auth::Auth;
use crate::app::error::AppError;
use crate::app::fields::{Patch, parse_fields};
use crate::app::state::App;
use crate::store::{DncEntry, DncSource, DncUpdate, NewDncEntry};
use chrono::{DateTime, SubsecRound, Utc};
use serde::Deserialize;
use serde_json::{Map, Value};
use switchboard_actors::ids::{AgentId, DncEntryId};
use switchboard_actors::phone::PhoneNumber;
use utoipa::ToSchema;

pub async fn create(
    state: &App,
    auth: &Auth,
    body: Map<String, Value>,
) -> Result<DncEntry, AppError> {
    let input: DncInput = parse_fields(body, CREATE_FIELDS)?;
    let raw = input
        .phone_number
        .as_deref()
        .ok_or_else(|| AppError::missing_field("phone_number"))?;
    let number = parse_number(state, auth, raw, NumberIn::Field("phone_number")).await?;
    let reason = input
        .reason
        .as_deref()
        .map(check_reason)
        .transpose()?
        .unwrap_or_default();
    let expires_at = match input.expires_at {
        Patch::Value(at) => Some(check_expiry(at, state.store.now())?),
        Patch::Absent | Patch::Null => None,
    };
    let agent_ids = check_agents(state, auth, input.agent_ids.unwrap_or_default()).await?;
    let new = NewDncEntry {
        phone_number: &number,
        reason: &reason,
        source: DncSource::Api,
        expires_at,
        agent_ids: &agent_ids,
        created_by: Some(auth.key_id),
    };
    let created = state
        .store
        .create_dnc_entry(auth.workspace_id, &new)
        .await?;
    Ok(created)
}

pub async fn update(
    state: &App,
    auth: &Auth,
    id: uuid::Uuid,
    body: Map<String, Value>,
) -> Result<DncEntry, AppError> {
    let id = DncEntryId::from_uuid(id);
    crate::app::fields::some_field(&body, UPDATE_FIELDS)?;
    let input: DncInput = parse_fields(body, UPDATE_FIELDS)?;
    // Another workspace's id reads as missing before anything about the body is checked.
    if state
        .store
        .dnc_entry(auth.workspace_id, id)
        .await?
        .is_none()
    {
        return Err(AppError::not_found("Do-not-call entry"));
    }
    let reason = input.reason.as_deref().map(check_reason).transpose()?;
    let expires_at = match input.expires_at {
        Patch::Absent => None,
        Patch::Null => Some(None),
        Patch::Value(at) => Some(Some(check_expiry(at, state.store.now())?)),
    };
    let agent_ids = match input.agent_ids {
        Some(ids) => Some(check_agents(state, auth, ids).await?),
        None => None,
    };
    let change = DncUpdate {
        reason: reason.as_deref(),
        expires_at,
        agent_ids: agent_ids.as_deref(),
    };
    let updated = state
        .store
        .update_dnc_entry(auth.workspace_id, id, &change)
        .await?;
    updated.ok_or(AppError::not_found("Do-not-call entry"))
}

pub async fn delete(
    state: &App,
    auth: &Auth,
    id: uuid::Uuid,
) -> Result<serde_json::Value, AppError> {
    let removed = state
        .store
        .delete_dnc_entry(auth.workspace_id, DncEntryId::from_uuid(id))
        .await?;
    crate::app::fields::deleted(removed, id, "Do-not-call entry")
}

pub const CREATE_FIELDS: &[&str] = &["phone_number", "reason", "expires_at", "agent_ids"];

pub const UPDATE_FIELDS: &[&str] = &["reason", "expires_at", "agent_ids"];

pub const MAX_REASON_CHARS: usize = 500;

#[derive(Deserialize, ToSchema)]
pub struct DncInput {
    /// The number in any common format; national forms are read in the workspace's country.
    /// Required when adding; cannot be changed afterwards.
    pub phone_number: Option<String>,
    /// Why the number must not be called (up to 500 characters).
    #[schema(max_length = 500)]
    pub reason: Option<String>,
    /// When the entry stops applying (must be in the future); null or omitted for never.
    #[serde(default)]
    #[schema(value_type = Option<DateTime<Utc>>)]
    pub expires_at: Patch<DateTime<Utc>>,
    /// Agents of the workspace the entry applies to; empty or omitted for every agent.
    #[schema(value_type = Option<Vec<uuid::Uuid>>)]
    pub agent_ids: Option<Vec<uuid::Uuid>>,
}

pub fn check_reason(reason: &str) -> Result<String, AppError> {
    let reason = reason.trim();
    if reason.chars().count() > MAX_REASON_CHARS {
        return Err(AppError::invalid_field(
            "reason",
            format!("must be at most {MAX_REASON_CHARS} characters"),
        ));
    }
    Ok(reason.to_owned())
}

pub fn check_expiry(
    expires_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<DateTime<Utc>, AppError> {
    let expires_at = expires_at.trunc_subsecs(6);
    if expires_at <= now {
        return Err(AppError::invalid_field(
            "expires_at",
            "must be in the future",
        ));
    }
    Ok(expires_at)
}

/// Agent ids, deduplicated, all of which must be agents of the workspace.
pub async fn check_agents(
    state: &App,
    auth: &Auth,
    ids: Vec<uuid::Uuid>,
) -> Result<Vec<AgentId>, AppError> {
    let mut agents: Vec<AgentId> = Vec::with_capacity(ids.len());
    for id in ids.into_iter().map(AgentId::from_uuid) {
        if !agents.contains(&id) {
            agents.push(id);
        }
    }
    let unknown = state
        .store
        .dnc_unknown_agents(auth.workspace_id, &agents)
        .await?;
    if let Some(first) = unknown.first() {
        return Err(AppError::invalid_field(
            "agent_ids",
            format!("{first} is not an agent of this workspace"),
        ));
    }
    Ok(agents)
}

/// Where a phone number to parse was sent, for the refusal's wording.
pub enum NumberIn {
    /// A body field.
    Field(&'static str),
    /// A query parameter.
    Query(&'static str),
}

/// A phone number in any common form, read in the workspace's default country; the E.164 form.
pub async fn parse_number(
    state: &App,
    auth: &Auth,
    input: &str,
    sent_in: NumberIn,
) -> Result<String, AppError> {
    let country = state.store.default_country(auth.workspace_id).await?;
    PhoneNumber::parse(input, country)
        .map(|n| n.as_str().to_owned())
        .map_err(|err| match sent_in {
            NumberIn::Field(field) => AppError::invalid_field(field, err.to_string()),
            NumberIn::Query(name) => {
                AppError::bad_request(format!("Invalid query parameter `{name}`: {err}"))
            }
        })
}
