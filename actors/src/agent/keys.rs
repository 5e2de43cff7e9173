//! The keypad on the call: a key stops the agent and joins the entry under way; a complete
//! entry goes into the transcript and the model's context and to the director; digits the
//! agent sends go out on the line and into the transcript, and a hang-up waits for them.

use switchboard_sip::dtmf::Digit;
use tokio::time::Instant;

use super::EndReason;
use super::director::Gather;
use super::keypad::Entry;
use super::session::Agent;
use crate::conversation::{Speaker, Turn};
use crate::vendors::ChatMessage;

/// Milliseconds one sent digit takes on the line (its tone and the gap after it).
const SENT_DIGIT_MS: u64 = 220;

impl Agent<'_> {
    /// How the caller's keys make an entry where the call is now.
    pub(super) fn gather(&self) -> Gather {
        self.course
            .director()
            .map(|d| d.gather())
            .unwrap_or_default()
    }

    /// The caller pressed a key: the agent stops speaking, and a completed entry goes to the
    /// director. While answering-machine detection decides, keys are not taken.
    pub(super) fn pressed(&mut self, digit: Digit) -> Option<EndReason> {
        if self.machine.detection() != super::machine::Detection::Off {
            return None;
        }
        // A key's tones are not words: the utterance they made is not transcribed.
        self.line.drop_utterance();
        self.listening.keyed(Instant::now());
        self.barge_in();
        let gather = self.gather();
        let entry = self
            .keypad
            .press(digit, &gather, Instant::now(), self.now_ms())?;
        self.enter_when_cut(entry)
    }

    /// Hands `entry` to the director, once the line has reported how much of the agent's
    /// words the key cut (the record keeps them before what follows).
    fn enter_when_cut(&mut self, entry: Entry) -> Option<EndReason> {
        if self.reply.playing() {
            self.keypad.held = Some(entry);
            return None;
        }
        self.entered(entry)
    }

    /// The agent's words a key cut have been reported: the entry held goes on.
    pub(super) fn cut_reported(&mut self) -> Option<EndReason> {
        let entry = self.keypad.held.take()?;
        self.entered(entry)
    }

    /// The entry under way timed out.
    pub(super) fn keypad_timed_out(&mut self) -> Option<EndReason> {
        let entry = self.keypad.take()?;
        self.enter_when_cut(entry)
    }

    /// The caller keyed `entry`: it goes into the transcript and the model's context, and
    /// the director says what follows.
    fn entered(&mut self, entry: Entry) -> Option<EndReason> {
        self.record
            .context(ChatMessage::User(format!("[keypad: {}]", entry.digits)));
        self.record.turn(Turn {
            role: Speaker::User,
            text: String::new(),
            start_ms: entry.start_ms,
            end_ms: entry.end_ms,
            interrupted: false,
            node: self.course.position(),
            unheard: None,
            digits: Some(entry.digits.clone()),
        });
        self.course.director()?;
        self.course.caller_turn();
        self.reply.flush_tools(&mut self.record);
        self.reply = super::reply::Reply::default();
        let now_ms = self.now_ms();
        let steps = self
            .course
            .director_mut()?
            .caller_digits(&entry.digits, now_ms);
        self.act(steps)
    }

    /// The call ends for `reason`: now, or once the digits being sent are out.
    pub(super) fn end_when_sent(&mut self, reason: EndReason) -> Option<EndReason> {
        if self.keypad.sending {
            self.keypad.end_when_sent = Some(reason);
            return None;
        }
        Some(reason)
    }

    /// The line has sent every digit: a call's end that waited for them comes now.
    pub(super) fn digits_sent(&mut self) -> Option<EndReason> {
        self.keypad.sending = false;
        self.keypad.end_when_sent.take()
    }

    /// Sends `keys` (already checked) on the line; the agent's turn records them.
    pub(super) fn send_digits(&mut self, keys: &str) {
        let Ok(digits) = Digit::parse_all(keys) else {
            return;
        };
        if digits.is_empty() {
            return;
        }
        self.keypad.sending = true;
        self.line.send_digits(&digits);
        let start_ms = self.now_ms();
        self.record.turn(Turn {
            role: Speaker::Agent,
            text: String::new(),
            start_ms,
            end_ms: start_ms + SENT_DIGIT_MS * digits.len() as u64,
            interrupted: false,
            node: self.course.position(),
            unheard: None,
            digits: Some(keys.to_string()),
        });
    }
}
