//! The session: the loop of one conversing call, its timers and limits, and its end. What
//! happens (line events, work coming back, a timer) is handed to the part it concerns;
//! nothing here waits on a vendor.

use std::sync::Arc;

use switchboard_sip::media::MediaEvent;
use tokio::time::Instant;

use super::course::Course;
use super::keypad::Keypad;
use super::line::{Clip, Line, LineEvent};
use super::listening::Listening;
use super::machine::{Detection, Machine, Step};
use super::record::Record;
use super::reply::Reply;
use super::work::{Voice, Work, WorkRx, WorkTx, work_queue};
use super::{AgentEnd, AgentPlan, EndReason, Speech};
use crate::call_tools::CallParties;
use crate::conversation::Unheard;
use crate::turns::{FALLBACK_LINE, FILLER_AFTER, FILLER_LINE, STILL_THERE_LINE};
use crate::vendors::ChatMessage;

/// Runs the agent on an answered call until it ends, then stops the line's media. `answered`
/// is when the call was connected (its duration counts from there); `stop` ends it (service
/// shutdown).
pub async fn converse(
    line: Box<dyn Line>,
    plan: &AgentPlan,
    speech: &Arc<dyn Speech>,
    answered: Instant,
    stop: tokio_util::sync::CancellationToken,
) -> AgentEnd {
    let (work, mut inbox) = work_queue();
    let mut agent = Agent::new(line, plan, speech.clone(), work, answered);
    let reason = match agent.start() {
        Some(reason) => reason,
        None => agent.run(&mut inbox, &stop).await,
    };
    agent.line.hangup().await;
    agent.end(reason, &mut inbox, &stop).await
}

/// A timer of the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Timer {
    /// The call's cap on length.
    Limit,
    /// No beep came from the machine in time.
    NoBeep,
    /// Neither side has spoken for the silence timeout.
    Silence,
    /// A tool runs long: the filler line.
    Filler,
    /// The caller has spoken too long without a pause.
    LongSpeech,
    /// The caller's turn ends.
    TurnEnd,
    /// The caller's keypad entry times out.
    Keypad,
}

/// One conversing call: its line, its parts and what it has said and heard.
pub(super) struct Agent<'a> {
    pub(super) plan: &'a AgentPlan,
    pub(super) speech: Arc<dyn Speech>,
    pub(super) line: Box<dyn Line>,
    pub(super) work: WorkTx,
    pub(super) answered: Instant,
    pub(super) deadline: Instant,
    /// How sentences are voiced; none on a line that takes text.
    pub(super) voice: Option<Voice>,
    pub(super) parties: CallParties,
    /// The call's record: the conversation, the model's context, the turns told.
    pub(super) record: Record,
    /// The utterance under way (or the last one): what comes back for another is stale.
    pub(super) reply: Reply,
    pub(super) listening: Listening,
    pub(super) keypad: Keypad,
    pub(super) machine: Machine,
    pub(super) fallback_said: bool,
    /// The agent has said it cannot go on without a chat model (the call ends on it).
    pub(super) no_model_said: bool,
    /// Tools dispatched and not yet answered, of any utterance.
    pub(super) tools_in_flight: u32,
    /// The director's course: the director, steps waiting, dispatches, the transfer.
    pub(super) course: Course,
    /// The line has been told the agent waits for the other party.
    floor_given: bool,
}

