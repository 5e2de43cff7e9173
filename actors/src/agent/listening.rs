//! Turn-taking: the caller's turn as it is heard. Their speech starts and stops (the VAD),
//! utterances are transcribed, a pause may end the turn early when its words end a sentence,
//! unfinished words get a grace, and a caller who talks too long without a pause has the turn
//! ended for them.

use std::time::Duration;

use tokio::time::Instant;

use super::reply::append;
use crate::conversation::{Speaker, Turn};
use crate::turns::sounds_unfinished;
use crate::vendors::{Transcript, VendorError};

/// The caller's turn so far.
#[derive(Debug, Default)]
pub(super) struct Listening {
    /// Their words so far this turn.
    heard: String,
    /// When the turn's speech started and ended, in ms from the answer.
    heard_from: Option<u64>,
    heard_to: u64,
    /// Transcriptions of whole utterances in flight.
    pub transcribing: u32,
    /// When the turn ends (once no transcription is in flight).
    pub turn_ends_at: Option<Instant>,
    /// Since when the caller has been speaking without a stop.
    pub speech_started: Option<Instant>,
    /// The VAD hears the caller.
    pub speaking: bool,
    /// The pause the pending early transcript was made at.
    early: Option<u64>,
    /// Pauses so far.
    pauses: u64,
    /// When the last pause began, in ms from the answer.
    paused_at_ms: u64,
    /// The turn ended on an early transcript: the utterance it was made of is not transcribed
    /// again.
    ended_early: bool,
}

impl Listening {
    /// The caller started (or resumed) speaking: an early transcript is stale.
    pub fn speech_started(&mut self, now: Instant, now_ms: u64) {
        self.early = None;
        self.ended_early = false;
        self.speaking = true;
        self.turn_ends_at = None;
        self.speech_started = Some(now);
        self.heard_from.get_or_insert(now_ms);
    }

    /// Their words so far this turn.
    pub fn heard_so_far(&self) -> &str {
        &self.heard
    }

    /// The caller stopped speaking.
    pub fn speech_stopped(&mut self, now_ms: u64) {
        self.speaking = false;
        self.speech_started = None;
        self.heard_to = now_ms;
    }

    /// An utterance was handed over: `true` if it is to be transcribed (not what the turn
    /// already ended on).
    pub fn utterance(&mut self) -> bool {
        if std::mem::take(&mut self.ended_early) {
            return false;
        }
        self.transcribing += 1;
        true
    }

    /// The caller paused `pause` before `now_ms`: the pause's number when an early transcript
    /// is to be made of what they said so far.
    pub fn paused(&mut self, now_ms: u64, pause: Duration) -> Option<u64> {
        if self.transcribing > 0 {
            return None;
        }
        self.pauses += 1;
        self.early = Some(self.pauses);
        self.paused_at_ms = now_ms.saturating_sub(pause.as_millis() as u64);
        Some(self.pauses)
    }

    /// A transcription of an utterance came back; the error, if it failed. Once none is in
    /// flight and the caller is quiet, the turn ends (after `grace` when the words sound
    /// unfinished).
    pub fn heard(
        &mut self,
        result: Result<Transcript, VendorError>,
        now: Instant,
        grace: Duration,
    ) -> Result<(), VendorError> {
        self.transcribing = self.transcribing.saturating_sub(1);
        let transcript = result?;
        append(&mut self.heard, transcript.text.trim());
        if self.transcribing == 0 && !self.speaking && !self.heard.is_empty() {
            let grace = if sounds_unfinished(&self.heard) {
                grace
            } else {
                Duration::ZERO
            };
            let at = now + grace;
            self.turn_ends_at = Some(self.turn_ends_at.map_or(at, |t| t.min(at)));
        }
        Ok(())
    }

    /// The early transcript made at `pause` came back: `true` if it ends the turn now (its
    /// words end a sentence and nothing has been said since). The utterance it was made of
    /// is then dropped.
    pub fn early(
        &mut self,
        pause: u64,
        result: Result<Transcript, VendorError>,
        now: Instant,
    ) -> bool {
        if self.early != Some(pause) || self.transcribing > 0 || self.turn_ends_at.is_some() {
            return false;
        }
        self.early = None;
        let Ok(transcript) = result else {
            return false;
        };
        let text = transcript.text.trim();
        let mut words = self.heard.clone();
        append(&mut words, text);
        if text.is_empty() || sounds_unfinished(&words) {
            // Mid-sentence: the VAD's stop decides, and the whole utterance is transcribed.
            return false;
        }
        self.heard = words;
        self.heard_to = self.paused_at_ms;
        self.ended_early = true;
        self.speech_started = None;
        self.turn_ends_at = Some(now);
        true
    }

    /// A turn that came as text (a text line): it ends now.
    pub fn said(&mut self, text: &str, now: Instant, now_ms: u64) {
        append(&mut self.heard, text.trim());
        self.heard_from.get_or_insert(now_ms);
        self.heard_to = now_ms;
        if !self.heard.is_empty() {
            self.turn_ends_at = Some(now);
        }
    }

    /// The caller has spoken too long without a pause: their turn ends here.
    pub fn too_long(&mut self, now: Instant) {
        self.speech_started = None;
        self.turn_ends_at = Some(now);
    }

    /// When the turn ends, if it is due to (no transcription in flight).
    pub fn ends_at(&self) -> Option<Instant> {
        self.turn_ends_at.filter(|_| self.transcribing == 0)
    }

    /// The turn, ended: what the caller said, if anything.
    pub fn take_turn(&mut self) -> Option<Turn> {
        self.turn_ends_at = None;
        let text = std::mem::take(&mut self.heard).trim().to_string();
        let start_ms = self.heard_from.take().unwrap_or(self.heard_to);
        if text.is_empty() {
            return None;
        }
        Some(Turn {
            role: Speaker::User,
            text,
            start_ms,
            end_ms: self.heard_to.max(start_ms),
            interrupted: false,
            node: None,
        })
    }
}
