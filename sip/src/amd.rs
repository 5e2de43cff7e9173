//! Answering-machine detection (AMD) on the first seconds of an answered outbound call, after
//! Asterisk's `app_amd`: an energy detector calls each 20 ms frame of the callee's audio voice or
//! silence, and rules over the words and pauses decide who answered. A person answers with a
//! word or two ("Hello?") and waits; a machine talks on ("Hi, you've reached the voicemail
//! of ...") or says nothing at all. The [`BeepDetector`] then hears the voicemail tone after a
//! machine's greeting, when a message can be left.
//!
//! ```text
//!                  a word (voice >= min_word_length)
//!  initial silence ---------------------------------> greeting
//!    | silence >= initial_silence                       | silence >= after_greeting_silence -> Human   HUMAN
//!    v                                                  | voice in all >= greeting          -> Machine LONGGREETING
//!  Machine INITIALSILENCE                               | words > maximum_number_of_words   -> Machine MAXWORDS
//!                                                       | one word >= maximum_word_length   -> Machine MAXWORDLENGTH
//!  in any state: audio >= total_analysis_time -> Unsure TOOLONG
//! ```
//!
//! Everything here is pure: no clock (time is the audio fed), no allocation per frame, and the
//! same input always gives the same verdict, so the rules can be tested and measured on files.
//!
//! **Invariant:** unsure is never a machine: a caller treats it as a person, because hanging up
//! on a person costs more than talking to a machine.
//!
//! The verdict's rules are one state machine, read top to bottom here, with the whole
//! detection that joins them to the beep; the beep detector lives in `amd/beep.rs`, the tests
//! in `amd/tests.rs`.

use std::fmt;

mod beep;

pub use beep::{BeepDetector, BeepEvent, BeepSettings};

/// Who answered; it serializes as its [`AnsweredBy::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AnsweredBy {
    Human,
    Machine,
    /// The analysis ran out of time; callers treat the call as answered by a person.
    Unsure,
}

impl AnsweredBy {
    pub const ALL: [AnsweredBy; 3] = [AnsweredBy::Human, AnsweredBy::Machine, AnsweredBy::Unsure];

    pub fn parse(s: &str) -> Option<AnsweredBy> {
        Self::ALL.into_iter().find(|a| a.as_str() == s)
    }

    /// `human`, `machine` or `unsure`.
    pub fn as_str(self) -> &'static str {
        match self {
            AnsweredBy::Human => "human",
            AnsweredBy::Machine => "machine",
            AnsweredBy::Unsure => "unsure",
        }
    }

    /// Whether the call goes on as a conversation (a person, or not sure).
    pub fn counts_as_human(self) -> bool {
        !matches!(self, AnsweredBy::Machine)
    }
}

impl fmt::Display for AnsweredBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the verdict fell, with the figures that decided it (Asterisk's `AMDCAUSE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AmdReason {
    /// No word within `initial_silence`.
    InitialSilence { silence_ms: u32, limit_ms: u32 },
    /// The greeting's voice lasted `greeting` or more.
    LongGreeting { voice_ms: u32, limit_ms: u32 },
    /// More words than `maximum_number_of_words`.
    MaxWords { words: u32, limit: u32 },
    /// One word lasted `maximum_word_length` or more.
    MaxWordLength { word_ms: u32 },
    /// A short greeting, then `after_greeting_silence`: a person waiting for an answer.
    Human { silence_ms: u32, limit_ms: u32 },
    /// The voicemail tone was heard before any other rule decided.
    Beep { frequency_hz: u32 },
    /// `total_analysis_time` went by without a verdict.
    TooLong { total_ms: u32 },
}

impl AmdReason {
    /// The cause's name: `INITIALSILENCE`, `LONGGREETING`, `MAXWORDS`, `MAXWORDLENGTH`, `HUMAN`,
    /// `BEEP` or `TOOLONG`.
    pub fn code(self) -> &'static str {
        match self {
            AmdReason::InitialSilence { .. } => "INITIALSILENCE",
            AmdReason::LongGreeting { .. } => "LONGGREETING",
            AmdReason::MaxWords { .. } => "MAXWORDS",
            AmdReason::MaxWordLength { .. } => "MAXWORDLENGTH",
            AmdReason::Human { .. } => "HUMAN",
            AmdReason::Beep { .. } => "BEEP",
            AmdReason::TooLong { .. } => "TOOLONG",
        }
    }
}

