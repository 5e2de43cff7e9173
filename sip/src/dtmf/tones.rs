//! Digits as tones in the audio: the detector that hears them in a caller's frames, and the
//! tone a digit sends when the peer takes no `telephone-event`.
//!
//! A frame is a digit's when one row and one column frequency together hold most of its energy,
//! each clearly above its neighbours and within [`MAX_TWIST_DB`] of the other (Goertzel filters
//! at the eight frequencies, as the voicemail beep's detector uses). A digit is heard once it
//! holds for two frames (40 ms, the shortest a keypad tone lasts), and once only, however long
//! the key is held; a frame that is not it (20 ms) lets the same key count again, as a pause
//! between two presses is at least 40 ms.

use super::{COLUMN_HZ, Digit, KEYPAD, ROW_HZ};

/// The quietest frame that may hold a digit, in dBFS (RMS): below it the filters are not run.
const MIN_LEVEL_DB: f32 = -36.0;
/// The share of a frame's energy its row and column tones must hold together.
const MIN_PURITY: f32 = 0.7;
/// How far the two tones' levels may differ (the twist), in dB.
const MAX_TWIST_DB: f32 = 8.0;
/// How far below the strongest filter of its group every other one must be (as a power ratio:
/// 6 dB).
const MAX_NEIGHBOUR: f32 = 0.25;
/// Frames a digit must hold before it is heard.
const HOLD_FRAMES: u32 = 2;

/// Hears keypad tones in a caller's audio.
#[derive(Debug, Clone)]
pub struct ToneDetector {
    /// Goertzel coefficients (2 cos ω): the rows, then the columns.
    coeffs: [f32; 8],
    /// The digit heard and still sounding.
    held: Option<Digit>,
    /// A digit seen in the last frames, not yet heard, and for how many.
    candidate: Option<(Digit, u32)>,
}

impl ToneDetector {
    pub fn new(sample_rate: u32) -> ToneDetector {
        let rate = sample_rate.max(1) as f32;
        let mut coeffs = [0.0; 8];
        for (c, hz) in coeffs.iter_mut().zip(ROW_HZ.iter().chain(&COLUMN_HZ)) {
            *c = 2.0 * (2.0 * std::f32::consts::PI * hz / rate).cos();
        }
        ToneDetector {
            coeffs,
            held: None,
            candidate: None,
        }
    }

    /// Forgets what it has heard so far (what follows is a new stream).
    pub fn reset(&mut self) {
        self.held = None;
        self.candidate = None;
    }

    /// Analyses one frame; the digit it completes, if it completes one.
    pub fn feed(&mut self, frame: &[i16]) -> Option<Digit> {
        let seen = self.classify(frame);
        if seen.is_some() && seen == self.held {
            return None;
        }
        self.held = None;
        let Some(digit) = seen else {
            self.candidate = None;
            return None;
        };
        let count = match self.candidate {
            Some((d, n)) if d == digit => n + 1,
            _ => 1,
        };
        if count >= HOLD_FRAMES {
            self.candidate = None;
            self.held = Some(digit);
            return Some(digit);
        }
        self.candidate = Some((digit, count));
        None
    }

    /// The digit whose two tones fill the frame, if one does.
    fn classify(&self, frame: &[i16]) -> Option<Digit> {
        let n = frame.len();
        if n == 0 {
            return None;
        }
        let energy: f32 = frame.iter().map(|&s| f32::from(s) * f32::from(s)).sum();
        let level_db = 10.0 * (energy / n as f32 / (32768.0 * 32768.0)).max(1e-12).log10();
        if level_db < MIN_LEVEL_DB {
            return None;
        }
        // Each filter's share of the frame's energy: a sine that fills the frame at a filter's
        // frequency gives 1, each tone of an even digit 0.5. The eight filters run side by
        // side in one pass over the frame (their states are lanes of one vector).
        let scale = 2.0 / (n as f32 * energy);
        let (mut s1, mut s2) = ([0.0f32; 8], [0.0f32; 8]);
        for &x in frame {
            let x = f32::from(x);
            for k in 0..8 {
                let s0 = x + self.coeffs[k] * s1[k] - s2[k];
                s2[k] = s1[k];
                s1[k] = s0;
            }
        }
        let mut shares = [0.0f32; 8];
        for k in 0..8 {
            let c = self.coeffs[k];
            shares[k] = (s1[k] * s1[k] + s2[k] * s2[k] - c * s1[k] * s2[k]).max(0.0) * scale;
        }
        let (rows, columns) = shares.split_at(4);
        let row = strongest(rows)?;
        let column = strongest(columns)?;
        let (r, c) = (rows[row], columns[column]);
        if r + c < MIN_PURITY {
            return None;
        }
        let twist_db = 10.0 * (c / r).log10();
        if twist_db.abs() > MAX_TWIST_DB {
            return None;
        }
        Digit::from_char(KEYPAD[row][column])
    }
}

/// The strongest filter of a group, when every other is well below it.
fn strongest(shares: &[f32]) -> Option<usize> {
    let (best, &peak) = shares
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))?;
    let clear = shares
        .iter()
        .enumerate()
        .all(|(i, &s)| i == best || s <= peak * MAX_NEIGHBOUR);
    (peak > 0.0 && clear).then_some(best)
}

/// The peak of each of a sent digit's two tones: -12 dBFS each, -6 dBFS together, loud enough
/// for any IVR and short of clipping.
const TONE_AMPLITUDE: f32 = 8_200.0;

/// Fills `out` with frame `index` of `digit`'s tone at `sample_rate` (the phase runs on from
/// the frame before, so the frames join without a click).
pub fn tone(digit: Digit, index: u32, sample_rate: u32, out: &mut [i16]) {
    let (low, high) = digit.frequencies();
    let rate = sample_rate.max(1) as f32;
    let first = index as usize * out.len();
    for (i, sample) in out.iter_mut().enumerate() {
        let t = (first + i) as f32 / rate;
        let w = std::f32::consts::TAU * t;
        let x = (w * low).sin() + (w * high).sin();
        *sample = (TONE_AMPLITUDE * x) as i16;
    }
}
