//! The workspace's default calling hours: the window campaigns without their own use.
//!
//! Until one is saved, the built-in default applies: every day 09:00-20:00 in the time zone of
//! the workspace's default country (UTC when the country spans several zones we do not map),
//! read in each contact's own zone when it is known. `is_default` tells the two apart.

use axum::Json;
use axum::extract::State;
use serde_json::Value;
use switchboard_actors::window::{CallingWindow, DayOfWeek};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use utoipa::ToSchema;

use super::error::ApiError;
use super::extract::JsonObject;
use super::openapi::body_schema;
use super::state::AppState;
use crate::app::auth::Auth;

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
    let (window, is_default) =
        crate::app::call_windows::workspace_window(&state, auth.workspace_id).await?;
    Ok(answer(&window, is_default))
}

/// The schema of `days`: at least one of the names `DayOfWeek` reads (`mon` .. `sun`).
fn days() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    let names = [
        chrono::Weekday::Mon,
        chrono::Weekday::Tue,
        chrono::Weekday::Wed,
        chrono::Weekday::Thu,
        chrono::Weekday::Fri,
        chrono::Weekday::Sat,
        chrono::Weekday::Sun,
    ]
    .map(|day| serde_json::to_value(DayOfWeek::from_weekday(day)).unwrap_or_default());
    ArrayBuilder::new()
        .items(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(names)),
        )
        .min_items(Some(1))
        .build()
}

/// A calling window; `CallingWindow::from_json` reads the body.
#[derive(ToSchema)]
#[allow(dead_code)] // Read by the OpenAPI document only.
struct CallWindowInput {
    /// An IANA time zone such as `America/New_York`.
    #[schema(min_length = 1)]
    timezone: String,
    /// The days the window opens (default every weekday).
    #[schema(schema_with = days)]
    days: Option<Vec<String>>,
    /// Opening time, `HH:MM`.
    #[schema(pattern = "^([01][0-9]|2[0-3]):[0-5][0-9]$")]
    start: String,
    /// Closing time, `HH:MM`, later than `start` (windows do not cross midnight).
    #[schema(pattern = "^([01][0-9]|2[0-3]):[0-5][0-9]$")]
    end: String,
    /// Read each contact's own time zone when it has one (default true).
    #[schema(nullable = false)]
    use_contact_timezone: Option<bool>,
}

body_schema!(
    /// The body of `PUT /call-windows`.
    CallWindowBody = create_body(CallWindowInput, &["timezone", "start", "end"])
);

/// Set the workspace's default calling hours
#[utoipa::path(put, path = "/call-windows", operation_id = "putCallWindow", tag = "calling hours", security(("bearer" = ["campaigns:manage"])),
    request_body = CallWindowBody,
    responses((status = 200, description = "The saved calling window"), (status = 400)))]
async fn put_window(
    State(state): State<AppState>,
    auth: Auth,
    JsonObject(body): JsonObject,
) -> Result<Json<Value>, ApiError> {
    let window = crate::app::call_windows::put_window(&state, &auth, body).await?;
    Ok(answer(&window, false))
}
