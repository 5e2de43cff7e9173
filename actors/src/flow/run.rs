//! One call's walk through a flow: the node it is in, the values it has gathered, the path it
//! took, and what the agent does next. It decides; the turn loop acts (says, asks the model,
//! dispatches, transfers, hangs up) and reports back.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::edges;
pub use super::edges::{EDGE_PREFIX, Edge, edge_function};
use super::graph::{
    Arg, CALLER_DIGITS, CALLER_WORDS, Check, Flow, Kind, Line, Node, Rule, Test, holds_phrase,
    words,
};
use super::routing;
use super::tokens::resolve;
use super::tokens::stringified;
pub use crate::agent::director::{Dispatch, HardFailure, Outcome, PathStep, Step};
use crate::vendors::ToolSpec;

/// The call's place in its flow.
#[derive(Debug, Clone)]
pub struct FlowRun {
    pub(super) flow: Arc<Flow>,
    pub(super) current: usize,
    /// `<node_id>.<name>`: values extracted at a node, and `<node_id>.result`.
    values: Map<String, Value>,
    metadata: Map<String, Value>,
    path: Vec<PathStep>,
    /// The caller has taken a turn in the current node.
    heard_here: bool,
    /// What the caller said in their last turn at the current node (empty on entering one).
    last_words: String,
    /// The caller's last keypad entry at the current node (empty on entering one).
    last_digits: String,
    /// The arguments the current node waits for the model to fill.
    extraction: Option<ToolSpec>,
    /// The current node's dispatch is under way.
    dispatching: bool,
    /// Results to put into the model's context at its next round, as (node id, content).
    pub results: Vec<(String, String)>,
    /// The call's tools by id (a tool_call node's function and parameters).
    tools: std::collections::HashMap<String, ToolSpec>,
}

/// The function the model fills to extract a node's arguments.
pub const EXTRACT_FUNCTION: &str = "extract_arguments";

impl FlowRun {
    /// A call at the flow's start; `metadata` holds the built-in keys and the call's own.
    pub fn new(
        flow: Arc<Flow>,
        metadata: Map<String, Value>,
        tools: std::collections::HashMap<String, ToolSpec>,
    ) -> FlowRun {
        let start = flow.start;
        FlowRun {
            flow,
            current: start,
            values: Map::new(),
            metadata,
            path: Vec::new(),
            heard_here: false,
            last_words: String::new(),
            last_digits: String::new(),
            extraction: None,
            dispatching: false,
            results: Vec::new(),
            tools,
        }
    }

    pub fn node(&self) -> &Node {
        self.flow.node(self.current)
    }

    /// What the model is offered at the current node: one function per edge it decides
    /// (the node's variables as their arguments) and one per global node.
    pub fn edges(&self) -> Vec<Edge> {
        edges::offered(&self.flow, self.current)
    }

    pub fn path(&self) -> &[PathStep] {
        &self.path
    }

    pub fn values(&self) -> &Map<String, Value> {
        &self.values
    }

    /// Starts the call in the start node.
    pub fn start(&mut self, at_ms: u64) -> Vec<Step> {
        self.enter(self.flow.start, "start".into(), at_ms)
    }

    /// Moves to `next` and says what happens there.
    fn enter(&mut self, next: usize, reason: String, at_ms: u64) -> Vec<Step> {
        self.current = next;
        self.heard_here = false;
        self.last_words.clear();
        self.last_digits.clear();
        self.extraction = None;
        self.dispatching = false;
        let node = self.flow.node(next).clone();
        self.path.push(PathStep {
            node_id: node.id.clone(),
            node_name: node.name.clone(),
            entered_ms: at_ms,
            reason,
        });
        let mut steps = Vec::new();
        let speaks = match node.kind {
            Kind::Start => node.speaks_first,
            _ => true,
        };
        if speaks && let Some(line) = &node.line {
            steps.push(self.line(line));
        }
        if let Some(keys) = &node.send_digits {
            steps.push(Step::SendDigits(keys.clone()));
        }
        match &node.kind {
            Kind::Start | Kind::Conversation { .. } => {
                if let Some(next) = self.checks() {
                    steps.extend(self.enter(next.0, next.1, at_ms));
                } else if node.auto_advance
                    && let Some(next) = node.next
                {
                    steps.extend(self.enter(next, "auto_advance".into(), at_ms));
                }
            }
            Kind::ToolCall { .. } => {
                let spec = self.tool_extraction(&node);
                self.extraction = Some(spec.clone());
                steps.push(Step::Extract(spec));
            }
            Kind::IntegrationCall { args, .. } => {
                if args.iter().any(|(_, a)| matches!(a, Arg::AiExtract(_))) {
                    let spec = self.integration_extraction(&node);
                    self.extraction = Some(spec.clone());
                    steps.push(Step::Extract(spec));
                } else {
                    self.dispatching = true;
                    steps.push(self.integration_dispatch(&node, &Map::new()));
                }
            }
            Kind::Transfer { destination, .. } => steps.push(Step::Transfer(resolve(
                destination,
                &self.values,
                &self.metadata,
            ))),
            Kind::End => steps.push(Step::Hangup),
        }
        steps
    }

