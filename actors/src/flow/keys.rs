//! One node's JSON read into its variant of the typed form: the keys its type reads taken
//! into typed fields, what cannot be read named as an issue at its field, and every other key
//! kept as sent (`extra`). A sent flow's reading ([`super::read`]) and a stored node's
//! (`Deserialize` of [`FlowNode`]) are this one.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::graph::{GraphIssue, NODE_TYPES, WHEN_SHAPE, issue};
use super::node::{
    ArgMode, ArgTemplate, Branch, ConversationNode, DigitGather, EndNode, FlowNode, Global,
    IntegrationCallNode, NodeBase, Phrases, StartNode, ToolCallNode, TransferNode, Transition,
    Variable, When,
};
use crate::agent::director::{MAX_ENTRY_DIGITS, checked_keys};
use switchboard_sip::dtmf::Digit;

impl<'de> Deserialize<'de> for FlowNode {
    /// A stored node, read leniently ([`stored_node`]).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = Map::<String, Value>::deserialize(deserializer)?;
        stored_node(map).map_err(serde::de::Error::custom)
    }
}

/// A stored node: what a save accepted reads back as it was sent.
fn stored_node(map: Map<String, Value>) -> Result<FlowNode, String> {
    let mut issues = Vec::new();
    let ty = map.get("type").and_then(Value::as_str).unwrap_or_default();
    let message = format!("`{ty}` is not a node type ({})", NODE_TYPES.join(", "));
    node(map, &mut issues, &mut Origins::default()).ok_or(message)
}

/// Where each typed entry of a node's lists was in the sent list (entries that could not be
/// read are left out of the typed form).
#[derive(Default)]
pub(super) struct Origins {
    transitions: Vec<usize>,
    custom: Vec<usize>,
}

impl Origins {
    /// The typed form's list indexes in `issues` (from the graph's checks) as sent.
    pub(super) fn restore(&self, issues: &mut [GraphIssue]) {
        for i in issues {
            for (list, at) in [("transitions", &self.transitions), ("custom", &self.custom)] {
                let Some(rest) = i.field.strip_prefix(list).and_then(|r| r.strip_prefix('['))
                else {
                    continue;
                };
                let Some((k, tail)) = rest.split_once(']') else {
                    continue;
                };
                if let Some(sent) = k.parse::<usize>().ok().and_then(|k| at.get(k)) {
                    i.field = format!("{list}[{sent}]{tail}");
                }
            }
        }
    }
}

/// The keys of one node, taken into typed fields one by one; what is left is kept as sent.
struct Keys<'a> {
    id: String,
    rest: Map<String, Value>,
    issues: &'a mut Vec<GraphIssue>,
    at: &'a mut Origins,
}

