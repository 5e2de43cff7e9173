//! `FlowDirector`: a flow agent on the turn loop. Each round the model is told the agent's
//! prompt and the current node's instructions, and offered the node's edges (one function
//! each) or the arguments the node waits for; the flow ([`FlowRun`]) decides the rest.

use serde_json::{Value, json};

use super::run::{EXTRACT_FUNCTION, FlowRun};
use crate::agent::director::{
    Briefing, Director, Function, Gather, Outcome, PathStep, Round, Step, digits_of,
};
use crate::turns::{SEND_DIGITS, send_digits_tool};
use crate::vendors::ToolCall;

/// One call's flow director: it owns the call's walk through its flow.
#[derive(Debug, Clone)]
pub struct FlowDirector {
    run: FlowRun,
    /// The agent's own prompt, before every node's instructions.
    pub system_prompt: String,
    pub temperature: Option<f32>,
}

impl FlowDirector {
    pub fn new(run: FlowRun, system_prompt: String, temperature: Option<f32>) -> FlowDirector {
        FlowDirector {
            run,
            system_prompt,
            temperature,
        }
    }

    /// The values the call has gathered, as `<node_id>.<name>`.
    pub fn values(&self) -> &serde_json::Map<String, Value> {
        self.run.values()
    }
}

impl Director for FlowDirector {
    fn brief(&self, round: Round<'_>) -> Briefing {
        let run = &self.run;
        let node = run.node();
        let mut instructions = self.system_prompt.clone();
        let mut push = |text: &str| {
            if text.is_empty() {
                return;
            }
            if !instructions.is_empty() {
                instructions.push_str("\n\n");
            }
            instructions.push_str(text);
        };
        let step = if node.name.is_empty() {
            &node.id
        } else {
            &node.name
        };
        push(&format!("You are at the step \"{step}\" of this call."));
        push(&run.instructions());
        for note in round.notes {
            push(note);
        }
        let (functions, force) = match run.extraction() {
            Some(spec) => {
                push("Fill in the function's arguments from the conversation; say nothing.");
                (vec![spec.clone()], Some(spec.name.clone()))
            }
            None => {
                let mut functions: Vec<_> = run.edges().into_iter().map(|e| e.function).collect();
                if round.keypad {
                    functions.push(send_digits_tool());
                }
                (functions, None)
            }
        };
        Briefing {
            instructions,
            functions,
            temperature: self.temperature,
            force,
        }
    }

    fn function(&mut self, call: &ToolCall, round: Round<'_>, at_ms: u64) -> Function {
        let arguments: Value = serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
        let run = &mut self.run;
        if call.name == SEND_DIGITS && round.keypad && run.extraction().is_none() {
            return Function::SendDigits(digits_of(call));
        }
        if call.name == EXTRACT_FUNCTION && run.extraction().is_some() {
            let steps = run.extracted(&arguments);
            return Function::Moved {
                result: json!({"noted": true}).to_string(),
                steps,
            };
        }
        match run.take(&call.name, &arguments, at_ms) {
            Some(steps) => {
                let node = run.node();
                Function::Moved {
                    result: json!({"moved_to": node.id}).to_string(),
                    steps,
                }
            }
            None => Function::Unknown,
        }
    }

    fn opening(&mut self, at_ms: u64) -> Option<Vec<Step>> {
        Some(self.run.start(at_ms))
    }

    fn caller_turn(&mut self, words: &str, at_ms: u64) -> Vec<Step> {
        self.run.caller_turn(words, at_ms)
    }

    fn gather(&self) -> Gather {
        self.run.gather()
    }

    fn caller_digits(&mut self, digits: &str, at_ms: u64) -> Vec<Step> {
        self.run.caller_digits(digits, at_ms)
    }

    fn dispatched(&mut self, outcome: Outcome, at_ms: u64) -> Vec<Step> {
        self.run.dispatched(outcome, at_ms).0
    }

    fn transfer_failed(&mut self, at_ms: u64) -> Vec<Step> {
        self.run.transfer_failed(at_ms)
    }

    fn take_results(&mut self) -> Vec<(String, String)> {
        std::mem::take(&mut self.run.results)
    }

    fn position(&self) -> Option<String> {
        Some(self.run.node().id.clone())
    }

    fn path(&self) -> Vec<PathStep> {
        self.run.path().to_vec()
    }
}
