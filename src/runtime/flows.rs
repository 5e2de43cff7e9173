//! Flows in the service: the checks of a flow at save time (what cannot run, from the flow's
//! graph; and its `integration_call` nodes: the integration, the action catalog, the shape of
//! `args_template`, the mustache references inside it), and the director a flow agent's call
//! runs under.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use switchboard_actors::agent::AgentPlan;
use switchboard_actors::flow::{FlowDirector, FlowRun};
use switchboard_actors::ids::CallId;
use switchboard_actors::turns::fill;

use crate::store::{Agent, AgentType, FlowConfig, FlowNode, Integration, IntegrationStatus};

/// The action catalog: provider, then its actions.
pub const CATALOG: [(&str, &[&str]); 2] = [
    (
        "google_calendar",
        &[
            "create_event",
            "list_events",
            "check_availability",
            "cancel_event",
        ],
    ),
    ("gmail", &["send_email"]),
];

/// One problem of a flow.
#[derive(Debug, Clone, Serialize, ToSchema, PartialEq, Eq)]
pub struct FlowIssue {
    pub node_id: String,
    /// The flow's graph: `start_missing`, `start_duplicate`, `node_type_invalid`,
    /// `unreachable`, `no_way_out`, `transition_dangling`, `transition_invalid`,
    /// `is_global_not_allowed`, `global_condition_missing`, `tool_missing`,
    /// `destination_missing`. Its integration_call nodes: `action_invalid`,
    /// `args_template_dangling_reference`, `args_template_invalid`, `integration_not_found`,
    /// `provider_mismatch`.
    pub code: &'static str,
    /// Where in the node.
    pub field: String,
    pub message: String,
}

/// What the checks need from outside the flow.
pub struct FlowContext<'a> {
    /// The workspace's integrations.
    pub integrations: &'a [Integration],
    /// The workspace's tools by id, with their extraction parameter names.
    pub tool_params: &'a HashMap<String, Vec<String>>,
}

/// The ids of tools the flow's `tool_call` nodes link to.
pub fn linked_tools(flow: &FlowConfig) -> Vec<String> {
    flow.nodes
        .iter()
        .filter(|n| n.node_type == "tool_call")
        .filter_map(|n| {
            n.extra
                .get("tool_id")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .collect()
}

/// How an argument of `args_template` is filled.
enum ArgMode<'a> {
    Literal(&'a str),
    AiExtract(&'a str),
}

fn arg_mode(value: &Value) -> Option<ArgMode<'_>> {
    match value {
        Value::String(s) => Some(ArgMode::Literal(s)),
        Value::Object(o) => match o.get("type").and_then(Value::as_str) {
            Some("literal") => o.get("value").and_then(Value::as_str).map(ArgMode::Literal),
            Some("ai_extract") => o
                .get("description")
                .and_then(Value::as_str)
                .map(ArgMode::AiExtract),
            _ => None,
        },
        _ => None,
    }
}

use switchboard_actors::flow::tokens::tokens;

fn args_of(node: &FlowNode) -> Option<&Map<String, Value>> {
    node.extra.get("args_template").and_then(Value::as_object)
}

/// Every issue of the flow's integration_call nodes (empty when it may be saved).
pub fn integration_issues(flow: &FlowConfig, ctx: &FlowContext<'_>) -> Vec<FlowIssue> {
    let nodes: HashMap<&str, &FlowNode> = flow.nodes.iter().map(|n| (n.id.as_str(), n)).collect();
    let mut issues = Vec::new();
    for node in flow
        .nodes
        .iter()
        .filter(|n| n.node_type == "integration_call")
    {
        let mut issue = |code: &'static str, field: &str, message: String| {
            issues.push(FlowIssue {
                node_id: node.id.clone(),
                code,
                field: field.to_string(),
                message,
            })
        };
        link_issues(node, &nodes, ctx, &mut issue);
        args_issues(node, &nodes, ctx, &mut issue);
    }
    // One issue per (node, code, field) is enough.
    let mut seen = HashSet::new();
    issues.retain(|i| seen.insert((i.node_id.clone(), i.code, i.field.clone())));
    issues
}

/// What an integration_call node's issue is told: its code, field and message.
type Issue<'a> = dyn FnMut(&'static str, &str, String) + 'a;

