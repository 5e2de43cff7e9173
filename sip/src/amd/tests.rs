//! The rules and the beep detector on synthetic audio: silence, tone bursts as words, steady
//! noise, beeps across the band and speech-like signals (harmonics gliding in pitch under a
//! syllable envelope, sustained vowels, modulated noise).

use std::f32::consts::PI;

use super::*;

const RATE: u32 = 8000;

/// Deterministic white noise in [-1, 1).
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// A signal under construction, at `rate` Hz.
struct Signal {
    rate: u32,
    samples: Vec<i16>,
    noise: Noise,
}

impl Signal {
    fn new(rate: u32) -> Signal {
        Signal {
            rate,
            samples: Vec::new(),
            noise: Noise(7),
        }
    }

    fn len_for(&self, ms: u32) -> usize {
        (self.rate / 1000 * ms) as usize
    }

    fn silence(mut self, ms: u32) -> Signal {
        let n = self.len_for(ms);
        self.samples.extend(std::iter::repeat_n(0, n));
        self
    }

    /// A "word": a 200 Hz tone with harmonics, at `amplitude` (peak of the fundamental).
    fn word(mut self, ms: u32, amplitude: f32) -> Signal {
        let n = self.len_for(ms);
        let rate = self.rate as f32;
        self.samples.extend((0..n).map(|i| {
            let t = i as f32 / rate;
            let x = (2.0 * PI * 200.0 * t).sin()
                + 0.5 * (2.0 * PI * 400.0 * t).sin()
                + 0.3 * (2.0 * PI * 600.0 * t).sin();
            (amplitude * x) as i16
        }));
        self
    }

    fn tone(mut self, ms: u32, hz: f32, amplitude: f32) -> Signal {
        let n = self.len_for(ms);
        let rate = self.rate as f32;
        self.samples
            .extend((0..n).map(|i| (amplitude * (2.0 * PI * hz * i as f32 / rate).sin()) as i16));
        self
    }

    /// White noise of peak `amplitude` (mean absolute value about half of it).
    fn noise(mut self, ms: u32, amplitude: f32) -> Signal {
        let n = self.len_for(ms);
        for _ in 0..n {
            let x = self.noise.next();
            self.samples.push((amplitude * x) as i16);
        }
        self
    }

    /// Adds white noise of peak `amplitude` over everything so far.
    fn under_noise(mut self, amplitude: f32) -> Signal {
        for s in self.samples.iter_mut() {
            let x = self.noise.next();
            *s = (f32::from(*s) + amplitude * x).clamp(-32768.0, 32767.0) as i16;
        }
        self
    }

    /// Speech-like voice: harmonics of a pitch gliding from `f0_start` to `f0_end`, shaped by
    /// three formants, under a syllable envelope of `syllable_hz` (never fully silent, as
    /// connected speech).
    fn speech(mut self, ms: u32, f0_start: f32, f0_end: f32, syllable_hz: f32) -> Signal {
        let n = self.len_for(ms);
        let rate = self.rate as f32;
        let formants = [(700.0f32, 130.0f32), (1220.0, 70.0), (2600.0, 160.0)];
        let mut phase = 0.0f32;
        for i in 0..n {
            let t = i as f32 / rate;
            let f0 = f0_start + (f0_end - f0_start) * i as f32 / n as f32;
            phase += 2.0 * PI * f0 / rate;
            let mut x = 0.0;
            let mut h = 1;
            while (h as f32) * f0 < 3400.0 {
                let f = h as f32 * f0;
                let gain: f32 = formants
                    .iter()
                    .map(|(c, bw)| 1.0 / (1.0 + ((f - c) / bw).powi(2)))
                    .sum();
                x += gain * (h as f32 * phase).sin();
                h += 1;
            }
            let envelope = 0.55 + 0.45 * (2.0 * PI * syllable_hz * t).sin();
            self.samples.push((2500.0 * envelope * x) as i16);
        }
        self
    }

    /// White noise under a syllable envelope.
    fn modulated_noise(mut self, ms: u32, amplitude: f32, syllable_hz: f32) -> Signal {
        let n = self.len_for(ms);
        let rate = self.rate as f32;
        for i in 0..n {
            let envelope = 0.5 + 0.5 * (2.0 * PI * syllable_hz * i as f32 / rate).sin();
            let x = self.noise.next();
            self.samples.push((amplitude * envelope * x) as i16);
        }
        self
    }

