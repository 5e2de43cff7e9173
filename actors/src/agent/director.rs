//! The director seam: what the model is told and offered at each round of a call, and what a
//! function call the model makes does. The turn loop asks the director and never which kind it
//! runs; a prompt agent ([`PromptAgent`]) is one director, a flow agent another. The seam's
//! vocabulary ([`Step`], [`Dispatch`], [`Outcome`], [`HardFailure`], [`PathStep`]) lives here: a
//! director speaks it, and the agent knows no director's kind.

use std::time::Duration;

use serde_json::{Map, Value};
use switchboard_sip::dtmf::Digit;

use crate::turns::{END_CALL, SEND_DIGITS, builtin_tools, send_digits_tool};
use crate::vendors::{ToolCall, ToolSpec};

/// A step of the path: a node entered, when, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PathStep {
    pub node_id: String,
    pub node_name: String,
    /// Milliseconds from the answer.
    pub entered_ms: u64,
    /// Why the flow came here: `start`, `next_step_id`, `auto_advance`, the model's choice
    /// (`model: <condition>`), a check (`when: ...`), a global node's condition, or a
    /// dispatch's routing rule.
    pub reason: String,
}

/// What the agent does now.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Say this line word for word.
    Say(String),
    /// The model speaks now, under the current node's briefing (a line it phrases, or its
    /// answer to the caller's turn).
    Reply,
    /// The model fills a function's arguments now (and says nothing): `Extracted` follows.
    Extract(ToolSpec),
    /// Run the node's tool or integration with these arguments: `Dispatched` follows.
    Dispatch(Dispatch),
    /// Transfer the call.
    Transfer(String),
    /// Send these keypad digits (a company's phone menu on an outbound call).
    SendDigits(String),
    /// Hang up once what is queued has been said.
    Hangup,
}

/// How the caller's keypad digits make one entry: it is complete at `max_digits` digits, at
/// the `terminator` key (which is not kept), or `timeout` after the last key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gather {
    pub max_digits: Option<usize>,
    pub terminator: Option<Digit>,
    pub timeout: Duration,
}

/// The longest entry: 32 digits, whatever a node says.
pub const MAX_ENTRY_DIGITS: usize = 32;

impl Default for Gather {
    /// No count, `#` ends the entry, and so do 3 seconds without a key.
    fn default() -> Self {
        Gather {
            max_digits: None,
            terminator: Digit::from_char('#'),
            timeout: Duration::from_secs(3),
        }
    }
}

/// A dispatch of a tool_call or integration_call node.
#[derive(Debug, Clone, PartialEq)]
pub enum Dispatch {
    Tool {
        node_id: String,
        tool_id: String,
        /// The tool's function name on the call.
        name: String,
        arguments: Value,
    },
    Integration {
        node_id: String,
        integration_id: String,
        provider: String,
        action: String,
        arguments: Map<String, Value>,
    },
}

/// What a dispatch came back with.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The result (for an integration, its sanitized view).
    Done(Value),
    /// A tool that failed; its error text.
    ToolFailed(String),
    Failed(HardFailure),
}

/// Why a dispatch failed hard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HardFailure {
    /// The provider answered 4xx or 5xx.
    Provider(u16),
    /// No answer in time, or the network failed.
    Timeout,
    /// The integration is disconnected (it stays so until reconnected).
    Disconnected,
    /// The integration belongs to another workspace (or no longer exists).
    ForeignIntegration,
    /// A required argument resolved to nothing.
    MissingArgument,
}

impl HardFailure {
    /// The name in the call's events and the simulator's answer.
    pub fn as_str(&self) -> &'static str {
        match self {
            HardFailure::Provider(code) if *code < 500 => "provider_4xx",
            HardFailure::Provider(_) => "provider_5xx",
            HardFailure::Timeout => "network_timeout",
            HardFailure::Disconnected => "integration_disconnected",
            HardFailure::ForeignIntegration => "integration_foreign",
            HardFailure::MissingArgument => "missing_required_argument",
        }
    }
}

/// The id a dispatch of node `node_id` runs a tool under.
pub fn dispatch_call_id(node_id: &str) -> String {
    format!("flow-{node_id}")
}