/// An integration_call node's links: not global, a connected integration of its provider, an
/// action of the catalog, and transitions to nodes of the flow.
fn link_issues(
    node: &FlowNode,
    nodes: &HashMap<&str, &FlowNode>,
    ctx: &FlowContext<'_>,
    issue: &mut Issue<'_>,
) {
    if node.extra.get("is_global").and_then(Value::as_bool) == Some(true) {
        issue(
                "is_global_not_allowed",
                "is_global",
                "integration_call nodes cannot be global (only conversation, transfer and end nodes can)".into(),
            );
    }
    let integration = node
        .extra
        .get("integration_id")
        .and_then(Value::as_str)
        .and_then(|id| {
            ctx.integrations
                .iter()
                .find(|i| i.id.to_string() == id && i.status == IntegrationStatus::Connected)
        });
    let provider = node
        .extra
        .get("provider")
        .and_then(Value::as_str)
        .unwrap_or("");
    match integration {
        None => issue(
            "integration_not_found",
            "integration_id",
            "integration_id must name a connected integration of this workspace".into(),
        ),
        Some(i) if i.provider.as_str() != provider => issue(
            "provider_mismatch",
            "provider",
            format!(
                "the integration is a {} integration, not `{provider}`",
                i.provider
            ),
        ),
        Some(_) => {}
    }
    let action = node
        .extra
        .get("action")
        .and_then(Value::as_str)
        .unwrap_or("");
    let valid = CATALOG
        .iter()
        .any(|(p, actions)| *p == provider && actions.contains(&action));
    if !valid {
        let known: Vec<String> = CATALOG
            .iter()
            .flat_map(|(p, actions)| actions.iter().map(move |a| format!("{p}.{a}")))
            .collect();
        issue(
            "action_invalid",
            "action",
            format!(
                "`{provider}.{action}` is not in the action catalog ({})",
                known.join(", ")
            ),
        );
    }
    for key in ["success_next_step_id", "error_next_step_id"] {
        if let Some(next) = node.extra.get(key).and_then(Value::as_str)
            && !nodes.contains_key(next)
        {
            issue(
                "transition_dangling",
                key,
                format!("`{next}` is not a node of this flow"),
            );
        }
    }
    if let Some(custom) = node.extra.get("custom").and_then(Value::as_array) {
        for (i, c) in custom.iter().enumerate() {
            if let Some(next) = c.get("next_step_id").and_then(Value::as_str)
                && !nodes.contains_key(next)
            {
                issue(
                    "transition_dangling",
                    &format!("custom[{i}].next_step_id"),
                    format!("`{next}` is not a node of this flow"),
                );
            }
        }
    }
}

/// An integration_call node's `args_template`: each argument a literal or an ai_extract, and
/// every `{{node.value}}` it mentions a value some node of the flow extracts.
fn args_issues(
    node: &FlowNode,
    nodes: &HashMap<&str, &FlowNode>,
    ctx: &FlowContext<'_>,
    issue: &mut Issue<'_>,
) {
    let args = match node.extra.get("args_template") {
        None | Some(Value::Null) => return,
        Some(Value::Object(args)) => args,
        Some(_) => {
            issue(
                "args_template_invalid",
                "args_template",
                "must be an object".into(),
            );
            return;
        }
    };
    for (name, value) in args {
        let field = format!("args_template.{name}");
        let text = match arg_mode(value) {
            Some(ArgMode::Literal(t)) | Some(ArgMode::AiExtract(t)) => t,
            None => {
                issue(
                    "args_template_invalid",
                    &field,
                    "must be a string, {type: literal, value} or {type: ai_extract, description}"
                        .into(),
                );
                continue;
            }
        };
        for (source, arg) in tokens(text) {
            if source == "metadata" {
                // A missing metadata key resolves to an empty string: never an error.
                continue;
            }
            let resolved = match nodes.get(source.as_str()) {
                Some(n) if n.node_type == "integration_call" => args_of(n)
                    .and_then(|a| a.get(&arg))
                    .is_some_and(|v| matches!(arg_mode(v), Some(ArgMode::AiExtract(_)))),
                // A conversation node's declared variables are extracted there too.
                Some(n) if n.node_type == "conversation" => n
                    .extra
                    .get("variables")
                    .and_then(Value::as_array)
                    .is_some_and(|vars| {
                        vars.iter()
                            .any(|v| v.get("name").and_then(Value::as_str) == Some(&arg))
                    }),
                Some(n) if n.node_type == "tool_call" => n
                    .extra
                    .get("tool_id")
                    .and_then(Value::as_str)
                    .and_then(|t| ctx.tool_params.get(t))
                    .is_some_and(|params| params.contains(&arg)),
                _ => false,
            };
            if !resolved {
                issue(
                    "args_template_dangling_reference",
                    &field,
                    format!(
                        "`{{{{{source}.{arg}}}}}` names no value: it must be an ai_extract argument of an integration_call node, an extraction parameter of a tool_call node's tool or a variable of a conversation node in this flow"
                    ),
                );
            }
        }
    }
}

