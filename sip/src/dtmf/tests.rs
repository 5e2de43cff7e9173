//! Digits through their three forms: the event payload, the sender's frames, and tones heard
//! in audio (made here, mixed with noise and speech, and in the project's recorded sentences).

use super::tones::{ToneDetector, tone};
use super::*;

const RATE: u32 = 8000;
const FRAME: usize = 160;

fn digits(keys: &str) -> Vec<Digit> {
    Digit::parse_all(keys).unwrap()
}

/// Every digit the detector hears in `audio`, frame by frame.
fn heard(audio: &[i16], rate: u32) -> String {
    let frame = rate as usize / 50;
    let mut detector = ToneDetector::new(rate);
    audio
        .chunks_exact(frame)
        .filter_map(|f| detector.feed(f))
        .map(Digit::as_char)
        .collect()
}

/// `keys` as tones of `ms` each with `gap_ms` of silence between, starting `offset` samples
/// into a frame.
fn keyed(keys: &str, ms: usize, gap_ms: usize, offset: usize, rate: u32) -> Vec<i16> {
    let per_ms = rate as usize / 1000;
    let mut audio = vec![0i16; offset];
    for digit in digits(keys) {
        let mut t = vec![0i16; ms * per_ms];
        tone(digit, 0, rate, &mut t);
        audio.extend(t);
        audio.extend(std::iter::repeat_n(0, gap_ms * per_ms));
    }
    audio.extend(std::iter::repeat_n(0, FRAME));
    audio
}

#[test]
fn digits_read_from_keys_and_event_codes() {
    assert_eq!(digits("0123456789*#abcd").len(), 16);
    for digit in digits(KEYS) {
        assert_eq!(Digit::from_event_code(digit.event_code()), Some(digit));
    }
    assert_eq!(Digit::from_char('#').unwrap().event_code(), 11);
    assert_eq!(Digit::from_char('*').unwrap().event_code(), 10);
    assert_eq!(Digit::from_event_code(16), None);
    assert_eq!(Digit::parse_all("12x3"), Err('x'));
    assert_eq!(
        Digit::from_char('5').unwrap().frequencies(),
        (770.0, 1336.0)
    );
}

#[test]
fn an_event_payload_round_trips() {
    let event = Event {
        code: 11,
        end: true,
        volume: 10,
        duration: 800,
    };
    assert_eq!(event.to_bytes(), [11, 0x8a, 0x03, 0x20]);
    assert_eq!(Event::parse(&event.to_bytes()), Some(event));
    assert_eq!(Event::parse(&[1, 2, 3]), None);
}

#[test]
fn one_digit_per_event_however_many_packets() {
    let mut reader = EventReader::default();
    let start = |code, end, duration| {
        Event {
            code,
            end,
            volume: 10,
            duration,
        }
        .to_bytes()
    };
    assert_eq!(
        reader.read(1000, &start(1, false, 160)),
        Digit::from_char('1')
    );
    assert_eq!(reader.read(1000, &start(1, false, 320)), None);
    for _ in 0..3 {
        assert_eq!(reader.read(1000, &start(1, true, 800)), None);
    }
    // The same key again is a new event: a new timestamp.
    assert_eq!(
        reader.read(2600, &start(1, true, 800)),
        Digit::from_char('1')
    );
    assert_eq!(
        reader.read(4200, &start(11, false, 160)),
        Digit::from_char('#')
    );
    // Flash (16) and a short payload are not digits.
    assert_eq!(reader.read(5800, &start(16, false, 160)), None);
    assert_eq!(reader.read(7400, &[1, 0]), None);
}

