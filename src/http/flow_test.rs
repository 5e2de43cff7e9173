//! `POST /agents/{id}/flow/test`: the flow simulator (see [`crate::runtime::simulator`]).

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use switchboard_actors::conversation::{ToolEvent, Turn};
use switchboard_actors::flow::PathStep;
use switchboard_actors::ids::{AgentId, CallId};
use utoipa::{PartialSchema, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::error::ApiError;
use super::extract::{Data, JsonObject, PathId, parse_fields};
use super::gate::Auth;
use super::openapi::{body_schema, create_body, schema_json, strip_null, with_bounds};
use crate::runtime::call_tools::{CallFacts, Toolbox};
use crate::runtime::simulator::{Caller, MAX_TURNS, Simulation, SimulationError, simulate};
use crate::store::AgentType;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(flow_test))
}

const FIELDS: &[&str] = &[
    "turns",
    "caller",
    "replay_call_id",
    "metadata",
    "variables",
    "flow_version",
    "dry_run",
];
const TURN_MAX: usize = 2000;
const ONE_CALLER: &str = "Give the caller's `turns`, a `caller` the model plays, or a `replay_call_id`: exactly one of them";
const PLAYED_TURNS_MAX: usize = 20;

body_schema!(
    /// The body of `POST /agents/{id}/flow/test`: one of `turns`, `caller` and `replay_call_id`.
    FlowTestBody = json(body_schema())
);