/// The node a tool run under [`dispatch_call_id`] dispatches for.
pub fn node_of_dispatch(call_id: &str) -> Option<&str> {
    call_id.strip_prefix("flow-")
}

/// What a director is given to brief the model for its next round.
#[derive(Debug, Clone, Copy)]
pub struct Round<'a> {
    /// What the service knows of the other party (the lead memory), one block each.
    pub notes: &'a [String],
    /// The workspace's tools the model may call this round; none once a turn has had its
    /// tool rounds (the model must answer).
    pub tools: Option<&'a [ToolSpec]>,
    /// The model may send keypad digits (`send_digits`): an outbound call's line.
    pub keypad: bool,
}

/// What the model is told and offered for one round.
#[derive(Debug, Clone, PartialEq)]
pub struct Briefing {
    /// The system prompt.
    pub instructions: String,
    /// The functions offered.
    pub functions: Vec<ToolSpec>,
    pub temperature: Option<f32>,
    /// The function the model must call this round (it says nothing else).
    pub force: Option<String>,
}

/// What a function call the model made does.
#[derive(Debug, Clone, PartialEq)]
pub enum Function {
    /// Hang up once what the reply says has been said.
    EndCall,
    /// Run the workspace's tool of that name.
    Tool,
    /// Send these keypad digits (`send_digits`); `Err` names what is not a key.
    SendDigits(Result<String, String>),
    /// Nothing by that name was offered: the model is told so.
    Unknown,
    /// The director moved on (a flow took an edge, or has the arguments it asked for): the
    /// model is told where with `result`, and the agent does `steps`.
    Moved { result: String, steps: Vec<Step> },
}

