//! What a flow needs the chat model for, node by node. A flow whose decisions are all
//! deterministic (literal lines, `when` checks on values, the caller's words and keypad) runs
//! with no model configured; a node that needs one is named when the flow is saved (a warning)
//! and, when a call reaches it without a model, as the call's end reason.

use super::graph::{Arg, Flow, Kind, Node, Rule};

/// A node that needs the chat model, and for what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelNeed {
    pub node_id: String,
    /// What the model would do there, in a sentence.
    pub why: &'static str,
}

/// Whether a conversation node is decided by its checks alone: a line said word for word, and
/// no instructions, values to extract or model-decided transitions. When no check holds after
/// the caller's turn, such a node says its line again instead of asking the model.
pub fn answers_itself(node: &Node) -> bool {
    let Kind::Conversation {
        instructions,
        transitions,
        variables,
    } = &node.kind
    else {
        return false;
    };
    node.line.as_ref().is_some_and(|l| l.literal)
        && instructions.trim().is_empty()
        && variables.is_empty()
        && transitions.iter().all(|t| matches!(t.rule, Rule::When(_)))
}

/// Why `node` needs the model, if it does.
fn need(node: &Node) -> Option<&'static str> {
    let phrased = node.line.as_ref().is_some_and(|l| !l.literal);
    match &node.kind {
        Kind::Start if phrased && node.speaks_first => Some("the model phrases its greeting"),
        Kind::Start => None,
        Kind::Conversation {
            instructions,
            transitions,
            variables,
        } => {
            if answers_itself(node) || node.auto_advance && node.next.is_some() {
                None
            } else if transitions.iter().any(|t| matches!(t.rule, Rule::Model(_))) {
                Some("the model decides a transition")
            } else if !variables.is_empty() {
                Some("the model extracts its variables")
            } else if !instructions.trim().is_empty() || phrased {
                Some("the model answers the caller under its instructions")
            } else {
                // No line of its own to say again when no check holds.
                Some(
                    "the model answers the caller when no check holds (give it a literal greeting to say again instead)",
                )
            }
        }
        Kind::ToolCall { .. } => Some("the model fills the tool's arguments"),
        Kind::IntegrationCall { args, .. }
            if args.iter().any(|(_, a)| matches!(a, Arg::AiExtract(_))) =>
        {
            Some("the model fills its ai_extract arguments")
        }
        Kind::IntegrationCall { .. } | Kind::Transfer { .. } | Kind::End if phrased => {
            Some("the model phrases its greeting")
        }
        Kind::IntegrationCall { .. } | Kind::Transfer { .. } | Kind::End => None,
    }
}

impl Flow {
    /// The nodes that need the chat model, in flow order; empty: the flow runs without one.
    pub fn model_needs(&self) -> Vec<ModelNeed> {
        self.nodes
            .iter()
            .filter_map(|node| {
                need(node).map(|why| ModelNeed {
                    node_id: node.id.clone(),
                    why,
                })
            })
            .collect()
    }
}
