//! A flow agent tried on the text line: the caller's turns given, played by the model from a
//! description, or replayed from a past call; nothing is dispatched in a dry run.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use switchboard_actors::call::EndReason;
use switchboard_actors::conversation::{ToolEvent, Turn};
use switchboard_actors::flow::PathStep;
use switchboard_actors::ids::{AgentId, CallId};
use utoipa::ToSchema;

use crate::app::auth::Auth;
use crate::app::error::AppError;
use crate::app::fields::parse_fields;
use crate::app::state::App;
use crate::runtime::call_tools::{CallFacts, Toolbox};
use crate::runtime::simulator::{Caller, MAX_TURNS, Simulation, SimulationError, simulate};
use crate::store::{AgentType, FlowConfig};

const FIELDS: &[&str] = &[
    "turns",
    "caller",
    "replay_call_id",
    "metadata",
    "variables",
    "flow_version",
    "dry_run",
];

pub const TURN_MAX: usize = 2000;

const ONE_CALLER: &str = "Give the caller's `turns`, a `caller` the model plays, or a `replay_call_id`: exactly one of them";

pub const PLAYED_TURNS_MAX: usize = 20;

/// The body of `POST /agents/{id}/flow/test`: one of `turns`, `caller` and `replay_call_id`.
#[derive(Deserialize, ToSchema)]
pub struct FlowTestInput {
    /// The caller's turns, in order (1-50, each 1-2000 characters); the caller hangs up
    /// after the last.
    #[schema(min_items = 1, max_items = 50)]
    pub turns: Option<Vec<String>>,
    /// A caller the model plays instead of a script.
    pub caller: Option<PlayedCaller>,
    /// A past call of the workspace whose caller turns are replayed against the flow.
    #[schema(value_type = Option<uuid::Uuid>)]
    pub replay_call_id: Option<uuid::Uuid>,
    /// The call's metadata: the custom keys the flow declares.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// Values of the agent's `{{variables}}`.
    #[serde(default)]
    pub variables: Map<String, Value>,
    /// A saved version of the flow (`GET /agents/{id}/flow/versions`); default: the flow
    /// as it is now.
    #[schema(minimum = 1)]
    pub flow_version: Option<i64>,
    /// Answer tool_call and integration_call nodes with their `sample_result` and dispatch
    /// nothing (default false).
    #[serde(default)]
    pub dry_run: bool,
}

/// A caller the model plays.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlayedCaller {
    pub description: String,
    pub max_turns: Option<usize>,
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
    #[schema(value_type = String)]
    pub(crate) end_reason: EndReason,
    /// The version run; null: the flow as it is now.
    pub(crate) flow_version: Option<i64>,
    pub(crate) dry_run: bool,
    /// With `replay_call_id`: each caller turn of the past call, where the original call and
    /// the replay heard it and answered it, and the first turn where they differ.
    #[schema(value_type = Option<Object>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) replay: Option<Value>,
}

fn check_turns(turns: &[String]) -> Result<(), AppError> {
    if turns.is_empty() || turns.len() > MAX_TURNS {
        return Err(AppError::invalid_field(
            "turns",
            format!("must hold 1-{MAX_TURNS} turns"),
        ));
    }
    for (i, turn) in turns.iter().enumerate() {
        let n = turn.chars().count();
        if turn.trim().is_empty() || n > TURN_MAX {
            return Err(AppError::invalid_field(
                format!("turns[{i}]"),
                format!("must be 1-{TURN_MAX} characters of words"),
            ));
        }
    }
    Ok(())
}

pub fn caller_of(input: &FlowTestInput) -> Result<Caller, AppError> {
    if input.replay_call_id.is_some() {
        return match (&input.turns, &input.caller) {
            (None, None) => Ok(Caller::Script(Vec::new())),
            _ => Err(AppError::bad_request(ONE_CALLER)),
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
                return Err(AppError::invalid_field(
                    "caller.description",
                    format!("must be 1-{TURN_MAX} characters"),
                ));
            }
            let max_turns = played.max_turns.unwrap_or(10);
            if !(1..=PLAYED_TURNS_MAX).contains(&max_turns) {
                return Err(AppError::invalid_field(
                    "caller.max_turns",
                    format!("must be 1-{PLAYED_TURNS_MAX}"),
                ));
            }
            Ok(Caller::Played {
                description: played.description.clone(),
                max_turns,
            })
        }
        _ => Err(AppError::bad_request(ONE_CALLER)),
    }
}

/// A run of the flow simulator with `body` as `POST /agents/{id}/flow/test` reads it.
pub async fn run_flow_test(
    state: &App,
    auth: &Auth,
    id: AgentId,
    body: Map<String, Value>,
) -> Result<FlowTestResult, AppError> {
    let input: FlowTestInput = parse_fields(body, FIELDS)?;
    let mut caller = caller_of(&input)?;
    let agent = state
        .store
        .agent(auth.workspace_id, id)
        .await?
        .ok_or(AppError::not_found("Agent"))?;
    let flow = match input.flow_version {
        Some(version) => state
            .store
            .flow_versions(auth.workspace_id, agent.id)
            .await?
            .into_iter()
            .find(|v| v.version == version)
            .map(|v| serde_json::from_value::<FlowConfig>(v.flow_config))
            .ok_or(AppError::not_found("Flow version"))?
            .map_err(|e| AppError::Internal(e.into()))?,
        None => match (&agent.agent_type, &agent.flow_config) {
            (AgentType::Flow, Some(flow)) => flow.clone(),
            _ => {
                return Err(AppError::CodedConflict {
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
                .ok_or(AppError::not_found("Call"))?;
            let turns = crate::runtime::simulator::caller_turns(&detail.transcript);
            if turns.is_empty() {
                return Err(AppError::CodedConflict {
                    code: "NOTHING_TO_REPLAY",
                    message: "The call has no caller turns to replay".into(),
                });
            }
            caller = Caller::Script(turns.iter().map(|t| t.text.clone()).collect());
            Some((call, detail.transcript))
        }
        None => None,
    };
    // A played caller needs the model; a flow itself needs it only at the steps it decides
    // with it.
    let model = state.model.clone();
    if matches!(caller, Caller::Played { .. }) && model.is_none() {
        return Err(AppError::ModelNotConfigured);
    }
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
            SimulationError::Invalid(issues) => AppError::FlowInvalid {
                issues: issues.into_iter().map(Into::into).collect(),
            },
            SimulationError::Failed(why) => AppError::Internal(anyhow::anyhow!(why)),
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