    fn line(&self, line: &Line) -> Step {
        let text = resolve(&line.text, &self.values, &self.metadata);
        if line.literal {
            Step::Say(text)
        } else {
            Step::Reply
        }
    }

    /// The first check of the current node's transitions that holds, top to bottom.
    fn checks(&self) -> Option<(usize, String)> {
        let Kind::Conversation { transitions, .. } = &self.node().kind else {
            return None;
        };
        transitions.iter().find_map(|t| match &t.rule {
            Rule::When(check) if self.holds(check) => {
                Some((t.next, format!("when: {}", describe(check))))
            }
            _ => None,
        })
    }

    fn holds(&self, check: &Check) -> bool {
        let said;
        let value = match check.variable.split_once('.') {
            Some(("metadata", key)) => self.metadata.get(key),
            Some(("caller", CALLER_WORDS)) => {
                said = Value::String(self.last_words.clone());
                Some(&said)
            }
            Some(("caller", CALLER_DIGITS)) => {
                said = Value::String(self.last_digits.clone());
                Some(&said)
            }
            _ => self.values.get(&check.variable),
        };
        // Keys are read as keyed: `*` and `#` are not punctuation.
        let read = |v: &Value| {
            if check.variable == format!("caller.{CALLER_DIGITS}") {
                stringified(v)
            } else {
                words(&stringified(v))
            }
        };
        let value = match (&check.path, value) {
            (Some(path), Some(v)) => routing::parse_path(path).and_then(|p| routing::select(v, &p)),
            (None, v) => v,
            (Some(_), None) => None,
        };
        match &check.test {
            Test::Equals(want) => value.is_some_and(|v| stringified(v) == stringified(want)),
            Test::NotEquals(want) => value.is_none_or(|v| stringified(v) != stringified(want)),
            Test::Exists(want) => {
                let there = value.is_some_and(|v| !v.is_null() && !stringified(v).is_empty());
                there == *want
            }
            Test::Contains(phrases) => value.is_some_and(|v| {
                let text = read(v);
                phrases.iter().any(|p| holds_phrase(&text, p))
            }),
            Test::Matches(pattern) => value.is_some_and(|v| pattern.0.is_match(&read(v))),
        }
    }

    /// The caller's turn (`words`) has ended: where the flow goes before the model answers.
    /// Empty: the model answers in the current node.
    pub fn caller_turn(&mut self, words: &str, at_ms: u64) -> Vec<Step> {
        self.heard(Heard::Words(words), at_ms)
    }

    /// The caller keyed `digits` at the current node (kept as `<node_id>.digits`): where the
    /// flow goes, as after a turn.
    pub fn caller_digits(&mut self, digits: &str, at_ms: u64) -> Vec<Step> {
        self.heard(Heard::Digits(digits), at_ms)
    }

    /// How the caller's keys make an entry at the current node.
    pub fn gather(&self) -> crate::agent::director::Gather {
        self.node().gather.unwrap_or_default()
    }

    fn keep(&mut self, heard: Heard<'_>) {
        match heard {
            Heard::Words(words) => self.last_words = words.to_string(),
            Heard::Digits(digits) => {
                self.last_digits = digits.to_string();
                let key = format!("{}.{CALLER_DIGITS}", self.node().id);
                self.values.insert(key, Value::String(digits.to_string()));
            }
        }
    }

    /// The caller's turn, words or keys, has ended.
    fn heard(&mut self, heard: Heard<'_>, at_ms: u64) -> Vec<Step> {
        let node = self.node().clone();
        let first_here = !self.heard_here;
        self.heard_here = true;
        self.keep(heard);
        // At a dispatching node the caller's words go into the context: the arguments are
        // asked for again (an earlier ask was cut short), or the dispatch under way is awaited.
        if let Some(spec) = &self.extraction {
            return vec![Step::Extract(spec.clone())];
        }
        if self.dispatching {
            return Vec::new();
        }
        if let Some((next, reason)) = self.checks() {
            return self.enter(next, reason, at_ms);
        }
        match node.kind {
            // The flow is over: whatever the caller says over its last line, the call ends.
            Kind::End => vec![Step::Hangup],
            // The start node hands the caller's first turn to the node after it.
            Kind::Start if first_here => match node.next {
                Some(next) => {
                    let mut steps = self.enter(next, "next_step_id".into(), at_ms);
                    self.heard_here = true;
                    // The first turn is the next node's to check, as if made there: when it
                    // routes on at once, that node's line is not said.
                    if steps
                        .iter()
                        .all(|s| matches!(s, Step::Say(_) | Step::Reply))
                    {
                        self.keep(heard);
                        if let Some((next, reason)) = self.checks() {
                            return self.enter(next, reason, at_ms);
                        }
                    }
                    if !steps.iter().any(is_speech) && !steps.iter().any(is_dispatching) {
                        steps.push(Step::Reply);
                    }
                    steps
                }
                None => vec![Step::Reply],
            },
            // A node decided by its checks alone asks again in its own words.
            _ if super::needs::answers_itself(&node) => {
                node.line.iter().map(|line| self.line(line)).collect()
            }
            _ => vec![Step::Reply],
        }
    }