impl<'a> Agent<'a> {
    fn new(
        line: Box<dyn Line>,
        plan: &'a AgentPlan,
        speech: Arc<dyn Speech>,
        work: WorkTx,
        answered: Instant,
    ) -> Agent<'a> {
        let voice = line.sample_rate().map(|rate| Voice {
            voice: plan.voice.clone(),
            language: plan.language.clone(),
            rate,
        });
        let parties = line.parties();
        Agent {
            plan,
            speech,
            line,
            work,
            answered,
            deadline: answered + plan.max_duration,
            voice,
            parties,
            record: Record::default(),
            reply: Reply::default(),
            listening: Listening::new(Instant::now()),
            keypad: Keypad::default(),
            machine: Machine::new(plan),
            fallback_said: false,
            no_model_said: false,
            tools_in_flight: 0,
            course: Course::new(plan.mind.as_ref().map(|m| m.director.clone())),
            floor_given: false,
        }
    }

    /// Milliseconds since the answer.
    pub(super) fn now_ms(&self) -> u64 {
        Instant::now()
            .saturating_duration_since(self.answered)
            .as_millis() as u64
    }

    /// Sets the line up and greets, unless answering-machine detection holds the greeting.
    fn start(&mut self) -> Option<EndReason> {
        if let Some(mind) = &self.plan.mind {
            self.line.listen(mind.listen);
        }
        if let Some(amd) = &self.plan.amd {
            self.line.detect_answering_machine(amd.settings);
        } else {
            // The other party may speak over the agent: the line stops its audio on the frame
            // the VAD hears them (the call then drops the rest of the reply).
            self.line.yield_to_speech(true);
            return self.greet();
        }
        None
    }

    /// The opening of the director's course, or else the greeting when the agent speaks
    /// first; once.
    fn greet(&mut self) -> Option<EndReason> {
        if !self.course.open() {
            return None;
        }
        let now_ms = self.now_ms();
        let opening = self.course.director_mut().and_then(|d| d.opening(now_ms));
        if let Some(steps) = opening {
            return self.act(steps);
        }
        let plan = self.plan;
        let greeting = plan.greeting.trim();
        if plan.agent_speaks_first && !greeting.is_empty() {
            self.say(greeting);
        }
        None
    }

    /// The loop: until the call ends, why.
    async fn run(
        &mut self,
        inbox: &mut WorkRx,
        stop: &tokio_util::sync::CancellationToken,
    ) -> EndReason {
        loop {
            self.tell_turns();
            self.give_floor();
            let (at, timer) = self.next_timer();
            let step = tokio::select! {
                _ = stop.cancelled() => Some(EndReason::Shutdown),
                _ = tokio::time::sleep_until(at) => self.on_timer(timer),
                Some(work) = inbox.recv() => self.on_work(work),
                event = self.line.next_event() => self.on_event(event),
            };
            if let Some(reason) = step {
                return reason;
            }
        }
    }

    /// Tells the line once each time the agent has nothing left to say or do but wait for
    /// the other party.
    fn give_floor(&mut self) {
        let waiting = !self.reply.writing()
            && !self.reply.in_progress()
            && !self.reply.sounding()
            && self.course.idle()
            && self.listening.idle()
            && self.keypad.idle()
            && self.machine.detection() == Detection::Off;
        if waiting && !self.floor_given {
            self.line.floor();
        }
        self.floor_given = waiting;
    }

    /// The next timer due, and when.
    fn next_timer(&self) -> (Instant, Timer) {
        let mut next = (self.deadline, Timer::Limit);
        let mut consider = |at: Option<Instant>, timer: Timer| {
            if let Some(at) = at
                && at < next.0
            {
                next = (at, timer);
            }
        };
        consider(self.machine.beep_due(), Timer::NoBeep);
        let busy = self.reply.writing()
            || self.reply.in_progress()
            || self.listening.transcribing()
            || self.reply.tools_pending();
        let watch_silence = !self.listening.is_speaking()
            && !self.reply.sounding()
            && !busy
            && self.machine.detection() == Detection::Off;
        consider(
            watch_silence.then(|| self.listening.silence_due(self.plan.silence_timeout)),
            Timer::Silence,
        );
        let filler = self.reply.tools_since().map(|at| at + FILLER_AFTER);
        consider(filler.filter(|_| self.reply.filler_due()), Timer::Filler);
        if let Some(mind) = &self.plan.mind {
            let long = self.listening.long_speech_due(mind.max_continuous_speech);
            consider(long, Timer::LongSpeech);
        }
        consider(self.listening.ends_at(), Timer::TurnEnd);
        consider(self.keypad.due(&self.gather()), Timer::Keypad);
        next
    }

    fn on_timer(&mut self, timer: Timer) -> Option<EndReason> {
        match timer {
            Timer::Limit => return Some(EndReason::MaxDuration),
            Timer::NoBeep => return Some(EndReason::VoicemailNoBeep),
            Timer::Silence => {
                // Once, before the silence ends the call.
                if self.plan.mind.is_none() || !self.listening.ask_still_there(Instant::now()) {
                    return Some(EndReason::SilenceTimeout);
                }
                self.say(STILL_THERE_LINE);
            }
            Timer::Filler => {
                self.reply.filler_said();
                self.say(FILLER_LINE);
            }
            Timer::LongSpeech => {
                self.listening.too_long(Instant::now());
                self.line.take_utterance();
            }
            Timer::TurnEnd => return self.end_turn(),
            Timer::Keypad => return self.keypad_timed_out(),
        }
        None
    }

    fn on_event(&mut self, event: LineEvent) -> Option<EndReason> {
        let event = match event {
            LineEvent::Ended(reason) => return Some(reason),
            LineEvent::Transferred(result) => return self.transferred(result),
            // The call is being handed over: the caller waits for it.
            _ if self.course.is_transferring() => return None,
            LineEvent::Said(text) => {
                let (now, now_ms) = (Instant::now(), self.now_ms());
                self.caller_speaks();
                self.listening.speech_stopped(now_ms);
                self.listening.said(&text, now, now_ms);
                self.listening.quiet(now);
                self.fallback();
                return None;
            }
            LineEvent::Media(event) => event,
        };
        match event {
            MediaEvent::SpeechStarted | MediaEvent::Resumed => self.caller_speaks(),
            MediaEvent::SpeechStopped => {
                self.listening.speech_stopped(self.now_ms());
                self.listening.quiet(Instant::now());
                if self.machine.greet_early(self.plan)
                    && let Some(reason) = self.greet()
                {
                    return Some(reason);
                }
                self.fallback();
            }
            MediaEvent::Utterance(audio) => return self.utterance(audio),
            MediaEvent::Pause(audio) => {
                // The callee's first words have paused: a greeting held for detection starts.
                if self.machine.greet_early(self.plan)
                    && let Some(reason) = self.greet()
                {
                    return Some(reason);
                }
                self.pause(audio);
            }
            MediaEvent::PlayedOut(tag) => {
                self.reply.played_out(tag);
                return self.reply_said();
            }
            MediaEvent::Cut { tag, played } => {
                self.reply.cut(tag, played);
                let now_ms = self.now_ms();
                self.reply.finish(&mut self.record, now_ms, true);
                return self.cut_reported();
            }
            MediaEvent::PlayoutDone => {
                self.reply.line_idle();
                self.listening.quiet(Instant::now());
                if self.machine.detection() == Detection::LeavingMessage
                    && !self.reply.in_progress()
                {
                    return Some(EndReason::VoicemailLeft);
                }
                if !self.reply.playing() {
                    return self.cut_reported();
                }
            }
            MediaEvent::Amd(verdict) => {
                let step = self.machine.verdict(&verdict, self.plan, self.answered);
                return self.machine_step(step);
            }
            MediaEvent::Beep(switchboard_sip::amd::BeepEvent::Ended { .. }) => {
                let step = self.machine.beep_ended(self.plan);
                return self.machine_step(step);
            }
            MediaEvent::Beep(_) => {}
            MediaEvent::DigitsSent => return self.digits_sent(),
            MediaEvent::Digit(digit) => return self.pressed(digit),
        }
        None
    }

    fn on_work(&mut self, work: Work) -> Option<EndReason> {
        match work {
            Work::Heard { result } => self.heard(result),
            Work::Early { pause, result } => {
                if self.listening.early(pause, result, Instant::now()) {
                    self.line.drop_utterance();
                }
            }
            Work::Sentence { speech, .. }
                if self.reply.is_current(speech) && self.course.is_silent() => {}
            Work::Sentence { speech, text } if self.reply.is_current(speech) => {
                self.reply.written(&text);
                let index = self.reply.add_sentence();
                self.voice(index, text);
            }
            Work::Function { speech, call } if self.reply.is_current(speech) => {
                return self.function(call);
            }
            Work::ToolDone {
                speech,
                call,
                run,
                at_ms,
            } => return self.tool_done(speech, call, run, at_ms),
            Work::Replied { speech, result } if self.reply.is_current(speech) => {
                if let Some(reason) = self.replied(result) {
                    return Some(reason);
                }
                return self.round_over();
            }
            Work::Dispatched {
                outcome,
                event,
                at_ms,
            } => return self.dispatched(outcome, event, at_ms),
            Work::Spoken {
                speech,
                index,
                text,
                result,
            } if self.reply.is_current(speech) => {
                let clip = match result {
                    Ok(audio) if !audio.is_empty() => Some(Clip {
                        text,
                        audio: Some(audio),
                    }),
                    Ok(_) => None,
                    Err(e) => {
                        let at = self.now_ms();
                        self.record.vendor_failed(
                            "speech",
                            "a reply could not be synthesized",
                            &e,
                            at,
                        );
                        None
                    }
                };
                self.ready(index, clip);
                return self.reply_said();
            }
            // Stale: its utterance was interrupted or replaced (a newer turn). A function
            // call among them is never dispatched.
            Work::Sentence { .. }
            | Work::Function { .. }
            | Work::Replied { .. }
            | Work::Spoken { .. } => {}
        }
        None
    }

    /// The other party speaks (or goes on after a pause): the agent yields, and what it was
    /// about to say is dropped.
    fn caller_speaks(&mut self) {
        self.listening.speech_started(Instant::now(), self.now_ms());
        self.barge_in();
    }

    /// The other party speaks or presses a key: whatever the agent is saying or about to say
    /// stops (not while answering-machine detection decides).
    pub(super) fn barge_in(&mut self) {
        let agent_busy = self.reply.sounding() || self.reply.writing() || self.reply.in_progress();
        if self.machine.detection() != Detection::Off || !agent_busy {
            return;
        }
        self.line.clear();
        self.interrupt();
    }

    /// Without speech to text: the caller's turn goes on the record as unheard, and the
    /// fallback line is said, once, when the caller has spoken.
    fn fallback(&mut self) {
        if self.plan.mind.is_some() || self.machine.detection() != Detection::Off {
            return;
        }
        self.record_unheard(Unheard::NoSpeechToText);
        if !self.fallback_said {
            self.fallback_said = true;
            self.say(FALLBACK_LINE);
        }
    }

    /// The caller's turn so far could not be heard (`why`): it goes on the record, empty, at
    /// the course's position.
    pub(super) fn record_unheard(&mut self, why: Unheard) {
        if let Some(mut turn) = self.listening.take_unheard(why) {
            turn.node = self.course.position();
            self.record.turn(turn);
        }
    }

    fn machine_step(&mut self, step: Option<Step>) -> Option<EndReason> {
        match step? {
            Step::Converse { greet } => {
                self.line.yield_to_speech(true);
                self.listening.quiet(Instant::now());
                if greet {
                    return self.greet();
                }
            }
            Step::AwaitBeep => {
                // A greeting started early stops at once.
                if self.reply.in_progress() {
                    self.line.clear();
                    self.interrupt();
                }
            }
            Step::LeaveMessage(message) => self.say(&message),
            Step::End(reason) => return Some(reason),
        }
        None
    }

    /// The caller's turn has ended: it goes into the transcript and the context, and the
    /// director says what follows (the model's reply, for a prompt agent). While detection
    /// still decides, the turn is only written down.
    fn end_turn(&mut self) -> Option<EndReason> {
        let mut turn = self.listening.take_turn()?;
        let words = turn.text.clone();
        self.record.context(ChatMessage::User(turn.text.clone()));
        turn.node = self.course.position();
        self.record.turn(turn);
        self.course.director()?;
        if self.machine.detection() != Detection::Off {
            return None;
        }
        // What was under way for the last turn is stale: a new utterance answers this one.
        self.course.caller_turn();
        self.reply.flush_tools(&mut self.record);
        self.reply = Reply::default();
        let now_ms = self.now_ms();
        let steps = self.course.director_mut()?.caller_turn(&words, now_ms);
        self.act(steps)
    }

    /// Hands the transcript's turns not yet told to the plan's sink.
    pub(super) fn tell_turns(&mut self) {
        // Each turn carries where the director's course was when it was written down.
        let position = self.course.position();
        self.record.tell(self.plan.turns.as_deref(), position);
    }
}