    fn frames(&self) -> std::slice::Chunks<'_, i16> {
        self.samples.chunks((self.rate / 50) as usize)
    }
}

/// The classifier's verdict on `signal` followed by silence.
fn classify(settings: AmdSettings, signal: Signal) -> AmdVerdict {
    let rate = signal.rate;
    let padded = signal.silence(settings.total_analysis_time_ms + 100);
    let mut amd = AmdClassifier::new(settings, rate);
    padded
        .frames()
        .find_map(|f| amd.feed(f))
        .expect("a verdict within the analysis time")
}

fn beeps(settings: BeepSettings, signal: &Signal) -> Vec<BeepEvent> {
    let mut detector = BeepDetector::new(settings, signal.rate);
    signal.frames().filter_map(|f| detector.feed(f)).collect()
}

#[test]
fn silence_longer_than_the_initial_silence_is_a_machine() {
    let v = classify(AmdSettings::default(), Signal::new(RATE));
    assert_eq!(v.answered_by, AnsweredBy::Machine);
    assert_eq!(
        v.reason,
        AmdReason::InitialSilence {
            silence_ms: 2500,
            limit_ms: 2500
        }
    );
    assert_eq!(v.after_ms, 2500);
    assert_eq!(v.reason.to_string(), "INITIALSILENCE-2500-2500");
}

#[test]
fn a_short_hello_then_silence_is_a_person() {
    let v = classify(
        AmdSettings::default(),
        Signal::new(RATE).silence(300).word(400, 4000.0),
    );
    assert_eq!(v.answered_by, AnsweredBy::Human);
    assert_eq!(v.reason.to_string(), "HUMAN-800-800");
    assert_eq!(v.after_ms, 300 + 400 + 800);
}

#[test]
fn two_words_then_silence_are_a_person() {
    let v = classify(
        AmdSettings::default(),
        Signal::new(RATE)
            .silence(200)
            .word(250, 4000.0)
            .silence(200)
            .word(300, 4000.0),
    );
    assert_eq!(v.answered_by, AnsweredBy::Human, "{v:?}");
}

/// `n` words of 160 ms, 200 ms apart.
fn words(n: usize) -> Signal {
    let mut signal = Signal::new(RATE);
    for _ in 0..n {
        signal = signal.silence(200).word(160, 4000.0);
    }
    signal
}

#[test]
fn a_fourth_word_is_a_machine() {
    assert_eq!(
        classify(AmdSettings::default(), words(3)).answered_by,
        AnsweredBy::Human
    );
    let v = classify(AmdSettings::default(), words(4));
    assert_eq!(v.answered_by, AnsweredBy::Machine);
    assert_eq!(v.reason, AmdReason::MaxWords { words: 4, limit: 3 });
    // Decided on the fourth word's 100th millisecond.
    assert_eq!(v.after_ms, 3 * 360 + 200 + 100);
}

#[test]
fn maximum_number_of_words_sets_how_many_words_a_person_may_say() {
    // Asterisk's default: the third word is a machine.
    let settings = AmdSettings {
        maximum_number_of_words: 2,
        ..AmdSettings::default()
    };
    assert_eq!(classify(settings, words(2)).answered_by, AnsweredBy::Human);
    let v = classify(settings, words(3));
    assert_eq!(v.reason, AmdReason::MaxWords { words: 3, limit: 2 });
    assert_eq!(v.reason.to_string(), "MAXWORDS-3-2");
}

#[test]
fn pauses_shorter_than_between_words_silence_do_not_end_a_word() {
    // Six bursts 40 ms apart: one word of 600 ms, not six words.
    let mut signal = Signal::new(RATE).silence(200);
    for _ in 0..6 {
        signal = signal.word(100, 4000.0).silence(40);
    }
    let v = classify(AmdSettings::default(), signal);
    assert_eq!(v.answered_by, AnsweredBy::Human, "{v:?}");
}

#[test]
fn a_long_greeting_is_a_machine() {
    let v = classify(
        AmdSettings::default(),
        Signal::new(RATE)
            .silence(500)
            .speech(3000, 110.0, 140.0, 4.0),
    );
    assert_eq!(v.answered_by, AnsweredBy::Machine);
    assert_eq!(v.reason.code(), "LONGGREETING");
    assert_eq!(
        v.reason,
        AmdReason::LongGreeting {
            voice_ms: 1500,
            limit_ms: 1500
        }
    );
    // The speech starts at 500 ms; its softest frames are silence.
    assert!((2000..=2100).contains(&v.after_ms), "{v:?}");
}

