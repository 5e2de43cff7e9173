//! The director seam: what the model is told and offered at each round of a call, and what a
//! function call the model makes does. The turn loop asks the director and never which kind it
//! runs; a prompt agent ([`PromptAgent`]) is one director, a flow agent another.

use crate::turns::{END_CALL, builtin_tools};
use crate::vendors::{ToolCall, ToolSpec};

/// What a director is given to brief the model for its next round.
#[derive(Debug, Clone, Copy)]
pub struct Round<'a> {
    /// What the service knows of the other party (the lead memory), one block each.
    pub notes: &'a [String],
    /// The workspace's tools the model may call this round; none once a turn has had its
    /// tool rounds (the model must answer).
    pub tools: Option<&'a [ToolSpec]>,
}

/// What the model is told and offered for one round.
#[derive(Debug, Clone, PartialEq)]
pub struct Briefing {
    /// The system prompt.
    pub instructions: String,
    /// The functions offered.
    pub functions: Vec<ToolSpec>,
    pub temperature: Option<f32>,
}

/// What a function call the model made does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Function {
    /// Hang up once what the reply says has been said.
    EndCall,
    /// Run the workspace's tool of that name.
    Tool,
    /// Nothing by that name was offered: the model is told so.
    Unknown,
}

/// Decides what the model is told and offered, and what its function calls do.
pub trait Director: Send + Sync + std::fmt::Debug + 'static {
    /// The briefing for the model's next round.
    fn brief(&self, round: Round<'_>) -> Briefing;
    /// What `call` does, given the briefing `round` it was made under.
    fn function(&self, call: &ToolCall, round: Round<'_>) -> Function;
}

/// An agent of one system prompt: the same briefing every round, the workspace's tools and
/// `end_call` offered.
#[derive(Debug, Clone)]
pub struct PromptAgent {
    /// The agent's system prompt, its `{{variables}}` filled.
    pub system_prompt: String,
    pub temperature: Option<f32>,
}

impl Director for PromptAgent {
    fn brief(&self, round: Round<'_>) -> Briefing {
        let mut instructions = self.system_prompt.clone();
        for note in round.notes {
            if !instructions.is_empty() {
                instructions.push_str("\n\n");
            }
            instructions.push_str(note);
        }
        let mut functions = builtin_tools();
        functions.extend(round.tools.unwrap_or_default().iter().cloned());
        Briefing {
            instructions,
            functions,
            temperature: self.temperature,
        }
    }

    fn function(&self, call: &ToolCall, round: Round<'_>) -> Function {
        if call.name == END_CALL {
            Function::EndCall
        } else if round
            .tools
            .unwrap_or_default()
            .iter()
            .any(|t| t.name == call.name)
        {
            Function::Tool
        } else {
            Function::Unknown
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: String::new(),
            parameters: serde_json::json!({}),
        }
    }

    fn call(name: &str) -> ToolCall {
        ToolCall {
            id: "1".into(),
            name: name.into(),
            arguments: "{}".into(),
        }
    }

    #[test]
    fn a_prompt_agent_adds_its_notes_and_offers_the_round_s_tools() {
        let agent = PromptAgent {
            system_prompt: "Be brief.".into(),
            temperature: Some(0.2),
        };
        let tools = [spec("book")];
        let notes = ["Lead: Ada.".to_string()];
        let round = Round {
            notes: &notes,
            tools: Some(&tools),
        };
        let brief = agent.brief(round);
        assert_eq!(brief.instructions, "Be brief.\n\nLead: Ada.");
        let names: Vec<_> = brief.functions.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, [END_CALL, "book"]);
        assert_eq!(agent.function(&call("book"), round), Function::Tool);
        assert_eq!(agent.function(&call(END_CALL), round), Function::EndCall);
        assert_eq!(agent.function(&call("other"), round), Function::Unknown);
        let last = Round {
            notes: &[],
            tools: None,
        };
        assert_eq!(agent.brief(last).functions.len(), 1);
        assert_eq!(agent.function(&call("book"), last), Function::Unknown);
    }
}