/// The cause as Asterisk writes it, e.g. `MAXWORDS-3-2` or `HUMAN-800-800`.
impl fmt::Display for AmdReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let code = self.code();
        match *self {
            AmdReason::InitialSilence {
                silence_ms,
                limit_ms,
            }
            | AmdReason::Human {
                silence_ms,
                limit_ms,
            } => write!(f, "{code}-{silence_ms}-{limit_ms}"),
            AmdReason::LongGreeting { voice_ms, limit_ms } => {
                write!(f, "{code}-{voice_ms}-{limit_ms}")
            }
            AmdReason::MaxWords { words, limit } => write!(f, "{code}-{words}-{limit}"),
            AmdReason::MaxWordLength { word_ms } => write!(f, "{code}-{word_ms}"),
            AmdReason::Beep { frequency_hz } => write!(f, "{code}-{frequency_hz}"),
            AmdReason::TooLong { total_ms } => write!(f, "{code}-{total_ms}"),
        }
    }
}

/// The outcome of the analysis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AmdVerdict {
    pub answered_by: AnsweredBy,
    pub reason: AmdReason,
    /// Milliseconds of audio it took, from the first frame.
    pub after_ms: u32,
}

/// The rules' parameters, with Asterisk's names and defaults (`amd.conf`), but one: a person
/// may say three words, not two. Durations are in milliseconds of audio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmdSettings {
    /// Longest silence before the first word; longer is a machine (`INITIALSILENCE`).
    pub initial_silence_ms: u32,
    /// Longest a greeting may speak (its voice added up); longer is a machine (`LONGGREETING`).
    pub greeting_ms: u32,
    /// Silence after a greeting that means a person waiting for an answer (`HUMAN`).
    pub after_greeting_silence_ms: u32,
    /// Audio analysed at most; then the verdict is unsure (`TOOLONG`).
    pub total_analysis_time_ms: u32,
    /// Shortest voice that counts as a word.
    pub min_word_length_ms: u32,
    /// Shortest silence that ends a word.
    pub between_words_silence_ms: u32,
    /// Most words a person's greeting has; one more is a machine (`MAXWORDS`). Asterisk's
    /// default is 2, but a "word" here is a burst of voice between pauses of
    /// `between_words_silence`, and a stop consonant or a comma splits one: "Hi, who is this?"
    /// is three or four. With 2, a fifth to a quarter of the people in `switchboard-bench amd`
    /// were taken for machines; with 3, none or one in fifty, and the machines are still found
    /// (their greetings run on: `LONGGREETING`).
    pub maximum_number_of_words: u32,
    /// Longest one word may last; longer is a machine (`MAXWORDLENGTH`). The default equals
    /// the total analysis time, so this rule only decides when a setting lowers it.
    pub maximum_word_length_ms: u32,
    /// A frame whose mean absolute sample value (16-bit) is below this is silence. Above a
    /// noisy line's floor the bar rises: see [`AmdClassifier`].
    pub silence_threshold: u32,
}

impl Default for AmdSettings {
    fn default() -> Self {
        AmdSettings {
            initial_silence_ms: 2500,
            greeting_ms: 1500,
            after_greeting_silence_ms: 800,
            total_analysis_time_ms: 5000,
            min_word_length_ms: 100,
            between_words_silence_ms: 50,
            maximum_number_of_words: 3,
            maximum_word_length_ms: 5000,
            silence_threshold: 256,
        }
    }
}

/// How far above the line's noise floor a frame must be to count as voice: 3 times its mean
/// absolute value, about 9.5 dB. Steady noise varies by far less from one 20 ms frame to the
/// next; speech rises 20 dB and more above the floor.
const FLOOR_MARGIN: f32 = 3.0;
/// How fast the floor estimate climbs while frames are louder than it: 3 dB a second, as a
/// factor per millisecond. Slow beside words (a greeting of 1.5 s lifts it 4.5 dB), quick
/// enough to follow a line that gets noisier.
const FLOOR_RISE_PER_MS: f32 = 1.000_345_4;

