//! A flow as a read-only graph: its nodes in layers by their distance from the start, each
//! edge labelled with what takes it (next, a transition's condition or check, a dispatch's
//! success, error or branch), drawn as SVG on the server (no script), and the same graph as a
//! list in words. The flow's issues (`FLOW_INVALID`'s) are marked at their nodes.
//!
//! It reads the flow's typed form, not the compiled graph, so that a flow that no longer holds
//! together (a dangling edge, a disconnected integration) is still drawn, with what is wrong at
//! the node where it is wrong.

use std::collections::{HashMap, VecDeque};

use maud::{Markup, html};
use switchboard_actors::flow::node::When;

use crate::runtime::flows::FlowIssue;
use crate::store::{FlowConfig, FlowNode};

/// A node as the graph draws it.
struct Node {
    id: String,
    kind: String,
    name: String,
    global: bool,
    /// Label, target id.
    edges: Vec<(String, String)>,
}

fn short(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &s[..end]),
        None => s.to_owned(),
    }
}

/// The check of a `when` transition, in words.
fn check_words(when: &When) -> String {
    let variable = &when.variable;
    let path = when
        .path
        .as_deref()
        .filter(|p| !p.is_empty())
        .map(|p| format!(" {p}"))
        .unwrap_or_default();
    if let Some(v) = &when.equals {
        format!("{variable}{path} = {v}")
    } else if let Some(v) = &when.not_equals {
        format!("{variable}{path} ≠ {v}")
    } else {
        format!("{variable}{path} exists")
    }
}

/// A node's edges by its type: (label, target id).
fn edges_of(node: &FlowNode) -> Vec<(String, String)> {
    let (next, success, error) = match node {
        FlowNode::IntegrationCall(n) => (
            None,
            Some(n.success_next_step_id.as_str()),
            n.error_next_step_id.as_deref(),
        ),
        FlowNode::ToolCall(n) => (
            n.next_step_id.as_deref(),
            None,
            n.error_next_step_id.as_deref(),
        ),
        FlowNode::Transfer(n) => (None, None, n.error_next_step_id.as_deref()),
        other => (other.next_step_id(), None, None),
    };
    let mut edges: Vec<(String, String)> = [("next", next), ("success", success), ("error", error)]
        .into_iter()
        .filter_map(|(label, target)| {
            let target = target.filter(|t| !t.is_empty())?;
            Some((label.to_owned(), target.to_owned()))
        })
        .collect();
    if let FlowNode::Conversation(n) = node {
        for t in n.transitions.iter().flatten() {
            let label = match (t.condition.as_deref().filter(|c| !c.is_empty()), &t.when) {
                (Some(c), _) => c.to_owned(),
                (None, Some(when)) => check_words(when),
                _ => "transition".into(),
            };
            edges.push((label, t.next_step_id.clone()));
        }
    }
    if let FlowNode::IntegrationCall(n) = node {
        for b in n.custom.iter().flatten() {
            edges.push((format!("{} = {}", b.path, b.equals), b.next_step_id.clone()));
        }
    }
    edges
}

fn nodes_of(flow: &FlowConfig) -> Vec<Node> {
    flow.nodes
        .iter()
        .map(|n| Node {
            id: n.id().to_owned(),
            kind: n.kind().to_owned(),
            name: n.base().name.clone(),
            global: n.global().is_some_and(|g| g.is_global == Some(true)),
            edges: edges_of(n),
        })
        .collect()
}

/// A node's edges with one per target: the labels of edges to the same node joined.
fn joined(edges: &[(String, String)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (label, target) in edges {
        match out.iter_mut().find(|(_, t)| t == target) {
            Some((l, _)) => {
                l.push_str(" or ");
                l.push_str(label);
            }
            None => out.push((label.clone(), target.clone())),
        }
    }
    out
}

/// Each node's layer: its distance from the start node (breadth first); nodes no edge
/// reaches come last, global nodes beside them.
fn layers(nodes: &[Node]) -> Vec<usize> {
    let index: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id.as_str(), i))
        .collect();
    let mut layer = vec![usize::MAX; nodes.len()];
    let mut queue = VecDeque::new();
    if let Some(start) = nodes.iter().position(|n| n.kind == "start") {
        layer[start] = 0;
        queue.push_back(start);
    }
    while let Some(i) = queue.pop_front() {
        for (_, target) in &nodes[i].edges {
            if let Some(&j) = index.get(target.as_str())
                && layer[j] == usize::MAX
            {
                layer[j] = layer[i] + 1;
                queue.push_back(j);
            }
        }
    }
    let deepest = layer
        .iter()
        .filter(|l| **l != usize::MAX)
        .max()
        .copied()
        .unwrap_or(0);
    layer
        .iter()
        .map(|l| if *l == usize::MAX { deepest + 1 } else { *l })
        .collect()
}