    /// The model took the edge function `name` with `arguments`: the node's variables are
    /// kept, and the flow moves. `None` when no such edge is offered here.
    pub fn take(&mut self, name: &str, arguments: &Value, at_ms: u64) -> Option<Vec<Step>> {
        let edge = self.edges().into_iter().find(|e| e.function.name == name)?;
        let node_id = self.node().id.clone();
        let node = self.node().clone();
        if let (Kind::Conversation { variables, .. }, Some(args)) =
            (&node.kind, arguments.as_object())
        {
            for v in variables {
                if let Some(value) = args.get(&v.name).filter(|v| !v.is_null()) {
                    self.values
                        .insert(format!("{node_id}.{}", v.name), value.clone());
                }
            }
        }
        Some(self.enter(edge.next, edge.reason, at_ms))
    }

    /// The function the model fills at a tool_call node: the tool's extraction parameters.
    fn tool_extraction(&self, node: &Node) -> ToolSpec {
        let tool = match &node.kind {
            Kind::ToolCall { tool_id, .. } => self.tools.get(tool_id),
            _ => None,
        };
        ToolSpec {
            name: EXTRACT_FUNCTION.into(),
            description: match tool {
                Some(t) => format!(
                    "Fill in the arguments of `{}` ({}) from the conversation.",
                    t.name, t.description
                ),
                None => "Fill in the arguments from the conversation.".into(),
            },
            parameters: tool
                .map(|t| t.parameters.clone())
                .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
        }
    }

    /// The function the model fills at an integration_call node: its ai_extract arguments,
    /// each described (tokens resolved).
    fn integration_extraction(&self, node: &Node) -> ToolSpec {
        let mut properties = Map::new();
        if let Kind::IntegrationCall { args, .. } = &node.kind {
            for (name, arg) in args {
                if let Arg::AiExtract(description) = arg {
                    let description = resolve(description, &self.values, &self.metadata);
                    properties.insert(
                        name.clone(),
                        json!({"type": "string", "description": description}),
                    );
                }
            }
        }
        ToolSpec {
            name: EXTRACT_FUNCTION.into(),
            description: "Fill in these values from the conversation.".into(),
            parameters: json!({"type": "object", "properties": properties}),
        }
    }

    /// The arguments the current node waits for, if any.
    pub fn extraction(&self) -> Option<&ToolSpec> {
        self.extraction.as_ref()
    }

    /// The model filled the current node's arguments: they are kept as the node's values,
    /// and the node dispatches.
    pub fn extracted(&mut self, arguments: &Value) -> Vec<Step> {
        if self.extraction.take().is_none() {
            return Vec::new();
        }
        self.dispatching = true;
        let node = self.node().clone();
        let args = arguments.as_object().cloned().unwrap_or_default();
        for (name, value) in &args {
            if !value.is_null() {
                self.values
                    .insert(format!("{}.{name}", node.id), value.clone());
            }
        }
        match &node.kind {
            Kind::ToolCall { tool_id, .. } => vec![Step::Dispatch(Dispatch::Tool {
                node_id: node.id.clone(),
                tool_id: tool_id.clone(),
                name: self
                    .tools
                    .get(tool_id)
                    .map(|t| t.name.clone())
                    .unwrap_or_default(),
                arguments: Value::Object(args),
            })],
            Kind::IntegrationCall { .. } => vec![self.integration_dispatch(&node, &args)],
            _ => Vec::new(),
        }
    }

