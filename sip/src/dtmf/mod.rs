//! Keypad digits (DTMF) on a call's media: the digits themselves ([`Digit`]), the RFC 4733
//! `telephone-event` payload they travel in when both sides offered it ([`Event`], read by
//! [`EventReader`]), the tones they are when they travel in the audio (heard by
//! [`tones::ToneDetector`], made by [`tones::tone`]), and the sender that plays digits out a frame
//! at a time, as events or as tones ([`DigitSender`]).

use std::collections::VecDeque;

#[cfg(test)]
mod tests;
pub mod tones;

/// One key of a telephone keypad: `0`-`9`, `*`, `#` and the rarely seen `A`-`D`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Digit(char);

/// The keypad, row by row: a key's row and column give its two frequencies.
pub(crate) const KEYPAD: [[char; 4]; 4] = [
    ['1', '2', '3', 'A'],
    ['4', '5', '6', 'B'],
    ['7', '8', '9', 'C'],
    ['*', '0', '#', 'D'],
];

/// The low (row) frequencies of DTMF, in Hz.
pub(crate) const ROW_HZ: [f32; 4] = [697.0, 770.0, 852.0, 941.0];
/// The high (column) frequencies of DTMF, in Hz.
pub(crate) const COLUMN_HZ: [f32; 4] = [1209.0, 1336.0, 1477.0, 1633.0];

/// The keys a digit string may hold, as a flow or the API writes them.
pub const KEYS: &str = "0123456789*#ABCD";

impl Digit {
    /// The digit of a key (`a`-`d` read as `A`-`D`); none for anything else.
    pub fn from_char(c: char) -> Option<Digit> {
        let c = c.to_ascii_uppercase();
        KEYS.contains(c).then_some(Digit(c))
    }

    /// Every digit of `keys`, or the first character that is not a key.
    pub fn parse_all(keys: &str) -> Result<Vec<Digit>, char> {
        keys.chars().map(|c| Digit::from_char(c).ok_or(c)).collect()
    }

    pub fn as_char(self) -> char {
        self.0
    }

    /// The RFC 4733 event code: 0-9, `*` 10, `#` 11, `A`-`D` 12-15.
    pub fn event_code(self) -> u8 {
        match self.0 {
            '*' => 10,
            '#' => 11,
            c @ '0'..='9' => c as u8 - b'0',
            c => c as u8 - b'A' + 12,
        }
    }

    /// The digit of an RFC 4733 event code; none for the other events (flash, tones).
    pub fn from_event_code(code: u8) -> Option<Digit> {
        KEYS.chars().nth(usize::from(code)).map(Digit)
    }

    /// Its two frequencies (row, column), in Hz.
    pub fn frequencies(self) -> (f32, f32) {
        for (r, row) in KEYPAD.iter().enumerate() {
            if let Some(c) = row.iter().position(|k| *k == self.0) {
                return (ROW_HZ[r], COLUMN_HZ[c]);
            }
        }
        (0.0, 0.0)
    }
}

impl std::fmt::Display for Digit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// One RFC 4733 event packet's payload (section 2.3): the event, whether it has ended, its
/// volume (0 to -63 dBm0) and its duration so far, in RTP timestamp units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub code: u8,
    pub end: bool,
    pub volume: u8,
    pub duration: u16,
}

impl Event {
    /// Reads a payload; none when it is shorter than the four bytes an event takes.
    pub fn parse(payload: &[u8]) -> Option<Event> {
        let [code, flags, hi, lo, ..] = *payload else {
            return None;
        };
        Some(Event {
            code,
            end: flags & 0x80 != 0,
            volume: flags & 0x3f,
            duration: u16::from_be_bytes([hi, lo]),
        })
    }

    pub fn to_bytes(self) -> [u8; 4] {
        let flags = (u8::from(self.end) << 7) | (self.volume & 0x3f);
        let [hi, lo] = self.duration.to_be_bytes();
        [self.code, flags, hi, lo]
    }
}

/// Turns a caller's event packets into digits: one digit per event, however many packets
/// carry it (an event's packets share its start timestamp; its end packet comes three times).
#[derive(Debug, Default)]
pub struct EventReader {
    last: Option<(u32, u8)>,
}

impl EventReader {
    /// The digit a packet with this RTP `timestamp` and `payload` begins, if it begins one.
    pub fn read(&mut self, timestamp: u32, payload: &[u8]) -> Option<Digit> {
        let event = Event::parse(payload)?;
        let digit = Digit::from_event_code(event.code)?;
        if self.last == Some((timestamp, event.code)) {
            return None;
        }
        self.last = Some((timestamp, event.code));
        Some(digit)
    }
}

/// How long a sent digit sounds, in 20 ms frames (100 ms: what a carrier's IVR takes surely).
pub const DIGIT_FRAMES: u32 = 5;
/// The silence after a sent digit, in frames, before the next one.
pub const GAP_FRAMES: u32 = 4;
/// How many times the end packet of a sent event goes out (RFC 4733 section 2.5.1.4).
const END_PACKETS: u32 = 3;
/// The volume sent digits are marked with, in -dBm0 (RFC 4733's example level).
const VOLUME: u8 = 10;
/// RTP timestamp units per frame.
const FRAME_UNITS: u16 = 160;

/// What the sender puts on the line for one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// A frame of the digit's tone (sent as audio when the peer takes no events, and written
    /// into the recording either way).
    Tone(Digit, u32),
    /// The silence between digits.
    Gap,
}

/// One frame of digits being sent: what sounds, and the event packet to send instead of audio
/// when the peer takes events, with its start timestamp and whether it is the event's first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    pub sent: Sent,
    pub event: Option<(Event, u32, bool)>,
}

/// Digits queued to send, played out a frame at a time: each sounds [`DIGIT_FRAMES`] frames,
/// then its end packet goes twice more, then [`GAP_FRAMES`] of silence.
#[derive(Debug, Default)]
pub struct DigitSender {
    queue: VecDeque<Digit>,
    /// The digit sounding, the frame it is at, and the timestamp it started at.
    current: Option<(Digit, u32, u32)>,
}

impl DigitSender {
    pub fn push(&mut self, digits: &[Digit]) {
        self.queue.extend(digits.iter().copied());
    }

    /// Whether nothing is queued or sounding.
    pub fn idle(&self) -> bool {
        self.current.is_none() && self.queue.is_empty()
    }

    /// The next frame, if digits are being sent; `timestamp` is the RTP timestamp of this
    /// frame's packet.
    pub fn next_frame(&mut self, timestamp: u32) -> Option<Frame> {
        if self.current.is_none() {
            let digit = self.queue.pop_front()?;
            self.current = Some((digit, 0, timestamp));
        }
        let (digit, frame, started) = self.current?;
        let last = DIGIT_FRAMES + END_PACKETS - 2 + GAP_FRAMES;
        self.current = (frame < last).then_some((digit, frame + 1, started));
        if frame >= DIGIT_FRAMES + END_PACKETS - 1 {
            return Some(Frame {
                sent: Sent::Gap,
                event: None,
            });
        }
        let sounding = frame.min(DIGIT_FRAMES - 1);
        let duration = FRAME_UNITS * (sounding as u16 + 1);
        let event = Event {
            code: digit.event_code(),
            end: frame + 1 >= DIGIT_FRAMES,
            volume: VOLUME,
            duration,
        };
        let sent = if frame < DIGIT_FRAMES {
            Sent::Tone(digit, frame)
        } else {
            Sent::Gap
        };
        Some(Frame {
            sent,
            event: Some((event, started, frame == 0)),
        })
    }
}
