//! The workspace's webhook signing secret, read or rotated alike by the API, the dashboard and
//! the operator's commands: made on first use; a rotation replaces it at once, and every
//! delivery from then on (pending retries included) is signed with the new one.

use chrono::{DateTime, Utc};
use switchboard_actors::ids::WorkspaceId;

use crate::app::error::AppError;
use crate::domain::signing::SigningSecret;
use crate::store::Store;

/// The workspace's signing secret and when it was made (`rotate`: a new one, made now).
pub async fn signing_secret(
    store: &Store,
    ws: WorkspaceId,
    rotate: bool,
) -> Result<(SigningSecret, DateTime<Utc>), AppError> {
    Ok(if rotate {
        store.rotate_webhook_signing_secret(ws).await?
    } else {
        store.webhook_signing_secret(ws).await?
    })
}
