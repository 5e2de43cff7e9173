//! A caller's line that echoes the agent's audio back, late and quieter, over what the
//! caller says.

/// The agent's audio a call's line sends back: frames queued as they arrive, each sent out
/// `delay` frames later at `gain`.
pub(super) struct Echo {
    pub(super) delay: usize,
    pub(super) gain: f64,
    pub(super) frames: std::collections::VecDeque<Vec<i16>>,
}

impl Echo {
    pub(super) fn heard(&mut self, pcm: &[i16]) {
        // A line holds a second of echo at most: a burst beyond it is dropped.
        if self.frames.len() < self.delay + 50 {
            self.frames.push_back(pcm.to_vec());
        }
    }

    /// This tick's echo over what the caller says (`speaking`), encoded into `out`; its
    /// length, if an echo frame is due.
    pub(super) fn mixed(
        &mut self,
        speaking: Option<&[i16]>,
        encoder: &mut dyn switchboard_sip::audio_codec::Encoder,
        out: &mut [u8],
    ) -> Option<usize> {
        let mut back = self.due()?;
        for (e, v) in back.iter_mut().zip(speaking.unwrap_or_default()) {
            *e = e.saturating_add(*v);
        }
        Some(encoder.encode_into(&back, out).unwrap_or(0))
    }

    /// This tick's echo, if its frame is due.
    fn due(&mut self) -> Option<Vec<i16>> {
        if self.frames.len() <= self.delay {
            return None;
        }
        let mut frame = self.frames.pop_front()?;
        for s in &mut frame {
            *s = (f64::from(*s) * self.gain) as i16;
        }
        Some(frame)
    }
}
