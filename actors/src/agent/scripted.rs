//! A scripted line and stand-in vendors for the agent's tests, on tokio's paused clock.
//!
//! The line plays the caller's part from a script of cues at set times (speech starting and
//! stopping, utterances, pauses, verdicts, a hang-up) and plays the agent's clips out in
//! virtual time (8 kHz: a clip of n samples lasts n / 8 ms), yielding to the caller's speech
//! as the SIP media does. Utterances carry their words as their samples, so the stand-in
//! transcriber reads them back.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use switchboard_sip::amd::{AmdSettings, AmdVerdict, BeepEvent};
use switchboard_sip::media::{ListenSettings, MediaEvent, MediaStats};
use tokio::time::Instant;

use super::line::{Clip, Line, LineEvent};
use super::{EndReason, Speech, SpeechError};
use crate::call_tools::{CallParties, CallTools, ToolRun};
use crate::conversation::{ToolEvent, ToolStatus};
use crate::vendors::{
    ChatEvent, ChatModel, ChatRequest, ChatStream, ToolCall, ToolSpec, Transcriber, Transcript,
    VendorError,
};

/// The line's sample rate.
pub const RATE: u32 = 8000;
/// How long the stand-in speech makes each character.
pub const MS_PER_CHAR: u64 = 50;

/// Words as the samples of an utterance.
pub fn audio_of(text: &str) -> Arc<[i16]> {
    text.bytes().map(i16::from).collect()
}

/// Milliseconds since `start`.
pub fn ms_since(start: Instant) -> u64 {
    Instant::now().saturating_duration_since(start).as_millis() as u64
}

/// What the caller's side does at a point of the script.
#[derive(Debug, Clone)]
pub enum Cue {
    Media(MediaEvent),
    HangUp,
}

/// One clip the line played, as the caller heard it.
#[derive(Debug, Clone, PartialEq)]
pub struct Heard {
    pub text: String,
    pub start_ms: u64,
    pub end_ms: u64,
    pub cut: bool,
}

/// What the agent did to the line, for the test to read.
#[derive(Debug, Default)]
pub struct LineLog {
    pub heard: Vec<Heard>,
    pub hung_up_at: Option<u64>,
    pub utterances_taken: Vec<u64>,
    pub utterances_dropped: u32,
    pub detecting: bool,
    pub listening: bool,
    /// The digits the agent sent, with when (ms from the start).
    pub sent_digits: Vec<(u64, String)>,
}

struct Playing {
    clip: Clip,
    tag: u64,
    /// When it started playing (it is first in the queue), if it has.
    started: Option<Instant>,
}

impl Playing {
    fn lasts(&self) -> Duration {
        Duration::from_millis(self.clip.len() as u64 * 1000 / u64::from(RATE))
    }
}

/// A line whose caller follows a script.
pub struct ScriptedLine {
    start: Instant,
    cues: VecDeque<(u64, Cue)>,
    queue: VecDeque<Playing>,
    raised: VecDeque<LineEvent>,
    yielding: bool,
    ended: bool,
    /// The model is offered `send_digits` (an outbound call's line).
    keypad: bool,
    log: Arc<Mutex<LineLog>>,
}

impl ScriptedLine {
    /// A line whose script counts from now.
    pub fn new() -> (ScriptedLine, Arc<Mutex<LineLog>>) {
        let log = Arc::new(Mutex::new(LineLog::default()));
        let line = ScriptedLine {
            start: Instant::now(),
            cues: VecDeque::new(),
            queue: VecDeque::new(),
            raised: VecDeque::new(),
            yielding: false,
            ended: false,
            keypad: false,
            log: log.clone(),
        };
        (line, log)
    }

    /// The line of an outbound call: the model may send digits.
    pub fn outbound(mut self) -> Self {
        self.keypad = true;
        self
    }

    /// Adds `cue` at `at_ms` (cues are kept in time order).
    pub fn at(mut self, at_ms: u64, cue: Cue) -> Self {
        let place = self.cues.iter().position(|(at, _)| *at > at_ms);
        match place {
            Some(i) => self.cues.insert(i, (at_ms, cue)),
            None => self.cues.push_back((at_ms, cue)),
        }
        self
    }

    fn media(self, at_ms: u64, event: MediaEvent) -> Self {
        self.at(at_ms, Cue::Media(event))
    }

