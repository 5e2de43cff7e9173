//! A flow as a read-only graph: its nodes where the flow's `position`s put them (else in layers
//! by their distance from the start), each edge labelled with what takes it (next, a
//! transition's condition or check, a dispatch's success, error or branch) in full, wrapped
//! over lines, drawn as SVG on the server (no script), and the same graph as a list in words.
//! The flow's issues (`FLOW_INVALID`'s) are marked at their nodes.
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
    } else if let Some(phrases) = &when.contains {
        let phrases: Vec<String> = phrases.list().iter().map(|p| format!("“{p}”")).collect();
        format!("{variable}{path} contains {}", phrases.join(" or "))
    } else if let Some(pattern) = &when.matches {
        format!("{variable}{path} matches /{pattern}/")
    } else if when.exists == Some(false) {
        format!("{variable}{path} is not set")
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
/// An edge label's line, in characters at most (a longer word keeps a line of its own).
const LABEL_CHARS: usize = 28;
/// A label line's height and a character's width at the labels' size, in pixels (a generous
/// width, so a label never runs past the drawing).
const LINE_H: i64 = 13;
const CHAR_W: i64 = 7;

/// `label` in lines of at most [`LABEL_CHARS`], broken between words; nothing is left out.
fn label_lines(label: &str) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in label.split_whitespace() {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= LABEL_CHARS => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_owned()),
        }
    }
    lines
}

/// Where each node's box goes: at the flow's `position`s (moved so the leftmost and topmost
/// sit at the margin) when they keep every box clear of the others, else in layers by
/// distance from the start.
fn placed(flow: &FlowConfig, nodes: &[Node]) -> Vec<(i64, i64)> {
    let given: Vec<(i64, i64)> = flow
        .nodes
        .iter()
        .map(|n| {
            let p = &n.base().position;
            let coordinate = |v: f64| if v.is_finite() { v.round() as i64 } else { 0 };
            (coordinate(p.x), coordinate(p.y))
        })
        .collect();
    let clear = given.iter().enumerate().all(|(i, a)| {
        given[i + 1..]
            .iter()
            .all(|b| (a.0 - b.0).abs() >= BOX_W + 10 || (a.1 - b.1).abs() >= BOX_H + 10)
    });
    if clear && given.len() > 1 {
        let left = given.iter().map(|p| p.0).min().unwrap_or(0);
        let top = given.iter().map(|p| p.1).min().unwrap_or(0);
        return given
            .iter()
            .map(|(x, y)| (MARGIN + x - left, MARGIN + y - top))
            .collect();
    }
    let layer = layers(nodes);
    let rows = layer.iter().max().copied().unwrap_or(0) + 1;
    let mut position = vec![(0i64, 0i64); nodes.len()];
    for row in 0..rows {
        let members: Vec<usize> = (0..nodes.len()).filter(|i| layer[*i] == row).collect();
        for (k, i) in members.iter().enumerate() {
            position[*i] = (
                MARGIN + k as i64 * (BOX_W + GAP_X),
                MARGIN + row as i64 * (BOX_H + GAP_Y),
            );
        }
    }
    position
}

/// An edge drawn: its path, and its label's lines with where they start.
struct Drawn {
    d: String,
    error: bool,
    lines: Vec<String>,
    at: (i64, i64),
    /// The label ends at `at` (it sits left of an edge that comes in from the right).
    leftward: bool,
}

impl Drawn {
    /// The label's widest line, in pixels.
    fn label_width(&self) -> i64 {
        self.lines
            .iter()
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(0) as i64
            * CHAR_W
    }

    /// The label's left and right edges.
    fn span(&self) -> (i64, i64) {
        if self.leftward {
            (self.at.0 - self.label_width(), self.at.0)
        } else {
            (self.at.0, self.at.0 + self.label_width())
        }
    }
}

/// The edges of `nodes` at `position`, each with its label placed beside the edge's end.
fn drawn_edges(nodes: &[Node], position: &[(i64, i64)]) -> Vec<Drawn> {
    let index: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id.as_str(), i))
        .collect();
    let mut out = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        for (label, target) in joined(&n.edges) {
            let Some(&j) = index.get(target.as_str()) else {
                continue;
            };
            let (x1, y1) = (position[i].0 + BOX_W / 2, position[i].1 + BOX_H);
            let (x2, y2) = (position[j].0 + BOX_W / 2, position[j].1);
            let back = position[j].1 <= position[i].1;
            let lines = label_lines(&label);
            let d = if back {
                // Up or sideways: around the right of the boxes.
                let bend = x1.max(x2) + BOX_W / 2 + 20;
                let (from_y, to_y) = (position[i].1 + BOX_H / 2, y2 + BOX_H / 2);
                format!(
                    "M {} {from_y} C {bend} {from_y}, {bend} {to_y}, {} {to_y}",
                    x1 + BOX_W / 2,
                    x2 + BOX_W / 2
                )
            } else {
                format!(
                    "M {x1} {y1} C {x1} {}, {x2} {}, {x2} {y2}",
                    y1 + GAP_Y / 2,
                    y2 - GAP_Y / 2
                )
            };
            // Beside the edge's end, where edges from one node part, on the side the edge
            // does not come in from; the last line just above the box.
            let rise = (lines.len() as i64 - 1) * LINE_H;
            let leftward = !back && x1 > x2;
            let at = if back {
                (x2 + BOX_W / 2 + 6, y2 + BOX_H / 2 - 6 - rise)
            } else if leftward {
                (x2 - 6, y2 - 10 - rise)
            } else {
                (x2 + 6, y2 - 10 - rise)
            };
            out.push(Drawn {
                d,
                error: label == "error",
                lines,
                at,
                leftward,
            });
        }
    }
    out
}

