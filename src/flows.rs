//! Checks of a flow's `integration_call` nodes at save time: the integration, the action
//! catalog, the shape of `args_template`, the mustache references inside it, transitions, and
//! `is_global` (refused: only conversation, transfer and end nodes may be global).

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::store::{FlowConfig, FlowNode, Integration};

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
    /// `action_invalid`, `args_template_dangling_reference`, `args_template_invalid`,
    /// `integration_not_found`, `provider_mismatch`, `is_global_not_allowed`,
    /// `transition_dangling`.
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

/// The `{{a.b}}` tokens of a text, as (a, b).
fn tokens(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        let inner = after[..end].trim();
        if let Some((a, b)) = inner.split_once('.') {
            out.push((a.trim().to_string(), b.trim().to_string()));
        } else {
            out.push((inner.to_string(), String::new()));
        }
        rest = &after[end + 2..];
    }
    out
}

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
                    .find(|i| i.id.to_string() == id && i.status == "connected")
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
            Some(i) if i.provider != provider => issue(
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
        let args = match node.extra.get("args_template") {
            None | Some(Value::Null) => continue,
            Some(Value::Object(args)) => args,
            Some(_) => {
                issue(
                    "args_template_invalid",
                    "args_template",
                    "must be an object".into(),
                );
                continue;
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
                        "must be a string, {type: literal, value} or {type: ai_extract, description}".into(),
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
                            "`{{{{{source}.{arg}}}}}` names no value: it must be an ai_extract argument of an integration_call node or an extraction parameter of a tool_call node's tool in this flow"
                        ),
                    );
                }
            }
        }
    }
    // One issue per (node, code, field) is enough.
    let mut seen = HashSet::new();
    issues.retain(|i| seen.insert((i.node_id.clone(), i.code, i.field.clone())));
    issues
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_found_and_split() {
        assert_eq!(
            tokens("At {{ book.start_time }} for {{metadata.user_number}}, {{x}} {{open"),
            vec![
                ("book".to_string(), "start_time".to_string()),
                ("metadata".to_string(), "user_number".to_string()),
                ("x".to_string(), String::new()),
            ]
        );
    }
}
