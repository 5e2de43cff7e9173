//! Flows in the service: the checks of a flow at save time (what cannot run, from the flow's
//! graph; and its `integration_call` nodes: the integration, the action catalog
//! (`domain::integrations`), the shape of
//! `args_template`, the mustache references inside it), and the director a flow agent's call
//! runs under.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use switchboard_actors::agent::AgentPlan;
use switchboard_actors::flow::node::{ArgMode, ArgTemplate, IntegrationCallNode};
use switchboard_actors::flow::{Flow, FlowDirector, FlowRun};
use switchboard_actors::ids::CallId;
use switchboard_actors::turns::fill;

use crate::domain::integrations::Action;
use crate::store::{Agent, AgentType, FlowConfig, FlowNode, Integration, IntegrationStatus};

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
        .filter_map(|n| match n {
            FlowNode::ToolCall(t) => Some(t.tool_id.clone()),
            _ => None,
        })
        .collect()
}

use switchboard_actors::flow::tokens::tokens;

/// Every issue of the flow's integration_call nodes against the workspace (empty when it may
/// be saved): a connected integration of the node's provider, an action of the catalog, and
/// every `{{node.value}}` of `args_template` a value some node of the flow extracts.
pub fn integration_issues(flow: &FlowConfig, ctx: &FlowContext<'_>) -> Vec<FlowIssue> {
    let nodes: HashMap<&str, &FlowNode> = flow.nodes.iter().map(|n| (n.id(), n)).collect();
    let mut issues = Vec::new();
    for node in &flow.nodes {
        let FlowNode::IntegrationCall(call) = node else {
            continue;
        };
        let mut issue = |code: &'static str, field: &str, message: String| {
            issues.push(FlowIssue {
                node_id: node.id().to_string(),
                code,
                field: field.to_string(),
                message,
            })
        };
        link_issues(call, ctx, &mut issue);
        args_issues(call, &nodes, ctx, &mut issue);
    }
    // One issue per (node, code, field) is enough.
    let mut seen = HashSet::new();
    issues.retain(|i| seen.insert((i.node_id.clone(), i.code, i.field.clone())));
    issues
}

/// What an integration_call node's issue is told: its code, field and message.
type Issue<'a> = dyn FnMut(&'static str, &str, String) + 'a;

/// An integration_call node's links: a connected integration of its provider and an action of
/// the catalog.
fn link_issues(node: &IntegrationCallNode, ctx: &FlowContext<'_>, issue: &mut Issue<'_>) {
    let integration = ctx.integrations.iter().find(|i| {
        i.id.to_string() == node.integration_id && i.status == IntegrationStatus::Connected
    });
    let provider = node.provider.as_str();
    match integration {
        None => issue(
            "integration_not_found",
            "integration_id",
            "integration_id must name a connected integration of this workspace".into(),
        ),
        Some(i) if i.provider.name() != provider => issue(
            "provider_mismatch",
            "provider",
            format!(
                "the integration is a {} integration, not `{provider}`",
                i.provider
            ),
        ),
        Some(_) => {}
    }
    let action = node.action.as_str();
    if Action::find(provider, action).is_none() {
        let known: Vec<String> = Action::ALL.iter().map(|a| a.qualified()).collect();
        issue(
            "action_invalid",
            "action",
            format!(
                "`{provider}.{action}` is not in the action catalog ({})",
                known.join(", ")
            ),
        );
    }
}

/// The text of an argument (a literal's, or an ai_extract's description).
fn arg_text(arg: &ArgTemplate) -> &str {
    match arg {
        ArgTemplate::Text(t)
        | ArgTemplate::Mode(ArgMode::Literal { value: t })
        | ArgTemplate::Mode(ArgMode::AiExtract { description: t }) => t,
    }
}

/// Every `{{node.value}}` an integration_call node's `args_template` mentions is a value some
/// node of the flow extracts.
fn args_issues(
    node: &IntegrationCallNode,
    nodes: &HashMap<&str, &FlowNode>,
    ctx: &FlowContext<'_>,
    issue: &mut Issue<'_>,
) {
    for (name, value) in node.args_template.iter().flatten() {
        let field = format!("args_template.{name}");
        for (source, arg) in tokens(arg_text(value)) {
            if source == "metadata" {
                // A missing metadata key resolves to an empty string: never an error.
                continue;
            }
            let resolved = match nodes.get(source.as_str()) {
                Some(FlowNode::IntegrationCall(n)) => n
                    .args_template
                    .as_ref()
                    .and_then(|a| a.get(&arg))
                    .is_some_and(|v| matches!(v, ArgTemplate::Mode(ArgMode::AiExtract { .. }))),
                // A conversation node's declared variables are extracted there too.
                Some(FlowNode::Conversation(n)) => {
                    n.variables.iter().flatten().any(|v| v.name == arg)
                }
                Some(FlowNode::ToolCall(n)) => ctx
                    .tool_params
                    .get(&n.tool_id)
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

/// What a flow needs that this service lacks: it is saved and runs, but a call that reaches
/// the node ends there.
#[derive(Debug, Clone, Serialize, ToSchema, PartialEq, Eq)]
pub struct FlowWarning {
    pub node_id: String,
    /// `model_not_configured`: the node needs the chat model and none is configured
    /// (`--llm-url`); a call that reaches it ends `model_not_configured`.
    pub code: &'static str,
    pub message: String,
}

/// The nodes of `flow` that need the chat model, when none is configured.
pub fn model_warnings(flow: &FlowConfig, model_configured: bool) -> Vec<FlowWarning> {
    if model_configured {
        return Vec::new();
    }
    let Ok(flow) = Flow::compile(flow) else {
        return Vec::new();
    };
    flow.model_needs()
        .into_iter()
        .map(|need| FlowWarning {
            message: format!(
                "{}, and no chat model is configured (--llm-url): a call that reaches this node ends there",
                need.why
            ),
            node_id: need.node_id,
            code: "model_not_configured",
        })
        .collect()
}

/// The issues of the flow's graph: what would stop it running (no start, an unreachable node,
/// a node with no way out, a bad transition, a global node without its condition).
pub fn graph_issues(flow: &FlowConfig) -> Vec<FlowIssue> {
    match Flow::compile(flow) {
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
    let flow = match Flow::compile(flow) {
        Ok(flow) => flow,
        Err(issues) => {
            tracing::warn!(agent = %agent.id, issues = issues.len(), "the agent's flow cannot run; its prompt answers the call");
            return;
        }
    };
    let tools = mind.tools.as_ref().map(|t| t.by_id()).unwrap_or_default();
    let run = FlowRun::new(Arc::new(flow), metadata, tools);
    mind.director = Box::new(FlowDirector::new(
        run,
        fill(&agent.system_prompt, variables),
        Some(agent.temperature as f32),
    ));
}
