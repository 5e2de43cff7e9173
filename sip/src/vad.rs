//! Voice activity detection on a call's incoming audio: when the caller starts and stops
//! speaking, from the energy of 20 ms frames.

/// How a caller's speech is told from silence.
#[derive(Debug, Clone, Copy)]
pub struct VadSettings {
    /// Speech must last this long before it counts as the caller speaking.
    pub start_secs: f64,
    /// Silence must last this long before the caller counts as done.
    pub stop_secs: f64,
    /// 0-1: how sure a frame must be to count as speech (higher ignores more noise).
    pub confidence: f64,
}

impl Default for VadSettings {
    fn default() -> Self {
        VadSettings {
            start_secs: 0.2,
            stop_secs: 0.8,
            confidence: 0.7,
        }
    }
}

/// Energy-based voice activity detection over 20 ms frames. A frame's speech probability grows
/// linearly from 0 at 6 dB above the noise floor to 1 at 36 dB above it; the floor follows the
/// quietest recent frames and rises slowly, so steady line noise is not taken for speech.
#[derive(Debug, Clone)]
pub struct Vad {
    settings: VadSettings,
    floor_db: f64,
    run_speech: f64,
    run_silence: f64,
    speaking: bool,
}

/// What one frame changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VadChange {
    Started,
    Stopped,
}

const FRAME_SECS: f64 = 0.02;

impl Vad {
    pub fn new(settings: VadSettings) -> Vad {
        Vad {
            settings,
            floor_db: -70.0,
            run_speech: 0.0,
            run_silence: 0.0,
            speaking: false,
        }
    }

    pub fn speaking(&self) -> bool {
        self.speaking
    }

    /// How long the audio has been silent (0 while it is speech).
    pub fn silence_secs(&self) -> f64 {
        self.run_silence
    }

    /// The speech probability of one frame, after updating the noise floor.
    pub fn probability(&mut self, frame: &[i16]) -> f64 {
        let db = level_db(frame);
        if db < self.floor_db {
            self.floor_db = db.max(-90.0);
        } else {
            // About 1.5 dB per second, and never above a level that would hide speech.
            self.floor_db = (self.floor_db + 0.03).min(-45.0);
        }
        ((db - self.floor_db - 6.0) / 30.0).clamp(0.0, 1.0)
    }

    pub fn feed(&mut self, frame: &[i16]) -> Option<VadChange> {
        let speech = self.probability(frame) >= self.settings.confidence;
        if speech {
            self.run_speech += FRAME_SECS;
            self.run_silence = 0.0;
            if !self.speaking && self.run_speech + 1e-9 >= self.settings.start_secs {
                self.speaking = true;
                return Some(VadChange::Started);
            }
        } else {
            self.run_silence += FRAME_SECS;
            self.run_speech = 0.0;
            if self.speaking && self.run_silence + 1e-9 >= self.settings.stop_secs {
                self.speaking = false;
                return Some(VadChange::Stopped);
            }
        }
        None
    }
}

/// A frame's RMS level in dBFS (-100 for digital silence).
pub fn level_db(frame: &[i16]) -> f64 {
    if frame.is_empty() {
        return -100.0;
    }
    let sum: f64 = frame.iter().map(|&s| f64::from(s) * f64::from(s)).sum();
    let rms = (sum / frame.len() as f64).sqrt();
    if rms < 1.0 {
        -100.0
    } else {
        20.0 * (rms / 32768.0).log10()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn tone(n: usize, amplitude: f64, rate: f64) -> Vec<i16> {
        (0..n)
            .map(|i| {
                (amplitude * (2.0 * std::f64::consts::PI * 440.0 * i as f64 / rate).sin()) as i16
            })
            .collect()
    }

    #[test]
    fn vad_waits_for_start_and_stop_durations() {
        let mut vad = Vad::new(VadSettings {
            start_secs: 0.1,
            stop_secs: 0.2,
            confidence: 0.5,
        });
        let quiet = vec![0i16; 160];
        let loud = tone(160, 8000.0, 8000.0);
        for _ in 0..20 {
            assert_eq!(vad.feed(&quiet), None);
        }
        let changes: Vec<_> = (0..5).map(|_| vad.feed(&loud)).collect();
        assert_eq!(changes[..4], [None, None, None, None]);
        assert_eq!(changes[4], Some(VadChange::Started));
        let changes: Vec<_> = (0..10).map(|_| vad.feed(&quiet)).collect();
        assert_eq!(changes.iter().flatten().count(), 1);
        assert_eq!(changes[9], Some(VadChange::Stopped));
    }

    #[test]
    fn vad_confidence_sets_how_loud_speech_must_be() {
        let soft = tone(160, 300.0, 8000.0); // about -41 dBFS
        let mut strict = Vad::new(VadSettings {
            start_secs: 0.02,
            stop_secs: 0.2,
            confidence: 0.95,
        });
        let mut lenient = Vad::new(VadSettings {
            start_secs: 0.02,
            stop_secs: 0.2,
            confidence: 0.3,
        });
        assert_eq!(strict.feed(&soft), None);
        assert_eq!(lenient.feed(&soft), Some(VadChange::Started));
    }
}
