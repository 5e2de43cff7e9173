//! The agent on an answered call, inbound or outbound: one call actor for both directions.
//!
//! [`converse`] is one task whose mailbox is the call's event stream (media events and the
//! dialog's end) plus its own timers. When the agent speaks first it plays its greeting
//! (synthesized by the [`Speech`] port at the call's sample rate); the other party speaking over
//! it cuts it short. The call ends with a BYE after `silence_timeout` with neither side
//! speaking, at `max_duration`, or when `stop` fires (service shutdown). What the agent says in
//! reply comes with the conversation engine.
//!
//! How the call started (an INVITE received, or one sent through a trunk) and how its start
//! and end are recorded belong to the callers: [`crate::inbound::run_call`] and the SIP dialer
//! ([`crate::sip_dialer`]).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use switchboard_sip::amd::{AmdSettings, AnsweredBy, BEEP_WINDOW_MS, BeepEvent};
use switchboard_sip::call::{Call, CallEvent, EndCause};

use crate::call_tools::{CallParties, ToolRun};
use crate::conversation::{Conversation, Speaker, ToolEvent, ToolStatus, Turn, TurnSink};
use crate::turns::{
    APOLOGY_LINE, END_CALL, FALLBACK_LINE, FILLER_AFTER, FILLER_LINE, MAX_TOOL_ROUNDS, Mind,
    STILL_THERE_LINE, Sentences, builtin_tools, sounds_unfinished, words_heard,
};
use crate::vendors::{ChatEvent, ChatMessage, ChatRequest, ToolCall, Transcript, VendorError};
use switchboard_sip::media::{MediaEvent, MediaStats};
use tokio::time::Instant;

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SpeechError(pub String);

/// Text to speech.
#[async_trait]
pub trait Speech: Send + Sync + 'static {
    /// Mono 16-bit audio of `text` at `sample_rate`.
    async fn speak(
        &self,
        text: &str,
        voice: &str,
        language: &str,
        sample_rate: u32,
    ) -> Result<Arc<[i16]>, SpeechError>;
}

/// Why the agent ended a call.
pub const END_SILENCE: &str = "silence_timeout";
pub const END_MAX_DURATION: &str = "max_duration";
pub const END_SHUTDOWN: &str = "shutdown";
/// A machine answered and the agent has no voicemail message: it hung up at once.
pub const END_MACHINE: &str = "answering_machine";
/// A machine answered; the agent left its voicemail message after the beep.
pub const END_VOICEMAIL_LEFT: &str = "voicemail_left";
/// A machine answered but no beep came within the listening window: nothing was left.
pub const END_NO_BEEP: &str = "voicemail_no_beep";
/// The model hung up (its `end_call` function) after saying goodbye.
pub const END_AGENT: &str = "agent_hangup";

/// Answering-machine detection on an outbound call.
#[derive(Debug, Clone)]
pub struct AmdPlan {
    pub settings: AmdSettings,
    /// Left after the beep when a machine answers; none: hang up at once.
    pub voicemail_message: Option<String>,
}

/// How the agent runs a call.
#[derive(Debug, Clone)]
pub struct AgentPlan {
    pub greeting: String,
    pub agent_speaks_first: bool,
    pub voice: String,
    pub language: String,
    pub silence_timeout: Duration,
    /// The agent's cap on a call's length.
    pub max_duration: Duration,
    /// Answering-machine detection (outbound calls whose agent has it on): the greeting
    /// waits for the verdict.
    pub amd: Option<AmdPlan>,
    /// What the agent converses with; none: it greets and answers with a fallback line.
    pub mind: Option<Mind>,
    /// Where each turn goes once final (when the agent's webhook wants `transcript.final`).
    pub turns: Option<Arc<dyn TurnSink>>,
}

/// How a conversation ended.
#[derive(Debug, Clone)]
pub struct AgentEnd {
    /// `caller_hangup`, `callee_hangup`, `silence_timeout`, `max_duration`, `shutdown`, ...
    pub reason: String,
    /// Connected time, whole seconds.
    pub duration_secs: i64,
    pub stats: MediaStats,
    /// Who answered, when answering-machine detection ran and decided.
    pub answered_by: Option<AnsweredBy>,
    /// The transcript and the tools run.
    pub conversation: Conversation,
}

/// Where a call with answering-machine detection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Detection {
    /// No detection, or a person (or unsure) answered: the conversation runs.
    Off,
    /// Listening for the verdict; the agent holds its greeting.
    Listening,
    /// A machine: waiting for its beep (until the deadline) to leave the message.
    AwaitingBeep,
    /// Leaving the voicemail message; the call ends when it has played.
    LeavingMessage,
}