/// The flow drawn, and the same in words, with `issues` at their nodes.
pub fn render(flow: &FlowConfig, issues: &[FlowIssue]) -> Markup {
    let nodes = nodes_of(flow);
    if nodes.is_empty() {
        return html! { p.muted { "The flow has no nodes." } };
    }
    let mut position = placed(flow, &nodes);
    let mut edges = drawn_edges(&nodes, &position);
    // Room above and to the left for labels that run past the margin: everything moves.
    let above = edges
        .iter()
        .map(|e| MARGIN - (e.at.1 - LINE_H))
        .max()
        .unwrap_or(0)
        .max(0);
    let left = edges
        .iter()
        .map(|e| MARGIN - e.span().0)
        .max()
        .unwrap_or(0)
        .max(0);
    if above > 0 || left > 0 {
        for p in position.iter_mut() {
            p.0 += left;
            p.1 += above;
        }
        edges = drawn_edges(&nodes, &position);
    }
    let width = position
        .iter()
        .map(|p| p.0 + BOX_W + BOX_W / 2 + 30)
        .chain(edges.iter().map(|e| e.span().1))
        .max()
        .unwrap_or(0)
        + MARGIN;
    let height = position
        .iter()
        .map(|p| p.1 + BOX_H)
        .chain(edges.iter().map(|e| e.at.1 + e.lines.len() as i64 * LINE_H))
        .max()
        .unwrap_or(0)
        + MARGIN;
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
                    @for e in &edges {
                        path class=(if e.error { "edge edge-error" } else { "edge" }) d=(e.d) marker-end="url(#arrow)" {}
                        text.edge-label x=(e.at.0) y=(e.at.1) text-anchor=[e.leftward.then_some("end")] {
                            @for (k, line) in e.lines.iter().enumerate() {
                                tspan x=(e.at.0) dy=(if k == 0 { 0 } else { LINE_H }) { (line) }
                            }
                        }
                    }
                    @for (i, n) in nodes.iter().enumerate() {
                        @let (x, y) = position[i];
                        g class=(format!("node kind-{}{}", n.kind, if flawed(&n.id) { " flawed" } else { "" })) {
                            title { (n.id) @if !n.name.is_empty() { " — " (n.name) } }
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

    #[test]
    fn nodes_stand_at_their_positions_and_labels_are_whole() {
        let long = "the caller asked for a table by the window on a Saturday evening";
        let flow = json!({"nodes": [
            {"id": "start", "type": "start", "next_step_id": "ask", "position": {"x": 400, "y": -50}},
            {"id": "ask", "type": "conversation", "position": {"x": 100, "y": 150}, "transitions": [
                {"condition": long, "next_step_id": "done"},
                {"when": {"variable": "caller.last_words", "contains": ["bye", "no thanks"]}, "next_step_id": "done"}]},
            {"id": "done", "type": "end", "position": {"x": 700, "y": 400}}
        ]});
        let flow: FlowConfig = serde_json::from_value(flow).unwrap();
        let nodes = nodes_of(&flow);
        assert_eq!(
            placed(&flow, &nodes),
            vec![
                (MARGIN + 300, MARGIN),
                (MARGIN, MARGIN + 200),
                (MARGIN + 600, MARGIN + 450)
            ]
        );
        let lines = label_lines(long);
        assert!(
            lines.iter().all(|l| l.chars().count() <= LABEL_CHARS),
            "{lines:?}"
        );
        assert_eq!(lines.join(" "), long);
        let page = render(&flow, &[]).into_string();
        assert!(!page.contains('…'), "nothing is cut: {page}");
        assert!(
            page.contains("caller.last_words contains “bye” or “no thanks”"),
            "{page}"
        );
        // The drawing holds its rightmost label.
        let width: i64 = page
            .split("width=\"")
            .nth(1)
            .and_then(|w| w.split('"').next())
            .and_then(|w| w.parse().ok())
            .unwrap();
        let edges = drawn_edges(&nodes, &placed(&flow, &nodes));
        for e in &edges {
            let (from, to) = e.span();
            assert!(from >= 0 && to <= width, "{from}-{to} in {width}");
        }
        // Boxes on top of each other (no positions given) are laid out in layers instead.
        let stacked = json!({"nodes": [
            {"id": "start", "type": "start", "next_step_id": "done"},
            {"id": "done", "type": "end"}
        ]});
        let stacked: FlowConfig = serde_json::from_value(stacked).unwrap();
        let nodes = nodes_of(&stacked);
        assert_eq!(
            placed(&stacked, &nodes),
            vec![(MARGIN, MARGIN), (MARGIN, MARGIN + BOX_H + GAP_Y)]
        );
    }
}
