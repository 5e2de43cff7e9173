//! A flow's nodes as they run, and the shape checks of its graph (every node reachable, none
//! stuck). [`Flow::compile`] builds one from the typed form ([`super::node`]).

use std::collections::{HashSet, VecDeque};

use serde_json::Value;

/// One problem of a flow, at a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphIssue {
    pub node_id: String,
    pub code: &'static str,
    /// Where in the node.
    pub field: String,
    pub message: String,
}

/// A line a node says: word for word, or as the model phrases it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub text: String,
    pub literal: bool,
}

/// A check on a value the call has, made before the model is asked.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// `<node_id>.<name>` (a value extracted or returned at that node) or `metadata.<key>`.
    pub variable: String,
    /// A JSONPath into the value (a result's field), when it is an object.
    pub path: Option<String>,
    pub test: Test,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Test {
    /// Equal once both are JSON-stringified (a string is compared as its text).
    Equals(Value),
    NotEquals(Value),
    /// Whether the value is there (and not null or empty).
    Exists(bool),
    /// The value holds one of these phrases as whole words (each as [`words`] gives it).
    Contains(Vec<String>),
    /// The value, as [`words`] gives it, matches the pattern.
    Matches(Pattern),
}

/// A `matches` pattern, compiled (case-insensitive).
#[derive(Debug, Clone)]
pub struct Pattern(pub regex::Regex);

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}

/// The variable of a check that reads the caller's last words at the node.
pub const CALLER_WORDS: &str = "last_words";
/// The variable of a check that reads the caller's keypad entry at the node.
pub const CALLER_DIGITS: &str = "digits";

/// The longest `matches` pattern a flow may hold.
pub const MAX_PATTERN_CHARS: usize = 200;

/// Text as a check on words reads it: lowercase, every run of characters that are neither
/// letters nor digits one space, trimmed ("Yes, please!" is "yes please").
pub fn words(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_alphanumeric() {
            out.extend(c.to_lowercase());
        } else if !out.is_empty() && !out.ends_with(' ') {
            out.push(' ');
        }
    }
    if out.ends_with(' ') {
        out.pop();
    }
    out
}

/// Whether `text` (already [`words`]) holds `phrase` (already [`words`]) as whole words.
pub fn holds_phrase(text: &str, phrase: &str) -> bool {
    !phrase.is_empty() && format!(" {text} ").contains(&format!(" {phrase} "))
}

/// A way out of a conversation node.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    pub next: usize,
    pub rule: Rule,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Rule {
    /// The model takes it when the condition holds (one function per edge).
    Model(String),
    /// Taken without asking the model when the check holds.
    When(Check),
}

/// A value to extract from the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variable {
    pub name: String,
    pub description: String,
}

/// An argument of an integration_call node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    Literal(String),
    /// Extracted from the conversation by the model, as the description says.
    AiExtract(String),
}

/// A custom branch of an integration_call node.
#[derive(Debug, Clone, PartialEq)]
pub struct Branch {
    /// A JSONPath into the result (`$.a.b[0]`).
    pub path: String,
    pub equals: Value,
    pub next: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Start,
    Conversation {
        instructions: String,
        transitions: Vec<Transition>,
        variables: Vec<Variable>,
    },
    ToolCall {
        tool_id: String,
        error_next: Option<usize>,
    },
    IntegrationCall {
        integration_id: String,
        provider: String,
        action: String,
        args: Vec<(String, Arg)>,
        success_next: usize,
        error_next: Option<usize>,
        custom: Vec<Branch>,
    },
    Transfer {
        destination: String,
        error_next: Option<usize>,
    },
    End,
}

impl Kind {
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Start => "start",
            Kind::Conversation { .. } => "conversation",
            Kind::ToolCall { .. } => "tool_call",
            Kind::IntegrationCall { .. } => "integration_call",
            Kind::Transfer { .. } => "transfer",
            Kind::End => "end",
        }
    }
}

/// One node, ready to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub id: String,
    pub name: String,
    pub kind: Kind,
    /// Said on entering the node (a start or end node's greeting, a conversation node's
    /// opening line, what is said while a dispatch runs or before a transfer).
    pub line: Option<Line>,
    /// Whether the agent speaks on entering (a start node; others speak when they have a line).
    pub speaks_first: bool,
    /// The node that follows (a start, conversation or tool_call node's success).
    pub next: Option<usize>,
    /// Move on to `next` once the node's line is said, without waiting for the caller.
    pub auto_advance: bool,
    /// Reachable from any conversation node when `global_condition` holds.
    pub global_condition: Option<String>,
    /// How the caller's keys make an entry here (a conversation node's own; else the
    /// default).
    pub gather: Option<crate::agent::director::Gather>,
    /// Keys sent on entering, after the line.
    pub send_digits: Option<String>,
}