    /// The caller says `text` from `from_ms` for `for_ms`: speech starts, stops, and the
    /// utterance follows.
    pub fn says(self, from_ms: u64, for_ms: u64, text: &str) -> Self {
        let to = from_ms + for_ms;
        self.media(from_ms, MediaEvent::SpeechStarted)
            .media(to, MediaEvent::SpeechStopped)
            .media(to, MediaEvent::Utterance(audio_of(text)))
    }

    /// The caller speaks from `from_ms` without stopping.
    pub fn speaks(self, from_ms: u64) -> Self {
        self.media(from_ms, MediaEvent::SpeechStarted)
    }

    /// The caller pauses at `at_ms` having said `text` so far.
    pub fn pauses(self, at_ms: u64, text: &str) -> Self {
        self.media(at_ms, MediaEvent::Pause(audio_of(text)))
    }

    /// The caller stops speaking at `at_ms`, and the utterance `text` follows.
    pub fn stops(self, at_ms: u64, text: &str) -> Self {
        self.media(at_ms, MediaEvent::SpeechStopped)
            .media(at_ms, MediaEvent::Utterance(audio_of(text)))
    }

    /// Detection decides at `at_ms`.
    pub fn verdict(self, at_ms: u64, verdict: AmdVerdict) -> Self {
        self.media(at_ms, MediaEvent::Amd(verdict))
    }

    /// A machine's beep ends at `at_ms`.
    pub fn beep(self, at_ms: u64) -> Self {
        let ended = BeepEvent::Ended {
            frequency_hz: 1000,
            at_ms: at_ms as u32,
            duration_ms: 400,
        };
        self.media(at_ms, MediaEvent::Beep(ended))
    }

    /// The caller presses `keys` at `at_ms`, 100 ms apart.
    pub fn presses(mut self, at_ms: u64, keys: &str) -> Self {
        let digits = switchboard_sip::dtmf::Digit::parse_all(keys).unwrap_or_default();
        for (i, digit) in digits.into_iter().enumerate() {
            self = self.media(at_ms + 100 * i as u64, MediaEvent::Digit(digit));
        }
        self
    }

    /// The caller hangs up at `at_ms`.
    pub fn hangs_up(self, at_ms: u64) -> Self {
        self.at(at_ms, Cue::HangUp)
    }

    fn log(&self) -> std::sync::MutexGuard<'_, LineLog> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Cuts the clip playing and drops the queue; `true` if something was playing.
    fn cut(&mut self) -> bool {
        let now = Instant::now();
        if let Some(front) = self.queue.front()
            && let Some(started) = front.started
        {
            let played_ms = now.saturating_duration_since(started).as_millis() as u64;
            let played = (played_ms * u64::from(RATE) / 1000) as usize;
            self.raised.push_back(LineEvent::Media(MediaEvent::Cut {
                tag: front.tag,
                played: played.min(front.clip.len()),
            }));
            let heard = Heard {
                text: front.clip.text.clone(),
                start_ms: started.saturating_duration_since(self.start).as_millis() as u64,
                end_ms: ms_since(self.start),
                cut: true,
            };
            self.log().heard.push(heard);
        }
        let was_playing = !self.queue.is_empty();
        self.queue.clear();
        was_playing
    }

    /// The clip playing has played out.
    fn played_out(&mut self, now: Instant) {
        let Some(done) = self.queue.pop_front() else {
            return;
        };
        let heard = Heard {
            text: done.clip.text.clone(),
            start_ms: done.started.map_or(0, |s| {
                s.saturating_duration_since(self.start).as_millis() as u64
            }),
            end_ms: now.saturating_duration_since(self.start).as_millis() as u64,
            cut: false,
        };
        self.log().heard.push(heard);
        self.raised
            .push_back(LineEvent::Media(MediaEvent::PlayedOut(done.tag)));
        match self.queue.front_mut() {
            Some(next) => next.started = Some(now),
            None => self
                .raised
                .push_back(LineEvent::Media(MediaEvent::PlayoutDone)),
        }
    }

    fn cue(&mut self, cue: Cue) {
        match cue {
            Cue::HangUp => {
                self.ended = true;
                self.raised
                    .push_back(LineEvent::Ended(EndReason::CallerHangup));
            }
            Cue::Media(MediaEvent::SpeechStarted) => {
                // As the SIP media: the cut, the caller's speech, then the playout's end.
                let cut = self.yielding && self.cut();
                self.raised
                    .push_back(LineEvent::Media(MediaEvent::SpeechStarted));
                if cut {
                    self.raised
                        .push_back(LineEvent::Media(MediaEvent::PlayoutDone));
                }
            }
            Cue::Media(event) => self.raised.push_back(LineEvent::Media(event)),
        }
    }
}

