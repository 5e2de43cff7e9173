//! Turn-taking: the caller's turn as it is heard. Their speech starts and stops (the VAD),
//! utterances are transcribed, a pause may end the turn early when its words end a sentence,
//! unfinished words get a grace, and a caller who talks too long without a pause has the turn
//! ended for them.

use std::time::Duration;

use tokio::time::Instant;

use super::reply::append;
use crate::conversation::{Speaker, Turn, Unheard};
use crate::turns::sounds_unfinished;
use crate::vendors::{Transcript, VendorError};

/// The caller's turn so far, and how long the call has been quiet.
#[derive(Debug)]
pub(super) struct Listening {
    /// Their words so far this turn.
    heard: String,
    /// When the turn's speech started and ended, in ms from the answer.
    heard_from: Option<u64>,
    heard_to: u64,
    /// Transcriptions of whole utterances in flight.
    transcribing: u32,
    /// When the turn ends (once no transcription is in flight).
    turn_ends_at: Option<Instant>,
    /// Since when the caller has been speaking without a stop.
    speech_started: Option<Instant>,
    /// The VAD hears the caller.
    speaking: bool,
    /// The pause the pending early transcript was made at.
    early: Option<u64>,
    /// Pauses so far.
    pauses: u64,
    /// When the last pause began, in ms from the answer.
    paused_at_ms: u64,
    /// The turn ended on an early transcript: the utterance it was made of is not transcribed
    /// again.
    ended_early: bool,
    /// Since when neither side has been heard (the silence timeout counts from there).
    quiet_since: Instant,
    /// The agent has asked whether the caller is still there since they last spoke.
    asked_still_there: bool,
}

impl Listening {
    /// Nothing heard yet, quiet since `now`.
    pub fn new(now: Instant) -> Listening {
        Listening {
            heard: String::new(),
            heard_from: None,
            heard_to: 0,
            transcribing: 0,
            turn_ends_at: None,
            speech_started: None,
            speaking: false,
            early: None,
            pauses: 0,
            paused_at_ms: 0,
            ended_early: false,
            quiet_since: now,
            asked_still_there: false,
        }
    }

    /// The VAD hears the caller.
    pub fn is_speaking(&self) -> bool {
        self.speaking
    }

    /// Whether a transcription of the caller's speech is in flight.
    pub fn transcribing(&self) -> bool {
        self.transcribing > 0
    }

    /// Whether nothing of the caller's is under way: not speaking, nothing being transcribed,
    /// no turn about to end.
    pub fn idle(&self) -> bool {
        !self.speaking && self.transcribing == 0 && self.ends_at().is_none()
    }

    /// When a caller speaking without a pause has spoken `max` and their turn ends for them.
    pub fn long_speech_due(&self, max: Duration) -> Option<Instant> {
        self.speech_started.map(|at| at + max)
    }

    /// The call is quiet from `now` (someone stopped speaking, or the agent's audio ended).
    pub fn quiet(&mut self, now: Instant) {
        self.quiet_since = now;
    }

    /// When the silence timeout runs out, if nobody speaks before.
    pub fn silence_due(&self, timeout: Duration) -> Instant {
        self.quiet_since + timeout
    }

    /// The silence timeout ran out: `true` if the agent asks whether the caller is still
    /// there (once since they last spoke; the timeout then counts again from `now`), `false`
    /// if it has asked already.
    pub fn ask_still_there(&mut self, now: Instant) -> bool {
        if std::mem::replace(&mut self.asked_still_there, true) {
            return false;
        }
        self.quiet_since = now;
        true
    }

    /// The caller started (or resumed) speaking: an early transcript is stale.
    pub fn speech_started(&mut self, now: Instant, now_ms: u64) {
        self.asked_still_there = false;
        self.early = None;
        self.ended_early = false;
        self.speaking = true;
        self.turn_ends_at = None;
        self.speech_started = Some(now);
        self.heard_from.get_or_insert(now_ms);
    }

    /// The caller pressed a key: they are there, and the call is not quiet.
    pub fn keyed(&mut self, now: Instant) {
        self.asked_still_there = false;
        self.quiet_since = now;
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

    /// A turn of the caller's whose words could not be heard (`why`): its span so far, then a
    /// fresh turn. `None` when the caller has not spoken since the last.
    pub fn take_unheard(&mut self, why: Unheard) -> Option<Turn> {
        let start_ms = self.heard_from.take()?;
        self.heard.clear();
        self.turn_ends_at = None;
        Some(Turn {
            role: Speaker::User,
            text: String::new(),
            start_ms,
            end_ms: self.heard_to.max(start_ms),
            interrupted: false,
            node: None,
            unheard: Some(why),
            digits: None,
        })
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
            unheard: None,
            digits: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transcript(text: &str) -> Result<Transcript, VendorError> {
        Ok(Transcript {
            text: text.into(),
            ..Transcript::default()
        })
    }

    #[tokio::test(start_paused = true)]
    async fn the_still_there_question_is_asked_once_until_the_caller_speaks() {
        let start = Instant::now();
        let timeout = Duration::from_secs(5);
        let mut listening = Listening::new(start);
        assert_eq!(listening.silence_due(timeout), start + timeout);
        let later = start + timeout;
        assert!(listening.ask_still_there(later));
        assert_eq!(listening.silence_due(timeout), later + timeout);
        assert!(!listening.ask_still_there(later + timeout));
        listening.speech_started(later, 5000);
        listening.speech_stopped(6000);
        listening.quiet(later + Duration::from_secs(1));
        assert!(listening.ask_still_there(later + timeout));
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_speech_is_due_from_its_start_and_a_turn_ends_after_its_transcript() {
        let start = Instant::now();
        let mut listening = Listening::new(start);
        let max = Duration::from_secs(10);
        assert_eq!(listening.long_speech_due(max), None);
        listening.speech_started(start, 0);
        assert_eq!(listening.long_speech_due(max), Some(start + max));
        assert!(listening.is_speaking() && !listening.idle());
        listening.speech_stopped(1200);
        assert!(listening.utterance());
        assert!(listening.transcribing() && listening.ends_at().is_none());
        let heard = start + Duration::from_millis(1400);
        let grace = Duration::from_millis(500);
        listening
            .heard(transcript("I want to book"), heard, grace)
            .unwrap();
        // Unfinished words get the grace.
        assert_eq!(listening.ends_at(), Some(heard + grace));
        let turn = listening.take_turn().expect("a turn");
        assert_eq!(
            (turn.text.as_str(), turn.start_ms, turn.end_ms),
            ("I want to book", 0, 1200)
        );
        assert!(listening.idle() && listening.long_speech_due(max).is_none());
    }
}
