//! What the caller's speech does to the call: utterances go to transcription, a pause may
//! bring an early transcript, and a transcript that fails gets the apology.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::EndReason;
use super::director::Step;
use super::machine::Detection;
use super::session::Agent;
use super::work::Work;
use crate::conversation::{Speaker, Unheard};
use crate::turns::APOLOGY_LINE;
use crate::vendors::{Transcript, VendorError};

impl Agent<'_> {
    /// The caller's utterance: transcribed, unless the turn already ended on its words.
    pub(super) fn utterance(&mut self, audio: Arc<[i16]>) -> Option<EndReason> {
        let (Some(mind), Some(rate)) = (&self.plan.mind, self.line.sample_rate()) else {
            return None;
        };
        let Some(transcriber) = &mind.transcriber else {
            return self.unheard_turn();
        };
        if !self.listening.utterance() {
            return None;
        }
        self.work
            .transcribe(transcriber, audio, rate, &self.plan.language, |result| {
                Work::Heard { result }
            });
        None
    }

    /// The caller spoke and nothing can transcribe it (a flow run with no speech to text,
    /// for its keypad): the turn goes on the record as unheard, and the flow hears a turn
    /// without words (a node decided by its checks asks again). A step that would have the
    /// model answer nothing is not taken.
    fn unheard_turn(&mut self) -> Option<EndReason> {
        if self.machine.detection() != Detection::Off {
            return None;
        }
        self.record_unheard(Unheard::NoSpeechToText);
        self.course.director()?;
        let now_ms = self.now_ms();
        let steps = self.course.director_mut()?.caller_turn("", now_ms);
        if steps.iter().all(|s| matches!(s, Step::Reply)) {
            return None;
        }
        self.course.caller_turn();
        self.reply.flush_tools(&mut self.record);
        self.reply = super::reply::Reply::default();
        self.act(steps)
    }

    /// The caller paused: an early transcript of what they said so far may end their turn
    /// before the VAD's stop, if their words end a sentence.
    pub(super) fn pause(&mut self, audio: Arc<[i16]>) {
        let (Some(mind), Some(rate)) = (&self.plan.mind, self.line.sample_rate()) else {
            return;
        };
        let Some(transcriber) = &mind.transcriber else {
            return;
        };
        if self.machine.detection() != Detection::Off {
            return;
        }
        let paused = Duration::from_secs_f64(mind.listen.pause_secs.max(0.0));
        let Some(pause) = self.listening.paused(self.now_ms(), paused) else {
            return;
        };
        self.work.transcribe(
            transcriber,
            audio,
            rate,
            &self.plan.language,
            move |result| Work::Early { pause, result },
        );
    }

    /// A transcription came back.
    pub(super) fn heard(&mut self, result: Result<Transcript, VendorError>) {
        let grace = self
            .plan
            .mind
            .as_ref()
            .map_or(Duration::ZERO, |m| m.unfinished_grace);
        match self.listening.heard(result, Instant::now(), grace) {
            // The caller's words so far go out before their turn ends (the live page).
            Ok(()) => {
                let words = self.listening.heard_so_far();
                if let Some(sink) = self.plan.turns.as_ref().filter(|_| !words.is_empty()) {
                    sink.speaking(Speaker::User, words);
                }
            }
            Err(e) => {
                let at = self.now_ms();
                self.record
                    .vendor_failed("transcriber", "speech to text failed", &e, at);
                self.record_unheard(Unheard::TranscriptionFailed);
                if !self.listening.is_speaking() {
                    self.say(APOLOGY_LINE);
                }
            }
        }
    }
}