/// Decides who answered from the callee's audio, frame by frame, with the rules of Asterisk's
/// `app_amd`.
///
/// One difference, for noisy lines: Asterisk compares every frame with the fixed
/// `silence_threshold`, so steady noise above it (a street, a car, a poor line) is one endless
/// word and a person who said "Hello?" becomes a machine (`LONGGREETING`). Here the bar is the
/// greater of `silence_threshold` and [`FLOOR_MARGIN`] times the line's noise floor, which
/// follows the quietest frames at once and climbs 3 dB a second otherwise (as the `Vad` does).
/// On a clean line the floor sits far below the threshold and the rules are Asterisk's.
///
/// Another: the first word counts even when the audio starts with it (Asterisk starts "in a
/// word" and counts only words after a silence).
#[derive(Debug, Clone)]
pub struct AmdClassifier {
    settings: AmdSettings,
    /// Samples per millisecond.
    samples_per_ms: u32,
    /// The line's noise floor, as a mean absolute sample value; none before the first frame.
    floor: Option<f32>,
    total_ms: u32,
    /// Silence since the last voice frame.
    silence_ms: u32,
    /// Voice since the start, in all.
    voice_ms: u32,
    /// Voice of the current word (short pauses within a word do not end it).
    word_ms: u32,
    words: u32,
    in_word: bool,
    /// Whether a word has been heard (the greeting has started).
    in_greeting: bool,
    verdict: Option<AmdVerdict>,
}

impl AmdClassifier {
    /// A classifier for mono 16-bit audio at `sample_rate` Hz (8000 or 16000).
    pub fn new(settings: AmdSettings, sample_rate: u32) -> AmdClassifier {
        AmdClassifier {
            settings,
            samples_per_ms: (sample_rate / 1000).max(1),
            floor: None,
            total_ms: 0,
            silence_ms: 0,
            voice_ms: 0,
            word_ms: 0,
            words: 0,
            in_word: false,
            in_greeting: false,
            verdict: None,
        }
    }

    /// The verdict, once there is one.
    pub fn verdict(&self) -> Option<AmdVerdict> {
        self.verdict
    }

    /// Words heard so far.
    pub fn words(&self) -> u32 {
        self.words
    }

    /// Whether `frame` counts as voice, after updating the noise floor with it.
    fn is_voice(&mut self, frame: &[i16], ms: u32) -> bool {
        let level = mean_abs(frame);
        let floor = match self.floor {
            Some(floor) if level >= floor => floor * FLOOR_RISE_PER_MS.powi(ms as i32),
            _ => level,
        };
        self.floor = Some(floor);
        level >= (self.settings.silence_threshold as f32).max(floor * FLOOR_MARGIN)
    }

    /// Analyses one frame; answers the verdict on the frame that reaches it (and `None` before
    /// and after).
    pub fn feed(&mut self, frame: &[i16]) -> Option<AmdVerdict> {
        if self.verdict.is_some() || frame.is_empty() {
            return None;
        }
        let s = self.settings;
        let ms = (frame.len() as u32 / self.samples_per_ms).max(1);
        self.total_ms += ms;
        let reached = if self.total_ms >= s.total_analysis_time_ms {
            Some((
                AnsweredBy::Unsure,
                AmdReason::TooLong {
                    total_ms: self.total_ms,
                },
            ))
        } else if !self.is_voice(frame, ms) {
            self.silence_ms += ms;
            if self.silence_ms >= s.between_words_silence_ms {
                self.in_word = false;
                self.word_ms = 0;
            }
            if !self.in_greeting && self.silence_ms >= s.initial_silence_ms {
                Some((
                    AnsweredBy::Machine,
                    AmdReason::InitialSilence {
                        silence_ms: self.silence_ms,
                        limit_ms: s.initial_silence_ms,
                    },
                ))
            } else if self.in_greeting && self.silence_ms >= s.after_greeting_silence_ms {
                Some((
                    AnsweredBy::Human,
                    AmdReason::Human {
                        silence_ms: self.silence_ms,
                        limit_ms: s.after_greeting_silence_ms,
                    },
                ))
            } else {
                None
            }
        } else {
            self.silence_ms = 0;
            self.word_ms += ms;
            self.voice_ms += ms;
            if self.word_ms >= s.min_word_length_ms && !self.in_word {
                self.words += 1;
                self.in_word = true;
            }
            if self.word_ms >= s.maximum_word_length_ms {
                Some((
                    AnsweredBy::Machine,
                    AmdReason::MaxWordLength {
                        word_ms: self.word_ms,
                    },
                ))
            } else if self.words > s.maximum_number_of_words {
                Some((
                    AnsweredBy::Machine,
                    AmdReason::MaxWords {
                        words: self.words,
                        limit: s.maximum_number_of_words,
                    },
                ))
            } else if self.in_greeting && self.voice_ms >= s.greeting_ms {
                Some((
                    AnsweredBy::Machine,
                    AmdReason::LongGreeting {
                        voice_ms: self.voice_ms,
                        limit_ms: s.greeting_ms,
                    },
                ))
            } else {
                if self.word_ms >= s.min_word_length_ms {
                    self.in_greeting = true;
                }
                None
            }
        };
        let (answered_by, reason) = reached?;
        self.decide(answered_by, reason)
    }

