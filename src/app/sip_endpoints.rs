//! SIP endpoints: what creating one does and refuses (its name, cap, source filter and agent),
//! the slug drawn for it, and how it is shown.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use switchboard_actors::ids::{AgentId, SipEndpointId};
use switchboard_actors::slug::{SipSlug, SlugPrefix};
use switchboard_sip::acl::{IpNet, IpNetError};
use utoipa::ToSchema;

use crate::app::auth::Auth;
use crate::app::error::AppError;
use crate::store::{NewSipEndpoint, SipEndpoint, SipEndpointCreation};

use crate::app::agents::rules::workspace_agent;
use crate::app::fields::{Patch, deleted, parse_fields};
use crate::app::state::App;
use crate::store::SipEndpointUpdate;

pub const CREATE_FIELDS: &[&str] = &[
    "name",
    "inbound_agent_id",
    "slug",
    "allowed_source_ips",
    "max_concurrent_calls",
];

pub const UPDATE_FIELDS: &[&str] = &[
    "name",
    "inbound_agent_id",
    "is_active",
    "allowed_source_ips",
    "max_concurrent_calls",
];

/// The largest per-endpoint cap on concurrent calls.
const CAP_MAX: i64 = 10_000;

pub const NAME_MAX: usize = 120;

pub const SOURCES_MAX: usize = 100;

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

pub fn view(state: &App, e: SipEndpoint) -> SipEndpointView {
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

#[derive(Deserialize, ToSchema)]
pub struct CreateInput {
    /// Label, 1-120 characters.
    #[schema(min_length = 1, max_length = 120, pattern = "^[^\\x00-\\x1f\\x7f]*$")]
    pub name: Option<String>,
    /// The agent answering calls.
    #[serde(default)]
    #[schema(value_type = Option<uuid::Uuid>)]
    pub inbound_agent_id: Patch<uuid::Uuid>,
    /// Prefix of the slug: at most 12 lowercase letters, digits and single hyphens (derived
    /// from the name when omitted).
    #[schema(min_length = 1, max_length = 12, pattern = "^[a-z0-9]+(-[a-z0-9]+)*$")]
    pub slug: Option<String>,
    /// Addresses or CIDR blocks calls may come from; `null` or omitted accepts any source.
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>)]
    pub allowed_source_ips: Patch<Vec<String>>,
    /// Calls at once (ringing or answered), 1-10000; `null` or omitted: no cap of its own.
    #[serde(default)]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 10000)]
    pub max_concurrent_calls: Patch<i64>,
}

#[derive(Deserialize, ToSchema)]
pub struct UpdateInput {
    /// Label, 1-120 characters.
    #[schema(min_length = 1, max_length = 120, pattern = "^[^\\x00-\\x1f\\x7f]*$")]
    pub name: Option<String>,
    #[serde(default)]
    #[schema(value_type = Option<uuid::Uuid>)]
    pub inbound_agent_id: Patch<uuid::Uuid>,
    pub is_active: Option<bool>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>)]
    pub allowed_source_ips: Patch<Vec<String>>,
    /// Calls at once, 1-10000; `null` removes the cap.
    #[serde(default)]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 10000)]
    pub max_concurrent_calls: Patch<i64>,
}

/// Checks a cap on concurrent calls (`None` for null: no cap).
pub fn check_cap(cap: Option<i64>) -> Result<Option<i64>, AppError> {
    match cap {
        Some(n) if !(1..=CAP_MAX).contains(&n) => Err(AppError::invalid_field(
            "max_concurrent_calls",
            format!("must be 1-{CAP_MAX}, or null for no cap"),
        )),
        cap => Ok(cap),
    }
}

pub fn check_name(name: &str) -> Result<String, AppError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > NAME_MAX || name.chars().any(char::is_control) {
        return Err(AppError::invalid_field(
            "name",
            format!("must be 1-{NAME_MAX} characters without control characters"),
        ));
    }
    Ok(name.to_owned())
}

/// Validates and normalizes a source list (`None` for null: any source).
pub fn check_sources(list: Option<Vec<String>>) -> Result<Option<Vec<String>>, AppError> {
    let Some(list) = list else {
        return Ok(None);
    };
    if list.is_empty() {
        return Err(AppError::invalid_field(
            "allowed_source_ips",
            "an empty list would refuse every caller; send null to accept any source, or set is_active to false",
        ));
    }
    if list.len() > SOURCES_MAX {
        return Err(AppError::invalid_field(
            "allowed_source_ips",
            format!("at most {SOURCES_MAX} entries"),
        ));
    }
    let mut out: Vec<String> = Vec::with_capacity(list.len());
    for (i, entry) in list.iter().enumerate() {
        let net: IpNet = entry.parse().map_err(|err: IpNetError| {
            AppError::invalid_field(format!("allowed_source_ips[{i}]"), err.to_string())
        })?;
        let text = net.to_string();
        if !out.contains(&text) {
            out.push(text);
        }
    }
    Ok(Some(out))
}

/// Creates an endpoint from `body` as `POST /sip-endpoints` reads it; its view, slug included
/// (the one time the dashboard shows it whole).
pub async fn create_endpoint(
    state: &App,
    auth: &Auth,
    body: Map<String, Value>,
) -> Result<SipEndpointView, AppError> {
    let input: CreateInput = parse_fields(body, CREATE_FIELDS)?;
    let name = check_name(
        input
            .name
            .as_deref()
            .ok_or_else(|| AppError::missing_field("name"))?,
    )?;
    let prefix = match input.slug.as_deref() {
        Some(prefix) => {
            SlugPrefix::parse(prefix).map_err(|e| AppError::invalid_field("slug", e.to_string()))?
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
                return Err(AppError::Quota {
                    message: format!(
                        "At most {} SIP endpoints may be created per workspace per day",
                        state.config.sip_endpoint_daily_limit
                    ),
                });
            }
            SipEndpointCreation::SlugTaken => continue,
        }
    }
    Err(AppError::Internal(anyhow::anyhow!(
        "no free SIP endpoint slug after three draws"
    )))
}

pub async fn update_endpoint(
    state: &App,
    auth: &Auth,
    id: uuid::Uuid,
    body: Map<String, Value>,
) -> Result<SipEndpointView, AppError> {
    crate::app::fields::some_field(&body, UPDATE_FIELDS)?;
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
        state,
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
        .ok_or(AppError::not_found("SIP endpoint"))?;
    reload(state, updated.id).await;
    Ok(view(state, updated))
}

pub async fn delete_endpoint(
    state: &App,
    auth: &Auth,
    id: uuid::Uuid,
) -> Result<serde_json::Value, AppError> {
    let id = SipEndpointId::from_uuid(id);
    let removed = state
        .store
        .delete_sip_endpoint(auth.workspace_id, id)
        .await?;
    if removed {
        reload(state, id).await;
    }
    deleted(removed, id.as_uuid(), "SIP endpoint")
}

/// Tells the endpoint's actor, if it runs, that the endpoint changed: from the answer on, its
/// calls follow the change (a deleted or deactivated endpoint answers 404).
async fn reload(state: &App, id: SipEndpointId) {
    if let Some(endpoints) = &state.endpoints {
        endpoints.reload(id).await;
    }
}
