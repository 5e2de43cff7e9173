//! Reading a stored `flow_config` (its nodes as JSON) into a [`Flow`], with every problem that
//! would stop it running named as an issue at its node (`FLOW_INVALID`).

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::graph::{
    Arg, Branch, Check, Flow, GraphIssue, Kind, Line, NODE_TYPES, Node, Rule, Test, Transition,
    Variable, issue,
};

/// Reads a stored flow (`{nodes, metadata}` as JSON): the flow, or every issue that stops it
/// running.
pub fn read(config: &Value) -> Result<Flow, Vec<GraphIssue>> {
    let empty = Vec::new();
    let raw = config
        .get("nodes")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let ids: HashMap<&str, usize> = raw
        .iter()
        .enumerate()
        .filter_map(|(i, n)| n.get("id").and_then(Value::as_str).map(|id| (id, i)))
        .collect();
    let mut reader = Reader {
        ids: &ids,
        issues: Vec::new(),
    };
    let nodes: Vec<Node> = raw.iter().filter_map(|n| reader.node(n)).collect();
    let mut issues = reader.issues;
    if nodes.len() != raw.len() {
        // A node that could not be read leaves the indexes unsure: stop at its issues.
        return Err(issues);
    }
    let starts: Vec<usize> = (0..nodes.len())
        .filter(|i| nodes[*i].kind == Kind::Start)
        .collect();
    let start = match starts.as_slice() {
        [one] => *one,
        [] => {
            issues.push(issue(
                "",
                "start_missing",
                "type",
                "a flow needs one node of type `start`",
            ));
            return Err(issues);
        }
        [_, more @ ..] => {
            for i in more {
                issues.push(issue(
                    &nodes[*i].id,
                    "start_duplicate",
                    "type",
                    "a flow has exactly one node of type `start`",
                ));
            }
            return Err(issues);
        }
    };
    let globals: Vec<usize> = (0..nodes.len())
        .filter(|i| nodes[*i].global_condition.is_some())
        .collect();
    let flow = Flow {
        custom_metadata_keys: config
            .pointer("/metadata/custom_metadata_keys")
            .and_then(Value::as_array)
            .map(|keys| {
                keys.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
        nodes,
        start,
        globals,
    };
    issues.extend(flow.shape_issues());
    if issues.is_empty() {
        Ok(flow)
    } else {
        Err(issues)
    }
}

struct Reader<'a> {
    ids: &'a HashMap<&'a str, usize>,
    issues: Vec<GraphIssue>,
}

impl Reader<'_> {
    fn push(&mut self, node: &str, code: &'static str, field: &str, message: String) {
        self.issues.push(GraphIssue {
            node_id: node.to_string(),
            code,
            field: field.to_string(),
            message,
        });
    }

    fn text(o: &Map<String, Value>, key: &str) -> Option<String> {
        o.get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    }

    /// The node a key names; an issue when it names none.
    fn target(&mut self, node: &str, o: &Map<String, Value>, key: &str) -> Option<usize> {
        let next = o.get(key).and_then(Value::as_str)?;
        match self.ids.get(next) {
            Some(i) => Some(*i),
            None => {
                self.push(
                    node,
                    "transition_dangling",
                    key,
                    format!("`{next}` is not a node of this flow"),
                );
                None
            }
        }
    }

    fn node(&mut self, raw: &Value) -> Option<Node> {
        let o = raw.as_object()?;
        let id = o.get("id").and_then(Value::as_str).unwrap_or_default();
        let ty = o.get("type").and_then(Value::as_str).unwrap_or_default();
        let line = Self::text(o, "greeting").map(|text| Line {
            text,
            literal: o
                .get("is_literal")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        });
        let next = self.target(id, o, "next_step_id");
        let global = o.get("is_global").and_then(Value::as_bool).unwrap_or(false);
        let kind = match ty {
            "start" => Kind::Start,
            "conversation" => self.conversation(id, o),
            "tool_call" => Kind::ToolCall {
                tool_id: Self::text(o, "tool_id").unwrap_or_else(|| {
                    self.push(
                        id,
                        "tool_missing",
                        "tool_id",
                        "a tool_call node names the tool it runs".into(),
                    );
                    String::new()
                }),
                error_next: self.target(id, o, "error_next_step_id"),
            },
            "integration_call" => self.integration(id, o),
            "transfer" => Kind::Transfer {
                destination: Self::text(o, "destination").unwrap_or_else(|| {
                    self.push(
                        id,
                        "destination_missing",
                        "destination",
                        "a transfer node names its destination: an E.164 number or a sip: URI"
                            .into(),
                    );
                    String::new()
                }),
                error_next: self.target(id, o, "error_next_step_id"),
            },
            "end" => Kind::End,
            other => {
                self.push(
                    id,
                    "node_type_invalid",
                    "type",
                    format!("`{other}` is not a node type ({})", NODE_TYPES.join(", ")),
                );
                return None;
            }
        };
        let global_condition = match (global, Self::text(o, "global_condition")) {
            (false, _) => None,
            (true, _)
                if !matches!(
                    kind,
                    Kind::Conversation { .. } | Kind::Transfer { .. } | Kind::End
                ) =>
            {
                self.push(
                    id,
                    "is_global_not_allowed",
                    "is_global",
                    format!(
                        "{} nodes cannot be global (only conversation, transfer and end nodes can)",
                        kind.name()
                    ),
                );
                None
            }
            (true, None) => {
                self.push(
                    id,
                    "global_condition_missing",
                    "global_condition",
                    "a global node says when the call jumps to it (`global_condition`)".into(),
                );
                None
            }
            (true, Some(condition)) => Some(condition),
        };
        Some(Node {
            id: id.to_string(),
            name: o
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            speaks_first: matches!(kind, Kind::Start)
                && o.get("agent_speaks_first")
                    .and_then(Value::as_bool)
                    .unwrap_or(true),
            kind,
            line,
            next,
            auto_advance: o
                .get("auto_advance")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            global_condition,
        })
    }

    fn conversation(&mut self, id: &str, o: &Map<String, Value>) -> Kind {
        let mut transitions = Vec::new();
        let list = o.get("transitions").and_then(Value::as_array);
        for (i, t) in list.into_iter().flatten().enumerate() {
            let field = format!("transitions[{i}]");
            let Some(t) = t.as_object() else {
                self.push(id, "transition_invalid", &field, "must be an object".into());
                continue;
            };
            let Some(next) = self.target(id, t, "next_step_id") else {
                if !t.contains_key("next_step_id") {
                    self.push(
                        id,
                        "transition_invalid",
                        &format!("{field}.next_step_id"),
                        "a transition names the node it leads to".into(),
                    );
                }
                continue;
            };
            let rule = match (Self::text(t, "condition"), t.get("when")) {
                (Some(condition), None) => Rule::Model(condition),
                (None, Some(when)) => match check(when) {
                    Some(check) => Rule::When(check),
                    None => {
                        self.push(id, "transition_invalid", &format!("{field}.when"),
                            "must be {variable, path?, equals | not_equals | exists}, the variable `<node_id>.<name>` or `metadata.<key>`".into());
                        continue;
                    }
                },
                _ => {
                    self.push(
                        id,
                        "transition_invalid",
                        &field,
                        "a transition has either a `condition` (the model decides) or a `when` check"
                            .into(),
                    );
                    continue;
                }
            };
            transitions.push(Transition { next, rule });
        }
        let variables = o
            .get("variables")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| {
                Some(Variable {
                    name: Self::text(v.as_object()?, "name")?,
                    description: Self::text(v.as_object()?, "description").unwrap_or_default(),
                })
            })
            .collect();
        Kind::Conversation {
            instructions: Self::text(o, "instructions").unwrap_or_default(),
            transitions,
            variables,
        }
    }

    fn integration(&mut self, id: &str, o: &Map<String, Value>) -> Kind {
        let args = o
            .get("args_template")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(name, v)| Some((name.clone(), arg(v)?)))
            .collect();
        let success_next = self
            .target(id, o, "success_next_step_id")
            .unwrap_or_else(|| {
                if !o.contains_key("success_next_step_id") {
                    self.push(
                        id,
                        "no_way_out",
                        "success_next_step_id",
                        "an integration_call node names the node that follows a success".into(),
                    );
                }
                usize::MAX
            });
        let mut custom = Vec::new();
        let branches = o.get("custom").and_then(Value::as_array);
        for (i, b) in branches.into_iter().flatten().enumerate() {
            let field = format!("custom[{i}]");
            let (Some(b), true) = (b.as_object(), b.get("equals").is_some()) else {
                self.push(
                    id,
                    "transition_invalid",
                    &field,
                    "a branch is {path, equals, next_step_id}".into(),
                );
                continue;
            };
            let Some(path) = Self::text(b, "path").or_else(|| Self::text(b, "jsonpath")) else {
                self.push(
                    id,
                    "transition_invalid",
                    &format!("{field}.path"),
                    "a branch names a JSONPath into the result".into(),
                );
                continue;
            };
            if super::routing::parse_path(&path).is_none() {
                self.push(
                    id,
                    "transition_invalid",
                    &format!("{field}.path"),
                    format!(
                        "`{path}` is not a JSONPath this service reads ($, .key, ['key'], [index])"
                    ),
                );
                continue;
            }
            if let Some(next) = self.target(id, b, "next_step_id") {
                custom.push(Branch {
                    path,
                    equals: b.get("equals").cloned().unwrap_or(Value::Null),
                    next,
                });
            }
        }
        Kind::IntegrationCall {
            integration_id: Self::text(o, "integration_id").unwrap_or_default(),
            provider: Self::text(o, "provider").unwrap_or_default(),
            action: Self::text(o, "action").unwrap_or_default(),
            args,
            success_next,
            error_next: self.target(id, o, "error_next_step_id"),
            custom,
        }
    }
}

