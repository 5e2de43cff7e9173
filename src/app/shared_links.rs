//! Shared links: what creating and revoking one do and refuse, and how one is shown.

use crate::app::auth::Auth;
use crate::app::error::AppError;
use crate::app::fields::check_fields;
use crate::app::state::App;
use crate::store::SharedLink;
use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use serde_json::{Map, Value};
use switchboard_actors::ids::{AgentId, SharedLinkId};
use utoipa::ToSchema;

pub async fn create(
    state: &App,
    auth: &Auth,
    body: Map<String, Value>,
) -> Result<SharedLinkView, AppError> {
    check_fields(&body, &["agent_id", "expires_at"])?;
    let agent: AgentId = body
        .get("agent_id")
        .and_then(Value::as_str)
        .ok_or_else(|| AppError::missing_field("agent_id"))?
        .parse()
        .map_err(|_| AppError::invalid_field("agent_id", "must be a UUID"))?;
    if state.store.agent(auth.workspace_id, agent).await?.is_none() {
        return Err(AppError::invalid_field(
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
    Ok(view(state, link))
}

pub async fn revoke(state: &App, auth: &Auth, id: uuid::Uuid) -> Result<SharedLinkView, AppError> {
    state
        .store
        .revoke_shared_link(auth.workspace_id, SharedLinkId::from_uuid(id))
        .await?
        .map(|l| view(state, l))
        .ok_or_else(missing)
}

/// The spec's Shared link object.
#[derive(Debug, Serialize, ToSchema)]
pub struct SharedLinkView {
    #[schema(value_type = uuid::Uuid)]
    pub id: SharedLinkId,
    /// The secret part of the URL.
    pub token: String,
    /// The public page.
    pub url: String,
    #[schema(value_type = uuid::Uuid)]
    pub agent_id: AgentId,
    #[schema(value_type = uuid::Uuid)]
    pub company_id: switchboard_actors::ids::WorkspaceId,
    /// The API key that created it.
    #[schema(value_type = uuid::Uuid)]
    pub created_by: switchboard_actors::ids::ApiKeyId,
    pub expires_at: DateTime<Utc>,
    pub is_revoked: bool,
    /// `active`, `revoked` or `expired`.
    pub status: &'static str,
    pub created_at: DateTime<Utc>,
}

pub fn view(state: &App, link: SharedLink) -> SharedLinkView {
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

pub fn missing() -> AppError {
    AppError::not_found("Shared link")
}

/// A shared link's fields; [`create`] reads the body.
#[derive(ToSchema)]
#[allow(dead_code)] // Read by the OpenAPI document only.
pub struct SharedLinkInput {
    /// The agent of this workspace to share.
    pub agent_id: uuid::Uuid,
    /// When the link stops working: in the future, at most 365 days ahead (default 30 days
    /// when omitted or null).
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// Longest a link may live.
pub const MAX_DAYS: i64 = 365;

pub const DEFAULT_DAYS: i64 = 30;

pub fn expiry(body: &Map<String, Value>, now: DateTime<Utc>) -> Result<DateTime<Utc>, AppError> {
    let bad = || {
        AppError::invalid_field(
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
