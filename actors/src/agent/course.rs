//! The director's course on the call, as state: the director itself, the steps waiting for
//! the model's round under way, and the dispatches and the transfer under way. What the
//! steps do to the call is [`super::steps`].

use super::director::{Director, Step};
use crate::conversation::ToolEvent;

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

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::agent::director::PromptAgent;
    use crate::conversation::ToolStatus;

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