    /// The arguments of an integration, tokens resolved at dispatch.
    fn integration_dispatch(&self, node: &Node, extracted: &Map<String, Value>) -> Step {
        let Kind::IntegrationCall {
            integration_id,
            provider,
            action,
            args,
            ..
        } = &node.kind
        else {
            return Step::Hangup;
        };
        let mut arguments = Map::new();
        for (name, arg) in args {
            let value = match arg {
                Arg::Literal(text) => Value::String(resolve(text, &self.values, &self.metadata)),
                Arg::AiExtract(_) => extracted.get(name).cloned().unwrap_or(Value::Null),
            };
            arguments.insert(name.clone(), value);
        }
        Step::Dispatch(Dispatch::Integration {
            node_id: node.id.clone(),
            integration_id: integration_id.clone(),
            provider: provider.clone(),
            action: action.clone(),
            arguments,
        })
    }

    /// The current node's dispatch came back: its result is kept (`<node_id>.result`) and
    /// goes to the model's next round, and exactly one edge fires. The rule that fired is
    /// returned with the steps.
    pub fn dispatched(&mut self, outcome: Outcome, at_ms: u64) -> (Vec<Step>, String) {
        if !std::mem::take(&mut self.dispatching) {
            return (Vec::new(), String::new());
        }
        let node = self.node().clone();
        let content = match &outcome {
            Outcome::Done(v) => v.to_string(),
            Outcome::ToolFailed(e) => json!({"error": e}).to_string(),
            Outcome::Failed(why) => json!({"error": why.as_str()}).to_string(),
        };
        if let Outcome::Done(v) = &outcome {
            self.values.insert(format!("{}.result", node.id), v.clone());
        }
        self.results.push((node.id.clone(), content));
        let (next, reason) = match (&node.kind, &outcome) {
            (
                Kind::IntegrationCall {
                    success_next,
                    error_next,
                    custom,
                    ..
                },
                outcome,
            ) => {
                let result = match outcome {
                    Outcome::Done(v) => Ok(v),
                    Outcome::Failed(why) => Err(*why),
                    Outcome::ToolFailed(_) => Err(HardFailure::Provider(500)),
                };
                let (next, route) = routing::route(result, custom, *success_next, *error_next);
                (next, route.describe())
            }
            (Kind::ToolCall { error_next, .. }, Outcome::Done(_)) => {
                let _ = error_next;
                (node.next, "next_step_id: the tool answered".to_string())
            }
            (Kind::ToolCall { error_next, .. }, _) => (
                error_next.or(node.next),
                "error_next_step_id: the tool failed".to_string(),
            ),
            _ => (None, String::new()),
        };
        match next {
            Some(next) => (self.enter(next, reason.clone(), at_ms), reason),
            // Nowhere to go after a failure: the call ends.
            None => (
                vec![Step::Hangup],
                format!("{reason} (no such edge: the call ends)"),
            ),
        }
    }

    /// The transfer of the current node failed: its error edge, else the call ends.
    pub fn transfer_failed(&mut self, at_ms: u64) -> Vec<Step> {
        match &self.node().kind {
            Kind::Transfer {
                error_next: Some(next),
                ..
            } => {
                let next = *next;
                self.enter(
                    next,
                    "error_next_step_id: the transfer failed".into(),
                    at_ms,
                )
            }
            _ => vec![Step::Hangup],
        }
    }

    /// The instructions of the current node, for the model.
    pub fn instructions(&self) -> String {
        let node = self.node();
        let mut out = String::new();
        match &node.kind {
            Kind::Conversation { instructions, .. } if !instructions.is_empty() => {
                out.push_str(&resolve(instructions, &self.values, &self.metadata));
            }
            _ => {}
        }
        if let Some(line) = &node.line
            && !line.literal
        {
            if !out.is_empty() {
                out.push_str("\n\n");
            }
            out.push_str("Say, in your own words: ");
            out.push_str(&resolve(&line.text, &self.values, &self.metadata));
        }
        out
    }
}

/// What the caller's turn was made of.
#[derive(Debug, Clone, Copy)]
enum Heard<'a> {
    Words(&'a str),
    Digits(&'a str),
}

fn is_speech(step: &Step) -> bool {
    matches!(step, Step::Say(_) | Step::Reply)
}

fn is_dispatching(step: &Step) -> bool {
    matches!(
        step,
        Step::Extract(_) | Step::Dispatch(_) | Step::Transfer(_) | Step::Hangup
    )
}

fn describe(check: &Check) -> String {
    let at = match &check.path {
        Some(path) => format!("{} {path}", check.variable),
        None => check.variable.clone(),
    };
    match &check.test {
        Test::Equals(v) => format!("{at} equals {}", stringified(v)),
        Test::NotEquals(v) => format!("{at} is not {}", stringified(v)),
        Test::Exists(true) => format!("{at} is set"),
        Test::Exists(false) => format!("{at} is not set"),
        Test::Contains(phrases) => format!("{at} contains \"{}\"", phrases.join("\" or \"")),
        Test::Matches(pattern) => format!("{at} matches /{}/", pattern.0.as_str()),
    }
}