#[test]
fn one_endless_word_is_a_machine_once_maximum_word_length_is_lowered() {
    let settings = AmdSettings {
        greeting_ms: 4000,
        maximum_word_length_ms: 1000,
        ..AmdSettings::default()
    };
    let v = classify(settings, Signal::new(RATE).silence(100).word(3000, 4000.0));
    assert_eq!(v.answered_by, AnsweredBy::Machine);
    assert_eq!(v.reason, AmdReason::MaxWordLength { word_ms: 1000 });
    assert_eq!(v.reason.to_string(), "MAXWORDLENGTH-1000");
}

#[test]
fn running_out_of_analysis_time_is_unsure() {
    // Short words with pauses under after_greeting_silence, never enough voice for a long
    // greeting.
    let settings = AmdSettings {
        maximum_number_of_words: 100,
        ..AmdSettings::default()
    };
    let mut signal = Signal::new(RATE).silence(200);
    for _ in 0..10 {
        signal = signal.word(120, 4000.0).silence(500);
    }
    let v = classify(settings, signal);
    assert_eq!(v.answered_by, AnsweredBy::Unsure);
    assert_eq!(v.reason, AmdReason::TooLong { total_ms: 5000 });
    assert!(v.answered_by.counts_as_human());
}

#[test]
fn sounds_shorter_than_a_word_are_not_words() {
    let mut signal = Signal::new(RATE);
    let mut amd = AmdClassifier::new(AmdSettings::default(), RATE);
    for _ in 0..15 {
        signal = signal.word(40, 4000.0).silence(300);
    }
    let verdict = signal.frames().find_map(|f| amd.feed(f));
    assert_eq!(amd.words(), 0);
    // Each click restarts the silence, as in Asterisk: neither an initial silence nor a
    // greeting, and the time runs out.
    assert_eq!(
        verdict.map(|v| v.reason),
        Some(AmdReason::TooLong { total_ms: 5000 })
    );
}

#[test]
fn a_quiet_sound_under_the_threshold_is_silence() {
    // A mean absolute value of about 180: under 256.
    let v = classify(
        AmdSettings::default(),
        Signal::new(RATE).silence(300).word(1000, 200.0),
    );
    assert_eq!(v.reason.code(), "INITIALSILENCE");
    let lower = AmdSettings {
        silence_threshold: 100,
        ..AmdSettings::default()
    };
    let v = classify(lower, Signal::new(RATE).silence(300).word(1000, 200.0));
    assert_eq!(v.answered_by, AnsweredBy::Human, "{v:?}");
}

#[test]
fn steady_line_noise_above_the_threshold_is_not_taken_for_voice() {
    // Noise of mean absolute value about 750 (three times the fixed threshold) from the start.
    let noisy = Signal::new(RATE).noise(3000, 1500.0);
    let v = classify(AmdSettings::default(), noisy.noise(3000, 1500.0));
    assert_eq!(v.answered_by, AnsweredBy::Machine);
    assert_eq!(v.reason.code(), "INITIALSILENCE");
    // A person saying hello on that line is still a person.
    let hello = Signal::new(RATE)
        .silence(400)
        .word(450, 9000.0)
        .silence(3000)
        .under_noise(1500.0);
    let v = classify(AmdSettings::default(), hello.noise(3000, 1500.0));
    assert_eq!(v.answered_by, AnsweredBy::Human, "{v:?}");
}

#[test]
fn the_rules_time_frames_of_sixteen_kilohertz_alike() {
    let v = classify(
        AmdSettings::default(),
        Signal::new(16_000).silence(300).word(400, 4000.0),
    );
    assert_eq!(v.answered_by, AnsweredBy::Human);
    assert_eq!(v.after_ms, 1500);
    let v = classify(AmdSettings::default(), Signal::new(16_000));
    assert_eq!(v.after_ms, 2500);
}

