//! Integrations: what disconnecting one does.

use crate::app::auth::Auth;
use crate::app::error::AppError;
use crate::app::state::App;
use serde_json::{Value, json};
use switchboard_actors::ids::IntegrationId;

pub async fn disconnect(state: &App, auth: &Auth, id: uuid::Uuid) -> Result<Value, AppError> {
    let done = state
        .store
        .disconnect_integration(auth.workspace_id, IntegrationId::from_uuid(id))
        .await?
        .ok_or(AppError::not_found("Integration"))?;
    Ok(json!({"success": true, "id": done.id, "status": done.status}))
}
