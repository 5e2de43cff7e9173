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
use crate::runtime::scripted_model::{Choice, ScriptedModel};
use crate::runtime::simulator::{
    Caller, MAX_TURNS, Models, ScriptTurn, Simulation, SimulationError, simulate,
};
use crate::store::{AgentType, FlowConfig};
use std::sync::Arc;
use switchboard_actors::agent::director::keys;
use switchboard_actors::vendors::ChatModel;

const FIELDS: &[&str] = &[
    "turns",
    "scripted_model",
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

/// Most choices a request may script for the model.
pub const CHOICES_MAX: usize = 50;

/// The body of `POST /agents/{id}/flow/test`: one of `turns`, `caller` and `replay_call_id`.
#[derive(Deserialize, ToSchema)]
pub struct FlowTestInput {
    /// The caller's turns, in order (1-50): words (1-2000 characters), or `{digits}`, keys
    /// pressed one after another (1-32 of `0`-`9`, `*`, `#`, `A`-`D`); the caller hangs up
    /// after the last.
    #[schema(min_items = 1, max_items = 50, value_type = Option<Vec<Object>>)]
    pub turns: Option<Vec<Value>>,
    /// The model's choices, played instead of a model (1-50): at caller turn `turn` (0:
    /// before the first), say `say`, take the edge to node `edge` with `arguments`, or fill
    /// the arguments a node waits for.
    #[schema(max_items = 50, value_type = Option<Vec<Object>>)]
    pub scripted_model: Option<Vec<Value>>,
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
    /// With `scripted_model`: the choices never used (by their place in the list), when a
    /// choice's turn never came or more choices were given than rounds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) unused_choices: Option<Vec<usize>>,
    pub(crate) dry_run: bool,
    /// With `replay_call_id`: each caller turn of the past call, where the original call and
    /// the replay heard it and answered it, and the first turn where they differ.
    #[schema(value_type = Option<Object>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) replay: Option<Value>,
}

/// The caller's turns as a script: each a string of words or `{digits}`.
fn script(turns: &[Value]) -> Result<Vec<ScriptTurn>, AppError> {
    if turns.is_empty() || turns.len() > MAX_TURNS {
        return Err(AppError::invalid_field(
            "turns",
            format!("must hold 1-{MAX_TURNS} turns"),
        ));
    }
    turns
        .iter()
        .enumerate()
        .map(|(i, turn)| match turn {
            Value::String(words) => {
                let n = words.chars().count();
                if words.trim().is_empty() || n > TURN_MAX {
                    return Err(AppError::invalid_field(
                        format!("turns[{i}]"),
                        format!("must be 1-{TURN_MAX} characters of words"),
                    ));
                }
                Ok(ScriptTurn::Says(words.clone()))
            }
            Value::Object(o) if o.len() == 1 && o.contains_key("digits") => {
                let text = o.get("digits").and_then(Value::as_str).unwrap_or_default();
                keys(text)
                    .map(ScriptTurn::Presses)
                    .map_err(|why| AppError::invalid_field(format!("turns[{i}].digits"), why))
            }
            _ => Err(AppError::invalid_field(
                format!("turns[{i}]"),
                "must be a string of words or {digits}",
            )),
        })
        .collect()
}

/// The model's choices of a request, each checked against `flow` (an edge names one of its
/// nodes).
fn choices(list: &[Value], flow: &FlowConfig) -> Result<Vec<Choice>, AppError> {
    if list.is_empty() || list.len() > CHOICES_MAX {
        return Err(AppError::invalid_field(
            "scripted_model",
            format!("must hold 1-{CHOICES_MAX} choices"),
        ));
    }
    let shape = "must be {turn, say?, edge?, arguments?}: `turn` 0-50, `say` at most 2000 characters, `edge` a node of the flow, `arguments` an object";
    list.iter()
        .enumerate()
        .map(|(i, choice)| {
            let at = |field: &str| format!("scripted_model[{i}]{field}");
            let o = choice
                .as_object()
                .filter(|o| {
                    o.keys()
                        .all(|k| ["turn", "say", "edge", "arguments"].contains(&k.as_str()))
                })
                .ok_or_else(|| AppError::invalid_field(at(""), shape))?;
            let turn = o
                .get("turn")
                .and_then(Value::as_u64)
                .filter(|t| *t as usize <= MAX_TURNS)
                .ok_or_else(|| AppError::invalid_field(at(".turn"), "must be 0-50"))?;
            let say = match o.get("say") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) if s.chars().count() <= TURN_MAX => Some(s.clone()),
                Some(_) => return Err(AppError::invalid_field(at(".say"), shape)),
            };
            let edge = match o.get("edge") {
                None | Some(Value::Null) => None,
                Some(Value::String(id)) if flow.nodes.iter().any(|n| n.id() == id) => {
                    Some(id.clone())
                }
                Some(_) => {
                    return Err(AppError::invalid_field(
                        at(".edge"),
                        "must be the id of a node of the flow",
                    ));
                }
            };
            let arguments = match o.get("arguments") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(a)) => a.clone(),
                Some(_) => return Err(AppError::invalid_field(at(".arguments"), shape)),
            };
            Ok(Choice {
                turn: turn as usize,
                say,
                edge,
                arguments,
            })
        })
        .collect()
}

pub fn caller_of(input: &FlowTestInput) -> Result<Caller, AppError> {
    if input.replay_call_id.is_some() {
        return match (&input.turns, &input.caller) {
            (None, None) => Ok(Caller::Script(Vec::new())),
            _ => Err(AppError::bad_request(ONE_CALLER)),
        };
    }
    match (&input.turns, &input.caller) {
        (Some(turns), None) => Ok(Caller::Script(script(turns)?)),
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
            let turns = crate::runtime::simulator::replayed(&detail.transcript);
            if turns.is_empty() {
                return Err(AppError::CodedConflict {
                    code: "NOTHING_TO_REPLAY",
                    message: "The call has no caller turns to replay".into(),
                });
            }
            caller = Caller::Script(turns);
            Some((call, detail.transcript))
        }
        None => None,
    };
    // A played caller needs the model; a flow itself needs it only at the steps it decides
    // with it, and a scripted model stands in for it.
    if matches!(caller, Caller::Played { .. }) && state.model.is_none() {
        return Err(AppError::ModelNotConfigured);
    }
    let scripted = match &input.scripted_model {
        Some(list) => Some(Arc::new(ScriptedModel::new(choices(list, &flow)?))),
        None => None,
    };
    let model: Option<Arc<dyn ChatModel>> = match &scripted {
        Some(s) => Some(s.clone()),
        None => state.model.clone(),
    };
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
    let models = Models {
        flow: model,
        caller: state.model.clone(),
    };
    let done = simulate(&agent, &flow, models, (tools, integrations), simulation)
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
        unused_choices: scripted.map(|s| s.unused()),
    })
}
