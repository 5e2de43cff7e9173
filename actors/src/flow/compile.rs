//! The run graph built from the typed form: each node's targets resolved to indexes, its texts
//! trimmed, its checks parsed, and every issue that would stop it running named at its node.

use std::collections::HashMap;

use super::graph::{
    Arg, Branch, CALLER_DIGITS, CALLER_WORDS, Check, Flow, GraphIssue, Kind, Line,
    MAX_PATTERN_CHARS, Node, Pattern, Rule, Test, Transition, Variable, WHEN_SHAPE, issue, words,
};
use super::node::{self as typed, ArgMode, ArgTemplate, FlowConfig, FlowNode};

const TOOL_MISSING: &str = "a tool_call node names the tool it runs";
const DESTINATION_MISSING: &str =
    "a transfer node names its destination: an E.164 number or a sip: URI";

fn text(s: Option<&str>) -> Option<String> {
    s.map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// Where one node's targets lead, and the issues of those that lead nowhere.
struct Targets<'a> {
    node: &'a str,
    ids: &'a HashMap<&'a str, usize>,
    issues: &'a mut Vec<GraphIssue>,
}

impl Targets<'_> {
    fn push(&mut self, code: &'static str, field: &str, message: &str) {
        self.issues.push(issue(self.node, code, field, message));
    }

    /// The node `next` names; an issue (at `field`) when it names none.
    fn target(&mut self, field: &str, next: Option<&str>) -> Option<usize> {
        let next = next?;
        match self.ids.get(next) {
            Some(i) => Some(*i),
            None => {
                self.push(
                    "transition_dangling",
                    field,
                    &format!("`{next}` is not a node of this flow"),
                );
                None
            }
        }
    }

    fn transitions(&mut self, list: &[typed::Transition]) -> Vec<Transition> {
        let mut out = Vec::new();
        for (i, t) in list.iter().enumerate() {
            let Some(next) = self.target("next_step_id", Some(&t.next_step_id)) else {
                continue;
            };
            let rule = match (text(t.condition.as_deref()), &t.when) {
                (Some(condition), None) => Rule::Model(condition),
                (None, Some(when)) => match check(when) {
                    Some(check) => Rule::When(check),
                    None => {
                        self.push(
                            "transition_invalid",
                            &format!("transitions[{i}].when"),
                            WHEN_SHAPE,
                        );
                        continue;
                    }
                },
                _ => {
                    self.push(
                        "transition_invalid",
                        &format!("transitions[{i}]"),
                        "a transition has either a `condition` (the model decides) or a `when` check",
                    );
                    continue;
                }
            };
            out.push(Transition { next, rule });
        }
        out
    }

    fn custom(&mut self, list: &[typed::Branch]) -> Vec<Branch> {
        let mut out = Vec::new();
        for (i, b) in list.iter().enumerate() {
            let path = b.path.trim();
            if super::routing::parse_path(path).is_none() {
                self.push(
                    "transition_invalid",
                    &format!("custom[{i}].path"),
                    &format!(
                        "`{path}` is not a JSONPath this service reads ($, .key, ['key'], [index])"
                    ),
                );
                continue;
            }
            let field = format!("custom[{i}].next_step_id");
            if let Some(next) = self.target(&field, Some(&b.next_step_id)) {
                out.push(Branch {
                    path: path.to_string(),
                    equals: b.equals.clone(),
                    next,
                });
            }
        }
        out
    }

    fn integration(&mut self, n: &typed::IntegrationCallNode) -> Kind {
        let args = n
            .args_template
            .iter()
            .flatten()
            .map(|(name, a)| {
                let arg = match a {
                    ArgTemplate::Text(s) | ArgTemplate::Mode(ArgMode::Literal { value: s }) => {
                        Arg::Literal(s.clone())
                    }
                    ArgTemplate::Mode(ArgMode::AiExtract { description }) => {
                        Arg::AiExtract(description.clone())
                    }
                };
                (name.clone(), arg)
            })
            .collect();
        let success = Some(n.success_next_step_id.as_str()).filter(|s| !s.is_empty());
        if success.is_none() {
            self.push(
                "no_way_out",
                "success_next_step_id",
                "an integration_call node names the node that follows a success",
            );
        }
        let success_next = self
            .target("success_next_step_id", success)
            .unwrap_or(usize::MAX);
        let custom = self.custom(n.custom.as_deref().unwrap_or_default());
        Kind::IntegrationCall {
            integration_id: n.integration_id.trim().to_string(),
            provider: n.provider.trim().to_string(),
            action: n.action.trim().to_string(),
            args,
            success_next,
            error_next: self.target("error_next_step_id", n.error_next_step_id.as_deref()),
            custom,
        }
    }

    /// What a tool_call or transfer node hands over to (an issue, as `missing` says, when it
    /// is blank) and the node that follows a failure.
    fn handover(
        &mut self,
        value: &str,
        (code, field, message): (&'static str, &str, &str),
        error_next: Option<&str>,
    ) -> (String, Option<usize>) {
        let value = value.trim();
        if value.is_empty() {
            self.push(code, field, message);
        }
        (
            value.to_string(),
            self.target("error_next_step_id", error_next),
        )
    }
}