/// Plays `text` on the call; `false` if it could not be synthesized.
pub async fn say(call: &Call, speech: &dyn Speech, text: &str, plan: &AgentPlan) -> bool {
    match speech
        .speak(text, &plan.voice, &plan.language, call.codec.sample_rate())
        .await
    {
        Ok(audio) => {
            call.media.play(audio);
            true
        }
        Err(e) => {
            tracing::warn!(error = %e, "a prompt could not be synthesized");
            false
        }
    }
}

/// [`say`] for one of the agent's own lines, written into the transcript when it plays.
async fn say_line(
    call: &Call,
    speech: &dyn Speech,
    text: &str,
    plan: &AgentPlan,
    conversation: &mut Conversation,
    at_ms: u64,
) -> bool {
    let said = say(call, speech, text, plan).await;
    if said {
        conversation.transcript.push(Turn {
            role: Speaker::Agent,
            text: text.to_string(),
            start_ms: at_ms,
            end_ms: at_ms,
            interrupted: false,
        });
    }
    said
}

/// What a task of the conversation reports back to the call.
enum Work {
    /// A transcription of the caller's speech.
    Heard {
        result: Result<Transcript, VendorError>,
    },
    /// An early transcription of the caller's speech so far, made at pause `pause`.
    Early {
        pause: u64,
        result: Result<Transcript, VendorError>,
    },
    /// The next sentence of a reply of generation `generation`.
    Sentence { generation: u64, text: String },
    /// The model asked for a function.
    Function { generation: u64, call: ToolCall },
    /// A tool dispatched for `generation` (dispatched `at_ms` into the call) has answered.
    ToolDone {
        generation: u64,
        call: ToolCall,
        run: ToolRun,
        at_ms: u64,
    },
    /// The reply of `generation` is complete (or failed).
    Replied {
        generation: u64,
        result: Result<(), VendorError>,
    },
    /// A sentence's audio.
    Spoken {
        generation: u64,
        index: u32,
        text: String,
        result: Result<Arc<[i16]>, SpeechError>,
    },
}

/// The sending side of a call's work queue.
#[derive(Clone)]
struct WorkTx(tokio::sync::mpsc::UnboundedSender<Box<Work>>);

/// The receiving side of a call's work queue.
struct WorkRx(tokio::sync::mpsc::UnboundedReceiver<Box<Work>>);

/// A call's work queue. Its messages travel boxed: a channel allocates room for 32 messages
/// when it is made, and a call holds its queue for its whole life, so unboxed that room would
/// be about 9 KiB a call.
fn work_queue() -> (WorkTx, WorkRx) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    (WorkTx(tx), WorkRx(rx))
}

impl WorkTx {
    fn send(&self, work: Work) -> Result<(), tokio::sync::mpsc::error::SendError<Box<Work>>> {
        self.0.send(Box::new(work))
    }
}

impl WorkRx {
    async fn recv(&mut self) -> Option<Work> {
        self.0.recv().await.map(|work| *work)
    }
}

/// Aborts a task when dropped: a reply nobody will hear stops being written.
struct Abort(tokio::task::JoinHandle<()>);

