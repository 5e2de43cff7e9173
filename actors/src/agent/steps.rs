//! The director's course on the call: what it says the agent does (say a line word for word,
//! let the model speak, have the model fill arguments, dispatch, transfer, hang up), done in
//! order, each when the call is ready for it. A prompt agent's course is the plan's greeting,
//! then the model answers every turn.

use serde_json::Value;

use super::EndReason;
use super::director::{Dispatch, Outcome, Step};
use super::session::Agent;
use crate::conversation::{ToolEvent, ToolStatus};
use crate::turns::FALLBACK_LINE;
use crate::vendors::ToolCall;

impl Agent<'_> {
    /// Does `steps` in order; a step that must wait for the model's round under way waits
    /// with those after it. The call's end, if a step ends it now.
    pub(super) fn act(&mut self, steps: Vec<Step>) -> Option<EndReason> {
        let mut steps = steps.into_iter();
        while let Some(step) = steps.next() {
            let busy = self.reply.writing();
            match step {
                Step::Say(text) => self.say_line(&text),
                Step::Reply | Step::Extract(_) if !self.has_model() => {
                    return self.without_model();
                }
                Step::Reply | Step::Extract(_) if busy => {
                    // After the round under way (a function moved the course mid-round).
                    self.course.wait(std::iter::once(step).chain(steps));
                    return None;
                }
                Step::Reply => self.speak_now(false),
                Step::Extract(_) => self.speak_now(true),
                Step::Dispatch(dispatch) => self.dispatch(dispatch),
                Step::SendDigits(keys) => self.send_digits(&keys),
                Step::Transfer(to) => {
                    self.course.transfer_to(to);
                    if let Some(end) = self.transfer_when_said() {
                        return Some(end);
                    }
                }
                Step::Hangup => {
                    if self.reply.in_progress() || busy {
                        self.reply.hang_up_after(EndReason::AgentHangup);
                    } else if let Some(end) = self.end_when_sent(EndReason::AgentHangup) {
                        return Some(end);
                    }
                }
            }
        }
        None
    }

    /// Whether a chat model is configured for this call.
    fn has_model(&self) -> bool {
        self.plan.mind.as_ref().is_some_and(|m| m.model.is_some())
    }

    /// A step needs the model and none is configured: the agent says it cannot answer, and
    /// hangs up once that is said (the call ends `model_not_configured`, never in silence).
    fn without_model(&mut self) -> Option<EndReason> {
        // Said once already and talked over: the call ends now.
        if std::mem::replace(&mut self.no_model_said, true) {
            return Some(EndReason::ModelNotConfigured);
        }
        let node = self.course.position();
        tracing::warn!(
            node = node.as_deref().unwrap_or("-"),
            "this step needs the chat model and none is configured (--llm-url): the call ends"
        );
        self.say(FALLBACK_LINE);
        self.reply.hang_up_after(EndReason::ModelNotConfigured);
        None
    }

    /// Says a line of the course word for word: as the next sentence of the reply under way,
    /// or a reply of its own.
    fn say_line(&mut self, text: &str) {
        if self.reply.writing() {
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
            self.reply.reopen();
        } else {
            self.reply = super::reply::Reply::default();
        }
        self.course.set_silent(silent);
        self.take_results();
        let round = self.start_round(!silent);
        self.reply.write(round);
    }

    /// Puts what the course's dispatches returned into the model's context.
    pub(super) fn take_results(&mut self) {
        let Some(director) = self.course.director_mut() else {
            return;
        };
        // The context's length makes the ids unique on the call.
        let first = self.record.context_len();
        for (n, (node, content)) in director.take_results().into_iter().enumerate() {
            let call = ToolCall {
                id: format!("result-{first}-{n}"),
                name: "flow_step_result".into(),
                arguments: serde_json::json!({ "step": node }).to_string(),
            };
            self.record.tool_exchange(call, content);
        }
    }

    /// The round under way is over: the course's steps that waited for it go on.
    pub(super) fn round_over(&mut self) -> Option<EndReason> {
        self.course.set_silent(false);
        if self.reply.writing() || !self.course.has_waiting() {
            return None;
        }
        let steps = self.course.take_waiting();
        self.act(steps)
    }

    /// Runs a dispatch of the course on a task of its own; its outcome comes back as
    /// [`super::work::Work::Dispatched`].
    fn dispatch(&mut self, dispatch: Dispatch) {
        let Some(mind) = &self.plan.mind else { return };
        let at_ms = self.now_ms();
        self.course.dispatch_started();
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
        self.course.dispatch_done();
        event.at_ms = at_ms;
        self.record.event(event);
        let now_ms = self.now_ms();
        let steps = self.course.director_mut()?.dispatched(outcome, now_ms);
        self.act(steps)
    }

    /// Transfers the call once what is being said has been said.
    pub(super) fn transfer_when_said(&mut self) -> Option<EndReason> {
        if self.reply.in_progress() || self.reply.writing() {
            return None;
        }
        let to = self.course.take_transfer()?;
        let at_ms = self.now_ms();
        let started = self.line.transfer(&to);
        let event = ToolEvent {
            at_ms,
            ..ToolEvent::at_once("transfer", Value::String(to), ToolStatus::Succeeded, None)
        };
        self.course.transferring(event);
        match started {
            Ok(()) => None,
            Err(why) => self.transferred(Err(why)),
        }
    }

    /// The line says how the transfer went: the call ends as transferred, or the director
    /// takes the failure (a flow's `error_next_step_id`).
    pub(super) fn transferred(&mut self, result: Result<Option<u16>, String>) -> Option<EndReason> {
        let mut event = self.course.transfer_done()?;
        event.latency_ms = self.now_ms().saturating_sub(event.at_ms);
        match result {
            Ok(code) => {
                event.status_code = code;
                self.record.event(event);
                Some(EndReason::Transferred)
            }
            Err(why) => {
                event.status = ToolStatus::Failed;
                event.error = Some(why);
                let at_ms = event.at_ms;
                self.record.event(event);
                let steps = self.course.director_mut()?.transfer_failed(at_ms);
                self.act(steps)
            }
        }
    }
}