    /// Ends the analysis: `answered_by`, for `reason`, after the audio fed so far.
    fn decide(&mut self, answered_by: AnsweredBy, reason: AmdReason) -> Option<AmdVerdict> {
        let verdict = AmdVerdict {
            answered_by,
            reason,
            after_ms: self.total_ms,
        };
        self.verdict = Some(verdict);
        Some(verdict)
    }
}

/// A frame's mean absolute sample value (Asterisk's silence measure).
fn mean_abs(frame: &[i16]) -> f32 {
    if frame.is_empty() {
        return 0.0;
    }
    let sum: u64 = frame.iter().map(|&s| u64::from(s.unsigned_abs())).sum();
    sum as f32 / frame.len() as f32
}

/// How long after the start a machine's greeting is listened to for its beep.
pub const BEEP_WINDOW_MS: u32 = 30_000;

/// What [`AnsweringMachineDetector`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AmdEvent {
    /// Who answered; once per call.
    Verdict(AmdVerdict),
    /// The voicemail tone.
    Beep(BeepEvent),
}

/// The whole detection for one call: the verdict, then, on a machine, its beep. A beep heard
/// before the rules decide is a machine (`BEEP`). After a person (or unsure) nothing more is
/// listened to; after a machine, the beep is listened for until it ends or until
/// [`BEEP_WINDOW_MS`] of audio have gone by.
#[derive(Debug, Clone)]
pub struct AnsweringMachineDetector {
    classifier: AmdClassifier,
    beep: BeepDetector,
    elapsed_ms: u32,
    samples_per_ms: u32,
    finished: bool,
}

impl AnsweringMachineDetector {
    pub fn new(settings: AmdSettings, sample_rate: u32) -> AnsweringMachineDetector {
        AnsweringMachineDetector {
            classifier: AmdClassifier::new(settings, sample_rate),
            beep: BeepDetector::new(BeepSettings::default(), sample_rate),
            elapsed_ms: 0,
            samples_per_ms: (sample_rate / 1000).max(1),
            finished: false,
        }
    }

    /// Whether there is nothing more to listen for.
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// The verdict, once there is one.
    pub fn verdict(&self) -> Option<AmdVerdict> {
        self.classifier.verdict()
    }

    /// Analyses one 20 ms frame of the callee's audio; `emit` gets what it decided (a verdict
    /// comes before a beep heard in the same frame).
    pub fn feed(&mut self, frame: &[i16], mut emit: impl FnMut(AmdEvent)) {
        if self.finished {
            return;
        }
        self.elapsed_ms += (frame.len() as u32 / self.samples_per_ms).max(1);
        let verdict = self.classifier.feed(frame);
        let beep = self.beep.feed(frame);
        let verdict = match (verdict, beep) {
            (None, Some(BeepEvent::Started { frequency_hz, .. }))
                if self.classifier.verdict().is_none() =>
            {
                self.classifier
                    .decide(AnsweredBy::Machine, AmdReason::Beep { frequency_hz })
            }
            _ => verdict,
        };
        if let Some(v) = verdict {
            emit(AmdEvent::Verdict(v));
        }
        match self.classifier.verdict() {
            Some(v) if v.answered_by == AnsweredBy::Machine => {
                if let Some(b) = beep {
                    emit(AmdEvent::Beep(b));
                }
                let beep_over = matches!(beep, Some(BeepEvent::Ended { .. }));
                let window_over = self.elapsed_ms >= BEEP_WINDOW_MS && !self.beep.sounding();
                self.finished = beep_over || window_over;
            }
            Some(_) => self.finished = true,
            None => {}
        }
    }
}

#[cfg(test)]
mod tests;