/// Decides what the model is told and offered, and what its function calls do. A director
/// with a course of its own (a flow) also says what the agent does at the call's start, after
/// each caller turn, once its lines are said and when its dispatches come back; the defaults
/// are a prompt agent's: the plan's greeting, then the model answers every turn.
///
/// A call's agent owns its director (a copy of the plan's, made as the call starts) and hands
/// it back in [`super::AgentEnd`]: what it changes is the call's alone.
pub trait Director: CopyDirector + std::any::Any + Send + Sync + std::fmt::Debug + 'static {
    /// The briefing for the model's next round.
    fn brief(&self, round: Round<'_>) -> Briefing;
    /// What `call` does, given the briefing `round` it was made under.
    fn function(&mut self, call: &ToolCall, round: Round<'_>, at_ms: u64) -> Function;
    /// What the agent does as the call starts; `None`: the plan's greeting, if it speaks first.
    fn opening(&mut self, _at_ms: u64) -> Option<Vec<Step>> {
        None
    }
    /// The caller's turn (what they said) has ended: what the agent does (`[Step::Reply]`: the
    /// model answers).
    fn caller_turn(&mut self, _words: &str, _at_ms: u64) -> Vec<Step> {
        vec![Step::Reply]
    }
    /// How the caller's keypad digits make an entry where the call is now.
    fn gather(&self) -> Gather {
        Gather::default()
    }
    /// The caller keyed an entry (its digits are in the model's context): what the agent does.
    fn caller_digits(&mut self, _digits: &str, _at_ms: u64) -> Vec<Step> {
        vec![Step::Reply]
    }
    /// A dispatch came back.
    fn dispatched(&mut self, _outcome: Outcome, _at_ms: u64) -> Vec<Step> {
        vec![Step::Hangup]
    }
    /// A transfer could not be made.
    fn transfer_failed(&mut self, _at_ms: u64) -> Vec<Step> {
        vec![Step::Hangup]
    }
    /// Results to put into the model's context before its next round, as (name, content).
    fn take_results(&mut self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// Where the call is in the director's course (a flow's node id), for the transcript.
    fn position(&self) -> Option<String> {
        None
    }
    /// The course so far (a flow's path), for the call's record.
    fn path(&self) -> Vec<PathStep> {
        Vec::new()
    }
}

/// A copy of a director as it is, for a call of its own: any [`Director`] that is `Clone` has
/// it.
pub trait CopyDirector {
    /// A copy of this director, boxed.
    fn copy_director(&self) -> Box<dyn Director>;
}

impl<D: Director + Clone> CopyDirector for D {
    fn copy_director(&self) -> Box<dyn Director> {
        Box::new(self.clone())
    }
}

impl Clone for Box<dyn Director> {
    fn clone(&self) -> Self {
        (**self).copy_director()
    }
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
        if round.keypad {
            functions.push(send_digits_tool());
        }
        functions.extend(round.tools.unwrap_or_default().iter().cloned());
        Briefing {
            instructions,
            functions,
            temperature: self.temperature,
            force: None,
        }
    }

    fn function(&mut self, call: &ToolCall, round: Round<'_>, _at_ms: u64) -> Function {
        if call.name == END_CALL {
            Function::EndCall
        } else if call.name == SEND_DIGITS && round.keypad {
            Function::SendDigits(digits_of(call))
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

/// The keys a `send_digits` call asks for, checked (spaces around them aside); what is wrong
/// with them otherwise.
pub fn digits_of(call: &ToolCall) -> Result<String, String> {
    let arguments: Value = serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
    let keys = arguments
        .get("digits")
        .and_then(Value::as_str)
        .ok_or("`digits` must be a string of keypad keys")?;
    checked_keys(keys.trim())
}

/// `keys` as keys to press or send: 1-32 of `0`-`9`, `*`, `#`, `A`-`D`, nothing else. The one
/// rule for a flow's `send_digits`, the model's and a simulated caller's.
pub fn keys(keys: &str) -> Result<Vec<Digit>, String> {
    let digits = Digit::parse_all(keys)
        .map_err(|c| format!("`{c}` is not a keypad key (0-9, *, #, A-D)"))?;
    if digits.is_empty() || digits.len() > MAX_ENTRY_DIGITS {
        return Err(format!("send 1 to {MAX_ENTRY_DIGITS} keys"));
    }
    Ok(digits)
}

/// [`keys`], written as the keys they are (`a`-`d` as `A`-`D`).
pub fn checked_keys(text: &str) -> Result<String, String> {
    Ok(keys(text)?.iter().map(|d| d.as_char()).collect())
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
        let mut agent = PromptAgent {
            system_prompt: "Be brief.".into(),
            temperature: Some(0.2),
        };
        let tools = [spec("book")];
        let notes = ["Lead: Ada.".to_string()];
        let round = Round {
            notes: &notes,
            tools: Some(&tools),
            keypad: false,
        };
        let brief = agent.brief(round);
        assert_eq!(brief.instructions, "Be brief.\n\nLead: Ada.");
        let names: Vec<_> = brief.functions.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, [END_CALL, "book"]);
        assert_eq!(agent.function(&call("book"), round, 0), Function::Tool);
        assert_eq!(agent.function(&call(END_CALL), round, 0), Function::EndCall);
        assert_eq!(agent.function(&call("other"), round, 0), Function::Unknown);
        let last = Round {
            notes: &[],
            tools: None,
            keypad: false,
        };
        assert_eq!(agent.brief(last).functions.len(), 1);
        assert_eq!(agent.function(&call("book"), last, 0), Function::Unknown);
        // Digits are offered on a line that sends them, and checked.
        assert_eq!(
            agent.function(&call(SEND_DIGITS), last, 0),
            Function::Unknown
        );
        let keypad = Round {
            keypad: true,
            ..last
        };
        let names: Vec<_> = agent
            .brief(keypad)
            .functions
            .into_iter()
            .map(|f| f.name)
            .collect();
        assert_eq!(names, [END_CALL, SEND_DIGITS]);
        let mut press = call(SEND_DIGITS);
        press.arguments = r#"{"digits": " 2#"}"#.into();
        assert_eq!(
            agent.function(&press, keypad, 0),
            Function::SendDigits(Ok("2#".into()))
        );
        press.arguments = r#"{"digits": "2x"}"#.into();
        assert!(matches!(
            agent.function(&press, keypad, 0),
            Function::SendDigits(Err(_))
        ));
        assert_eq!(checked_keys(""), Err("send 1 to 32 keys".into()));
    }
}
