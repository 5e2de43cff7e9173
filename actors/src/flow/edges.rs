//! The edges the model is offered at a conversation node: one function per transition it
//! decides (the node's variables as its arguments) and one per global node.

use serde_json::{Map, json};

use super::graph::{Flow, Kind, Rule};
use crate::vendors::ToolSpec;

/// A function of the model's briefing that leads somewhere.
#[derive(Debug, Clone, PartialEq)]
pub struct Edge {
    pub function: ToolSpec,
    pub next: usize,
    pub reason: String,
}

/// The prefix of every function that moves the flow.
pub const EDGE_PREFIX: &str = "go_to_";

/// What the model is offered at node `current` of `flow`: one function per edge it decides
/// (the node's variables as their arguments) and one per global node.
pub(super) fn offered(flow: &Flow, current: usize) -> Vec<Edge> {
    let node = flow.node(current);
    let mut edges = Vec::new();
    let mut names = std::collections::HashSet::new();
    if let Kind::Conversation {
        transitions,
        variables,
        ..
    } = &node.kind
    {
        let mut properties = Map::new();
        for v in variables {
            properties.insert(
                v.name.clone(),
                json!({"type": "string", "description": v.description}),
            );
        }
        let parameters = json!({"type": "object", "properties": properties});
        for t in transitions {
            if let Rule::Model(condition) = &t.rule {
                let name = unique(&mut names, &flow.node(t.next).id);
                edges.push(Edge {
                    function: ToolSpec {
                        name,
                        description: format!("Call this when: {condition}"),
                        parameters: parameters.clone(),
                    },
                    next: t.next,
                    reason: format!("model: {condition}"),
                });
            }
        }
        for g in &flow.globals {
            if *g == current {
                continue;
            }
            let global = flow.node(*g);
            let condition = global.global_condition.clone().unwrap_or_default();
            edges.push(Edge {
                function: ToolSpec {
                    name: unique(&mut names, &global.id),
                    description: format!("Call this at any time when: {condition}"),
                    parameters: parameters.clone(),
                },
                next: *g,
                reason: format!("global: {condition}"),
            });
        }
    }
    edges
}

/// The function name of the edge to node `id` (letters, digits, `_`, `-`; a second edge to a
/// node of the same name gets `_2`, and so on).
pub fn edge_function(id: &str) -> String {
    let clean: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(48)
        .collect();
    format!("{EDGE_PREFIX}{clean}")
}

/// A function name for the edge to `id`, unique among `names`.
fn unique(names: &mut std::collections::HashSet<String>, id: &str) -> String {
    let base = edge_function(id);
    let mut name = base.clone();
    let mut n = 2;
    while !names.insert(name.clone()) {
        name = format!("{base}_{n}");
        n += 1;
    }
    name
}