/// One node ready to run; its issues (`ids`: the flow's node ids by index) pushed to `issues`.
pub(super) fn build(
    node: &FlowNode,
    ids: &HashMap<&str, usize>,
    issues: &mut Vec<GraphIssue>,
) -> Node {
    let base = node.base();
    let mut t = Targets {
        node: &base.id,
        ids,
        issues,
    };
    let next = t.target("next_step_id", node.next_step_id());
    let (kind, auto_advance, speaks_first) = match node {
        FlowNode::Start(n) => (
            Kind::Start,
            n.auto_advance,
            n.agent_speaks_first.unwrap_or(true),
        ),
        FlowNode::Conversation(n) => {
            let transitions = t.transitions(n.transitions.as_deref().unwrap_or_default());
            let variables = n
                .variables
                .iter()
                .flatten()
                .filter_map(|v| {
                    Some(Variable {
                        name: text(Some(&v.name))?,
                        description: text(v.description.as_deref()).unwrap_or_default(),
                    })
                })
                .collect();
            let instructions = text(n.instructions.as_deref()).unwrap_or_default();
            let kind = Kind::Conversation {
                instructions,
                transitions,
                variables,
            };
            (kind, n.auto_advance, false)
        }
        FlowNode::ToolCall(n) => {
            let missing = ("tool_missing", "tool_id", TOOL_MISSING);
            let (tool_id, error_next) =
                t.handover(&n.tool_id, missing, n.error_next_step_id.as_deref());
            (
                Kind::ToolCall {
                    tool_id,
                    error_next,
                },
                None,
                false,
            )
        }
        FlowNode::IntegrationCall(n) => (t.integration(n), None, false),
        FlowNode::Transfer(n) => {
            let missing = ("destination_missing", "destination", DESTINATION_MISSING);
            let (destination, error_next) =
                t.handover(&n.destination, missing, n.error_next_step_id.as_deref());
            let kind = Kind::Transfer {
                destination,
                error_next,
            };
            (kind, None, false)
        }
        FlowNode::End(_) => (Kind::End, None, false),
    };
    let global_condition = match node.global() {
        Some(g) if g.is_global == Some(true) => {
            let condition = text(g.global_condition.as_deref());
            if condition.is_none() {
                t.push(
                    "global_condition_missing",
                    "global_condition",
                    "a global node says when the call jumps to it (`global_condition`)",
                );
            }
            condition
        }
        _ => None,
    };
    Node {
        id: base.id.clone(),
        name: base.name.clone(),
        kind,
        line: text(base.greeting.as_deref()).map(|text| Line {
            text,
            literal: base.is_literal.unwrap_or(false),
        }),
        speaks_first,
        next,
        auto_advance: auto_advance.unwrap_or(false),
        global_condition,
        gather: match node {
            FlowNode::Conversation(n) => n.gather.as_ref().map(gather),
            _ => None,
        },
        send_digits: match node {
            FlowNode::Conversation(n) => n.send_digits.clone(),
            _ => None,
        },
    }
}

