//! Answering-machine handling on an outbound call: while detection decides, the agent holds its
//! greeting (or, greeting early, starts it once the callee's first words end); a person (or an
//! unsure verdict) gets the conversation; a machine gets the voicemail message after its beep,
//! or a hang-up.

use std::time::Duration;

use switchboard_sip::amd::{AmdVerdict, AnsweredBy, BEEP_WINDOW_MS};
use tokio::time::Instant;

use super::{AgentPlan, EndReason};

/// Where a call with answering-machine detection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Detection {
    /// No detection, or a person (or unsure) answered: the conversation runs.
    Off,
    /// Listening for the verdict.
    Listening,
    /// A machine: waiting for its beep (until the deadline) to leave the message.
    AwaitingBeep,
    /// Leaving the voicemail message; the call ends when it has played.
    LeavingMessage,
}

/// The machine part of a call.
#[derive(Debug)]
pub(super) struct Machine {
    detection: Detection,
    /// The verdict, once detection decided.
    answered_by: Option<AnsweredBy>,
    /// Until when the beep is waited for.
    beep_deadline: Option<Instant>,
    /// The greeting started before the verdict.
    greeted_early: bool,
}

/// What the agent does on a verdict or a beep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step {
    /// A person: the conversation runs; greet unless the greeting already started.
    Converse { greet: bool },
    /// A machine: stop any greeting and wait for the beep.
    AwaitBeep,
    /// Say the voicemail message; the call ends once it has played.
    LeaveMessage(String),
    /// End the call.
    End(EndReason),
}

impl Machine {
    /// Where detection stands.
    pub fn detection(&self) -> Detection {
        self.detection
    }

    /// The verdict, once detection decided.
    pub fn answered_by(&self) -> Option<AnsweredBy> {
        self.answered_by
    }

    pub fn new(plan: &AgentPlan) -> Machine {
        Machine {
            detection: if plan.amd.is_some() {
                Detection::Listening
            } else {
                Detection::Off
            },
            answered_by: None,
            beep_deadline: None,
            greeted_early: false,
        }
    }

    /// The callee's first words ended (the VAD's stop, or the listening's pause before it)
    /// while detection listens: `true` if the agent greets now (once, when its plan greets
    /// early).
    pub fn greet_early(&mut self, plan: &AgentPlan) -> bool {
        let early = plan.amd.as_ref().is_some_and(|a| a.greet_early);
        if self.detection != Detection::Listening || !early || self.greeted_early {
            return false;
        }
        self.greeted_early = true;
        true
    }

    /// Detection decided, on a call answered at `answered`: a machine's beep is awaited until
    /// detection stops listening for it ([`BEEP_WINDOW_MS`] after the answer).
    pub fn verdict(
        &mut self,
        verdict: &AmdVerdict,
        plan: &AgentPlan,
        answered: Instant,
    ) -> Option<Step> {
        if self.detection != Detection::Listening {
            return None;
        }
        self.answered_by = Some(verdict.answered_by);
        tracing::info!(answered_by = verdict.answered_by.as_str(), reason = %verdict.reason, after_ms = verdict.after_ms, "answering-machine detection");
        if verdict.answered_by.counts_as_human() {
            self.detection = Detection::Off;
            return Some(Step::Converse {
                greet: !self.greeted_early,
            });
        }
        if plan
            .amd
            .as_ref()
            .is_some_and(|a| a.voicemail_message.is_some())
        {
            self.detection = Detection::AwaitingBeep;
            let window = Duration::from_millis(u64::from(BEEP_WINDOW_MS));
            self.beep_deadline = Some(answered + window);
            return Some(Step::AwaitBeep);
        }
        Some(Step::End(EndReason::AnsweringMachine))
    }

    /// The machine's beep ended.
    pub fn beep_ended(&mut self, plan: &AgentPlan) -> Option<Step> {
        if self.detection != Detection::AwaitingBeep {
            return None;
        }
        match plan.amd.as_ref().and_then(|a| a.voicemail_message.clone()) {
            Some(message) if !message.trim().is_empty() => {
                self.detection = Detection::LeavingMessage;
                Some(Step::LeaveMessage(message))
            }
            _ => Some(Step::End(EndReason::AnsweringMachine)),
        }
    }

    /// The beep's deadline, while one is awaited.
    pub fn beep_due(&self) -> Option<Instant> {
        self.beep_deadline
            .filter(|_| self.detection == Detection::AwaitingBeep)
    }
}
