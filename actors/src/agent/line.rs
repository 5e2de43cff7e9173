//! The line seam: what the agent does to and hears from a call, whatever carries it.
//!
//! A [`Line`] takes the agent's sentences (audio, or text on a line without speech), tagged so
//! it can tell which one was played in full or cut and after how much; it clears what is queued,
//! hangs up, and hands the agent what happens on the call as [`LineEvent`]s. [`SipLine`] is a
//! SIP call's; [`super::text::TextLine`] carries turns as text.

use std::sync::Arc;

use async_trait::async_trait;
use switchboard_sip::amd::AmdSettings;
use switchboard_sip::call::{Call, CallEvent, Direction, EndCause};
use switchboard_sip::dtmf::Digit;
use switchboard_sip::media::{ListenSettings, MediaEvent, MediaStats};

use super::EndReason;
use crate::call_tools::CallParties;

/// One sentence for the line to play.
#[derive(Debug, Clone)]
pub struct Clip {
    /// What is said.
    pub text: String,
    /// Its audio at the line's rate; none on a line that takes text.
    pub audio: Option<Arc<[i16]>>,
}

impl Clip {
    /// Its length as the line reports how much of it was played: samples, or characters of a
    /// text clip.
    pub fn len(&self) -> usize {
        match &self.audio {
            Some(audio) => audio.len(),
            None => self.text.chars().count(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What happens on a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineEvent {
    /// Something on the call's audio (speech, playout, answering-machine detection).
    Media(MediaEvent),
    /// The caller's turn as text (a line that carries text; no transcription needed).
    Said(String),
    /// The call has ended from the far side or the network.
    Ended(EndReason),
    /// How a transfer the agent started went: the status the other side accepted it with
    /// (none on a line without signalling), or why it did not.
    Transferred(Result<Option<u16>, String>),
}

/// What the agent does to and hears from a call.
#[async_trait]
pub trait Line: Send {
    /// The rate the line's audio is synthesized at; none for a line that takes text (the
    /// agent's sentences then go out as text, with no speech vendor).
    fn sample_rate(&self) -> Option<u32>;
    /// Who is on the call (tools get the parties).
    fn parties(&self) -> CallParties;
    /// Queues `clip` to play after what is queued; `tag` names it in its
    /// [`MediaEvent::PlayedOut`] or [`MediaEvent::Cut`].
    fn play(&mut self, clip: Clip, tag: u64);
    /// Drops what is queued; the clip cut short is reported.
    fn clear(&mut self);
    /// Starts capturing the caller's speech as utterances for transcription.
    fn listen(&mut self, settings: ListenSettings);
    /// Hands over the caller's speech so far as an utterance, though they go on.
    fn take_utterance(&mut self);
    /// Drops the caller's current utterance (its words are already had).
    fn drop_utterance(&mut self);
    /// Whether the line stops the agent's audio itself the moment the caller speaks.
    fn yield_to_speech(&mut self, on: bool);
    /// Starts answering-machine detection on the callee's audio.
    fn detect_answering_machine(&mut self, settings: AmdSettings);
    /// Ends the call from the agent's side (nothing happens once it has ended).
    async fn hangup(&mut self);
    /// The agent has said all it had to say and waits for the other party (a text line tells
    /// its other party so).
    fn floor(&mut self) {}
    /// Starts handing the call to `to` (an E.164 number or a `sip:` URI); how it went comes
    /// as [`LineEvent::Transferred`], and the agent's part ends if it went. Why it cannot
    /// start, when it cannot.
    fn transfer(&mut self, to: &str) -> Result<(), String> {
        let _ = to;
        Err("this line cannot transfer calls".into())
    }
    /// Sends keypad digits to the other party; a [`MediaEvent::DigitsSent`] follows.
    fn send_digits(&mut self, digits: &[Digit]);
    /// Whether the model is offered to send digits on this line (an outbound call, where a
    /// company's phone menu may answer).
    fn offers_keypad(&self) -> bool {
        false
    }
    /// The next thing that happens on the line. Cancel-safe. After [`LineEvent::Ended`] it
    /// never resolves again.
    async fn next_event(&mut self) -> LineEvent;
    /// Stops the line's media; its figures.
    async fn finish(self: Box<Self>) -> MediaStats;
}

/// A SIP call as a line.
pub struct SipLine {
    call: Call,
    ended: bool,
    /// The caller's speech starts handed to the agent so far (see `MediaControl::play_heard`).
    starts_heard: u64,
    /// The REFER under way, if any.
    transfer: Option<tokio::sync::oneshot::Receiver<Result<u16, String>>>,
}

impl SipLine {
    pub fn new(call: Call) -> SipLine {
        SipLine {
            call,
            ended: false,
            starts_heard: 0,
            transfer: None,
        }
    }
}

/// The end reason of a SIP call's end `cause`.
pub fn end_reason(cause: EndCause, direction: Direction) -> EndReason {
    match (cause, direction) {
        (EndCause::PeerHangup, Direction::Inbound) => EndReason::CallerHangup,
        (EndCause::PeerHangup, Direction::Outbound) => EndReason::CalleeHangup,
        (EndCause::LocalHangup, _) => EndReason::AgentHangup,
        (EndCause::PeerCancelled, _) => EndReason::CallerCancelled,
        (EndCause::AckTimeout, _) => EndReason::AckTimeout,
        (EndCause::SessionExpired, _) => EndReason::SessionExpired,
        (EndCause::Failed, _) => EndReason::SignallingError,
    }
}

#[async_trait]
impl Line for SipLine {
    fn sample_rate(&self) -> Option<u32> {
        Some(self.call.codec.sample_rate())
    }

    fn parties(&self) -> CallParties {
        CallParties {
            from: self.call.from.clone(),
            to: self.call.to.clone(),
        }
    }

    fn play(&mut self, clip: Clip, tag: u64) {
        if let Some(audio) = clip.audio {
            self.call
                .media
                .control()
                .play_heard(audio, tag, self.starts_heard);
        }
    }

    fn clear(&mut self) {
        self.call.media.clear();
    }

    fn listen(&mut self, settings: ListenSettings) {
        self.call.media.control().listen(settings);
    }

    fn take_utterance(&mut self) {
        self.call.media.control().take_utterance();
    }

    fn drop_utterance(&mut self) {
        self.call.media.control().drop_utterance();
    }

    fn yield_to_speech(&mut self, on: bool) {
        self.call.media.control().yield_to_speech(on);
    }

    fn detect_answering_machine(&mut self, settings: AmdSettings) {
        self.call.media.control().detect_answering_machine(settings);
    }

    async fn hangup(&mut self) {
        self.call.hangup().await;
    }

    fn send_digits(&mut self, digits: &[Digit]) {
        self.call.media.control().send_digits(digits);
    }

    fn offers_keypad(&self) -> bool {
        self.call.direction == Direction::Outbound
    }

    fn transfer(&mut self, to: &str) -> Result<(), String> {
        if self.transfer.is_some() {
            return Err("a transfer is already under way".into());
        }
        switchboard_sip::transfer::refer_target(to, self.call.remote)?;
        let (done, outcome) = tokio::sync::oneshot::channel();
        let transferer = self.call.transferer();
        let to = to.to_string();
        tokio::spawn(async move {
            let _ = done.send(transferer.refer(&to).await);
        });
        self.transfer = Some(outcome);
        Ok(())
    }

    async fn next_event(&mut self) -> LineEvent {
        if self.ended {
            return std::future::pending().await;
        }
        let direction = self.call.direction;
        let event = match self.transfer.as_mut() {
            Some(outcome) => tokio::select! {
                result = outcome => {
                    self.transfer = None;
                    let result = result.unwrap_or_else(|_| Err("the transfer was dropped".into()));
                    return LineEvent::Transferred(result.map(Some));
                }
                event = self.call.next_event() => event,
            },
            None => self.call.next_event().await,
        };
        match event {
            Some(CallEvent::Media(event)) => {
                if event == MediaEvent::SpeechStarted {
                    self.starts_heard += 1;
                }
                LineEvent::Media(event)
            }
            Some(CallEvent::Ended(cause)) => {
                self.ended = true;
                LineEvent::Ended(end_reason(cause, direction))
            }
            None => {
                self.ended = true;
                let cause = self.call.end_cause().unwrap_or(EndCause::Failed);
                LineEvent::Ended(end_reason(cause, direction))
            }
        }
    }

    async fn finish(self: Box<Self>) -> MediaStats {
        self.call.finish().await.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "a call's media ended badly");
            MediaStats::default()
        })
    }
}