/// An argument of `args_template`: a bare string is a literal.
pub fn arg(value: &Value) -> Option<Arg> {
    match value {
        Value::String(s) => Some(Arg::Literal(s.clone())),
        Value::Object(o) => match o.get("type").and_then(Value::as_str) {
            Some("literal") => o
                .get("value")
                .and_then(Value::as_str)
                .map(|s| Arg::Literal(s.to_string())),
            Some("ai_extract") => o
                .get("description")
                .and_then(Value::as_str)
                .map(|s| Arg::AiExtract(s.to_string())),
            _ => None,
        },
        _ => None,
    }
}

fn check(when: &Value) -> Option<Check> {
    let o = when.as_object()?;
    let variable = o.get("variable").and_then(Value::as_str)?;
    let (source, name) = variable.split_once('.')?;
    if source.is_empty() || name.is_empty() {
        return None;
    }
    let test = match (o.get("equals"), o.get("not_equals"), o.get("exists")) {
        // `{variable, path?, equals | not_equals | exists}`
        (Some(v), None, None) => Test::Equals(v.clone()),
        (None, Some(v), None) => Test::NotEquals(v.clone()),
        (None, None, Some(Value::Bool(b))) => Test::Exists(*b),
        _ => return None,
    };
    let path = match o.get("path") {
        None | Some(Value::Null) => None,
        Some(Value::String(p)) if super::routing::parse_path(p).is_some() => Some(p.clone()),
        Some(_) => return None,
    };
    Some(Check {
        variable: variable.to_string(),
        path,
        test,
    })
}