const BOX_W: i64 = 190;
const BOX_H: i64 = 54;
const GAP_X: i64 = 40;
const GAP_Y: i64 = 70;
const MARGIN: i64 = 20;

/// The flow drawn, and the same in words, with `issues` at their nodes.
pub fn render(flow: &FlowConfig, issues: &[FlowIssue]) -> Markup {
    let nodes = nodes_of(flow);
    if nodes.is_empty() {
        return html! { p.muted { "The flow has no nodes." } };
    }
    let layer = layers(&nodes);
    let rows = layer.iter().max().copied().unwrap_or(0) + 1;
    let mut position = vec![(0i64, 0i64); nodes.len()];
    let mut widest = 0i64;
    for row in 0..rows {
        let members: Vec<usize> = (0..nodes.len()).filter(|i| layer[*i] == row).collect();
        for (k, i) in members.iter().enumerate() {
            position[*i] = (
                MARGIN + k as i64 * (BOX_W + GAP_X),
                MARGIN + row as i64 * (BOX_H + GAP_Y),
            );
        }
        widest = widest.max(members.len() as i64);
    }
    let width = 2 * MARGIN + widest * (BOX_W + GAP_X) - GAP_X;
    let height = 2 * MARGIN + rows as i64 * (BOX_H + GAP_Y) - GAP_Y;
    let index: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id.as_str(), i))
        .collect();
    let issues_of =
        |id: &str| -> Vec<&FlowIssue> { issues.iter().filter(|i| i.node_id == id).collect() };
    let flawed = |id: &str| issues.iter().any(|i| i.node_id == id);
    let general: Vec<&FlowIssue> = issues
        .iter()
        .filter(|i| !index.contains_key(i.node_id.as_str()))
        .collect();
    let summary = format!(
        "The flow's {} nodes and their edges, from the start node down{}",
        nodes.len(),
        if issues.is_empty() {
            String::new()
        } else {
            format!("; {} issue(s) marked", issues.len())
        }
    );
    html! {
        figure.flow {
            div.flow-scroll {
                svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label=(summary)
                    viewBox=(format!("0 0 {width} {height}")) width=(width) height=(height) {
                    defs {
                        marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse" {
                            path d="M 0 0 L 10 5 L 0 10 z" class="arrow-head" {}
                        }
                    }
                    @for (i, n) in nodes.iter().enumerate() {
                        @for (label, target) in joined(&n.edges) {
                            @if let Some(&j) = index.get(target.as_str()) {
                                @let (x1, y1) = (position[i].0 + BOX_W / 2, position[i].1 + BOX_H);
                                @let (x2, y2) = (position[j].0 + BOX_W / 2, position[j].1);
                                @let back = position[j].1 <= position[i].1;
                                @let d = if back {
                                    // Up or sideways: around the right of the boxes.
                                    let bend = x1.max(x2) + BOX_W / 2 + 20;
                                    format!("M {} {} C {bend} {}, {bend} {}, {} {}", x1 + BOX_W / 2, position[i].1 + BOX_H / 2,
                                        position[i].1 + BOX_H / 2, y2 + BOX_H / 2, x2 + BOX_W / 2, y2 + BOX_H / 2)
                                } else {
                                    format!("M {x1} {y1} C {x1} {}, {x2} {}, {x2} {y2}", y1 + GAP_Y / 2, y2 - GAP_Y / 2)
                                };
                                path class=(if label == "error" { "edge edge-error" } else { "edge" }) d=(d) marker-end="url(#arrow)" {}
                                // Beside the edge's end, where edges from one node part.
                                text.edge-label x=(if back { x2 + BOX_W / 2 + 6 } else { x2 + 6 }) y=(if back { y2 + BOX_H / 2 - 6 } else { y2 - 10 }) { (short(&label, 30)) }
                            }
                        }
                    }
                    @for (i, n) in nodes.iter().enumerate() {
                        @let (x, y) = position[i];
                        g class=(format!("node kind-{}{}", n.kind, if flawed(&n.id) { " flawed" } else { "" })) {
                            rect x=(x) y=(y) width=(BOX_W) height=(BOX_H) rx="6" {}
                            text.node-id x=(x + 10) y=(y + 22) { (short(&n.id, 22)) @if flawed(&n.id) { " ⚠" } }
                            text.node-kind x=(x + 10) y=(y + 42) { (n.kind) @if n.global { " · global" } @if !n.name.is_empty() { " · " (short(&n.name, 14)) } }
                        }
                    }
                }
            }
            figcaption.muted { "Read-only. Edit the flow with " code { "PATCH /agents/{id}" } "." }
        }
        @if !issues.is_empty() {
            div.problem role="alert" {
                p { "This flow would not save as it is now (FLOW_INVALID):" }
                ul {
                    @for i in &general { li { code { (i.code) } " " (i.message) } }
                    @for n in &nodes {
                        @for i in issues_of(&n.id) {
                            li { a href=(format!("#node-{}", n.id)) { (n.id) } ": " code { (i.code) } " at " code { (i.field) } " — " (i.message) }
                        }
                    }
                }
            }
        }
        details open[nodes.len() <= 12] {
            summary { "The graph in words" }
            ol.flow-nodes {
                @for n in &nodes {
                    li id=(format!("node-{}", n.id)) class=[flawed(&n.id).then_some("flawed")] {
                        strong { (n.id) } " (" (n.kind) @if n.global { ", global" } ")"
                        @if n.edges.is_empty() { " — ends here" }
                        ul {
                            @for (label, target) in &n.edges {
                                li { (label) " → " @if index.contains_key(target.as_str()) { a href=(format!("#node-{target}")) { (target) } } @else { (target) " (no such node)" } }
                            }
                            @for i in issues_of(&n.id) { li.field-error { "⚠ " (i.message) } }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nodes_are_layered_by_distance_from_the_start_and_issues_marked() {
        let flow = json!({"nodes": [
            {"id": "done", "type": "end"},
            {"id": "start", "type": "start", "next_step_id": "ask"},
            {"id": "ask", "type": "conversation", "transitions": [
                {"condition": "the caller agrees", "next_step_id": "book"},
                {"when": {"variable": "ask.ok", "equals": "no"}, "next_step_id": "done"}]},
            {"id": "book", "type": "integration_call", "success_next_step_id": "done",
             "error_next_step_id": "sorry", "custom": [{"path": "$.available", "equals": false, "next_step_id": "ask"}]},
            {"id": "orphan", "type": "end"}
        ]});
        let flow: FlowConfig = serde_json::from_value(flow).unwrap();
        let nodes = nodes_of(&flow);
        assert_eq!(layers(&nodes), vec![2, 0, 1, 2, 3]);
        let book = &nodes[3];
        assert_eq!(
            book.edges,
            vec![
                ("success".to_string(), "done".to_string()),
                ("error".into(), "sorry".into()),
                ("$.available = false".into(), "ask".into())
            ]
        );
        assert_eq!(nodes[2].edges[1].0, "ask.ok = \"no\"");
        let issue = FlowIssue {
            node_id: "book".into(),
            code: "transition_dangling",
            field: "error_next_step_id".into(),
            message: "`sorry` is not a node of this flow".into(),
        };
        let page = render(&flow, &[issue]).into_string();
        assert!(
            page.contains("class=\"node kind-integration_call flawed\""),
            "{page}"
        );
        assert!(page.contains("sorry (no such node)"));
        assert!(page.contains("transition_dangling"));
        assert!(!page.contains("style="), "no inline style under the CSP");
    }
}