#[test]
fn the_sender_plays_each_digit_then_a_gap() {
    let mut sender = DigitSender::default();
    sender.push(&digits("4#"));
    let mut frames = Vec::new();
    let mut ts = 5000u32;
    while let Some(frame) = sender.next_frame(ts) {
        frames.push(frame);
        ts = ts.wrapping_add(160);
    }
    assert!(sender.idle());
    let per_digit = (DIGIT_FRAMES + 2 + GAP_FRAMES) as usize;
    assert_eq!(frames.len(), 2 * per_digit);
    let four = &frames[..per_digit];
    // Five frames of tone, all of one event that starts at the first frame's timestamp.
    let events: Vec<_> = four.iter().filter_map(|f| f.event).collect();
    assert_eq!(events.len(), 7);
    assert!(events.iter().all(|(e, at, _)| e.code == 4 && *at == 5000));
    assert!(events[0].2 && !events[1].2, "the marker is on the first");
    let durations: Vec<u16> = events.iter().map(|(e, ..)| e.duration).collect();
    assert_eq!(durations, [160, 320, 480, 640, 800, 800, 800]);
    let ends: Vec<bool> = events.iter().map(|(e, ..)| e.end).collect();
    assert_eq!(ends, [false, false, false, false, true, true, true]);
    let tones = four
        .iter()
        .filter(|f| matches!(f.sent, Sent::Tone(..)))
        .count();
    assert_eq!(tones, DIGIT_FRAMES as usize);
    let hash = frames[per_digit].event.unwrap();
    assert_eq!(hash.0.code, 11);
    assert_eq!(hash.1, 5000 + 160 * per_digit as u32);
}

#[test]
fn tones_are_heard_once_each_at_either_rate() {
    for rate in [8000, 16000] {
        for offset in [0, 37, 80, 151] {
            let audio = keyed(
                "0123456789*#ABCD",
                70,
                50,
                offset * rate as usize / 8000,
                rate,
            );
            assert_eq!(
                heard(&audio, rate),
                "0123456789*#ABCD",
                "{rate} Hz at {offset}"
            );
        }
    }
}

#[test]
fn a_key_held_long_is_one_digit_and_pressed_twice_is_two() {
    assert_eq!(heard(&keyed("7", 1500, 0, 0, RATE), RATE), "7");
    assert_eq!(heard(&keyed("77", 80, 60, 0, RATE), RATE), "77");
}

#[test]
fn the_sender_s_tones_are_heard_as_its_digits() {
    let mut sender = DigitSender::default();
    sender.push(&digits("90#"));
    let mut audio = Vec::new();
    while let Some(frame) = sender.next_frame(0) {
        let mut out = [0i16; FRAME];
        if let Sent::Tone(digit, index) = frame.sent {
            tone(digit, index, RATE, &mut out);
        }
        audio.extend(out);
    }
    assert_eq!(heard(&audio, RATE), "90#");
}

#[test]
fn a_tone_under_noise_is_still_heard_and_a_lone_tone_is_not_a_digit() {
    let mut audio = keyed("5", 100, 0, 0, RATE);
    let mut state = 1u32;
    for s in audio.iter_mut() {
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        let noise = ((state >> 16) as i16 as i32) / 40;
        *s = (*s as i32 + noise).clamp(-32768, 32767) as i16;
    }
    assert_eq!(heard(&audio, RATE), "5");
    // One of a digit's two frequencies alone (a beep) is no digit.
    let beep: Vec<i16> = (0..4000)
        .map(|i| (12000.0 * (std::f32::consts::TAU * 941.0 * i as f32 / 8000.0).sin()) as i16)
        .collect();
    assert_eq!(heard(&beep, RATE), "");
}

#[test]
fn recorded_speech_holds_no_digits() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../speech/sentences");
    let mut files = 0;
    for dir in [dir.clone(), dir.join("caller")] {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "wav") {
                continue;
            }
            let mut reader = hound::WavReader::open(&path).unwrap();
            let rate = reader.spec().sample_rate;
            let samples: Vec<i16> = reader.samples::<i16>().map(|s| s.unwrap()).collect();
            assert_eq!(heard(&samples, rate), "", "{}", path.display());
            files += 1;
        }
    }
    assert!(files >= 16, "{files} recordings");
}
