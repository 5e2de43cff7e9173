//! Saving an agent: creation and PATCH by the same rules, a flow checked (its graph, and its
//! integration_call nodes against the workspace's integrations and tools) and versioned.

use serde_json::{Map, Value};
use switchboard_actors::ids::{AgentId, WorkspaceId};

use crate::app::agents::rules::{FlowPending, WRITABLE, apply, parse_input};
use crate::app::agents::validate::validate;
use crate::app::auth::Auth;
use crate::app::error::AppError;
use crate::app::state::App;
use crate::store::{Agent, FlowConfig, FlowNode};

/// PATCH of an agent: the sent fields, by the same rules; answers the agent as it now is.
pub async fn update_agent(
    state: &App,
    auth: &Auth,
    id: AgentId,
    body: Map<String, Value>,
) -> Result<Agent, AppError> {
    crate::app::fields::some_field(&body, WRITABLE)?;
    let flow_sent = body.get("flow_config").is_some_and(|v| !v.is_null());
    let input = parse_input(body)?;
    let Some(mut agent) = state.store.agent(auth.workspace_id, id).await? else {
        return Err(AppError::not_found("Agent"));
    };
    let pending = apply(&mut agent, input);
    refuse_unread(&agent, &pending)?;
    validate(&agent, &state.egress)?;
    if flow_sent {
        check_flow_links(state, auth, &agent, pending).await?;
    }
    let updated = state
        .store
        .update_agent(auth.workspace_id, &agent)
        .await?
        .ok_or(AppError::not_found("Agent"))?;
    if flow_sent {
        save_flow_version(state, auth, &updated).await?;
    }
    Ok(updated)
}

/// A sent flow none of whose nodes could be read is refused with their issues at once (the
/// agent's own checks would take it for a flow without nodes).
fn refuse_unread(agent: &Agent, pending: &FlowPending) -> Result<(), AppError> {
    let empty = agent
        .flow_config
        .as_ref()
        .is_none_or(|f| f.nodes.is_empty());
    if pending.unread > 0 && empty {
        return Err(AppError::FlowInvalid {
            issues: pending.issues.iter().cloned().map(Into::into).collect(),
        });
    }
    Ok(())
}

/// Refuses a flow that cannot run (the issues its reading found), or whose integration_call
/// nodes do not hold together (`FLOW_INVALID`, every issue listed).
async fn check_flow_links(
    state: &App,
    auth: &Auth,
    agent: &Agent,
    pending: FlowPending,
) -> Result<(), AppError> {
    let Some(flow) = &agent.flow_config else {
        return Ok(());
    };
    let graph = pending.issues.into_iter().map(Into::into).collect();
    let issues = issues_with_links(state, auth.workspace_id, flow, graph).await?;
    if issues.is_empty() {
        Ok(())
    } else {
        Err(AppError::FlowInvalid { issues })
    }
}

/// What would stop `flow` from saving now: its graph's issues, and its integration_call
/// nodes' against the workspace's integrations and tools (one issue per node, code and field).
/// What `agent`'s flow needs that this service lacks (a node that needs the chat model, with
/// none configured): it is saved and runs, and these are said beside it.
pub fn warnings(state: &App, agent: &Agent) -> Vec<crate::runtime::flows::FlowWarning> {
    match (&agent.agent_type, &agent.flow_config) {
        (crate::store::AgentType::Flow, Some(flow)) => {
            crate::runtime::flows::model_warnings(flow, state.model.is_some())
        }
        _ => Vec::new(),
    }
}

pub async fn flow_issues(
    state: &App,
    ws: WorkspaceId,
    flow: &FlowConfig,
) -> Result<Vec<crate::runtime::flows::FlowIssue>, AppError> {
    let graph = crate::runtime::flows::graph_issues(flow);
    issues_with_links(state, ws, flow, graph).await
}

/// `issues` (the graph's) and the integration_call nodes' against the workspace.
async fn issues_with_links(
    state: &App,
    ws: WorkspaceId,
    flow: &FlowConfig,
    mut issues: Vec<crate::runtime::flows::FlowIssue>,
) -> Result<Vec<crate::runtime::flows::FlowIssue>, AppError> {
    if flow
        .nodes
        .iter()
        .any(|n| matches!(n, FlowNode::IntegrationCall(_)))
    {
        let integrations = state.store.list_integrations(ws).await?;
        let mut tool_params = std::collections::HashMap::new();
        for id in crate::runtime::flows::linked_tools(flow) {
            if let Ok(tool_id) = id.parse()
                && let Some(tool) = state.store.tool(ws, tool_id).await?
            {
                tool_params.insert(id, crate::edge::webhooks::parameter_names(&tool.config));
            }
        }
        issues.extend(crate::runtime::flows::integration_issues(
            flow,
            &crate::runtime::flows::FlowContext {
                integrations: &integrations,
                tool_params: &tool_params,
            },
        ));
    }
    let mut seen = std::collections::HashSet::new();
    issues.retain(|i| seen.insert((i.node_id.clone(), i.code, i.field.clone())));
    Ok(issues)
}

/// Every save of a flow is a new version.
async fn save_flow_version(state: &App, auth: &Auth, agent: &Agent) -> Result<(), AppError> {
    if let Some(flow) = &agent.flow_config {
        let value = serde_json::to_value(flow).map_err(|e| AppError::Internal(e.into()))?;
        state
            .store
            .record_flow_version(auth.workspace_id, agent.id, &value)
            .await?;
    }
    Ok(())
}

/// Creates an agent from `body` (`name` required; every rule of [`validate`] and, with a
/// flow, its checks); the flow's first version is saved with it.
pub async fn create_agent(
    state: &App,
    auth: &Auth,
    body: Map<String, Value>,
) -> Result<Agent, AppError> {
    let input = parse_input(body)?;
    let Some(name) = input.name.as_deref() else {
        return Err(AppError::missing_field("name"));
    };
    let mut agent = Agent::new(name.trim().to_owned());
    let pending = apply(&mut agent, input);
    refuse_unread(&agent, &pending)?;
    validate(&agent, &state.egress)?;
    check_flow_links(state, auth, &agent, pending).await?;
    let created = state.store.create_agent(auth.workspace_id, &agent).await?;
    save_flow_version(state, auth, &created).await?;
    Ok(created)
}

pub async fn deactivate(state: &App, auth: &Auth, id: uuid::Uuid) -> Result<Agent, AppError> {
    let done = state
        .store
        .deactivate_agent(auth.workspace_id, AgentId::from_uuid(id))
        .await?;
    done.ok_or(AppError::not_found("Agent"))
}
