//! The voicemail beep: a steady single tone within a band, held for a minimum time, heard by a
//! bank of Goertzel filters over each 20 ms frame ([`BeepDetector`]). Pure like the rest of
//! the detection: the audio fed is its only clock.

/// What makes a tone a voicemail beep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BeepSettings {
    /// The lowest tone heard, in Hz.
    pub min_hz: u32,
    /// The highest tone heard, in Hz (below 2100 Hz, a fax or modem answering).
    pub max_hz: u32,
    /// How long the tone must hold. Frames are 20 ms and a tone rarely starts on a frame's
    /// edge, so 120 ms hears every beep of 150 ms or more.
    pub min_duration_ms: u32,
    /// The quietest tone heard, in dBFS (RMS).
    pub min_level_db: f32,
}

impl Default for BeepSettings {
    fn default() -> Self {
        BeepSettings {
            min_hz: 400,
            max_hz: 2000,
            min_duration_ms: 120,
            min_level_db: -45.0,
        }
    }
}

/// What the beep detector heard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BeepEvent {
    /// A tone has held for the minimum duration; `at_ms` is when it started.
    Started { frequency_hz: u32, at_ms: u32 },
    /// The tone stopped (time to speak); `at_ms` is when.
    Ended {
        frequency_hz: u32,
        at_ms: u32,
        duration_ms: u32,
    },
}

/// The filter bank's spacing: the spectral resolution of a 20 ms frame (1 / 20 ms), so a tone
/// anywhere in the band falls within half a bin of a filter.
const BIN_HZ: f32 = 50.0;
/// Filters at most (400-2000 Hz takes 33).
const MAX_BINS: usize = 64;
/// The share of a frame's energy the strongest filter and its stronger neighbour must hold.
/// A pure tone holds 0.8-1.0 wherever it falls between two filters; voiced speech spreads
/// over its harmonics and formants.
const MIN_PURITY: f32 = 0.7;
/// How far the tone's frequency may wander within one beep.
const FREQ_TOLERANCE_HZ: f32 = 25.0;
/// How far its level may wander from the first frame's, in dB (a frame half filled by the tone,
/// at either end, is 3 dB down).
const LEVEL_TOLERANCE_DB: f32 = 6.0;

/// Hears a voicemail beep: a steady single tone within a band, held for a minimum time. Each
/// 20 ms frame goes through a bank of Goertzel filters 50 Hz apart; a frame is tonal when one
/// filter (with its stronger neighbour) holds most of the frame's energy, and a beep is a run
/// of tonal frames at the same frequency (within 25 Hz) and level (within 6 dB). Speech, even a
/// sustained vowel, spreads over several harmonics and glides in pitch, so it does not hold
/// such a run.
#[derive(Debug, Clone)]
pub struct BeepDetector {
    settings: BeepSettings,
    samples_per_ms: u32,
    /// The filters' frequencies and Goertzel coefficients (2 cos ω).
    bins: usize,
    freqs: [f32; MAX_BINS],
    coeffs: [f32; MAX_BINS],
    elapsed_ms: u32,
    run: Option<Run>,
}

/// A run of tonal frames.
#[derive(Debug, Clone, Copy)]
struct Run {
    started_ms: u32,
    ms: u32,
    frequency_hz: f32,
    level_db: f32,
    reported: bool,
}

impl BeepDetector {
    pub fn new(settings: BeepSettings, sample_rate: u32) -> BeepDetector {
        let rate = sample_rate.max(1) as f32;
        let mut freqs = [0.0; MAX_BINS];
        let mut coeffs = [0.0; MAX_BINS];
        let mut bins = 0;
        let mut f = settings.min_hz as f32;
        while f <= settings.max_hz as f32 && f < rate / 2.0 && bins < MAX_BINS {
            freqs[bins] = f;
            coeffs[bins] = 2.0 * (2.0 * std::f32::consts::PI * f / rate).cos();
            bins += 1;
            f += BIN_HZ;
        }
        BeepDetector {
            settings,
            samples_per_ms: (sample_rate / 1000).max(1),
            bins,
            freqs,
            coeffs,
            elapsed_ms: 0,
            run: None,
        }
    }

    /// Whether a beep is sounding now (reported as started and not yet ended).
    pub fn sounding(&self) -> bool {
        self.run.is_some_and(|r| r.reported)
    }

    /// Analyses one 20 ms frame; answers what it changed.
    pub fn feed(&mut self, frame: &[i16]) -> Option<BeepEvent> {
        let ms = (frame.len() as u32 / self.samples_per_ms).max(1);
        let at = self.elapsed_ms;
        self.elapsed_ms += ms;
        let tone = self.tone(frame);
        let continues = match (self.run, tone) {
            (Some(run), Some((hz, db))) => {
                (hz - run.frequency_hz).abs() <= FREQ_TOLERANCE_HZ
                    && (db - run.level_db).abs() <= LEVEL_TOLERANCE_DB
            }
            _ => false,
        };
        if continues && let Some(run) = self.run.as_mut() {
            run.ms += ms;
            if !run.reported && run.ms >= self.settings.min_duration_ms {
                run.reported = true;
                return Some(BeepEvent::Started {
                    frequency_hz: run.frequency_hz.round() as u32,
                    at_ms: run.started_ms,
                });
            }
            return None;
        }
        let ended = self
            .run
            .take()
            .filter(|r| r.reported)
            .map(|r| BeepEvent::Ended {
                frequency_hz: r.frequency_hz.round() as u32,
                at_ms: at,
                duration_ms: r.ms,
            });
        self.run = tone.map(|(frequency_hz, level_db)| Run {
            started_ms: at,
            ms,
            frequency_hz,
            level_db,
            reported: false,
        });
        ended
    }

    /// The frame's tone (frequency in Hz, level in dBFS), if it is one.
    fn tone(&self, frame: &[i16]) -> Option<(f32, f32)> {
        let n = frame.len();
        if n == 0 || self.bins == 0 {
            return None;
        }
        let energy: f32 = frame.iter().map(|&s| f32::from(s) * f32::from(s)).sum();
        let level_db = 10.0 * (energy / n as f32 / (32768.0 * 32768.0)).max(1e-12).log10();
        if level_db < self.settings.min_level_db {
            return None;
        }
        // Each filter's share of the energy: a sine that fills the frame, centred on a filter,
        // gives 1.
        let scale = 2.0 / (n as f32 * energy);
        let mut shares = [0.0f32; MAX_BINS];
        let mut peak = 0;
        for k in 0..self.bins {
            let c = self.coeffs[k];
            let (mut s1, mut s2) = (0.0f32, 0.0f32);
            for &x in frame {
                let s0 = f32::from(x) + c * s1 - s2;
                s2 = s1;
                s1 = s0;
            }
            shares[k] = (s1 * s1 + s2 * s2 - c * s1 * s2).max(0.0) * scale;
            if shares[k] > shares[peak] {
                peak = k;
            }
        }
        let below = if peak > 0 { shares[peak - 1] } else { 0.0 };
        let above = if peak + 1 < self.bins {
            shares[peak + 1]
        } else {
            0.0
        };
        if shares[peak] + below.max(above) < MIN_PURITY {
            return None;
        }
        // Where between the filters the tone lies: a parabola through the three magnitudes.
        let (a, b, c) = (below.sqrt(), shares[peak].sqrt(), above.sqrt());
        let curve = a - 2.0 * b + c;
        let offset = if curve < 0.0 {
            (0.5 * (a - c) / curve).clamp(-0.5, 0.5)
        } else {
            0.0
        };
        Some((self.freqs[peak] + offset * BIN_HZ, level_db))
    }
}
