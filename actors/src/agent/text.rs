//! A line that carries turns as text: the caller's turns come in as text (no transcription),
//! the agent's sentences go out as text (no speech synthesis). The flow simulator talks to an
//! agent over it; a chat widget could too.

use std::collections::VecDeque;

use async_trait::async_trait;
use switchboard_sip::amd::AmdSettings;
use switchboard_sip::dtmf::Digit;
use switchboard_sip::media::{ListenSettings, MediaEvent, MediaStats};
use tokio::sync::mpsc;

use super::EndReason;
use super::line::{Clip, Line, LineEvent};
use crate::call_tools::CallParties;

/// What the agent's side of a text line sends to the other party.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentSaid {
    /// One of the agent's sentences.
    Sentence(String),
    /// The agent has said all it had to say and waits for the caller's turn.
    Floor,
    /// The agent hung up.
    HungUp,
}

/// What the other party of a text line sends.
#[derive(Debug, Clone, PartialEq, Eq)]
enum FromCaller {
    Said(String),
    Pressed(Vec<Digit>),
}

/// The agent's side of a text line.
pub struct TextLine {
    parties: CallParties,
    from_caller: mpsc::UnboundedReceiver<FromCaller>,
    to_caller: mpsc::UnboundedSender<AgentSaid>,
    /// Events the line raised itself (played out, playout done), before the caller's next.
    raised: VecDeque<LineEvent>,
    ended: bool,
    sentences: u64,
}

/// The other party of a text line: says turns, reads the agent's sentences.
pub struct TextCaller {
    to_agent: Option<mpsc::UnboundedSender<FromCaller>>,
    from_agent: mpsc::UnboundedReceiver<AgentSaid>,
}

/// A text line between `parties` and its other party.
pub fn text_line(parties: CallParties) -> (TextLine, TextCaller) {
    let (to_agent, from_caller) = mpsc::unbounded_channel();
    let (to_caller, from_agent) = mpsc::unbounded_channel();
    (
        TextLine {
            parties,
            from_caller,
            to_caller,
            raised: VecDeque::new(),
            ended: false,
            sentences: 0,
        },
        TextCaller {
            to_agent: Some(to_agent),
            from_agent,
        },
    )
}

impl TextCaller {
    /// Says `text` as the caller's next turn; `false` once the agent has hung up.
    pub fn say(&self, text: &str) -> bool {
        self.send(FromCaller::Said(text.to_string()))
    }

    /// Presses `digits` on the keypad, one after another; `false` once the agent has hung up.
    pub fn press(&self, digits: &[Digit]) -> bool {
        self.send(FromCaller::Pressed(digits.to_vec()))
    }

    fn send(&self, what: FromCaller) -> bool {
        self.to_agent
            .as_ref()
            .is_some_and(|tx| tx.send(what).is_ok())
    }

    /// Hangs up: the agent sees the caller hang up.
    pub fn hang_up(&mut self) {
        self.to_agent = None;
    }

    /// The agent's next sentence, floor or hang-up; `None` once the line is gone.
    pub async fn next(&mut self) -> Option<AgentSaid> {
        self.from_agent.recv().await
    }

    /// What the agent says until it gives the floor (or hangs up, `true`).
    pub async fn reply(&mut self) -> (Vec<String>, bool) {
        let mut said = Vec::new();
        loop {
            match self.next().await {
                Some(AgentSaid::Sentence(text)) => said.push(text),
                Some(AgentSaid::Floor) => return (said, false),
                Some(AgentSaid::HungUp) | None => return (said, true),
            }
        }
    }
}

impl TextLine {
    /// Sentences sent so far.
    pub fn sentences(&self) -> u64 {
        self.sentences
    }
}

#[async_trait]
impl Line for TextLine {
    fn sample_rate(&self) -> Option<u32> {
        None
    }

    fn parties(&self) -> CallParties {
        self.parties.clone()
    }

    fn play(&mut self, clip: Clip, tag: u64) {
        if self.ended {
            return;
        }
        self.sentences += 1;
        let _ = self.to_caller.send(AgentSaid::Sentence(clip.text));
        // Text is delivered whole at once: played out, and nothing else is queued.
        self.raised
            .push_back(LineEvent::Media(MediaEvent::PlayedOut(tag)));
        self.raised
            .push_back(LineEvent::Media(MediaEvent::PlayoutDone));
    }

    fn clear(&mut self) {}

    fn floor(&mut self) {
        if !self.ended {
            let _ = self.to_caller.send(AgentSaid::Floor);
        }
    }

    fn listen(&mut self, _settings: ListenSettings) {}

    fn take_utterance(&mut self) {}

    fn drop_utterance(&mut self) {}

    fn yield_to_speech(&mut self, _on: bool) {}

    fn detect_answering_machine(&mut self, _settings: AmdSettings) {}

    fn transfer(&mut self, _to: &str) -> Result<(), String> {
        // Nothing carries the call further: the transfer is taken as done.
        self.raised.push_back(LineEvent::Transferred(Ok(None)));
        Ok(())
    }

    fn send_digits(&mut self, _digits: &[Digit]) {
        // Nobody hears them: they are taken as sent.
        self.raised
            .push_back(LineEvent::Media(MediaEvent::DigitsSent));
    }

    async fn hangup(&mut self) {
        if !self.ended {
            self.ended = true;
            let _ = self.to_caller.send(AgentSaid::HungUp);
        }
    }

    async fn next_event(&mut self) -> LineEvent {
        loop {
            if let Some(event) = self.raised.pop_front() {
                return event;
            }
            if self.ended {
                return std::future::pending().await;
            }
            match self.from_caller.recv().await {
                Some(FromCaller::Said(text)) => return LineEvent::Said(text),
                Some(FromCaller::Pressed(digits)) => self.raised.extend(
                    digits
                        .into_iter()
                        .map(|d| LineEvent::Media(MediaEvent::Digit(d))),
                ),
                None => {
                    self.ended = true;
                    return LineEvent::Ended(EndReason::CallerHangup);
                }
            }
        }
    }

    async fn finish(self: Box<Self>) -> MediaStats {
        MediaStats::default()
    }
}