#[async_trait]
impl Line for ScriptedLine {
    fn sample_rate(&self) -> Option<u32> {
        Some(RATE)
    }

    fn parties(&self) -> CallParties {
        CallParties {
            from: "+15550100".into(),
            to: "+15550199".into(),
        }
    }

    fn play(&mut self, clip: Clip, tag: u64) {
        let started = self.queue.is_empty().then(Instant::now);
        self.queue.push_back(Playing { clip, tag, started });
    }

    fn clear(&mut self) {
        if self.cut() {
            self.raised
                .push_back(LineEvent::Media(MediaEvent::PlayoutDone));
        }
    }

    fn listen(&mut self, _settings: ListenSettings) {
        self.log().listening = true;
    }

    fn offers_keypad(&self) -> bool {
        self.keypad
    }

    fn send_digits(&mut self, digits: &[switchboard_sip::dtmf::Digit]) {
        let keys = digits.iter().map(|d| d.as_char()).collect();
        let at = ms_since(self.start);
        self.log().sent_digits.push((at, keys));
        self.raised
            .push_back(LineEvent::Media(MediaEvent::DigitsSent));
    }

    fn take_utterance(&mut self) {
        let at = ms_since(self.start);
        self.log().utterances_taken.push(at);
    }

    fn drop_utterance(&mut self) {
        self.log().utterances_dropped += 1;
    }

    fn yield_to_speech(&mut self, on: bool) {
        self.yielding = on;
    }

    fn detect_answering_machine(&mut self, _settings: AmdSettings) {
        self.log().detecting = true;
    }

    async fn hangup(&mut self) {
        if !self.ended {
            self.ended = true;
            let at = ms_since(self.start);
            self.log().hung_up_at = Some(at);
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
            let cue_at = self
                .cues
                .front()
                .map(|(at, _)| self.start + Duration::from_millis(*at));
            let clip_end = self
                .queue
                .front()
                .and_then(|p| p.started.map(|s| s + p.lasts()));
            let next = match (cue_at, clip_end) {
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) | (None, Some(a)) => a,
                (None, None) => return std::future::pending().await,
            };
            tokio::time::sleep_until(next).await;
            if clip_end.is_some_and(|end| end <= next) {
                self.played_out(next);
            } else if let Some((_, cue)) = self.cues.pop_front() {
                self.cue(cue);
            }
        }
    }

    async fn finish(self: Box<Self>) -> MediaStats {
        MediaStats::default()
    }
}

/// Stand-in speech: `MS_PER_CHAR` of audio per character after `delay`; a text containing
/// `hang` never comes back.
pub struct StandInSpeech {
    pub delay: Duration,
    pub calls: Mutex<u32>,
}

impl StandInSpeech {
    pub fn new(delay_ms: u64) -> Arc<StandInSpeech> {
        Arc::new(StandInSpeech {
            delay: Duration::from_millis(delay_ms),
            calls: Mutex::new(0),
        })
    }
}

/// How long the stand-in speech makes `text`, in ms.
pub fn spoken_ms(text: &str) -> u64 {
    text.chars().count() as u64 * MS_PER_CHAR
}

#[async_trait]
impl Speech for StandInSpeech {
    async fn speak(
        &self,
        text: &str,
        _voice: &str,
        _language: &str,
        sample_rate: u32,
    ) -> Result<Arc<[i16]>, SpeechError> {
        *self.calls.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        if text.contains("hang") {
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(self.delay).await;
        let samples = spoken_ms(text) * u64::from(sample_rate) / 1000;
        Ok(vec![1000i16; samples as usize].into())
    }
}

/// Stand-in speech to text: reads the words an utterance carries after `delay`; `fail` in
/// them fails.
pub struct StandInTranscriber {
    pub delay: Duration,
}

#[async_trait]
impl Transcriber for StandInTranscriber {
    async fn transcribe(
        &self,
        audio: &[i16],
        _sample_rate: u32,
        _language: &str,
    ) -> Result<Transcript, VendorError> {
        tokio::time::sleep(self.delay).await;
        let bytes: Vec<u8> = audio.iter().map(|s| *s as u8).collect();
        let text = String::from_utf8_lossy(&bytes).to_string();
        if text.contains("fail") {
            return Err(VendorError::Timeout);
        }
        Ok(Transcript {
            text,
            language: None,
        })
    }
}

/// One step of a stand-in model's answer.
#[derive(Debug, Clone)]
pub enum Step {
    Wait(u64),
    Text(&'static str),
    Call(&'static str, &'static str),
    Fail(VendorError),
}

type Answer = Box<dyn Fn(&ChatRequest, usize) -> Vec<Step> + Send + Sync>;

/// A stand-in model: `answer` gives the steps of the reply to each request (with its number
/// from 0); the requests are kept.
pub struct StandInModel {
    answer: Answer,
    pub requests: Mutex<Vec<ChatRequest>>,
}

impl StandInModel {
    pub fn new(
        answer: impl Fn(&ChatRequest, usize) -> Vec<Step> + Send + Sync + 'static,
    ) -> Arc<StandInModel> {
        Arc::new(StandInModel {
            answer: Box::new(answer),
            requests: Mutex::new(Vec::new()),
        })
    }