/// A flow ready to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Flow {
    pub nodes: Vec<Node>,
    pub start: usize,
    /// The global nodes, in flow order.
    pub globals: Vec<usize>,
    /// Keys callers may pass in a call's metadata.
    pub custom_metadata_keys: Vec<String>,
}

/// The node types a flow may hold.
pub const NODE_TYPES: [&str; 6] = [
    "start",
    "conversation",
    "tool_call",
    "integration_call",
    "transfer",
    "end",
];

/// What a malformed `when` is told.
pub(super) const WHEN_SHAPE: &str = "must be {variable, path?, equals | not_equals | exists | contains | matches}, the variable `<node_id>.<name>`, `metadata.<key>`, `caller.last_words` or `caller.digits`, `contains` a phrase or a list of them, `matches` a regular expression of at most 200 characters";

pub(super) fn issue(node: &str, code: &'static str, field: &str, message: &str) -> GraphIssue {
    GraphIssue {
        node_id: node.to_string(),
        code,
        field: field.to_string(),
        message: message.to_string(),
    }
}

impl Flow {
    pub fn node(&self, i: usize) -> &Node {
        &self.nodes[i]
    }

    pub fn index(&self, id: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.id == id)
    }

    /// The nodes a node leads to, by its own edges.
    pub fn edges(&self, i: usize) -> Vec<usize> {
        let node = &self.nodes[i];
        // A conversation node goes to `next_step_id` only with `auto_advance`; every other
        // node that has one follows it.
        let follows_next = match node.kind {
            Kind::Conversation { .. } => node.auto_advance,
            _ => true,
        };
        let mut out: Vec<usize> = node.next.filter(|_| follows_next).into_iter().collect();
        match &node.kind {
            Kind::Conversation { transitions, .. } => {
                out.extend(transitions.iter().map(|t| t.next))
            }
            Kind::ToolCall { error_next, .. } | Kind::Transfer { error_next, .. } => {
                out.extend(error_next)
            }
            Kind::IntegrationCall {
                success_next,
                error_next,
                custom,
                ..
            } => {
                out.push(*success_next);
                out.extend(error_next);
                out.extend(custom.iter().map(|b| b.next));
            }
            Kind::Start | Kind::End => {}
        }
        out.retain(|n| *n < self.nodes.len());
        out
    }

    /// Unreachable nodes and nodes with no way out.
    pub(super) fn shape_issues(&self) -> Vec<GraphIssue> {
        let mut issues = Vec::new();
        // From the start, by every edge; a global node is reachable from any conversation node.
        let mut seen = HashSet::from([self.start]);
        let mut queue = VecDeque::from([self.start]);
        let mut conversation_seen = false;
        while let Some(i) = queue.pop_front() {
            let mut next = self.edges(i);
            if matches!(self.nodes[i].kind, Kind::Conversation { .. }) && !conversation_seen {
                conversation_seen = true;
                next.extend(&self.globals);
            }
            for n in next {
                if seen.insert(n) {
                    queue.push_back(n);
                }
            }
        }
        for (i, node) in self.nodes.iter().enumerate() {
            if !seen.contains(&i) {
                issues.push(issue(
                    &node.id,
                    "unreachable",
                    "id",
                    "no path from the start node leads here",
                ));
            }
            let has_way_out = match &node.kind {
                Kind::End | Kind::Transfer { .. } => true,
                Kind::Conversation { .. } => !self.edges(i).is_empty() || !self.globals.is_empty(),
                Kind::IntegrationCall { .. } => true,
                Kind::Start | Kind::ToolCall { .. } => node.next.is_some(),
            };
            if !has_way_out {
                let conversation = matches!(node.kind, Kind::Conversation { .. });
                let (field, message) = if conversation && node.next.is_some() {
                    (
                        "auto_advance",
                        "the call would be stuck here: a conversation node goes to its next_step_id only with auto_advance; set auto_advance or give it transitions",
                    )
                } else if conversation {
                    (
                        "transitions",
                        "the call would be stuck here: give the node a way out (or make it an end node)",
                    )
                } else {
                    (
                        "next_step_id",
                        "the call would be stuck here: give the node a way out (or make it an end node)",
                    )
                };
                issues.push(issue(&node.id, "no_way_out", field, message));
            }
        }
        issues
    }
}