impl Keys<'_> {
    fn push(&mut self, code: &'static str, field: &str, message: &str) {
        self.issues.push(issue(&self.id, code, field, message));
    }

    /// The key's value as a `T`; a value of another shape stays as sent.
    fn take<T: DeserializeOwned>(&mut self, key: &str) -> Option<T> {
        let value = self.rest.remove(key)?;
        match T::deserialize(&value) {
            Ok(v) => Some(v),
            Err(_) => {
                self.rest.insert(key.to_string(), value);
                None
            }
        }
    }

    /// A key the shared shape check read as an optional `T`: null is none.
    fn shared<T: DeserializeOwned>(&mut self, key: &str) -> Option<T> {
        match self.rest.get(key) {
            Some(Value::Null) => {
                self.rest.remove(key);
                None
            }
            _ => self.take(key),
        }
    }

    /// A text the node's type needs: empty when missing or not a string (refused by the
    /// graph's checks).
    fn required(&mut self, key: &str) -> String {
        match self.rest.remove(key) {
            Some(Value::String(s)) => s,
            _ => String::new(),
        }
    }

    /// The key's list; another value stays as sent.
    fn list(&mut self, key: &str) -> Option<Vec<Value>> {
        match self.rest.remove(key)? {
            Value::Array(list) => Some(list),
            other => {
                self.rest.insert(key.to_string(), other);
                None
            }
        }
    }

    fn global(&mut self) -> Global {
        Global {
            is_global: self.take("is_global"),
            global_condition: self.take("global_condition"),
        }
    }

    fn variables(&mut self) -> Option<Vec<Variable>> {
        let list = self.list("variables")?;
        let variables = list
            .iter()
            .filter_map(|v| {
                Some(Variable {
                    name: v.get("name")?.as_str()?.to_string(),
                    description: v
                        .get("description")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                })
            })
            .collect();
        Some(variables)
    }

    fn transitions(&mut self) -> Option<Vec<Transition>> {
        let list = self.list("transitions")?;
        let mut out = Vec::new();
        for (i, t) in list.iter().enumerate() {
            let at = format!("transitions[{i}]");
            let Some(t) = t.as_object() else {
                self.push("transition_invalid", &at, "must be an object");
                continue;
            };
            let Some(next) = t.get("next_step_id").and_then(Value::as_str) else {
                self.push(
                    "transition_invalid",
                    &format!("{at}.next_step_id"),
                    "a transition names the node it leads to",
                );
                continue;
            };
            let when = match t.get("when") {
                None => None,
                Some(w) => match when(w) {
                    Some(w) => Some(w),
                    None => {
                        self.push("transition_invalid", &format!("{at}.when"), WHEN_SHAPE);
                        continue;
                    }
                },
            };
            self.at.transitions.push(i);
            out.push(Transition {
                next_step_id: next.to_string(),
                condition: t
                    .get("condition")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                when,
            });
        }
        Some(out)
    }

    /// How the node gathers keypad digits; each field out of its range is an issue, and the
    /// gather is left as sent.
    fn gather(&mut self) -> Option<DigitGather> {
        let value = self.rest.get("gather")?;
        if value.is_null() {
            self.rest.remove("gather");
            return None;
        }
        let Ok(gather) = DigitGather::deserialize(value) else {
            self.push(
                "gather_invalid",
                "gather",
                "must be {max_digits?, terminator?, timeout_secs?}",
            );
            return None;
        };
        let mut fine = true;
        if gather
            .max_digits
            .is_some_and(|n| n == 0 || n as usize > MAX_ENTRY_DIGITS)
        {
            self.push("gather_invalid", "gather.max_digits", "must be 1-32");
            fine = false;
        }
        if let Some(t) = &gather.terminator
            && !t.is_empty()
            && (t.chars().count() != 1 || t.chars().next().and_then(Digit::from_char).is_none())
        {
            let message = "must be one keypad key (0-9, *, #, A-D), or empty for none";
            self.push("gather_invalid", "gather.terminator", message);
            fine = false;
        }
        if gather
            .timeout_secs
            .is_some_and(|t| !(0.5..=30.0).contains(&t))
        {
            self.push("gather_invalid", "gather.timeout_secs", "must be 0.5-30");
            fine = false;
        }
        if fine {
            self.rest.remove("gather");
        }
        fine.then_some(gather)
    }

    /// The keys the node sends, checked.
    fn send_digits(&mut self) -> Option<String> {
        let value = self.rest.get("send_digits")?;
        let checked = match value {
            Value::Null => {
                self.rest.remove("send_digits");
                return None;
            }
            Value::String(keys) => checked_keys(keys),
            _ => Err("must be a string of keypad keys".to_string()),
        };
        match checked {
            Ok(keys) => {
                self.rest.remove("send_digits");
                Some(keys)
            }
            Err(why) => {
                self.push("send_digits_invalid", "send_digits", &why);
                None
            }
        }
    }

    fn args(&mut self) -> Option<BTreeMap<String, ArgTemplate>> {
        let args = match self.rest.remove("args_template") {
            None => return None,
            Some(Value::Object(args)) => args,
            Some(Value::Null) => {
                self.rest.insert("args_template".into(), Value::Null);
                return None;
            }
            Some(_) => {
                self.push(
                    "args_template_invalid",
                    "args_template",
                    "must be an object",
                );
                return None;
            }
        };
        let mut out = BTreeMap::new();
        for (name, value) in args {
            match arg(&value) {
                Some(a) => {
                    out.insert(name, a);
                }
                None => self.push(
                    "args_template_invalid",
                    &format!("args_template.{name}"),
                    "must be a string, {type: literal, value} or {type: ai_extract, description}",
                ),
            }
        }
        Some(out)
    }

    fn custom(&mut self) -> Option<Vec<Branch>> {
        let list = self.list("custom")?;
        let mut out = Vec::new();
        for (i, b) in list.iter().enumerate() {
            let at = format!("custom[{i}]");
            let (Some(b), Some(equals)) = (b.as_object(), b.get("equals")) else {
                self.push(
                    "transition_invalid",
                    &at,
                    "a branch is {path, equals, next_step_id}",
                );
                continue;
            };
            let path = ["path", "jsonpath"]
                .iter()
                .find_map(|k| b.get(*k).and_then(Value::as_str))
                .filter(|p| !p.trim().is_empty());
            let Some(path) = path else {
                self.push(
                    "transition_invalid",
                    &format!("{at}.path"),
                    "a branch names a JSONPath into the result",
                );
                continue;
            };
            let Some(next) = b.get("next_step_id").and_then(Value::as_str) else {
                self.push(
                    "transition_invalid",
                    &format!("{at}.next_step_id"),
                    "a branch names the node it leads to",
                );
                continue;
            };
            self.at.custom.push(i);
            out.push(Branch {
                path: path.to_string(),
                equals: equals.clone(),
                next_step_id: next.to_string(),
            });
        }
        Some(out)
    }
}

