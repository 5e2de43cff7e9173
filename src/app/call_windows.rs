//! The workspace's calling hours: what saving them does and refuses, and what they are when
//! none were saved.

use serde_json::{Map, Value};
use switchboard_actors::ids::WorkspaceId;
use switchboard_actors::window::CallingWindow;

use crate::app::auth::Auth;
use crate::app::error::AppError;
use crate::app::state::App;

pub async fn put_window(
    state: &App,
    auth: &Auth,
    body: Map<String, Value>,
) -> Result<CallingWindow, AppError> {
    let window = CallingWindow::from_json(&Value::Object(body))
        .map_err(|err| AppError::bad_request(err.to_string()))?;
    state
        .store
        .set_call_window(auth.workspace_id, &window)
        .await?;
    Ok(window)
}

/// The workspace's calling hours: the saved ones, else the built-in default in the zone of the
/// workspace's default country (`true` when it is the default).
pub async fn workspace_window(
    state: &App,
    ws: WorkspaceId,
) -> Result<(CallingWindow, bool), AppError> {
    state
        .store
        .workspace_window(ws)
        .await?
        .ok_or(AppError::not_found("Workspace"))
}