#[test]
fn verdicts_name_who_answered() {
    assert_eq!(AnsweredBy::Human.as_str(), "human");
    assert_eq!(AnsweredBy::Machine.as_str(), "machine");
    assert_eq!(AnsweredBy::Unsure.as_str(), "unsure");
    assert!(AnsweredBy::Human.counts_as_human());
    assert!(!AnsweredBy::Machine.counts_as_human());
    assert_eq!(
        AmdReason::MaxWords { words: 3, limit: 2 }.to_string(),
        "MAXWORDS-3-2"
    );
    assert_eq!(
        AmdReason::LongGreeting {
            voice_ms: 1500,
            limit_ms: 1500
        }
        .to_string(),
        "LONGGREETING-1500-1500"
    );
    assert_eq!(
        AmdReason::TooLong { total_ms: 5000 }.to_string(),
        "TOOLONG-5000"
    );
    assert_eq!(
        AmdReason::Beep { frequency_hz: 1000 }.to_string(),
        "BEEP-1000"
    );
}

fn assert_one_beep(events: &[BeepEvent], hz: f32, start_ms: u32, ms: u32) {
    let [
        BeepEvent::Started {
            frequency_hz,
            at_ms,
        },
        BeepEvent::Ended { duration_ms, .. },
    ] = events
    else {
        panic!("{hz} Hz: one beep expected, got {events:?}");
    };
    assert!(
        (*frequency_hz as f32 - hz).abs() <= 25.0,
        "{hz} Hz heard as {frequency_hz}"
    );
    assert!(at_ms.abs_diff(start_ms) <= 20, "{hz} Hz started at {at_ms}");
    assert!(
        duration_ms.abs_diff(ms) <= 40,
        "{hz} Hz lasted {duration_ms}"
    );
}

#[test]
fn beeps_are_heard_across_the_band() {
    for hz in [
        400.0, 440.0, 620.0, 850.0, 1000.0, 1025.0, 1370.6, 1400.0, 1776.7, 1990.0,
    ] {
        let signal = Signal::new(RATE)
            .silence(500)
            .tone(400, hz, 8000.0)
            .silence(500);
        assert_one_beep(&beeps(BeepSettings::default(), &signal), hz, 500, 400);
    }
}

#[test]
fn a_beep_of_150_ms_is_heard_whatever_its_alignment_with_frames() {
    for offset in [0, 5, 10, 13, 15, 19] {
        let mut signal = Signal::new(RATE).silence(500);
        signal.samples.extend(std::iter::repeat_n(0, offset * 8));
        let signal = signal.tone(150, 1000.0, 8000.0).silence(300);
        let events = beeps(BeepSettings::default(), &signal);
        assert_eq!(events.len(), 2, "offset {offset} ms: {events:?}");
    }
}

#[test]
fn beeps_are_heard_over_line_noise_and_at_sixteen_kilohertz() {
    let signal = Signal::new(RATE)
        .silence(300)
        .tone(500, 850.0, 6000.0)
        .silence(300)
        .under_noise(150.0);
    assert_one_beep(&beeps(BeepSettings::default(), &signal), 850.0, 300, 500);
    let wide = Signal::new(16_000)
        .silence(300)
        .tone(500, 1400.0, 6000.0)
        .silence(300);
    assert_one_beep(&beeps(BeepSettings::default(), &wide), 1400.0, 300, 500);
}

#[test]
fn short_faint_and_out_of_band_tones_are_not_beeps() {
    let short = Signal::new(RATE)
        .silence(200)
        .tone(80, 1000.0, 8000.0)
        .silence(200);
    assert_eq!(beeps(BeepSettings::default(), &short), []);
    // About -52 dBFS.
    let faint = Signal::new(RATE)
        .silence(200)
        .tone(500, 1000.0, 120.0)
        .silence(200);
    assert_eq!(beeps(BeepSettings::default(), &faint), []);
    for hz in [300.0, 2100.0, 2600.0] {
        let signal = Signal::new(RATE)
            .silence(200)
            .tone(500, hz, 8000.0)
            .silence(200);
        assert_eq!(beeps(BeepSettings::default(), &signal), [], "{hz} Hz");
    }
}

#[test]
fn two_tones_at_once_are_not_a_beep() {
    // A DTMF digit (770 + 1336 Hz) splits its energy between two filters.
    let mut signal = Signal::new(RATE).silence(200).tone(400, 770.0, 6000.0);
    let other = Signal::new(RATE).silence(200).tone(400, 1336.0, 6000.0);
    for (s, o) in signal.samples.iter_mut().zip(&other.samples) {
        *s = s.saturating_add(*o);
    }
    assert_eq!(beeps(BeepSettings::default(), &signal.silence(200)), []);
}

