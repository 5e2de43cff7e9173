//! Reading a flow's JSON into its typed form ([`FlowConfig`]): a sent flow with every check of
//! a save (the keys' shapes and bounds first, as one field error; then every issue that would
//! stop it running, at its node: `FLOW_INVALID`), and a stored one leniently.

use std::collections::{HashMap, HashSet};

use serde::Deserialize;
use serde_json::{Map, Value};

use super::graph::{Flow, GraphIssue};
use super::keys::Origins;
use super::node::{FlowConfig, FlowMetadata, NodePosition};

/// The bounds of a flow's fields: text as (fewest, most) characters.
pub mod bounds {
    pub const NODES_MAX: usize = 500;
    pub const NODE_ID: (usize, usize) = (1, 100);
    pub const NODE_TYPE: (usize, usize) = (1, 50);
    pub const NODE_NAME: (usize, usize) = (0, 200);
    pub const METADATA_KEYS_MAX: usize = 100;
    pub const METADATA_KEY: (usize, usize) = (1, 100);
    pub const FLOW_CONFIG_VERSION: i64 = 1;
}

/// The first problem of a sent flow's fields: where (a path inside the flow, empty for the
/// flow itself) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

/// A sent flow read: its nodes that could be read, and every issue that stops it running.
#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    pub flow: FlowConfig,
    pub issues: Vec<GraphIssue>,
    /// Nodes that could not be read (an unknown `type`).
    pub unread: usize,
}

/// The keys every sent node has always been read with as JSON types: a wrong one answers
/// serde's own message at its path (`nodes[0].is_literal`), before any other check.
#[derive(Deserialize)]
#[serde(expecting = "struct FlowConfig")]
#[allow(dead_code)]
struct SentShape {
    nodes: Vec<SentKeys>,
    #[serde(default = "version")]
    flow_config_version: i64,
    #[serde(default)]
    metadata: FlowMetadata,
}

fn version() -> i64 {
    bounds::FLOW_CONFIG_VERSION
}

#[derive(Deserialize)]
#[serde(expecting = "struct FlowNode")]
#[allow(dead_code)]
struct SentKeys {
    id: String,
    #[serde(rename = "type")]
    node_type: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    position: NodePosition,
    agent_speaks_first: Option<bool>,
    greeting: Option<String>,
    is_literal: Option<bool>,
    next_step_id: Option<String>,
    auto_advance: Option<bool>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

fn field(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

/// What a text of `n` characters outside `min..=max` is told; `None` within.
pub fn length_rule(n: usize, (min, max): (usize, usize)) -> Option<String> {
    if n >= min && n <= max {
        return None;
    }
    Some(if min == 0 {
        format!("must be at most {max} characters")
    } else {
        format!("must be {min}-{max} characters")
    })
}

fn chars(at: String, value: &str, bounds: (usize, usize)) -> Result<(), FieldError> {
    match length_rule(value.chars().count(), bounds) {
        Some(rule) => Err(field(at, rule)),
        None => Ok(()),
    }
}

/// The shapes and bounds of a sent flow: the first problem.
fn check_fields(value: &Value) -> Result<SentShape, FieldError> {
    let shape: SentShape = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        field(path, e.into_inner().to_string())
    })?;
    if shape.flow_config_version != bounds::FLOW_CONFIG_VERSION {
        return Err(field(
            "flow_config_version",
            format!("must be {}", bounds::FLOW_CONFIG_VERSION),
        ));
    }
    if shape.nodes.len() > bounds::NODES_MAX {
        return Err(field(
            "nodes",
            format!("must have at most {} nodes", bounds::NODES_MAX),
        ));
    }
    let mut ids = HashSet::new();
    for (i, node) in shape.nodes.iter().enumerate() {
        chars(format!("nodes[{i}].id"), &node.id, bounds::NODE_ID)?;
        chars(
            format!("nodes[{i}].type"),
            &node.node_type,
            bounds::NODE_TYPE,
        )?;
        chars(format!("nodes[{i}].name"), &node.name, bounds::NODE_NAME)?;
        if !ids.insert(node.id.as_str()) {
            return Err(field(
                format!("nodes[{i}].id"),
                format!("node id `{}` is used more than once", node.id),
            ));
        }
    }
    for (i, node) in shape.nodes.iter().enumerate() {
        if let Some(next) = &node.next_step_id
            && !ids.contains(next.as_str())
        {
            return Err(field(
                format!("nodes[{i}].next_step_id"),
                format!("`{next}` is not a node of this flow"),
            ));
        }
    }
    let keys = &shape.metadata.custom_metadata_keys;
    if keys.len() > bounds::METADATA_KEYS_MAX {
        return Err(field(
            "metadata.custom_metadata_keys",
            format!("must have at most {} keys", bounds::METADATA_KEYS_MAX),
        ));
    }
    for (i, key) in keys.iter().enumerate() {
        chars(
            format!("metadata.custom_metadata_keys[{i}]"),
            key,
            bounds::METADATA_KEY,
        )?;
    }
    Ok(shape)
}

/// Reads a sent flow (`{nodes, flow_config_version, metadata}` as JSON): the first problem of
/// its fields, else the flow with every issue that stops it running (none: it may be saved).
pub fn read(value: &Value) -> Result<Read, FieldError> {
    let shape = check_fields(value)?;
    let raw: Vec<Map<String, Value>> = value
        .get("nodes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|n| n.as_object().cloned())
        .collect();
    let ids: HashMap<&str, usize> = shape
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id.as_str(), i))
        .collect();
    let mut issues = Vec::new();
    let mut nodes = Vec::new();
    let mut built = Vec::new();
    for map in raw {
        let mut at = Origins::default();
        if let Some(node) = super::keys::node(map, &mut issues, &mut at) {
            let from = issues.len();
            built.push(super::compile::build(&node, &ids, &mut issues));
            at.restore(&mut issues[from..]);
            nodes.push(node);
        }
    }
    let unread = shape.nodes.len() - nodes.len();
    let flow = FlowConfig {
        nodes,
        flow_config_version: shape.flow_config_version,
        metadata: shape.metadata,
    };
    if unread == 0
        && let Err(more) = Flow::assemble(built, &flow)
    {
        for i in more {
            if !issues.contains(&i) {
                issues.push(i);
            }
        }
    }
    Ok(Read {
        flow,
        issues,
        unread,
    })
}
