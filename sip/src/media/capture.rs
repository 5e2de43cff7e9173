//! What [`MediaControl::listen`](super::MediaControl::listen) captures of the caller's speech.

use std::collections::VecDeque;
use std::sync::Arc;

use super::{EventSink, ListenSettings, MediaEvent};
use crate::vad::VadChange;

/// The caller's speech as [`MediaControl::listen`] captures it.
pub(super) struct Capture {
    settings: ListenSettings,
    rate: f64,
    /// The last moments before speech starts, oldest first.
    pre_roll: VecDeque<i16>,
    pre_roll_len: usize,
    /// The utterance so far, while the caller speaks.
    pub(super) utterance: Vec<i16>,
    pub(super) capturing: bool,
    /// A pause has been reported for the silence going on now.
    paused: bool,
    /// The utterance was dropped during a pause: the silence that follows is not one.
    pub(super) dropped: bool,
}

impl Capture {
    pub(super) fn new(settings: ListenSettings, rate: u32) -> Capture {
        let pre_roll_len = (settings.pre_roll_secs.max(0.0) * f64::from(rate)) as usize;
        Capture {
            settings,
            rate: f64::from(rate),
            pre_roll: VecDeque::with_capacity(pre_roll_len),
            pre_roll_len,
            utterance: Vec::new(),
            capturing: false,
            paused: false,
            dropped: false,
        }
    }

    /// One frame of the caller's audio, with what the VAD made of it and how long the caller
    /// has been silent.
    pub(super) fn feed(
        &mut self,
        frame: &[i16],
        change: Option<VadChange>,
        silence_secs: f64,
        events: &EventSink,
    ) {
        if !self.capturing {
            self.pre_roll.extend(frame.iter().copied());
            let excess = self.pre_roll.len().saturating_sub(self.pre_roll_len);
            self.pre_roll.drain(..excess);
            if change == Some(VadChange::Started) {
                self.capturing = true;
                self.paused = false;
                self.utterance.extend(self.pre_roll.drain(..));
            }
            return;
        }
        self.utterance.extend_from_slice(frame);
        if change == Some(VadChange::Stopped) {
            self.capturing = false;
            if std::mem::take(&mut self.dropped) {
                self.utterance.clear();
            } else if let Some(audio) = self.take() {
                events(MediaEvent::Utterance(audio));
            }
            return;
        }
        if silence_secs == 0.0 {
            if self.paused {
                events(MediaEvent::Resumed);
            }
            self.paused = false;
            self.dropped = false;
        } else if !self.paused && silence_secs + 1e-9 >= self.settings.pause_secs {
            self.paused = true;
            events(MediaEvent::Pause(self.utterance.as_slice().into()));
        }
        if self.utterance.len() as f64 >= self.settings.max_secs * self.rate
            && let Some(audio) = self.take()
        {
            events(MediaEvent::Utterance(audio));
        }
    }

    /// The utterance so far, and a fresh start for the next.
    pub(super) fn take(&mut self) -> Option<Arc<[i16]>> {
        if self.utterance.is_empty() {
            return None;
        }
        let audio: Arc<[i16]> = self.utterance.as_slice().into();
        self.utterance = Vec::new();
        Some(audio)
    }
}