#[test]
fn speech_does_not_trigger_the_beep_detector() {
    let cases = [
        // Connected speech, pitch gliding up and down.
        Signal::new(RATE).speech(3000, 100.0, 160.0, 4.0),
        Signal::new(RATE).speech(3000, 220.0, 180.0, 5.0),
        // A sustained vowel at a nearly steady pitch.
        Signal::new(RATE).speech(1500, 120.0, 123.0, 0.5),
        Signal::new(RATE).speech(1500, 210.0, 212.0, 0.5),
        // Breath and fricatives: modulated noise.
        Signal::new(RATE).modulated_noise(3000, 8000.0, 4.0),
        Signal::new(RATE).noise(3000, 12000.0),
        // Words over noise.
        Signal::new(RATE)
            .word(300, 4000.0)
            .silence(100)
            .word(300, 4000.0)
            .under_noise(500.0),
    ];
    for (i, signal) in cases.iter().enumerate() {
        assert_eq!(beeps(BeepSettings::default(), signal), [], "case {i}");
    }
}

fn detect(signal: &Signal) -> (Vec<AmdEvent>, AnsweringMachineDetector) {
    let mut detector = AnsweringMachineDetector::new(AmdSettings::default(), signal.rate);
    let mut events = Vec::new();
    for frame in signal.frames() {
        detector.feed(frame, |e| events.push(e));
    }
    (events, detector)
}

#[test]
fn a_machine_is_followed_to_the_end_of_its_beep() {
    let signal = Signal::new(RATE)
        .silence(400)
        .speech(4000, 110.0, 140.0, 4.0)
        .silence(300)
        .tone(600, 1000.0, 8000.0)
        .silence(500);
    let (events, detector) = detect(&signal);
    assert_eq!(events.len(), 3, "{events:?}");
    let AmdEvent::Verdict(v) = events[0] else {
        panic!("{events:?}")
    };
    assert_eq!(v.answered_by, AnsweredBy::Machine);
    assert_eq!(v.reason.code(), "LONGGREETING");
    assert!(matches!(
        events[1],
        AmdEvent::Beep(BeepEvent::Started { .. })
    ));
    assert!(matches!(events[2], AmdEvent::Beep(BeepEvent::Ended { .. })));
    assert!(detector.finished());
}

#[test]
fn a_beep_before_any_verdict_is_a_machine() {
    let signal = Signal::new(RATE)
        .silence(300)
        .tone(500, 1400.0, 8000.0)
        .silence(300);
    let (events, _) = detect(&signal);
    let AmdEvent::Verdict(v) = events[0] else {
        panic!("{events:?}")
    };
    assert_eq!(v.answered_by, AnsweredBy::Machine);
    assert_eq!(v.reason.code(), "BEEP");
    assert!(matches!(
        events[1],
        AmdEvent::Beep(BeepEvent::Started { .. })
    ));
}

#[test]
fn after_a_person_nothing_more_is_listened_to() {
    let signal = Signal::new(RATE)
        .silence(300)
        .word(400, 4000.0)
        .silence(900)
        .tone(500, 1000.0, 8000.0)
        .silence(200);
    let (events, detector) = detect(&signal);
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(matches!(
        events[0],
        AmdEvent::Verdict(AmdVerdict {
            answered_by: AnsweredBy::Human,
            ..
        })
    ));
    assert!(detector.finished());
}

#[test]
fn a_machine_without_a_beep_is_listened_to_for_the_beep_window() {
    let (events, detector) = detect(&Signal::new(RATE).silence(BEEP_WINDOW_MS - 20));
    assert_eq!(events.len(), 1);
    assert!(!detector.finished());
    let (_, detector) = detect(&Signal::new(RATE).silence(BEEP_WINDOW_MS));
    assert!(detector.finished());
}

#[test]
fn who_answered_round_trips_through_its_name() {
    for who in AnsweredBy::ALL {
        assert_eq!(AnsweredBy::parse(who.as_str()), Some(who));
        assert_eq!(serde_json::to_value(who).unwrap(), who.as_str());
    }
    assert_eq!(AnsweredBy::parse("Human"), None);
}
