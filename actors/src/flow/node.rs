//! The typed form of a flow: what an agent stores (its `flow_config`, in the same JSON as
//! sent), what the API documents, what the save-time checks read and what the run graph is
//! built from ([`super::graph::Flow::compile`]). Each node is a variant tagged by `type`, with
//! exactly its own fields; keys a node's type does not read are kept as sent (`extra`).
//!
//! Reading JSON into it is [`super::read`]'s (a sent flow, with every issue at its node) and
//! [`super::keys`]'s (one node; a stored one leniently: a value of the wrong shape stays in
//! `extra`, as sent).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The flow of a `flow` agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FlowConfig {
    /// 1-500 nodes with unique ids.
    pub nodes: Vec<FlowNode>,
    /// Must be 1 (default 1).
    #[serde(default = "flow_version")]
    pub flow_config_version: i64,
    #[serde(default)]
    pub metadata: FlowMetadata,
}

fn flow_version() -> i64 {
    1
}

/// Declared metadata of a flow.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FlowMetadata {
    /// Custom keys callers may pass in a call's `metadata` and reference as `{{metadata.<key>}}`;
    /// each 1-100 characters, at most 100 keys.
    #[serde(default)]
    pub custom_metadata_keys: Vec<String>,
}

/// A node's position on the flow editor canvas.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodePosition {
    pub x: f64,
    pub y: f64,
}

/// One step of a flow agent, by its `type`. Keys beyond a type's own are kept as sent.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum FlowNode {
    /// Where every call starts: a flow has exactly one.
    Start(StartNode),
    /// The model converses, following the node's instructions, until a transition is taken.
    Conversation(ConversationNode),
    /// Runs one of the workspace's tools with arguments the model extracts.
    ToolCall(ToolCallNode),
    /// Runs an action of a connected integration and routes on its result.
    IntegrationCall(IntegrationCallNode),
    /// Hands the call over to a number or SIP URI.
    Transfer(TransferNode),
    /// Says its greeting, if any, and hangs up.
    End(EndNode),
}

/// What every node has.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeBase {
    /// Unique within the flow; 1-100 characters.
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 100))]
    pub id: String,
    /// Label shown in the editor; at most 200 characters (default empty).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_length = 200))]
    pub name: String,
    /// Canvas position (default 0,0).
    #[serde(default)]
    pub position: NodePosition,
    /// Said on entering the node (a start node's first words, a conversation node's opening
    /// line, what is said while a dispatch runs, before a transfer or before hanging up).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub greeting: Option<String>,
    /// Speak `greeting` word for word instead of letting the model phrase it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_literal: Option<bool>,
    /// Keys the node's type does not read, kept as sent.
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schema(ignore))]
    pub extra: Map<String, Value>,
}

/// Whether a conversation, transfer or end node can be jumped to from any conversation node.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Global {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_global: Option<bool>,
    /// When the call jumps here (the model decides); required with `is_global`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub global_condition: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StartNode {
    #[serde(flatten)]
    pub base: NodeBase,
    /// Whether the agent says the greeting before the caller speaks (default true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_speaks_first: Option<bool>,
    /// Id of the node that follows; must be a node of the same flow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_step_id: Option<String>,
    /// Move on to `next_step_id` once the greeting is said, without waiting for the caller.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_advance: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ConversationNode {
    #[serde(flatten)]
    pub base: NodeBase,
    /// What the model does in this node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Values the model extracts here, as `<node_id>.<name>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variables: Option<Vec<Variable>>,
    /// The ways out, top to bottom: a `when` check is taken without asking the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transitions: Option<Vec<Transition>>,
    /// The node `auto_advance` moves to; must be a node of the same flow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_step_id: Option<String>,
    /// Move on to `next_step_id` once the node's line is said, without waiting for the caller.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_advance: Option<bool>,
    /// How the caller's keypad digits make an entry here (`caller.digits`); default: `#` or 3
    /// seconds after the last key end it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gather: Option<DigitGather>,
    /// Keypad keys the agent sends on entering the node, after its line (`0`-`9`, `*`, `#`,
    /// `A`-`D`; 1-32 of them): a company's phone menu on an outbound call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_digits: Option<String>,
    #[serde(flatten)]
    pub global: Global,
}