/// [`FlowTestInput`] with the rules [`caller_of`] checks: words in every turn, and exactly one
/// of `turns` and `caller`.
fn body_schema() -> Value {
    let mut body = with_bounds(
        schema_json(&create_body(FlowTestInput::schema(), &[])),
        json!({"turns": {"items": {"type": "string", "minLength": 1, "maxLength": TURN_MAX, "pattern": "\\S"}}}),
    );
    if let Some(Value::Object(properties)) = body.get_mut("properties") {
        for field in ["turns", "caller", "replay_call_id", "flow_version"] {
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

/// The body of `POST /agents/{id}/flow/test`: one of `turns`, `caller` and `replay_call_id`.
#[derive(Deserialize, ToSchema)]
pub struct FlowTestInput {
    /// The caller's turns, in order (1-50, each 1-2000 characters); the caller hangs up
    /// after the last.
    #[schema(min_items = 1, max_items = 50)]
    turns: Option<Vec<String>>,
    /// A caller the model plays instead of a script.
    caller: Option<PlayedCaller>,
    /// A past call of the workspace whose caller turns are replayed against the flow.
    #[schema(value_type = Option<uuid::Uuid>)]
    replay_call_id: Option<uuid::Uuid>,
    /// The call's metadata: the custom keys the flow declares.
    #[serde(default)]
    metadata: Map<String, Value>,
    /// Values of the agent's `{{variables}}`.
    #[serde(default)]
    variables: Map<String, Value>,
    /// A saved version of the flow (`GET /agents/{id}/flow/versions`); default: the flow
    /// as it is now.
    #[schema(minimum = 1)]
    flow_version: Option<i64>,
    /// Answer tool_call and integration_call nodes with their `sample_result` and dispatch
    /// nothing (default false).
    #[serde(default)]
    dry_run: bool,
}

/// A caller the model plays.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlayedCaller {
    description: String,
    max_turns: Option<usize>,
}

/// What the simulated call did.
#[derive(Serialize, ToSchema)]
pub struct FlowTestResult {
    /// The turns, each with the node the flow was in when it was written down.
    #[schema(value_type = Vec<Object>)]
    pub(crate) transcript: Vec<Turn>,
    /// The nodes entered, with the reason for each transition.
    #[schema(value_type = Vec<Object>)]
    pub(crate) path: Vec<PathStep>,
    /// Every function the model called, tool and integration run: arguments, result, status.
    #[schema(value_type = Vec<Object>)]
    pub(crate) dispatches: Vec<ToolEvent>,
    /// The values gathered, as `<node_id>.<name>` (`<node_id>.result` for a dispatch's
    /// result).
    pub(crate) variables: Map<String, Value>,
    /// The node the call ended in.
    pub(crate) final_node: Option<String>,
    /// `agent_hangup`, `caller_hangup` (the script ended), `transferred` or `time_limit`.
    pub(crate) end_reason: String,
    /// The version run; null: the flow as it is now.
    pub(crate) flow_version: Option<i64>,
    pub(crate) dry_run: bool,
    /// With `replay_call_id`: each caller turn of the past call, where the original call and
    /// the replay heard it and answered it, and the first turn where they differ.
    #[schema(value_type = Option<Object>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) replay: Option<Value>,
}

fn check_turns(turns: &[String]) -> Result<(), ApiError> {
    if turns.is_empty() || turns.len() > MAX_TURNS {
        return Err(ApiError::invalid_field(
            "turns",
            format!("must hold 1-{MAX_TURNS} turns"),
        ));
    }
    for (i, turn) in turns.iter().enumerate() {
        let n = turn.chars().count();
        if turn.trim().is_empty() || n > TURN_MAX {
            return Err(ApiError::invalid_field(
                format!("turns[{i}]"),
                format!("must be 1-{TURN_MAX} characters of words"),
            ));
        }
    }
    Ok(())
}

fn caller_of(input: &FlowTestInput) -> Result<Caller, ApiError> {
    if input.replay_call_id.is_some() {
        return match (&input.turns, &input.caller) {
            (None, None) => Ok(Caller::Script(Vec::new())),
            _ => Err(ApiError::bad_request(ONE_CALLER)),
        };
    }
    match (&input.turns, &input.caller) {
        (Some(turns), None) => {
            check_turns(turns)?;
            Ok(Caller::Script(turns.clone()))
        }
        (None, Some(played)) => {
            let n = played.description.chars().count();
            if played.description.trim().is_empty() || n > TURN_MAX {
                return Err(ApiError::invalid_field(
                    "caller.description",
                    format!("must be 1-{TURN_MAX} characters"),
                ));
            }
            let max_turns = played.max_turns.unwrap_or(10);
            if !(1..=PLAYED_TURNS_MAX).contains(&max_turns) {
                return Err(ApiError::invalid_field(
                    "caller.max_turns",
                    format!("must be 1-{PLAYED_TURNS_MAX}"),
                ));
            }
            Ok(Caller::Played {
                description: played.description.clone(),
                max_turns,
            })
        }
        _ => Err(ApiError::bad_request(ONE_CALLER)),
    }
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

/// A run of the flow simulator with `body` as `POST /agents/{id}/flow/test` reads it.
pub(crate) async fn run_flow_test(
    state: &AppState,
    auth: &Auth,
    id: AgentId,
    body: Map<String, Value>,
) -> Result<FlowTestResult, ApiError> {
    let input: FlowTestInput = parse_fields(body, FIELDS)?;
    let mut caller = caller_of(&input)?;
    let agent = state
        .store
        .agent(auth.workspace_id, id)
        .await?
        .ok_or(ApiError::NotFound { resource: "Agent" })?;
    let flow = match input.flow_version {
        Some(version) => state
            .store
            .flow_versions(auth.workspace_id, agent.id)
            .await?
            .into_iter()
            .find(|v| v.version == version)
            .map(|v| v.flow_config)
            .ok_or(ApiError::NotFound {
                resource: "Flow version",
            })?,
        None => match (&agent.agent_type, &agent.flow_config) {
            (AgentType::Flow, Some(flow)) => {
                serde_json::to_value(flow).map_err(|e| ApiError::Internal(e.into()))?
            }
            _ => {
                return Err(ApiError::CodedConflict {
                    code: "NOT_A_FLOW_AGENT",
                    message: "The agent is not a flow agent: give it `type: flow` and a flow first"
                        .into(),
                });
            }
        },
    };
    let original = match input.replay_call_id {
        Some(call) => {
            let detail = state
                .store
                .call_detail(auth.workspace_id, CallId::from_uuid(call))
                .await?
                .ok_or(ApiError::NotFound { resource: "Call" })?;
            let turns = crate::runtime::simulator::caller_turns(&detail.transcript);
            if turns.is_empty() {
                return Err(ApiError::CodedConflict {
                    code: "NOTHING_TO_REPLAY",
                    message: "The call has no caller turns to replay".into(),
                });
            }
            caller = Caller::Script(turns.iter().map(|t| t.text.clone()).collect());
            Some((call, detail.transcript))
        }
        None => None,
    };
    let model = state.model.clone().ok_or(ApiError::ModelNotConfigured)?;
    let facts = CallFacts {
        workspace_id: auth.workspace_id,
        agent_id: agent.id,
        agent_name: agent.name.clone(),
        call_id: CallId::new(),
        direction: "outbound",
        metadata: input.metadata.clone(),
        variables: input.variables.clone(),
    };
    let tools = Toolbox::load(&state.store, &state.egress, facts)
        .await?
        .map(|t| std::sync::Arc::new(t) as _);
    let simulation = Simulation {
        caller,
        metadata: input.metadata,
        variables: input.variables,
        dry_run: input.dry_run,
        tool_samples: state
            .store
            .call_tools(auth.workspace_id, agent.id)
            .await?
            .into_iter()
            .filter_map(|t| Some((t.id.to_string(), t.config.get("sample_result")?.clone())))
            .collect(),
    };
    let integrations = state
        .providers
        .as_ref()
        .map(|p| p.for_call(auth.workspace_id));
    let done = simulate(&agent, &flow, model, (tools, integrations), simulation)
        .await
        .map_err(|e| match e {
            SimulationError::Invalid(issues) => ApiError::FlowInvalid {
                issues: issues.into_iter().map(Into::into).collect(),
            },
            SimulationError::Failed(why) => ApiError::Internal(anyhow::anyhow!(why)),
        })?;
    let replay = original.map(|(call, transcript)| {
        crate::runtime::simulator::compare(call, &transcript, &done.transcript)
    });
    Ok(FlowTestResult {
        replay,
        transcript: done.transcript,
        path: done.path,
        dispatches: done.events,
        variables: done.values,
        final_node: done.final_node,
        end_reason: done.end_reason,
        flow_version: input.flow_version,
        dry_run: input.dry_run,
    })
}
