//! `POST /agents/{id}/flow/test`: the flow simulator (see [`crate::runtime::simulator`]).

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};
use switchboard_actors::ids::AgentId;
use utoipa::PartialSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{Data, JsonObject, PathId};
use super::openapi::{body_schema, create_body, schema_json, strip_null, with_bounds};
use super::state::AppState;
use crate::app::auth::Auth;
use crate::app::flow_test::*;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(flow_test))
}

body_schema!(
    /// The body of `POST /agents/{id}/flow/test`: one of `turns`, `caller` and `replay_call_id`.
    FlowTestBody = json(body_schema())
);

/// [`FlowTestInput`] with the rules [`caller_of`] checks: words in every turn, and exactly one
/// of `turns` and `caller`.
fn body_schema() -> Value {
    let words = json!({"type": "string", "minLength": 1, "maxLength": TURN_MAX, "pattern": "\\S",
                       "description": "Words the caller says."});
    let keys = json!({"type": "object", "additionalProperties": false, "required": ["digits"],
        "description": "Keys the caller presses, one after another.",
        "properties": {"digits": {"type": "string", "pattern": "^[0-9*#A-Da-d]{1,32}$"}}});
    let choice = json!({"type": "object", "additionalProperties": false, "required": ["turn"],
    "properties": {
        "turn": {"type": "integer", "minimum": 0, "maximum": crate::runtime::simulator::MAX_TURNS,
                 "description": "The caller turn the choice answers (0: before the first)."},
        "say": {"type": "string", "maxLength": TURN_MAX, "description": "What the model says first."},
        "edge": {"type": "string", "minLength": 1, "maxLength": 100,
                 "description": "The id of the node whose edge the model takes (a node of the flow)."},
        "arguments": {"type": "object", "description": "The edge's arguments, or those the node waits for."},
    }});
    let mut body = with_bounds(
        schema_json(&create_body(FlowTestInput::schema(), &[])),
        json!({"turns": {"items": {"oneOf": [words, keys]}},
               "scripted_model": {"minItems": 1, "maxItems": CHOICES_MAX, "items": choice}}),
    );
    if let Some(Value::Object(properties)) = body.get_mut("properties") {
        for field in [
            "turns",
            "scripted_model",
            "caller",
            "replay_call_id",
            "flow_version",
        ] {
            if let Some(property) = properties.get_mut(field) {
                strip_null(property);
            }
        }
        if let Some(caller) = properties.get_mut("caller") {
            *caller = json!({
                "type": "object",
                "description": "A caller the model plays instead of a script.",
                "additionalProperties": false,
                "required": ["description"],
                "properties": {
                    "description": {"type": "string", "minLength": 1, "maxLength": TURN_MAX, "pattern": "\\S",
                                    "description": "Who the caller is and what they want."},
                    "max_turns": {"type": "integer", "minimum": 1, "maximum": PLAYED_TURNS_MAX,
                                  "description": "Most turns the caller takes (default 10)."},
                },
            });
        }
    }
    if let Value::Object(body) = &mut body {
        body.insert(
            "oneOf".into(),
            json!([{"required": ["turns"]}, {"required": ["caller"]}, {"required": ["replay_call_id"]}]),
        );
    }
    body
}

/// Run the flow simulator: the agent's flow on a text line, through the same director and turn loop as a call
#[utoipa::path(post, path = "/agents/{id}/flow/test", operation_id = "testAgentFlow", tag = "agents", security(("bearer" = ["flows:test"])),
    params(("id" = uuid::Uuid, Path)), request_body = FlowTestBody,
    responses((status = 200, body = Data<FlowTestResult>), (status = 400), (status = 404), (status = 409, description = "NOT_A_FLOW_AGENT"), (status = 503, description = "MODEL_NOT_CONFIGURED")))]
async fn flow_test(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    JsonObject(body): JsonObject,
) -> Result<Json<Data<FlowTestResult>>, ApiError> {
    Ok(Json(Data {
        data: run_flow_test(&state, &auth, AgentId::from_uuid(id), body).await?,
    }))
}