/// A node's gather as the agent runs it (its ranges were checked as it was read).
fn gather(g: &typed::DigitGather) -> crate::agent::director::Gather {
    let default = crate::agent::director::Gather::default();
    crate::agent::director::Gather {
        max_digits: g.max_digits.map(|n| n as usize),
        terminator: match g.terminator.as_deref() {
            None => default.terminator,
            Some(t) => t
                .chars()
                .next()
                .and_then(switchboard_sip::dtmf::Digit::from_char),
        },
        timeout: g
            .timeout_secs
            .map_or(default.timeout, std::time::Duration::from_secs_f64),
    }
}

/// A `when` as a check: the variable `<source>.<name>`, one test, a path this service reads.
fn check(when: &typed::When) -> Option<Check> {
    let (source, name) = when.variable.split_once('.')?;
    if source.is_empty() || name.is_empty() {
        return None;
    }
    if source == "caller" && name != CALLER_WORDS && name != CALLER_DIGITS {
        return None;
    }
    let test = match (
        &when.equals,
        &when.not_equals,
        when.exists,
        &when.contains,
        &when.matches,
    ) {
        (Some(v), None, None, None, None) => Test::Equals(v.clone()),
        (None, Some(v), None, None, None) => Test::NotEquals(v.clone()),
        (None, None, Some(b), None, None) => Test::Exists(b),
        (None, None, None, Some(phrases), None) => {
            let phrases: Vec<String> = phrases.list().into_iter().map(words).collect();
            if phrases.is_empty() || phrases.iter().any(String::is_empty) {
                return None;
            }
            Test::Contains(phrases)
        }
        (None, None, None, None, Some(pattern)) => {
            if pattern.chars().count() > MAX_PATTERN_CHARS {
                return None;
            }
            let regex = regex::RegexBuilder::new(pattern)
                .case_insensitive(true)
                .size_limit(1 << 20)
                .build()
                .ok()?;
            Test::Matches(Pattern(regex))
        }
        _ => return None,
    };
    if let Some(path) = &when.path
        && super::routing::parse_path(path).is_none()
    {
        return None;
    }
    Some(Check {
        variable: when.variable.clone(),
        path: when.path.clone(),
        test,
    })
}

impl Flow {
    /// The flow ready to run, or every issue that stops it running.
    pub fn compile(config: &FlowConfig) -> Result<Flow, Vec<GraphIssue>> {
        let ids: HashMap<&str, usize> = config
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.id(), i))
            .collect();
        let mut issues = Vec::new();
        let nodes = config
            .nodes
            .iter()
            .map(|n| build(n, &ids, &mut issues))
            .collect();
        match (Flow::assemble(nodes, config), issues.is_empty()) {
            (Ok(flow), true) => Ok(flow),
            (Ok(_), false) => Err(issues),
            (Err(more), _) => {
                issues.extend(more);
                Err(issues)
            }
        }
    }

    /// Built nodes as a flow: its one start node, its global nodes, and the shape's issues
    /// (a node no path reaches, a node with no way out).
    pub(super) fn assemble(nodes: Vec<Node>, config: &FlowConfig) -> Result<Flow, Vec<GraphIssue>> {
        let starts: Vec<usize> = (0..nodes.len())
            .filter(|i| nodes[*i].kind == Kind::Start)
            .collect();
        let start = match starts.as_slice() {
            [one] => *one,
            [] => {
                return Err(vec![issue(
                    "",
                    "start_missing",
                    "type",
                    "a flow needs one node of type `start`",
                )]);
            }
            [_, more @ ..] => {
                return Err(more
                    .iter()
                    .map(|i| {
                        issue(
                            &nodes[*i].id,
                            "start_duplicate",
                            "type",
                            "a flow has exactly one node of type `start`",
                        )
                    })
                    .collect());
            }
        };
        let globals = (0..nodes.len())
            .filter(|i| nodes[*i].global_condition.is_some())
            .collect();
        let flow = Flow {
            custom_metadata_keys: config.metadata.custom_metadata_keys.clone(),
            nodes,
            start,
            globals,
        };
        let issues = flow.shape_issues();
        if issues.is_empty() {
            Ok(flow)
        } else {
            Err(issues)
        }
    }
}
