//! `POST /tools/{id}/test`: one delivery of a webhook tool with the production payload, through
//! the outbound URL policy, answered with what the endpoint answered.

use super::*;
use crate::app::tools::test_tool;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(test))
}

/// Deliver one test request to a webhook tool with the production payload contract
#[utoipa::path(post, path = "/tools/{id}/test", operation_id = "testTool", tag = "tools", security(("bearer" = ["tools:update"])),
    params(("id" = uuid::Uuid, Path)), request_body(content = Option<ToolTestBody>, description = "Optional: no body tests with placeholder arguments"),
    responses((status = 200, description = "{success, status_code, response_body, payload_sent, delivery_id}"),
        (status = 400), (status = 404),
        (status = 502, description = "DOWNSTREAM_HTTP_ERROR or WEBHOOK_NETWORK_ERROR"),
        (status = 504, description = "WEBHOOK_TIMEOUT")))]
async fn test(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    OptionalJsonObject(body): OptionalJsonObject,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(
        test_tool(&state, &auth, ToolId::from_uuid(id), body).await?,
    ))
}