impl Drop for Abort {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A sentence and its audio.
type Clip = (String, Arc<[i16]>);

/// The agent's reply being written and spoken.
#[derive(Default)]
struct Reply {
    /// Sentences received from the model so far (their indexes are 0..sentences).
    sentences: u32,
    /// The next sentence to queue for playing.
    next: u32,
    /// Synthesized sentences waiting for their turn (`None`: it could not be synthesized).
    ready: std::collections::BTreeMap<u32, Option<Clip>>,
    /// Queued sentences by tag: text, length in samples and index.
    queued: std::collections::HashMap<u64, (String, usize, u32)>,
    /// Queued sentences not yet played out or cut.
    outstanding: u32,
    /// What has been played of this reply.
    said: String,
    /// What has been played of the sentences from `round_start` on: the words of this reply
    /// the model's context has not had yet (earlier ones went in with their tool calls).
    said_round: String,
    /// The first sentence written after the last tool results.
    round_start: u32,
    /// What the model has written in this round: it goes into the context with the round's
    /// tool calls.
    written: String,
    /// The workspace's tools the model called in this round (dispatched, or answered at
    /// once when the model named no such tool).
    tool_calls: Vec<ToolCall>,
    /// Their results, by call id.
    results: std::collections::HashMap<String, String>,
    /// Tools of this reply still running.
    tools_running: u32,
    /// Since when tools of this reply have been running.
    tools_since: Option<Instant>,
    /// The filler line has been said this turn.
    filler_said: bool,
    /// Model rounds that followed tool results.
    rounds: u32,
    /// The model has finished the reply.
    complete: bool,
    /// The model asked to hang up once the reply is said.
    end_call: bool,
    /// The turn has been written down.
    done: bool,
    started_ms: Option<u64>,
}

impl Reply {
    /// `text` of sentence `index` has been played (all of it, or the words heard before a
    /// cut).
    fn played(&mut self, text: &str, index: u32) {
        append(&mut self.said, text);
        if index >= self.round_start {
            append(&mut self.said_round, text);
        }
    }
}

/// How long an ended call waits for the tools it dispatched to answer, so their runs are on
/// its record.
const TOOL_DRAIN: Duration = Duration::from_secs(5);

/// Runs the agent on an answered call until it ends, then stops its media. `answered`
/// is when the call was connected (its duration counts from there).
pub async fn converse(
    mut call: Call,
    plan: &AgentPlan,
    speech: &Arc<dyn Speech>,
    answered: Instant,
    stop: tokio_util::sync::CancellationToken,
) -> AgentEnd {
    let ms = |at: Instant| at.saturating_duration_since(answered).as_millis() as u64;
    let mut conversation = Conversation::default();
    let (work_tx, mut work) = work_queue();
    let mut history: Vec<ChatMessage> = Vec::new();
    if let Some(mind) = &plan.mind {
        history.push(ChatMessage::System(mind.system_prompt.clone()));
        call.media.control().listen(mind.listen);
    }
    // Generations: a new caller turn or a barge-in makes everything older stale.
    let mut generation: u64 = 0;
    let mut reply = Reply::default();
    let mut writer: Option<Abort> = None;
    // The caller's turn: their words so far, when they started, transcriptions in flight.
    let mut heard = String::new();
    let mut heard_from: Option<u64> = None;
    let mut heard_to: u64 = 0;
    let mut transcribing = 0u32;
    let mut turn_ends_at: Option<Instant> = None;
    let mut speech_started: Option<Instant> = None;
    let mut asked_still_there = false;
    let mut fallback_said = false;
    // Early transcripts: the pause the pending one was made at, and the pause count. The
    // turn ended on one: the utterance it was made of is not transcribed again.
    let mut early: Option<u64> = None;
    let mut pauses = 0u64;
    let mut paused_at_ms = 0u64;
    let mut ended_early = false;
    // Tools dispatched and not yet answered, of any generation.
    let mut tools_in_flight = 0u32;
    let parties = CallParties {
        from: call.from.clone(),
        to: call.to.clone(),
    };

    let mut agent_speaking = false;
    let mut detection = Detection::Off;
    let mut answered_by = None;
    let greet = |call: &Call, conversation: &mut Conversation, history: &mut Vec<ChatMessage>| {
        let text = plan.greeting.trim().to_string();
        let at = ms(Instant::now());
        conversation.transcript.push(Turn {
            role: Speaker::Agent,
            text: text.clone(),
            start_ms: at,
            end_ms: at,
            interrupted: false,
        });
        history.push(ChatMessage::Assistant {
            text: Some(text),
            tool_calls: vec![],
        });
        let _ = call;
    };
    if let Some(amd) = &plan.amd {
        call.media.control().detect_answering_machine(amd.settings);
        detection = Detection::Listening;
    } else {
        // The other party may speak over the agent: the media stops its audio on the frame
        // the VAD hears them (the call then drops the rest of the reply).
        call.media.control().yield_to_speech(true);
    }
    if plan.amd.is_none() && plan.agent_speaks_first && !plan.greeting.trim().is_empty() {
        agent_speaking = say(&call, speech.as_ref(), &plan.greeting, plan).await;
        if agent_speaking {
            greet(&call, &mut conversation, &mut history);
        }
    }
    let deadline = answered + plan.max_duration;
    let mut beep_deadline = deadline;
    let mut peer_speaking = false;
    let mut quiet_since = Instant::now();
    let far_future = deadline + Duration::from_secs(3600);
    // Turns handed to `plan.turns` so far.
    let mut turns_told = 0usize;
    let reason: String = loop {
        tell_turns(plan, &conversation, &mut turns_told);
        let silence_at = quiet_since + plan.silence_timeout;
        let busy = writer.is_some()
            || reply.outstanding > 0
            || transcribing > 0
            || reply.tools_running > 0;
        // A tool still running once everything before it has been said: one filler line.
        let filler_due = reply.tools_running > 0
            && !reply.filler_said
            && reply.outstanding == 0
            && reply.next == reply.sentences;
        let filler_at = reply.tools_since.map_or(far_future, |at| at + FILLER_AFTER);
        let watch_silence =
            !peer_speaking && !agent_speaking && !busy && detection == Detection::Off;
        let long_speech_at = match (&plan.mind, speech_started) {
            (Some(mind), Some(at)) => at + mind.max_continuous_speech,
            _ => far_future,
        };
        tokio::select! {
            _ = stop.cancelled() => {
                call.hangup().await;
                break END_SHUTDOWN.into();
            }
            _ = tokio::time::sleep_until(deadline) => {
                call.hangup().await;
                break END_MAX_DURATION.into();
            }
            _ = tokio::time::sleep_until(beep_deadline), if detection == Detection::AwaitingBeep => {
                call.hangup().await;
                break END_NO_BEEP.into();
            }
            _ = tokio::time::sleep_until(silence_at), if watch_silence => {
                if plan.mind.is_some() && !asked_still_there {
                    // Once, before the silence ends the call.
                    asked_still_there = true;
                    agent_speaking = say_line(&call, speech.as_ref(), STILL_THERE_LINE, plan, &mut conversation, ms(Instant::now())).await;
                    quiet_since = Instant::now();
                    continue;
                }
                call.hangup().await;
                break END_SILENCE.into();
            }
            _ = tokio::time::sleep_until(filler_at), if filler_due => {
                reply.filler_said = true;
                synthesize(&mut reply, FILLER_LINE.into(), generation, speech, plan, &call, &work_tx);
            }
            _ = tokio::time::sleep_until(long_speech_at), if speech_started.is_some() && plan.mind.is_some() => {
                // The caller has spoken without a pause for too long: their turn ends here.
                speech_started = None;
                call.media.control().take_utterance();
                turn_ends_at = Some(Instant::now());
            }
            _ = tokio::time::sleep_until(turn_ends_at.unwrap_or(far_future)), if turn_ends_at.is_some() && transcribing == 0 => {
                turn_ends_at = None;
                let Some(mind) = &plan.mind else { continue };
                let text = std::mem::take(&mut heard).trim().to_string();
                if text.is_empty() {
                    continue;
                }
                conversation.transcript.push(Turn {
                    role: Speaker::User,
                    text: text.clone(),
                    start_ms: heard_from.take().unwrap_or(heard_to),
                    end_ms: heard_to,
                    interrupted: false,
                });
                history.push(ChatMessage::User(text));
                generation += 1;
                flush_tools(&mut reply, &mut history);
                reply = Reply::default();
                writer = Some(start_reply(mind, &history, generation, true, work_tx.clone()));
            }
            Some(done) = work.recv() => match done {
                Work::Heard { result } => {
                    transcribing = transcribing.saturating_sub(1);
                    match result {
                        Ok(t) => {
                            let text = t.text.trim();
                            if !text.is_empty() {
                                if !heard.is_empty() {
                                    heard.push(' ');
                                }
                                heard.push_str(text);
                            }
                            if transcribing == 0 && !peer_speaking && !heard.is_empty() {
                                let grace = match &plan.mind {
                                    Some(mind) if sounds_unfinished(&heard) => mind.unfinished_grace,
                                    _ => Duration::ZERO,
                                };
                                let at = Instant::now() + grace;
                                turn_ends_at = Some(turn_ends_at.map_or(at, |t| t.min(at)));
                            }
                        }
                        Err(e) => {
                            conversation.vendor_failed("transcriber", "speech to text failed", &e, ms(Instant::now()));
                            if !peer_speaking {
                                agent_speaking = say_line(&call, speech.as_ref(), APOLOGY_LINE, plan, &mut conversation, ms(Instant::now())).await;
                            }
                        }
                    }
                }
                Work::Early { pause, result } => {
                    if early != Some(pause) || transcribing > 0 || turn_ends_at.is_some() {
                        continue;
                    }
                    early = None;
                    let Ok(t) = result else { continue };
                    let text = t.text.trim();
                    let mut words = heard.clone();
                    append(&mut words, text);
                    if text.is_empty() || sounds_unfinished(&words) {
                        // Mid-sentence: the VAD's stop decides, and the whole utterance is
                        // transcribed then.
                        continue;
                    }
                    heard = words;
                    heard_to = paused_at_ms;
                    call.media.control().drop_utterance();
                    ended_early = true;
                    speech_started = None;
                    turn_ends_at = Some(Instant::now());
                }
                Work::Sentence { generation: g, text } if g == generation => {
                    append(&mut reply.written, &text);
                    synthesize(&mut reply, text, g, speech, plan, &call, &work_tx);
                }
                Work::Function { generation: g, call: wanted } if g == generation => {
                    let at_ms = ms(Instant::now());
                    let tools = plan.mind.as_ref().and_then(|m| m.tools.clone()).filter(|t| {
                        reply.rounds < MAX_TOOL_ROUNDS && t.specs().iter().any(|s| s.name == wanted.name)
                    });
                    if wanted.name == END_CALL {
                        reply.end_call = true;
                        conversation.events.push(builtin_event(&wanted, at_ms));
                    } else if let Some(tools) = tools {
                        // Dispatched once, now: its generation is current.
                        reply.tool_calls.push(wanted.clone());
                        reply.tools_running += 1;
                        reply.tools_since.get_or_insert_with(Instant::now);
                        tools_in_flight += 1;
                        let (parties, work_tx) = (parties.clone(), work_tx.clone());
                        tokio::spawn(async move {
                            let run = tools.run(&wanted, &parties).await;
                            let _ = work_tx.send(Work::ToolDone { generation: g, call: wanted, run, at_ms });
                        });
                    } else {
                        let run = unknown_function(&wanted, at_ms);
                        reply.results.insert(wanted.id.clone(), run.content);
                        reply.tool_calls.push(wanted);
                        conversation.events.push(run.event);
                    }
                }
                Work::ToolDone { generation: g, call: done, mut run, at_ms } => {
                    tools_in_flight = tools_in_flight.saturating_sub(1);
                    run.event.at_ms = at_ms;
                    conversation.events.push(run.event);
                    if g == generation {
                        reply.tools_running = reply.tools_running.saturating_sub(1);
                        if reply.tools_running == 0 {
                            reply.tools_since = None;
                        }
                        reply.results.insert(done.id, run.content);
                        if let Some(mind) = &plan.mind
                            && let Some(next) = follow_up(&mut reply, &mut history, mind, generation, &work_tx)
                        {
                            writer = Some(next);
                        }
                    } else {
                        // It ran for a turn that was cut short: the model still learns what it did.
                        history.push(ChatMessage::Assistant { text: None, tool_calls: vec![done.clone()] });
                        history.push(ChatMessage::Tool { tool_call_id: done.id, content: run.content });
                    }
                    if reply_said(&mut reply, &mut conversation, &mut history, ms(Instant::now()))
                        && reply.end_call
                    {
                        call.hangup().await;
                        break END_AGENT.into();
                    }
                }
                Work::Replied { generation: g, result } if g == generation => {
                    writer = None;
                    reply.complete = true;
                    if let Err(e) = result {
                        conversation.vendor_failed("chat_model", "the model failed", &e, ms(Instant::now()));
                        if reply.sentences == 0 {
                            agent_speaking = say_line(&call, speech.as_ref(), APOLOGY_LINE, plan, &mut conversation, ms(Instant::now())).await;
                        }
                    }
                    if let Some(mind) = &plan.mind
                        && let Some(next) = follow_up(&mut reply, &mut history, mind, generation, &work_tx)
                    {
                        writer = Some(next);
                    }
                    if reply_said(&mut reply, &mut conversation, &mut history, ms(Instant::now()))
                        && reply.end_call
                    {
                        call.hangup().await;
                        break END_AGENT.into();
                    }
                }
                Work::Spoken { generation: g, index, text, result } if g == generation => {
                    let clip = match result {
                        Ok(audio) if !audio.is_empty() => Some((text, audio)),
                        Ok(_) => None,
                        Err(e) => {
                            conversation.vendor_failed("speech", "a reply could not be synthesized", &e, ms(Instant::now()));
                            None
                        }
                    };
                    reply.ready.insert(index, clip);
                    while let Some(clip) = reply.ready.remove(&reply.next) {
                        let index = reply.next;
                        reply.next += 1;
                        let Some((text, audio)) = clip else { continue };
                        let tag = (generation << 20) | u64::from(index + 1);
                        reply.queued.insert(tag, (text, audio.len(), index));
                        reply.outstanding += 1;
                        reply.started_ms.get_or_insert_with(|| ms(Instant::now()));
                        call.media.control().play_tagged(audio, tag);
                        agent_speaking = true;
                    }
                    if reply_said(&mut reply, &mut conversation, &mut history, ms(Instant::now()))
                        && reply.end_call
                    {
                        call.hangup().await;
                        break END_AGENT.into();
                    }
                }
                // Stale: a newer turn or a barge-in replaced its generation. A function call
                // among them is never dispatched.
                Work::Sentence { .. } | Work::Function { .. } | Work::Replied { .. } | Work::Spoken { .. } => {}
            },
            event = call.next_event() => match event {
                Some(CallEvent::Media(MediaEvent::SpeechStarted | MediaEvent::Resumed)) => {
                    // Speaking again (after the VAD's stop, or after a pause) makes any early
                    // transcript stale.
                    early = None;
                    ended_early = false;
                    peer_speaking = true;
                    asked_still_there = false;
                    turn_ends_at = None;
                    speech_started = Some(Instant::now());
                    heard_from.get_or_insert_with(|| ms(Instant::now()));
                    if detection == Detection::Off
                        && (agent_speaking || writer.is_some() || reply.tools_running > 0)
                    {
                        // The other party talks over the agent: the agent yields, and what it
                        // was about to say is dropped.
                        call.media.clear();
                        generation += 1;
                        writer = None;
                        flush_tools(&mut reply, &mut history);
                        if reply.outstanding == 0 {
                            finish_reply(&mut reply, &mut conversation, &mut history, ms(Instant::now()), true);
                        }
                    }
                }
                Some(CallEvent::Media(MediaEvent::SpeechStopped)) => {
                    peer_speaking = false;
                    speech_started = None;
                    quiet_since = Instant::now();
                    heard_to = ms(Instant::now());
                    if plan.mind.is_none() && detection == Detection::Off && !fallback_said {
                        // No model to answer with: say so, once.
                        fallback_said = true;
                        agent_speaking = say_line(&call, speech.as_ref(), FALLBACK_LINE, plan, &mut conversation, ms(Instant::now())).await;
                    }
                }
                Some(CallEvent::Media(MediaEvent::Utterance(audio))) => {
                    if std::mem::take(&mut ended_early) {
                        // What the turn already ended on.
                        continue;
                    }
                    if let Some(mind) = &plan.mind {
                        transcribing += 1;
                        let transcriber = mind.transcriber.clone();
                        let work_tx = work_tx.clone();
                        let (rate, language) = (call.codec.sample_rate(), plan.language.clone());
                        tokio::spawn(async move {
                            let result = transcriber.transcribe(&audio, rate, &language).await;
                            let _ = work_tx.send(Work::Heard { result });
                        });
                    }
                }
                Some(CallEvent::Media(MediaEvent::Pause(audio))) => {
                    // The caller has paused: an early transcript may end their turn before the
                    // VAD's stop, if their words end a sentence.
                    if let Some(mind) = &plan.mind
                        && transcribing == 0
                        && detection == Detection::Off
                    {
                        pauses += 1;
                        early = Some(pauses);
                        paused_at_ms = ms(Instant::now()).saturating_sub((mind.listen.pause_secs * 1000.0) as u64);
                        let transcriber = mind.transcriber.clone();
                        let work_tx = work_tx.clone();
                        let (rate, language, pause) = (call.codec.sample_rate(), plan.language.clone(), pauses);
                        tokio::spawn(async move {
                            let result = transcriber.transcribe(&audio, rate, &language).await;
                            let _ = work_tx.send(Work::Early { pause, result });
                        });
                    }
                }
                Some(CallEvent::Media(MediaEvent::PlayedOut(tag))) => {
                    if let Some((text, _, index)) = reply.queued.remove(&tag) {
                        reply.outstanding = reply.outstanding.saturating_sub(1);
                        reply.played(&text, index);
                    }
                    if reply_said(&mut reply, &mut conversation, &mut history, ms(Instant::now()))
                        && reply.end_call
                    {
                        call.hangup().await;
                        break END_AGENT.into();
                    }
                }
                Some(CallEvent::Media(MediaEvent::Cut { tag, played })) => {
                    if let Some((text, total, index)) = reply.queued.remove(&tag) {
                        reply.played(&words_heard(&text, played, total), index);
                    }
                    reply.outstanding = 0;
                    reply.queued.clear();
                    finish_reply(&mut reply, &mut conversation, &mut history, ms(Instant::now()), true);
                }
                Some(CallEvent::Media(MediaEvent::PlayoutDone)) => {
                    agent_speaking = false;
                    quiet_since = Instant::now();
                    if detection == Detection::LeavingMessage {
                        call.hangup().await;
                        break END_VOICEMAIL_LEFT.into();
                    }
                }
                Some(CallEvent::Media(MediaEvent::Amd(verdict))) => {
                    if detection != Detection::Listening {
                        continue;
                    }
                    answered_by = Some(verdict.answered_by);
                    tracing::info!(answered_by = verdict.answered_by.as_str(), reason = %verdict.reason, after_ms = verdict.after_ms, "answering-machine detection");
                    if verdict.answered_by.counts_as_human() {
                        detection = Detection::Off;
                        call.media.control().yield_to_speech(true);
                        quiet_since = Instant::now();
                        if plan.agent_speaks_first && !plan.greeting.trim().is_empty() {
                            agent_speaking = say(&call, speech.as_ref(), &plan.greeting, plan).await;
                            if agent_speaking {
                                greet(&call, &mut conversation, &mut history);
                            }
                        }
                    } else if plan.amd.as_ref().is_some_and(|a| a.voicemail_message.is_some()) {
                        detection = Detection::AwaitingBeep;
                        beep_deadline = Instant::now()
                            + Duration::from_millis(u64::from(BEEP_WINDOW_MS));
                    } else {
                        call.hangup().await;
                        break END_MACHINE.into();
                    }
                }
                Some(CallEvent::Media(MediaEvent::Beep(BeepEvent::Ended { .. }))) => {
                    if detection != Detection::AwaitingBeep {
                        continue;
                    }
                    let message = plan.amd.as_ref().and_then(|a| a.voicemail_message.as_deref());
                    if let Some(message) = message
                        && say(&call, speech.as_ref(), message, plan).await
                    {
                        agent_speaking = true;
                        detection = Detection::LeavingMessage;
                    } else {
                        call.hangup().await;
                        break END_MACHINE.into();
                    }
                }
                Some(CallEvent::Media(MediaEvent::Beep(BeepEvent::Started { .. }))) => {}
                Some(CallEvent::Ended(cause)) => break cause.name(call.direction).into(),
                None => {
                    let cause = call.end_cause().unwrap_or(EndCause::Failed);
                    break cause.name(call.direction).into();
                }
            }
        }
    };
    drop(writer);
    // Tools still running when the call ended are waited for a little, so their runs are on
    // the call's record (they were dispatched; the call cannot stop them).
    if tools_in_flight > 0 && !stop.is_cancelled() {
        let until = Instant::now() + TOOL_DRAIN;
        while tools_in_flight > 0 {
            match tokio::time::timeout_at(until, work.recv()).await {
                Ok(Some(Work::ToolDone { mut run, at_ms, .. })) => {
                    tools_in_flight -= 1;
                    run.event.at_ms = at_ms;
                    conversation.events.push(run.event);
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
    }
    // What the caller said last, if the call ended before the agent could answer it.
    let heard = heard.trim();
    if !heard.is_empty() {
        conversation.transcript.push(Turn {
            role: Speaker::User,
            text: heard.to_string(),
            start_ms: heard_from.unwrap_or(heard_to),
            end_ms: heard_to.max(heard_from.unwrap_or(0)),
            interrupted: false,
        });
    }
    if !reply.said.is_empty() {
        finish_reply(
            &mut reply,
            &mut conversation,
            &mut history,
            ms(Instant::now()),
            true,
        );
    }
    tell_turns(plan, &conversation, &mut turns_told);
    if let Some(sink) = &plan.turns {
        sink.flush().await;
    }
    let duration_secs = answered.elapsed().as_secs() as i64;
    let stats = call.finish().await.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "a call's media ended badly");
        Default::default()
    });
    AgentEnd {
        reason,
        duration_secs,
        stats,
        answered_by,
        conversation,
    }
}

/// Hands the transcript's turns from `told` on to the plan's sink.
fn tell_turns(plan: &AgentPlan, conversation: &Conversation, told: &mut usize) {
    let Some(sink) = &plan.turns else {
        *told = conversation.transcript.len();
        return;
    };
    while let Some(turn) = conversation.transcript.get(*told) {
        *told += 1;
        sink.final_turn(*told as u32, turn);
    }
}

/// `text` after `said`, a space between.
fn append(said: &mut String, text: &str) {
    if text.is_empty() {
        return;
    }
    if !said.is_empty() {
        said.push(' ');
    }
    said.push_str(text);
}

/// Ends the agent's turn once the model has finished and every sentence has been played (or
/// could not be synthesized); `true` if it has ended now.
fn reply_said(
    reply: &mut Reply,
    conversation: &mut Conversation,
    history: &mut Vec<ChatMessage>,
    now_ms: u64,
) -> bool {
    if !reply.complete
        || reply.outstanding > 0
        || reply.next < reply.sentences
        || reply.done
        || reply.tools_running > 0
        || !reply.tool_calls.is_empty()
    {
        return false;
    }
    reply.done = true;
    finish_reply(reply, conversation, history, now_ms, false);
    true
}

/// Ends the agent's turn: what was played goes into the transcript and the model's context
/// (only that, when it was interrupted), and the reply is cleared.
fn finish_reply(
    reply: &mut Reply,
    conversation: &mut Conversation,
    history: &mut Vec<ChatMessage>,
    now_ms: u64,
    interrupted: bool,
) {
    let said = std::mem::take(&mut reply.said);
    let said_round = std::mem::take(&mut reply.said_round);
    let started = reply.started_ms.take();
    reply.queued.clear();
    reply.outstanding = 0;
    if said.is_empty() {
        return;
    }
    conversation.transcript.push(Turn {
        role: Speaker::Agent,
        text: said,
        start_ms: started.unwrap_or(now_ms),
        end_ms: now_ms,
        interrupted,
    });
    if said_round.is_empty() {
        return;
    }
    history.push(ChatMessage::Assistant {
        text: Some(if interrupted {
            format!("{said_round} [interrupted]")
        } else {
            said_round
        }),
        tool_calls: vec![],
    });
}

/// Queues `text` of `generation` for synthesis as the reply's next sentence; its audio comes
/// back as [`Work::Spoken`] and plays in sentence order.
fn synthesize(
    reply: &mut Reply,
    text: String,
    generation: u64,
    speech: &Arc<dyn Speech>,
    plan: &AgentPlan,
    call: &Call,
    work: &WorkTx,
) {
    let index = reply.sentences;
    reply.sentences += 1;
    let (speech, work) = (speech.clone(), work.clone());
    let (voice, language, rate) = (
        plan.voice.clone(),
        plan.language.clone(),
        call.codec.sample_rate(),
    );
    tokio::spawn(async move {
        let result = speech.speak(&text, &voice, &language, rate).await;
        let _ = work.send(Work::Spoken {
            generation,
            index,
            text,
            result,
        });
    });
}

/// The arguments the model wrote, as JSON (as a string when they are not JSON).
fn arguments_of(call: &ToolCall) -> serde_json::Value {
    serde_json::from_str(&call.arguments)
        .unwrap_or_else(|_| serde_json::Value::String(call.arguments.clone()))
}

/// The record of a built-in function the model called.
fn builtin_event(call: &ToolCall, at_ms: u64) -> ToolEvent {
    ToolEvent {
        name: call.name.clone(),
        tool_id: None,
        arguments: arguments_of(call),
        status: ToolStatus::Succeeded,
        latency_ms: 0,
        response_preview: None,
        status_code: None,
        error: None,
        delivery_id: None,
        at_ms,
    }
}

/// The answer to a function the model named but was not offered: nothing is dispatched, and
/// the model is told.
fn unknown_function(call: &ToolCall, at_ms: u64) -> ToolRun {
    let error = format!("there is no function named {:?} on this call", call.name);
    ToolRun {
        content: serde_json::json!({ "error": error }).to_string(),
        event: ToolEvent {
            status: ToolStatus::Failed,
            error: Some(error),
            ..builtin_event(call, at_ms)
        },
    }
}

/// The tool calls of a reply cut short go into the context with the results already in (the
/// others follow when they answer).
fn flush_tools(reply: &mut Reply, history: &mut Vec<ChatMessage>) {
    let calls = std::mem::take(&mut reply.tool_calls);
    let (answered, _): (Vec<ToolCall>, Vec<ToolCall>) = calls
        .into_iter()
        .partition(|c| reply.results.contains_key(&c.id));
    reply.tools_running = 0;
    reply.tools_since = None;
    if answered.is_empty() {
        return;
    }
    history.push(ChatMessage::Assistant {
        text: None,
        tool_calls: answered.clone(),
    });
    for call in answered {
        if let Some(content) = reply.results.remove(&call.id) {
            history.push(ChatMessage::Tool {
                tool_call_id: call.id,
                content,
            });
        }
    }
}

/// Once the model has finished a round and every tool it called has answered: the round's
/// text, calls and results go into the context, and (unless the model also hung up) the
/// model continues the reply with them.
fn follow_up(
    reply: &mut Reply,
    history: &mut Vec<ChatMessage>,
    mind: &Mind,
    generation: u64,
    work: &WorkTx,
) -> Option<Abort> {
    if !reply.complete || reply.tools_running > 0 || reply.tool_calls.is_empty() {
        return None;
    }
    let text = std::mem::take(&mut reply.written);
    let calls = std::mem::take(&mut reply.tool_calls);
    history.push(ChatMessage::Assistant {
        text: (!text.trim().is_empty()).then_some(text),
        tool_calls: calls.clone(),
    });
    for call in calls {
        let content = reply.results.remove(&call.id).unwrap_or_default();
        history.push(ChatMessage::Tool {
            tool_call_id: call.id,
            content,
        });
    }
    if reply.end_call {
        return None;
    }
    reply.rounds += 1;
    reply.complete = false;
    reply.round_start = reply.sentences;
    reply.said_round.clear();
    Some(start_reply(
        mind,
        history,
        generation,
        reply.rounds < MAX_TOOL_ROUNDS,
        work.clone(),
    ))
}

/// Starts the model's reply to the conversation so far: its sentences, function calls and end
/// come back as [`Work`] of `generation`. The workspace's tools are offered with the built-in
/// functions when `offer_tools`.
fn start_reply(
    mind: &Mind,
    history: &[ChatMessage],
    generation: u64,
    offer_tools: bool,
    work: WorkTx,
) -> Abort {
    let model = mind.model.clone();
    let mut tools = builtin_tools();
    if offer_tools && let Some(offered) = &mind.tools {
        tools.extend(offered.specs().iter().cloned());
    }
    let request = ChatRequest {
        messages: history.to_vec(),
        tools,
        temperature: mind.temperature,
        max_tokens: None,
    };
    Abort(tokio::spawn(async move {
        use futures_util::StreamExt;
        let mut sentences = Sentences::default();
        let result = async {
            let mut stream = model.stream(request).await?;
            while let Some(event) = stream.next().await {
                match event? {
                    ChatEvent::Text(text) => {
                        for text in sentences.push(&text) {
                            let _ = work.send(Work::Sentence { generation, text });
                        }
                    }
                    ChatEvent::ToolCall(call) => {
                        let _ = work.send(Work::Function { generation, call });
                    }
                    ChatEvent::Done { .. } => break,
                }
            }
            Ok(())
        }
        .await;
        if let Some(text) = sentences.finish() {
            let _ = work.send(Work::Sentence { generation, text });
        }
        let _ = work.send(Work::Replied { generation, result });
    }))
}
