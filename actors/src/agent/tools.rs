//! The model's rounds on a call: each started briefed by the director, its function calls (what
//! the director says each does; tools run once and only for the current utterance), their
//! results fed back for the next round, and the round's end.

use super::EndReason;
use super::director::{Function, Round, Step};
use super::session::Agent;
use super::speech_handle::SpeechId;
use super::work::Abort;
use crate::call_tools::ToolRun;
use crate::conversation::{ToolEvent, ToolStatus};
use crate::turns::APOLOGY_LINE;
use crate::vendors::{ChatRequest, ToolCall, VendorError};

impl Agent<'_> {
    /// The model asked for a function (for the current utterance); the call's end if what
    /// it does ends it.
    pub(super) fn function(&mut self, call: ToolCall) -> Option<EndReason> {
        let at_ms = self.now_ms();
        let plan = self.plan;
        let mind = plan.mind.as_ref()?;
        let specs = mind.tools.as_ref().map(|t| t.specs());
        let round = Round {
            notes: &mind.notes,
            tools: specs.filter(|_| self.reply.may_offer_tools()),
            keypad: self.line.offers_keypad(),
        };
        match (
            self.course.director_mut()?.function(&call, round, at_ms),
            &mind.tools,
        ) {
            (Function::EndCall, _) => {
                self.reply.hang_up_after(EndReason::AgentHangup);
                self.record.event(builtin_event(&call, at_ms));
            }
            (Function::Tool, Some(tools)) => {
                // Dispatched once, now: its utterance is current.
                self.reply.tool_dispatched(call.clone());
                self.tools_in_flight += 1;
                let parties = self.parties.clone();
                self.work
                    .run_tool(tools.clone(), call, parties, self.reply.id(), at_ms);
            }
            (Function::Moved { result, steps }, _) => {
                // The model is told where the course went, with the words it said on the way;
                // it goes on speaking only if the course asks it to.
                self.reply.answered(call.clone(), result);
                self.record.event(builtin_event(&call, at_ms));
                let speaks = steps.iter().any(|s| matches!(s, Step::Reply));
                if !speaks {
                    self.reply.no_more_rounds();
                }
                let steps: Vec<Step> = steps
                    .into_iter()
                    .filter(|s| !matches!(s, Step::Reply))
                    .collect();
                return self.act(steps);
            }
            (Function::SendDigits(keys), _) => {
                let mut event = builtin_event(&call, at_ms);
                let result = match keys {
                    Ok(keys) => {
                        self.send_digits(&keys);
                        serde_json::json!({ "sent": keys })
                    }
                    Err(why) => {
                        event.status = ToolStatus::Failed;
                        event.error = Some(why.clone());
                        serde_json::json!({ "error": why })
                    }
                };
                self.reply.answered(call, result.to_string());
                self.record.event(event);
            }
            (Function::Tool | Function::Unknown, _) => {
                let run = unknown_function(&call, at_ms);
                self.reply.answered(call, run.content);
                self.record.event(run.event);
            }
        }
        None
    }

    /// A tool dispatched for utterance `speech` answered.
    pub(super) fn tool_done(
        &mut self,
        speech: SpeechId,
        call: ToolCall,
        mut run: ToolRun,
        at_ms: u64,
    ) -> Option<EndReason> {
        self.tools_in_flight = self.tools_in_flight.saturating_sub(1);
        run.event.at_ms = at_ms;
        self.record.event(run.event);
        if self.reply.is_current(speech) {
            self.reply.tool_returned(call.id, run.content);
            self.continue_round();
        } else {
            // It ran for a turn that was cut short: the model still learns what it did.
            self.record.tool_exchange(call, run.content);
        }
        self.reply_said()
    }

    /// Starts the model's round on the conversation so far, briefed by the director.
    pub(super) fn start_round(&self, offer_tools: bool) -> Option<Abort> {
        let mind = self.plan.mind.as_ref()?;
        let tools = mind.tools.as_ref().map(|t| t.specs());
        let briefing = self.course.director()?.brief(Round {
            notes: &mind.notes,
            tools: tools.filter(|_| offer_tools),
            keypad: self.line.offers_keypad(),
        });
        let request = ChatRequest {
            messages: self.record.messages(briefing.instructions),
            tools: briefing.functions,
            temperature: briefing.temperature,
            max_tokens: None,
            force: briefing.force,
        };
        let model = mind.model.as_ref()?;
        Some(self.work.converse(model, request, self.reply.id()))
    }

    /// The round of tools is done: the model continues the reply with their results.
    pub(super) fn continue_round(&mut self) {
        if self.reply.round_done(&mut self.record) {
            self.take_results();
            let round = self.start_round(self.reply.may_offer_tools());
            self.reply.write(round);
        }
    }

    /// The model's round (of the current utterance) is complete, or failed.
    pub(super) fn replied(&mut self, result: Result<(), VendorError>) -> Option<EndReason> {
        self.reply.write(None);
        let wrote = self.reply.round_over();
        if let Err(e) = result {
            let at = self.now_ms();
            self.record
                .vendor_failed("chat_model", "the model failed", &e, at);
            if !wrote {
                self.say(APOLOGY_LINE);
            }
        }
        self.continue_round();
        self.reply_said()
    }
}

/// The arguments the model wrote, as JSON (as a string when they are not JSON).
fn arguments_of(call: &ToolCall) -> serde_json::Value {
    serde_json::from_str(&call.arguments)
        .unwrap_or_else(|_| serde_json::Value::String(call.arguments.clone()))
}

/// The record of a built-in function the model called.
fn builtin_event(call: &ToolCall, at_ms: u64) -> ToolEvent {
    ToolEvent {
        at_ms,
        ..ToolEvent::at_once(&call.name, arguments_of(call), ToolStatus::Succeeded, None)
    }
}

/// The answer to a function the model named but was not offered: nothing is dispatched, and
/// the model is told.
fn unknown_function(call: &ToolCall, at_ms: u64) -> ToolRun {
    let error = format!("there is no function named {:?} on this call", call.name);
    ToolRun {
        content: serde_json::json!({ "error": error }).to_string(),
        event: ToolEvent {
            status: ToolStatus::Failed,
            error: Some(error),
            ..builtin_event(call, at_ms)
        },
    }
}
