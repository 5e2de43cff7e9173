//! API keys: what creating and revoking one do and refuse, for the dashboard's settings page
//! and the operator's commands alike. A key's secret is shown once, at creation.

use chrono::{DateTime, Utc};
use switchboard_actors::ids::{ApiKeyId, WorkspaceId};

use crate::app::error::AppError;
use crate::domain::auth::Scopes;
use crate::store::{ApiKey, Store};

/// Longest key name, in characters.
pub const NAME_MAX: usize = 100;

/// A key to create.
pub struct NewKey<'a> {
    /// Trimmed; at most [`NAME_MAX`] characters.
    pub name: &'a str,
    pub scopes: &'a Scopes,
    /// After now, when given.
    pub expires_at: Option<DateTime<Utc>>,
}

/// A key's name: trimmed, at most [`NAME_MAX`] characters.
pub fn check_name(name: &str) -> Result<(), AppError> {
    if name.trim().chars().count() > NAME_MAX {
        return Err(AppError::invalid_field(
            "name",
            format!("must be at most {NAME_MAX} characters"),
        ));
    }
    Ok(())
}

/// A key's expiry, when it has one: after `now`.
pub fn check_expiry(expires_at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Result<(), AppError> {
    if expires_at.is_some_and(|at| at <= now) {
        return Err(AppError::invalid_field(
            "expires_at",
            "must be in the future",
        ));
    }
    Ok(())
}

/// Creates `key` in `ws`; answers the key and its secret (shown once).
pub async fn create(
    store: &Store,
    ws: WorkspaceId,
    key: NewKey<'_>,
) -> Result<(ApiKey, String), AppError> {
    check_name(key.name)?;
    check_expiry(key.expires_at, store.now())?;
    if store.workspace(ws).await?.is_none() {
        return Err(AppError::not_found("Workspace"));
    }
    Ok(store
        .create_key(ws, key.name.trim(), key.scopes, key.expires_at)
        .await?)
}

/// Revokes the active key `id`; false when there is none.
pub async fn revoke(store: &Store, id: ApiKeyId) -> Result<bool, AppError> {
    Ok(store.revoke_key(id).await?)
}