/// The issues of the flow's graph: what would stop it running (no start, an unknown node
/// type, an unreachable node, a node with no way out, a bad transition, a global node of a
/// type that cannot be global).
pub fn graph_issues(flow: &FlowConfig) -> Vec<FlowIssue> {
    let Ok(config) = serde_json::to_value(flow) else {
        return Vec::new();
    };
    match switchboard_actors::flow::read(&config) {
        Ok(_) => Vec::new(),
        Err(issues) => issues.into_iter().map(Into::into).collect(),
    }
}

impl From<switchboard_actors::flow::GraphIssue> for FlowIssue {
    fn from(i: switchboard_actors::flow::GraphIssue) -> Self {
        FlowIssue {
            node_id: i.node_id,
            code: i.code,
            field: i.field,
            message: i.message,
        }
    }
}

/// A call's metadata as its flow reads it: the built-in keys (`id`, `direction`,
/// `agent_number`, `user_number`, `agent_name`) and the custom keys the agent's flow declares,
/// taken from `custom` (`metadata` of `POST /calls`).
pub fn call_metadata(
    agent: &Agent,
    call: CallId,
    direction: &str,
    (agent_number, user_number): (&str, &str),
    custom: &Map<String, Value>,
) -> Map<String, Value> {
    let declared = agent
        .flow_config
        .as_ref()
        .map(|f| f.metadata.custom_metadata_keys.as_slice())
        .unwrap_or_default();
    let mut metadata: Map<String, Value> = declared
        .iter()
        .filter_map(|key| custom.get(key).map(|v| (key.clone(), v.clone())))
        .collect();
    for (key, value) in [
        ("id", call.to_string()),
        ("direction", direction.to_string()),
        ("agent_number", agent_number.to_string()),
        ("user_number", user_number.to_string()),
        ("agent_name", agent.name.clone()),
    ] {
        metadata.insert(key.to_string(), Value::String(value));
    }
    metadata
}

/// Puts a flow agent's call under its flow, as the flow is now: the plan's model is briefed
/// node by node. A flow that cannot run (saved before its checks) leaves the agent's prompt
/// in charge, with a warning.
pub fn direct(
    plan: &mut AgentPlan,
    agent: &Agent,
    metadata: Map<String, Value>,
    variables: &Map<String, Value>,
) {
    let (AgentType::Flow, Some(flow), Some(mind)) =
        (&agent.agent_type, &agent.flow_config, plan.mind.as_mut())
    else {
        return;
    };
    let config = match serde_json::to_value(flow) {
        Ok(config) => config,
        Err(_) => return,
    };
    let flow = match switchboard_actors::flow::read(&config) {
        Ok(flow) => flow,
        Err(issues) => {
            tracing::warn!(agent = %agent.id, issues = issues.len(), "the agent's flow cannot run; its prompt answers the call");
            return;
        }
    };
    let tools = mind.tools.as_ref().map(|t| t.by_id()).unwrap_or_default();
    let run = FlowRun::new(Arc::new(flow), metadata, tools);
    mind.director = Arc::new(FlowDirector::new(
        run,
        fill(&agent.system_prompt, variables),
        Some(agent.temperature as f32),
    ));
}