/// One node read into its type, its problems pushed to `issues`; `None` for an unknown type.
pub(super) fn node(
    mut rest: Map<String, Value>,
    issues: &mut Vec<GraphIssue>,
    at: &mut Origins,
) -> Option<FlowNode> {
    let id = match rest.remove("id") {
        Some(Value::String(id)) => id,
        _ => String::new(),
    };
    let ty = match rest.remove("type") {
        Some(Value::String(ty)) => ty,
        _ => String::new(),
    };
    let mut k = Keys {
        id: id.clone(),
        rest,
        issues,
        at,
    };
    let mut base = NodeBase {
        id,
        name: k.take("name").unwrap_or_default(),
        position: k.take("position").unwrap_or_default(),
        greeting: k.shared("greeting"),
        is_literal: k.shared("is_literal"),
        extra: Map::new(),
    };
    let mut node = match ty.as_str() {
        "start" => FlowNode::Start(StartNode {
            agent_speaks_first: k.shared("agent_speaks_first"),
            next_step_id: k.shared("next_step_id"),
            auto_advance: k.shared("auto_advance"),
            ..Default::default()
        }),
        "conversation" => FlowNode::Conversation(ConversationNode {
            instructions: k.take("instructions"),
            variables: k.variables(),
            transitions: k.transitions(),
            next_step_id: k.shared("next_step_id"),
            auto_advance: k.shared("auto_advance"),
            gather: k.gather(),
            send_digits: k.send_digits(),
            global: k.global(),
            ..Default::default()
        }),
        "tool_call" => FlowNode::ToolCall(ToolCallNode {
            tool_id: k.required("tool_id"),
            next_step_id: k.shared("next_step_id"),
            error_next_step_id: k.take("error_next_step_id"),
            sample_result: k.take("sample_result"),
            ..Default::default()
        }),
        "integration_call" => FlowNode::IntegrationCall(IntegrationCallNode {
            integration_id: k.required("integration_id"),
            provider: k.required("provider"),
            action: k.required("action"),
            args_template: k.args(),
            success_next_step_id: k.required("success_next_step_id"),
            error_next_step_id: k.take("error_next_step_id"),
            custom: k.custom(),
            sample_result: k.take("sample_result"),
            ..Default::default()
        }),
        "transfer" => FlowNode::Transfer(TransferNode {
            destination: k.required("destination"),
            error_next_step_id: k.take("error_next_step_id"),
            global: k.global(),
            ..Default::default()
        }),
        "end" => FlowNode::End(EndNode {
            global: k.global(),
            ..Default::default()
        }),
        other => {
            k.push(
                "node_type_invalid",
                "type",
                &format!("`{other}` is not a node type ({})", NODE_TYPES.join(", ")),
            );
            return None;
        }
    };
    if node.global().is_none() && k.rest.get("is_global") == Some(&Value::Bool(true)) {
        let message = format!(
            "{} nodes cannot be global (only conversation, transfer and end nodes can)",
            node.kind()
        );
        k.push("is_global_not_allowed", "is_global", &message);
    }
    base.extra = k.rest;
    match &mut node {
        FlowNode::Start(n) => n.base = base,
        FlowNode::Conversation(n) => n.base = base,
        FlowNode::ToolCall(n) => n.base = base,
        FlowNode::IntegrationCall(n) => n.base = base,
        FlowNode::Transfer(n) => n.base = base,
        FlowNode::End(n) => n.base = base,
    }
    Some(node)
}

/// An argument of `args_template`: a bare string is a literal.
fn arg(value: &Value) -> Option<ArgTemplate> {
    match value {
        Value::String(s) => Some(ArgTemplate::Text(s.clone())),
        Value::Object(o) => {
            let text = |key: &str| o.get(key).and_then(Value::as_str).map(str::to_string);
            let mode = match o.get("type").and_then(Value::as_str) {
                Some("literal") => ArgMode::Literal {
                    value: text("value")?,
                },
                Some("ai_extract") => ArgMode::AiExtract {
                    description: text("description")?,
                },
                _ => return None,
            };
            Some(ArgTemplate::Mode(mode))
        }
        _ => None,
    }
}

/// A `when` of the right shape (what it checks is the graph's to judge).
fn when(value: &Value) -> Option<When> {
    let o = value.as_object()?;
    let path = match o.get("path") {
        None | Some(Value::Null) => None,
        Some(Value::String(p)) => Some(p.clone()),
        Some(_) => return None,
    };
    let exists = match o.get("exists") {
        None => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => return None,
    };
    let contains = match o.get("contains") {
        None => None,
        Some(Value::String(p)) => Some(Phrases::One(p.clone())),
        Some(Value::Array(ps)) => Some(Phrases::Any(
            ps.iter()
                .map(|p| p.as_str().map(str::to_string))
                .collect::<Option<_>>()?,
        )),
        Some(_) => return None,
    };
    let matches = match o.get("matches") {
        None => None,
        Some(Value::String(p)) => Some(p.clone()),
        Some(_) => return None,
    };
    Some(When {
        variable: o.get("variable")?.as_str()?.to_string(),
        path,
        equals: o.get("equals").cloned(),
        not_equals: o.get("not_equals").cloned(),
        exists,
        contains,
        matches,
    })
}
