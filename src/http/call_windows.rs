//! The workspace's default calling hours: the window campaigns without their own use.
//!
//! Until one is saved, the built-in default applies: every day 09:00-20:00 in the time zone of
//! the workspace's default country (UTC when the country spans several zones we do not map),
//! read in each contact's own zone when it is known. `is_default` tells the two apart.

use axum::Json;
use axum::extract::State;
use serde_json::Value;
use switchboard_actors::ids::WorkspaceId;
use switchboard_actors::window::CallingWindow;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::error::ApiError;
use super::extract::JsonObject;
use super::gate::Auth;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_window, put_window))
}

fn answer(window: &CallingWindow, is_default: bool) -> Json<Value> {
    let mut body = window.to_json();
    if let Value::Object(map) = &mut body {
        map.insert("is_default".into(), Value::Bool(is_default));
    }
    Json(body)
}

/// The workspace's default calling hours
#[utoipa::path(get, path = "/call-windows", operation_id = "getCallWindow", tag = "calling hours", security(("bearer" = ["campaigns:manage"])),
    responses((status = 200, description = "The calling window {timezone, days, start, end, use_contact_timezone, is_default}")))]
async fn get_window(State(state): State<AppState>, auth: Auth) -> Result<Json<Value>, ApiError> {
    let (window, is_default) = workspace_window(&state, auth.workspace_id).await?;
    Ok(answer(&window, is_default))
}

/// The workspace's calling hours: the saved ones, else the built-in default in the zone of the
/// workspace's default country (`true` when it is the default).
pub async fn workspace_window(
    state: &AppState,
    ws: WorkspaceId,
) -> Result<(CallingWindow, bool), ApiError> {
    state
        .store
        .workspace_window(ws)
        .await?
        .ok_or(ApiError::NotFound {
            resource: "Workspace",
        })
}

/// Set the workspace's default calling hours
#[utoipa::path(put, path = "/call-windows", operation_id = "putCallWindow", tag = "calling hours", security(("bearer" = ["campaigns:manage"])),
    request_body(content = Object, description = "{timezone (IANA), days ([\"mon\", ...]), start \"HH:MM\", end \"HH:MM\", use_contact_timezone (default true)}"),
    responses((status = 200, description = "The saved calling window"), (status = 400)))]
async fn put_window(
    State(state): State<AppState>,
    auth: Auth,
    JsonObject(body): JsonObject,
) -> Result<Json<Value>, ApiError> {
    let window = CallingWindow::from_json(&Value::Object(body))
        .map_err(|err| ApiError::bad_request(err.to_string()))?;
    state
        .store
        .set_call_window(auth.workspace_id, &window)
        .await?;
    Ok(answer(&window, false))
}
