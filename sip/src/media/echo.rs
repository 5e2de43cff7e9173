//! Echo of the agent's own voice in the caller's audio (a speakerphone, a line without echo
//! cancelling, an echo test number), taken out before the caller's audio is judged.
//!
//! The session keeps the last [`TAIL_FRAMES`] frames it sent, as the far end decodes them.
//! For each caller frame it finds the sent frame that explains most of it (the normalized
//! correlation over every delay of whole frames, which is how a packet echo returns). A frame
//! that is all echo (the rest below [`ECHO_ONLY`] of it) goes on as silence, and gives the
//! echo path (its delay and gain); a frame with more in it has the echo subtracted along that
//! path, so what the far end says over the echo is left. The VAD, the caller's
//! capture and answering-machine detection hear the result, so an echo never counts as the
//! caller speaking and never interrupts the agent; the recording keeps what the line carried.
//!
//! Work is done only while the agent's audio could still be echoing: within the tail after
//! the last frame that was not silence. The frames are kept only then.

/// How far back an echo is looked for: 640 ms of 20 ms frames.
pub const TAIL_FRAMES: usize = 32;

/// A caller frame whose energy is at least this share echo is echo alone: what is left is
/// 25 dB or more below the echo (a packet echo leaves its codec's noise, about 38 dB below; a
/// caller speaking over the echo is far above it).
const ECHO_ONLY: f64 = 0.997;

/// The agent's recent audio, and the echo found in the caller's.
#[derive(Debug, Default)]
pub struct EchoCanceller {
    /// The last sent frames, oldest first from `head` (a ring of `TAIL_FRAMES` frames); empty
    /// while nothing could be echoing.
    sent: Vec<i16>,
    /// Each kept frame's energy.
    energy: Vec<i64>,
    head: usize,
    frame: usize,
    /// Frames sent since the last one that was not silence.
    quiet: usize,
    /// The echo path, as last found from the echo alone: how many frames back, at what gain.
    /// A path keeps its delay and level, so speech over the echo is cancelled with them.
    path: Option<(usize, f64)>,
    /// Caller frames that were echo alone, and frames with echo taken out.
    pub echo_frames: u64,
    pub cancelled_frames: u64,
}

fn dot(a: &[i16], b: &[i16]) -> i64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| i64::from(i32::from(*x) * i32::from(*y)))
        .sum()
}

impl EchoCanceller {
    /// A frame the far end will hear (as it decodes it).
    pub fn sent(&mut self, frame: &[i16]) {
        let energy = dot(frame, frame);
        if energy == 0 {
            self.quiet = self.quiet.saturating_add(1);
            if self.quiet >= TAIL_FRAMES {
                // Nothing of ours can still be echoing: keep nothing.
                if !self.sent.is_empty() {
                    self.sent = Vec::new();
                    self.energy = Vec::new();
                }
                return;
            }
        } else {
            self.quiet = 0;
        }
        if self.sent.is_empty() || self.frame != frame.len() {
            self.frame = frame.len();
            self.sent = vec![0; TAIL_FRAMES * frame.len()];
            self.energy = vec![0; TAIL_FRAMES];
            self.head = 0;
        }
        let at = self.head * self.frame;
        self.sent[at..at + self.frame].copy_from_slice(frame);
        self.energy[self.head] = energy;
        self.head = (self.head + 1) % TAIL_FRAMES;
    }