    pub fn requests(&self) -> Vec<ChatRequest> {
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

#[async_trait]
impl ChatModel for StandInModel {
    async fn stream(&self, request: ChatRequest) -> Result<ChatStream, VendorError> {
        let n = {
            let mut requests = self.requests.lock().unwrap_or_else(|e| e.into_inner());
            requests.push(request.clone());
            requests.len() - 1
        };
        let steps = (self.answer)(&request, n);
        let stream = futures_util::stream::unfold(
            (steps.into_iter(), n, false),
            |(mut steps, n, done)| async move {
                if done {
                    return None;
                }
                loop {
                    match steps.next() {
                        Some(Step::Wait(ms)) => tokio::time::sleep(Duration::from_millis(ms)).await,
                        Some(Step::Text(text)) => {
                            return Some((Ok(ChatEvent::Text(text.into())), (steps, n, false)));
                        }
                        Some(Step::Call(name, arguments)) => {
                            let call = ToolCall {
                                id: format!("call-{n}-{name}"),
                                name: name.into(),
                                arguments: arguments.into(),
                            };
                            return Some((Ok(ChatEvent::ToolCall(call)), (steps, n, false)));
                        }
                        Some(Step::Fail(e)) => return Some((Err(e), (steps, n, true))),
                        None => {
                            let done = ChatEvent::Done {
                                finish_reason: None,
                                usage: None,
                            };
                            return Some((Ok(done), (steps, n, true)));
                        }
                    }
                }
            },
        );
        Ok(Box::pin(stream))
    }
}

/// Stand-in tools: one tool, `book`, that answers after `delay`; its runs are counted.
pub struct StandInTools {
    specs: Vec<ToolSpec>,
    pub delay: Duration,
    pub runs: Mutex<Vec<(ToolCall, u64)>>,
    start: Instant,
}

impl StandInTools {
    pub fn new(delay_ms: u64) -> Arc<StandInTools> {
        Arc::new(StandInTools {
            specs: vec![ToolSpec {
                name: "book".into(),
                description: "Books a viewing.".into(),
                parameters: serde_json::json!({"type": "object"}),
            }],
            delay: Duration::from_millis(delay_ms),
            runs: Mutex::new(Vec::new()),
            start: Instant::now(),
        })
    }

    pub fn runs(&self) -> Vec<(ToolCall, u64)> {
        self.runs.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[async_trait]
impl CallTools for StandInTools {
    fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    async fn run(&self, call: &ToolCall, _parties: &CallParties) -> ToolRun {
        let at = ms_since(self.start);
        self.runs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((call.clone(), at));
        tokio::time::sleep(self.delay).await;
        ToolRun {
            event: ToolEvent {
                name: call.name.clone(),
                tool_id: None,
                arguments: serde_json::json!({}),
                status: ToolStatus::Succeeded,
                latency_ms: self.delay.as_millis() as u64,
                response_preview: Some("booked".into()),
                raw_response_preview: None,
                status_code: Some(200),
                error: None,
                delivery_id: None,
                at_ms: 0,
            },
            content: r#"{"booked":true}"#.into(),
        }
    }
}

/// A mind of stand-ins: `model`, a transcription in 150 ms, and `director`; no tools.
pub fn stand_in_mind(
    model: Arc<StandInModel>,
    director: Box<dyn super::director::Director>,
) -> super::Mind {
    super::Mind {
        model: Some(model),
        transcriber: Some(Arc::new(StandInTranscriber {
            delay: Duration::from_millis(150),
        })),
        director,
        notes: Vec::new(),
        listen: switchboard_sip::media::ListenSettings {
            pause_secs: 0.4,
            pre_roll_secs: 0.5,
            max_secs: 31.0,
        },
        unfinished_grace: Duration::from_millis(800),
        max_continuous_speech: Duration::from_secs(10),
        tools: None,
        integrations: None,
    }
}
