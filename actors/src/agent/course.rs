//! The director's course on the call: what it says the agent does (say a line word for word,
//! let the model speak, have the model fill arguments, dispatch, transfer, hang up), done in
//! order, each when the call is ready for it. A prompt agent's course is the plan's greeting,
//! then the model answers every turn.

use serde_json::Value;

use super::EndReason;
use super::director::{Director, Dispatch, Outcome, Step};
use super::session::Agent;
use crate::conversation::{ToolEvent, ToolStatus};
use crate::vendors::ToolCall;

/// The director's course on the call: the director itself, the steps waiting for the model's
/// round under way, and the dispatches and the transfer under way.
#[derive(Debug, Default)]
pub(super) struct Course {
    /// The call's own director (a copy of the mind's); none without a mind.
    director: Option<Box<dyn Director>>,
    /// Steps waiting for the model's round under way.
    waiting: Vec<Step>,
    /// The model's round under way only fills arguments: its words are not said.
    silent_round: bool,
    /// Dispatches under way.
    dispatches: u32,
    /// Where the call is transferred once what is being said has been said.
    transfer_to: Option<String>,
    /// The transfer under way: its record, completed when the line says how it went.
    transferring: Option<ToolEvent>,
    /// The director's opening has been done.
    opened: bool,
}

impl Course {
    pub fn new(director: Option<Box<dyn Director>>) -> Course {
        Course {
            director,
            ..Course::default()
        }
    }

    pub fn director(&self) -> Option<&dyn Director> {
        self.director.as_deref()
    }

    pub fn director_mut(&mut self) -> Option<&mut (dyn Director + 'static)> {
        self.director.as_deref_mut()
    }

    /// The director, as the call leaves it.
    pub fn into_director(self) -> Option<Box<dyn Director>> {
        self.director
    }

    /// Where the director's course is (a flow's node).
    pub fn position(&self) -> Option<String> {
        self.director.as_ref().and_then(|d| d.position())
    }

    /// `true` the first time only: the opening is done once.
    pub fn open(&mut self) -> bool {
        !std::mem::replace(&mut self.opened, true)
    }

    /// `steps` wait for the model's round under way.
    pub fn wait(&mut self, steps: impl IntoIterator<Item = Step>) {
        self.waiting.extend(steps);
    }

    /// The steps that waited for the model's round, taken to be done now.
    pub fn take_waiting(&mut self) -> Vec<Step> {
        std::mem::take(&mut self.waiting)
    }

    pub fn has_waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// A caller's turn ended: what waited is dropped (the director says again what it needs).
    pub fn caller_turn(&mut self) {
        self.waiting.clear();
        self.silent_round = false;
    }

    /// The model's next round only fills arguments (`silent`), or speaks.
    pub fn set_silent(&mut self, silent: bool) {
        self.silent_round = silent;
    }

    pub fn is_silent(&self) -> bool {
        self.silent_round
    }

    pub fn dispatch_started(&mut self) {
        self.dispatches += 1;
    }

    pub fn dispatch_done(&mut self) {
        self.dispatches = self.dispatches.saturating_sub(1);
    }

    /// The call is to be transferred to `to` once what is being said has been said.
    pub fn transfer_to(&mut self, to: String) {
        self.transfer_to = Some(to);
    }

    pub fn transfer_due(&self) -> bool {
        self.transfer_to.is_some()
    }

    /// The transfer due, taken to be made now.
    pub fn take_transfer(&mut self) -> Option<String> {
        self.transfer_to.take()
    }

    /// The transfer is under way, with its record.
    pub fn transferring(&mut self, event: ToolEvent) {
        self.transferring = Some(event);
    }

    pub fn is_transferring(&self) -> bool {
        self.transferring.is_some()
    }

    /// The record of the transfer under way, once the line says how it went.
    pub fn transfer_done(&mut self) -> Option<ToolEvent> {
        self.transferring.take()
    }

    /// Whether nothing of the course is under way or waiting.
    pub fn idle(&self) -> bool {
        self.dispatches == 0
            && self.waiting.is_empty()
            && self.transfer_to.is_none()
            && self.transferring.is_none()
    }
}

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
                    self.course.wait(std::iter::once(step).chain(steps));
                    return None;
                }
                Step::Reply => self.speak_now(false),
                Step::Extract(_) => self.speak_now(true),
                Step::Dispatch(dispatch) => self.dispatch(dispatch),
                Step::Transfer(to) => {
                    self.course.transfer_to(to);
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
        self.course.set_silent(silent);
        self.take_results();
        self.writer = self.start_round(!silent);
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
        if self.writer.is_some() || !self.course.has_waiting() {
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
        if self.reply.in_progress() || self.writer.is_some() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::director::PromptAgent;

    fn course() -> Course {
        Course::new(Some(Box::new(PromptAgent {
            system_prompt: "Be brief.".into(),
            temperature: None,
        })))
    }

    #[test]
    fn the_opening_is_done_once() {
        let mut course = course();
        assert!(course.open());
        assert!(!course.open());
        assert!(course.director().is_some() && course.position().is_none());
    }

    #[test]
    fn steps_wait_for_the_round_until_a_caller_turn_drops_them() {
        let mut course = course();
        course.wait([Step::Reply, Step::Hangup]);
        course.set_silent(true);
        assert!(!course.idle() && course.has_waiting() && course.is_silent());
        assert_eq!(course.take_waiting(), [Step::Reply, Step::Hangup]);
        assert!(course.idle());
        course.wait([Step::Say("Hi.".into())]);
        course.caller_turn();
        assert!(course.idle() && !course.is_silent());
    }

    #[test]
    fn dispatches_and_a_transfer_keep_the_course_busy_until_they_come_back() {
        let mut course = course();
        course.dispatch_started();
        course.dispatch_started();
        course.dispatch_done();
        assert!(!course.idle());
        course.dispatch_done();
        course.dispatch_done();
        assert!(course.idle(), "an extra answer is not counted below zero");
        course.transfer_to("+15550100".into());
        assert!(course.transfer_due() && !course.idle());
        assert_eq!(course.take_transfer().as_deref(), Some("+15550100"));
        let event = ToolEvent::at_once("transfer", Value::Null, ToolStatus::Succeeded, None);
        course.transferring(event);
        assert!(course.is_transferring() && !course.transfer_due() && !course.idle());
        assert_eq!(
            course.transfer_done().map(|e| e.name),
            Some("transfer".into())
        );
        assert!(course.idle() && course.into_director().is_some());
    }
}
