//! The director's course on the call: what it says the agent does (say a line word for word,
//! let the model speak, have the model fill arguments, dispatch, transfer, hang up), done in
//! order, each when the call is ready for it. A prompt agent's course is the plan's greeting,
//! then the model answers every turn.

use serde_json::Value;

use super::EndReason;
use super::director::{Dispatch, Outcome, Step};
use super::session::Agent;
use crate::conversation::{ToolEvent, ToolStatus};
use crate::vendors::{ChatMessage, ToolCall};

impl Agent<'_> {
    /// Does `steps` in order; a step that must wait for the model's round under way waits
    /// with those after it. The call's end, if a step ends it now.
    pub(super) fn act(&mut self, steps: Vec<Step>) -> Option<EndReason> {
        let mut steps = steps.into_iter();
        while let Some(step) = steps.next() {
            let busy = self.writer.is_some();
            match step {
                Step::Say(text) => self.say_line(&text),
                Step::Reply | Step::Extract(_) if busy => {
                    // After the round under way (a function moved the course mid-round).
                    self.course.push(step);
                    self.course.extend(steps);
                    return None;
                }
                Step::Reply => self.speak_now(false),
                Step::Extract(_) => self.speak_now(true),
                Step::Dispatch(dispatch) => self.dispatch(dispatch),
                Step::Transfer(to) => {
                    self.transfer_to = Some(to);
                    if let Some(end) = self.transfer_when_said() {
                        return Some(end);
                    }
                }
                Step::Hangup => {
                    if self.reply.in_progress() || busy {
                        self.reply.end_call = true;
                    } else {
                        return Some(EndReason::AgentHangup);
                    }
                }
            }
        }
        None
    }

    /// Says a line of the course word for word: as the next sentence of the reply under way,
    /// or a reply of its own.
    fn say_line(&mut self, text: &str) {
        if self.writer.is_some() {
            let index = self.reply.add_sentence();
            self.voice(index, text.to_string());
        } else {
            self.say(text);
        }
    }

    /// Starts the model's round now: its words follow what is being said (`silent`: it only
    /// fills the arguments it is asked for).
    fn speak_now(&mut self, silent: bool) {
        if self.reply.is_open() {
            self.reply.complete = false;
        } else {
            self.reply = super::reply::Reply::default();
        }
        self.silent_round = silent;
        self.take_results();
        self.writer = self.start_round(!silent);
    }

    /// Puts what the course's dispatches returned into the model's context.
    pub(super) fn take_results(&mut self) {
        let Some(director) = self.director.as_mut() else {
            return;
        };
        // The context's length makes the ids unique on the call.
        let first = self.history.len();
        for (n, (node, content)) in director.take_results().into_iter().enumerate() {
            let call = ToolCall {
                id: format!("result-{first}-{n}"),
                name: "flow_step_result".into(),
                arguments: serde_json::json!({ "step": node }).to_string(),
            };
            self.history.push(ChatMessage::Assistant {
                text: None,
                tool_calls: vec![call.clone()],
            });
            self.history.push(ChatMessage::Tool {
                tool_call_id: call.id,
                content,
            });
        }
    }

    /// The round under way is over: the course's steps that waited for it go on.
    pub(super) fn round_over(&mut self) -> Option<EndReason> {
        self.silent_round = false;
        if self.writer.is_some() || self.course.is_empty() {
            return None;
        }
        let steps = std::mem::take(&mut self.course);
        self.act(steps)
    }

    /// Runs a dispatch of the course on a task of its own; its outcome comes back as
    /// [`super::work::Work::Dispatched`].
    fn dispatch(&mut self, dispatch: Dispatch) {
        let Some(mind) = &self.plan.mind else { return };
        let at_ms = self.now_ms();
        self.dispatches += 1;
        self.work.dispatch(
            mind.tools.clone(),
            mind.integrations.clone(),
            dispatch,
            self.parties.clone(),
            at_ms,
        );
    }

    /// A dispatch came back: its record is kept and the course goes on from its outcome.
    pub(super) fn dispatched(
        &mut self,
        outcome: Outcome,
        mut event: ToolEvent,
        at_ms: u64,
    ) -> Option<EndReason> {
        self.dispatches = self.dispatches.saturating_sub(1);
        event.at_ms = at_ms;
        self.conversation.events.push(event);
        let now_ms = self.now_ms();
        let steps = self.director.as_mut()?.dispatched(outcome, now_ms);
        self.act(steps)
    }

    /// Transfers the call once what is being said has been said.
    pub(super) fn transfer_when_said(&mut self) -> Option<EndReason> {
        if self.reply.in_progress() || self.writer.is_some() {
            return None;
        }
        let to = self.transfer_to.take()?;
        let at_ms = self.now_ms();
        let started = self.line.transfer(&to);
        let event = ToolEvent {
            at_ms,
            ..ToolEvent::at_once("transfer", Value::String(to), ToolStatus::Succeeded, None)
        };
        self.transferring = Some(event);
        match started {
            Ok(()) => None,
            Err(why) => self.transferred(Err(why)),
        }
    }

    /// The line says how the transfer went: the call ends as transferred, or the director
    /// takes the failure (a flow's `error_next_step_id`).
    pub(super) fn transferred(&mut self, result: Result<Option<u16>, String>) -> Option<EndReason> {
        let mut event = self.transferring.take()?;
        event.latency_ms = self.now_ms().saturating_sub(event.at_ms);
        match result {
            Ok(code) => {
                event.status_code = code;
                self.conversation.events.push(event);
                Some(EndReason::Transferred)
            }
            Err(why) => {
                event.status = ToolStatus::Failed;
                event.error = Some(why);
                let at_ms = event.at_ms;
                self.conversation.events.push(event);
                let steps = self.director.as_mut()?.transfer_failed(at_ms);
                self.act(steps)
            }
        }
    }
}
