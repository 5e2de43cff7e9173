//! What the agent says: its own lines and its reply's sentences voiced, played in order as
//! each is ready (and told as the turn under way), the turn ended once said, or cut short when
//! the caller talks over it.

use super::EndReason;
use super::line::Clip;
use super::machine::Detection;
use super::reply::Reply;
use super::session::Agent;
use crate::conversation::Speaker;

impl Agent<'_> {
    /// Says one of the agent's own lines: the next sentence of the reply under way, or a
    /// reply of its own.
    pub(super) fn say(&mut self, text: &str) {
        if !self.reply.is_open() {
            self.reply = Reply::line();
        }
        let index = self.reply.add_sentence();
        self.voice(index, text.to_string());
    }

    /// Voices sentence `index` of the reply: synthesized on its own task, or handed to a text
    /// line as it is.
    pub(super) fn voice(&mut self, index: u32, text: String) {
        match &self.voice {
            Some(voice) => self
                .work
                .synthesize(&self.speech, voice, index, self.reply.id(), text),
            None => self.ready(index, Some(Clip { text, audio: None })),
        }
    }

    /// Sentence `index` is ready: what is due plays, in order.
    pub(super) fn ready(&mut self, index: u32, clip: Option<Clip>) {
        let now_ms = self.now_ms();
        let mut started = false;
        for (clip, tag) in self.reply.ready(index, clip, now_ms) {
            self.line.play(clip, tag);
            started = true;
        }
        // What is being said goes out as it starts (the live page shows it), before the turn
        // is final.
        if started && let Some(sink) = &self.plan.turns {
            sink.speaking(Speaker::Agent, &self.reply.under_way());
        }
    }

    /// Ends the agent's turn if it has been said; the call's end if the model hung up then
    /// (or a voicemail message could not be said).
    pub(super) fn reply_said(&mut self) -> Option<EndReason> {
        let now_ms = self.now_ms();
        if !self.reply.said(&mut self.record, now_ms) {
            return None;
        }
        if let Some(reason) = self.reply.hangs_up() {
            return self.end_when_sent(reason);
        }
        if self.course.transfer_due() {
            return self.transfer_when_said();
        }
        if self.machine.detection() == Detection::LeavingMessage && !self.reply.queued_any() {
            // The message could not be synthesized: nothing was left.
            return Some(EndReason::AnsweringMachine);
        }
        None
    }

    /// Cuts the agent's reply short: everything that comes back for its utterance is stale,
    /// and what was played of it is written down as interrupted (now, or when the line
    /// reports the cut).
    pub(super) fn interrupt(&mut self) {
        self.reply.interrupt();
        self.reply.flush_tools(&mut self.record);
        if !self.reply.playing() {
            let now_ms = self.now_ms();
            self.reply.finish(&mut self.record, now_ms, true);
        }
    }
}