/// How a conversation node gathers the caller's keypad digits into an entry: it ends at
/// `max_digits` digits, at the `terminator` key (not kept), or `timeout_secs` after the last
/// key, whichever comes first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DigitGather {
    /// 1-32 (default: no count).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 32))]
    pub max_digits: Option<u32>,
    /// One key, or empty for none (default `#`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(max_length = 1))]
    pub terminator: Option<String>,
    /// 0.5-30 (default 3).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0.5, maximum = 30))]
    pub timeout_secs: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolCallNode {
    #[serde(flatten)]
    pub base: NodeBase,
    /// The workspace tool the node runs.
    pub tool_id: String,
    /// The node that follows the tool's answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_step_id: Option<String>,
    /// The node that follows a failure (default: `next_step_id`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_next_step_id: Option<String>,
    /// What a dry run of the simulator answers instead of running the tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub sample_result: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct IntegrationCallNode {
    #[serde(flatten)]
    pub base: NodeBase,
    /// A connected integration of the workspace.
    pub integration_id: String,
    /// The integration's provider, e.g. `google_calendar`, `gmail`.
    pub provider: String,
    /// An action of the provider's catalog, e.g. `create_event`.
    pub action: String,
    /// The action's arguments by name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args_template: Option<BTreeMap<String, ArgTemplate>>,
    /// The node that follows a result no custom branch takes.
    pub success_next_step_id: String,
    /// The node that follows a hard failure (else the call ends).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_next_step_id: Option<String>,
    /// Branches on the result, top to bottom: the first whose value equals wins.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom: Option<Vec<Branch>>,
    /// What a dry run of the simulator answers instead of running the action.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub sample_result: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TransferNode {
    #[serde(flatten)]
    pub base: NodeBase,
    /// E.164 or a `sip:` URI (a SIP call is handed over by REFER); may hold `{{tokens}}`.
    pub destination: String,
    /// The node that follows a failed transfer (else the call ends).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_next_step_id: Option<String>,
    #[serde(flatten)]
    pub global: Global,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EndNode {
    #[serde(flatten)]
    pub base: NodeBase,
    #[serde(flatten)]
    pub global: Global,
}

/// A value a conversation node extracts.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Variable {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A way out of a conversation node: a `condition` the model decides, or a `when` check.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Transition {
    pub next_step_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub when: Option<When>,
}

/// A check on a value the call has: exactly one of `equals`, `not_equals`, `exists`,
/// `contains`, `matches`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct When {
    /// `<node_id>.<name>`, `metadata.<key>`, `caller.last_words` (what the caller said in
    /// their last turn at this node) or `caller.digits` (the keypad entry they made at this
    /// node).
    pub variable: String,
    /// A JSONPath into the value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub equals: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub not_equals: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exists: Option<bool>,
    /// A word or phrase (or any of a list) the value holds, as whole words; case and
    /// punctuation aside.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contains: Option<Phrases>,
    /// A regular expression the value matches somewhere, case aside, once lowercased with its
    /// punctuation taken out (`caller.digits` as keyed, `*` and `#` kept; at most 200
    /// characters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matches: Option<String>,
}

/// One phrase, or a list of them (any one holds).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Phrases {
    One(String),
    Any(Vec<String>),
}

impl Phrases {
    pub fn list(&self) -> Vec<&str> {
        match self {
            Phrases::One(p) => vec![p.as_str()],
            Phrases::Any(ps) => ps.iter().map(String::as_str).collect(),
        }
    }
}

/// An argument of an integration_call node: a string is a literal (it may hold
/// `{{tokens}}`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ArgTemplate {
    Text(String),
    Mode(ArgMode),
}

/// An argument given by its mode.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ArgMode {
    Literal {
        value: String,
    },
    /// Extracted from the conversation by the model, as the description says.
    AiExtract {
        description: String,
    },
}

/// A custom branch of an integration_call node.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Branch {
    /// A JSONPath into the result (`$.a.b[0]`); `jsonpath` is read too.
    pub path: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub equals: Value,
    pub next_step_id: String,
}

impl FlowNode {
    pub fn base(&self) -> &NodeBase {
        match self {
            FlowNode::Start(n) => &n.base,
            FlowNode::Conversation(n) => &n.base,
            FlowNode::ToolCall(n) => &n.base,
            FlowNode::IntegrationCall(n) => &n.base,
            FlowNode::Transfer(n) => &n.base,
            FlowNode::End(n) => &n.base,
        }
    }

    pub fn id(&self) -> &str {
        &self.base().id
    }

    /// The node's `type`.
    pub fn kind(&self) -> &'static str {
        match self {
            FlowNode::Start(_) => "start",
            FlowNode::Conversation(_) => "conversation",
            FlowNode::ToolCall(_) => "tool_call",
            FlowNode::IntegrationCall(_) => "integration_call",
            FlowNode::Transfer(_) => "transfer",
            FlowNode::End(_) => "end",
        }
    }

    /// Whether the node can be jumped to (conversation, transfer and end nodes).
    pub fn global(&self) -> Option<&Global> {
        match self {
            FlowNode::Conversation(n) => Some(&n.global),
            FlowNode::Transfer(n) => Some(&n.global),
            FlowNode::End(n) => Some(&n.global),
            _ => None,
        }
    }

    /// The node that follows, for the types that have `next_step_id`.
    pub fn next_step_id(&self) -> Option<&str> {
        match self {
            FlowNode::Start(n) => n.next_step_id.as_deref(),
            FlowNode::Conversation(n) => n.next_step_id.as_deref(),
            FlowNode::ToolCall(n) => n.next_step_id.as_deref(),
            _ => None,
        }
    }

    /// What a dry run answers at a tool_call or integration_call node.
    pub fn sample_result(&self) -> Option<&Value> {
        match self {
            FlowNode::ToolCall(n) => n.sample_result.as_ref(),
            FlowNode::IntegrationCall(n) => n.sample_result.as_ref(),
            _ => None,
        }
    }
}