    /// Takes the agent's echo out of a caller frame.
    pub fn cancel(&mut self, caller: &mut [i16]) {
        if self.sent.is_empty() || caller.len() != self.frame {
            return;
        }
        let own = dot(caller, caller);
        if own == 0 {
            return;
        }
        // The sent frame that explains the most of the caller's.
        let mut best: Option<(usize, i64, f64)> = None;
        let newest = (self.head + TAIL_FRAMES - 1) % TAIL_FRAMES;
        for (k, &energy) in self.energy.iter().enumerate() {
            if energy == 0 {
                continue;
            }
            let kept = &self.sent[k * self.frame..(k + 1) * self.frame];
            let cross = dot(caller, kept);
            if cross <= 0 {
                continue;
            }
            let share = (cross as f64 / own as f64) * (cross as f64 / energy as f64);
            if best.is_none_or(|(_, _, s)| share > s) {
                best = Some((k, cross, share));
            }
        }
        if let Some((k, cross, share)) = best
            && share >= ECHO_ONLY
        {
            self.echo_frames += 1;
            let back = (newest + TAIL_FRAMES - k) % TAIL_FRAMES;
            self.path = Some((back, cross as f64 / self.energy[k] as f64));
            caller.fill(0);
            return;
        }
        // Speech over the echo: the echo is subtracted along the path found from the echo
        // alone (a caller whose voice happens to resemble something the agent said is left as
        // it is), when that leaves less than it found.
        let Some((back, gain)) = self.path else {
            return;
        };
        let k = (newest + TAIL_FRAMES - back) % TAIL_FRAMES;
        if self.energy[k] == 0 {
            return;
        }
        let kept = &self.sent[k * self.frame..(k + 1) * self.frame];
        let rest = |c: i16, s: i16| f64::from(c) - gain * f64::from(s);
        let left: f64 = caller
            .iter()
            .zip(kept)
            .map(|(c, s)| rest(*c, *s).powi(2))
            .sum();
        if left >= own as f64 {
            return;
        }
        self.cancelled_frames += 1;
        for (c, s) in caller.iter_mut().zip(kept) {
            *c = rest(*c, *s).clamp(f64::from(i16::MIN), f64::from(i16::MAX)) as i16;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A voice-like frame sequence: a few tones whose mix changes every frame.
    fn voice(frames: usize, seed: u32, level: f64) -> Vec<Vec<i16>> {
        (0..frames)
            .map(|f| {
                let f1 = 110.0 + f64::from((seed * 53 + f as u32 * 37) % 250);
                let f2 = 700.0 + f64::from((seed * 71 + f as u32 * 53) % 900);
                let mut noise = seed.wrapping_mul(2_654_435_761).wrapping_add(f as u32);
                (0..160)
                    .map(|i| {
                        let t = (f * 160 + i) as f64 / 8000.0;
                        noise = noise.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                        let hiss = f64::from(noise >> 16) / 65536.0 - 0.5;
                        let s = (2.0 * std::f64::consts::PI * f1 * t).sin()
                            + 0.6 * (2.0 * std::f64::consts::PI * f2 * t).sin()
                            + 0.5 * hiss;
                        (s * level) as i16
                    })
                    .collect()
            })
            .collect()
    }

    fn energy(frame: &[i16]) -> f64 {
        dot(frame, frame) as f64 / frame.len() as f64
    }

    #[test]
    fn an_echo_at_any_delay_and_level_is_taken_out() {
        for (delay, gain) in [(1usize, 1.0f64), (3, 1.0), (10, 0.5), (25, 0.3)] {
            let agent = voice(60, 3, 8000.0);
            let mut echo = EchoCanceller::default();
            let mut left = 0.0;
            for (n, frame) in agent.iter().enumerate() {
                echo.sent(frame);
                if n + 1 >= delay {
                    let mut heard: Vec<i16> = agent[n + 1 - delay]
                        .iter()
                        .map(|s| (f64::from(*s) * gain) as i16)
                        .collect();
                    echo.cancel(&mut heard);
                    left += energy(&heard);
                }
            }
            assert!(left < 1.0, "delay {delay} gain {gain}: {left}");
            assert!(echo.echo_frames > 0);
        }
    }

    #[test]
    fn speech_over_the_echo_is_kept() {
        let agent = voice(40, 3, 8000.0);
        let caller = voice(40, 11, 4000.0);
        let mut echo = EchoCanceller::default();
        for n in 0..40 {
            echo.sent(&agent[n]);
            if n < 2 {
                continue;
            }
            // The echo alone first, then the caller speaks over it.
            let speaks = n >= 12;
            let mut heard: Vec<i16> = agent[n - 2]
                .iter()
                .zip(&caller[n])
                .map(|(a, c)| if speaks { a.saturating_add(*c) } else { *a })
                .collect();
            echo.cancel(&mut heard);
            if !speaks {
                assert_eq!(energy(&heard), 0.0, "frame {n}");
                continue;
            }
            let kept = energy(&heard) / energy(&caller[n]);
            assert!((0.8..1.25).contains(&kept), "frame {n}: {kept}");
        }
    }

    #[test]
    fn a_caller_alone_is_left_as_is_and_quiet_keeps_nothing() {
        let caller = voice(20, 11, 4000.0);
        let mut echo = EchoCanceller::default();
        for frame in &caller {
            let mut heard = frame.clone();
            echo.cancel(&mut heard);
            assert_eq!(&heard, frame);
        }
        let agent = voice(5, 3, 8000.0);
        for frame in &agent {
            echo.sent(frame);
        }
        for frame in &caller {
            echo.sent(&[0; 160]);
            let mut heard = frame.clone();
            echo.cancel(&mut heard);
            assert_eq!(&heard, frame);
        }
        for _ in 0..TAIL_FRAMES {
            echo.sent(&[0; 160]);
        }
        assert!(echo.sent.is_empty());
    }
}
