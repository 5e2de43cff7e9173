//! The agent's rules on a scripted line, in virtual time: every figure below is exact, in
//! milliseconds from the answer. Speech is 50 ms per character after a 100 ms synthesis; a
//! transcription takes 150 ms.

use std::sync::Arc;
use std::time::Duration;

use switchboard_sip::amd::{AmdReason, AmdSettings, AmdVerdict, AnsweredBy};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::director::PromptAgent;
use super::scripted::{
    ScriptedLine, StandInModel, StandInSpeech, StandInTools, Step, spoken_ms, stand_in_mind,
};
use super::text::text_line;
use super::told::Told;
use super::{AgentEnd, AgentPlan, AmdPlan, EndReason, Mind, Speech, converse};
use crate::call_tools::CallParties;
use crate::conversation::{Speaker, Turn};
use crate::turns::{APOLOGY_LINE, FALLBACK_LINE, FILLER_LINE, STILL_THERE_LINE};
use crate::vendors::{ChatMessage, VendorError};

const GREETING: &str = "Hello, this is Ada from Acme.";
/// When a synthesized line starts playing, after its synthesis.
const SYNTH: u64 = 100;
const TRANSCRIBE: u64 = 150;

fn mind(model: Arc<StandInModel>, tools: Option<Arc<StandInTools>>) -> Mind {
    let director = Box::new(PromptAgent {
        system_prompt: "You are Ada.".into(),
        temperature: None,
    });
    Mind {
        tools: tools.map(|t| t as _),
        ..stand_in_mind(model, director)
    }
}

fn plan(mind: Option<Mind>, greeting: &str) -> AgentPlan {
    AgentPlan {
        greeting: greeting.into(),
        agent_speaks_first: !greeting.is_empty(),
        voice: "alloy".into(),
        language: "en-US".into(),
        silence_timeout: Duration::from_secs(30),
        max_duration: Duration::from_secs(600),
        amd: None,
        mind,
        turns: None,
    }
}

/// A model that is never asked.
fn silent_model() -> Arc<StandInModel> {
    StandInModel::new(|_, _| vec![Step::Text("Unexpected.")])
}

async fn run(line: ScriptedLine, plan: &AgentPlan) -> AgentEnd {
    run_until(line, plan, CancellationToken::new()).await
}

async fn run_until(line: ScriptedLine, plan: &AgentPlan, stop: CancellationToken) -> AgentEnd {
    let speech: Arc<dyn Speech> = StandInSpeech::new(SYNTH);
    converse(Box::new(line), plan, &speech, Instant::now(), stop).await
}

fn agent_turn(text: &str, start_ms: u64, end_ms: u64, interrupted: bool) -> Turn {
    Turn {
        role: Speaker::Agent,
        text: text.into(),
        start_ms,
        end_ms,
        interrupted,
        node: None,
        unheard: None,
        digits: None,
    }
}

fn user_turn(text: &str, start_ms: u64, end_ms: u64) -> Turn {
    Turn {
        role: Speaker::User,
        text: text.into(),
        start_ms,
        end_ms,
        interrupted: false,
        node: None,
        unheard: None,
        digits: None,
    }
}

#[tokio::test(start_paused = true)]
async fn the_greeting_spans_its_audio_and_is_told_once_said() {
    let told = Told::new();
    let mut plan = plan(None, GREETING);
    plan.turns = Some(told.clone());
    let (line, log) = ScriptedLine::new();
    let end = run(line.hangs_up(5000), &plan).await;
    let played = SYNTH + spoken_ms(GREETING);
    let greeting = agent_turn(GREETING, SYNTH, played, false);
    assert_eq!(end.conversation.transcript, std::slice::from_ref(&greeting));
    assert_eq!(told.turns(), [(1, greeting, played)]);
    assert_eq!(end.reason, EndReason::CallerHangup);
    assert_eq!(log.lock().unwrap().hung_up_at, None);
}

#[tokio::test(start_paused = true)]
async fn a_caller_talking_over_the_greeting_keeps_only_its_words_played() {
    let model = StandInModel::new(|_, _| vec![Step::Text("Ada, from Acme.")]);
    let told = Told::new();
    let mut plan = plan(Some(mind(model.clone(), None)), GREETING);
    plan.turns = Some(told.clone());
    let (line, log) = ScriptedLine::new();
    let line = line.says(600, 1000, "Who is this?").hangs_up(8000);
    let end = run(line, &plan).await;
    // 500 ms of 1450 were played: the first word.
    let cut = agent_turn("Hello,", SYNTH, 600, true);
    let asked = user_turn("Who is this?", 600, 1600);
    let answered_at = 1600 + TRANSCRIBE + SYNTH;
    let answer = agent_turn(
        "Ada, from Acme.",
        answered_at,
        answered_at + spoken_ms("Ada, from Acme."),
        false,
    );
    assert_eq!(end.conversation.transcript, [cut.clone(), asked, answer]);
    let heard = &log.lock().unwrap().heard;
    assert!(heard[0].cut && heard[0].end_ms == 600, "{heard:?}");
    // The model heard what the caller heard, marked.
    let request = &model.requests()[0];
    assert_eq!(
        request.messages[1..],
        [
            ChatMessage::Assistant {
                text: Some("Hello, [interrupted]".into()),
                tool_calls: vec![],
            },
            ChatMessage::User("Who is this?".into()),
        ]
    );
    // Each turn is told once final, in the order they happened.
    let speaking = told.speaking();
    let told = told.turns();
    let numbers: Vec<u32> = told.iter().map(|t| t.0).collect();
    assert_eq!(numbers, [1, 2, 3]);
    assert_eq!(told[0].2, 600);
    assert_eq!(told[1].2, 1600 + TRANSCRIBE);
    assert_eq!(told[2].2, answered_at + spoken_ms("Ada, from Acme."));
    // Each turn is told as under way before that: the greeting as it starts to play, the
    // caller's words once transcribed, the answer as it starts.
    assert_eq!(
        speaking,
        [
            (Speaker::Agent, GREETING.to_owned(), SYNTH),
            (Speaker::User, "Who is this?".to_owned(), 1600 + TRANSCRIBE),
            (Speaker::Agent, "Ada, from Acme.".to_owned(), answered_at),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_reply_plays_sentence_by_sentence_as_the_model_writes() {
    let model = StandInModel::new(|_, _| {
        vec![
            Step::Wait(300),
            Step::Text("We open at nine. "),
            Step::Wait(200),
            Step::Text("We close at five."),
        ]
    });
    let plan = plan(Some(mind(model, None)), "");
    let (line, log) = ScriptedLine::new();
    let line = line.says(1000, 1000, "What are your hours?").hangs_up(8000);
    let end = run(line, &plan).await;
    let turn_end = 2000 + TRANSCRIBE;
    // The first sentence plays as soon as it is written and synthesized: nothing added.
    let first_audio = turn_end + 300 + SYNTH;
    let said = first_audio + spoken_ms("We open at nine.") + spoken_ms("We close at five.");
    assert_eq!(
        end.conversation.transcript,
        [
            user_turn("What are your hours?", 1000, 2000),
            agent_turn(
                "We open at nine. We close at five.",
                first_audio,
                said,
                false
            ),
        ]
    );
    let heard = &log.lock().unwrap().heard;
    assert_eq!(
        heard[1].start_ms,
        first_audio + spoken_ms("We open at nine.")
    );
    assert!(heard.iter().all(|h| !h.cut));
}

#[tokio::test(start_paused = true)]
async fn a_function_call_of_a_reply_cut_short_is_never_dispatched() {
    let tools = StandInTools::new(100);
    let model = StandInModel::new(|_, n| match n {
        0 => vec![
            Step::Wait(500),
            Step::Call("book", "{}"),
            Step::Text("Booking now."),
        ],
        1 => vec![Step::Call("book", "{}")],
        _ => vec![Step::Text("Booked for Tuesday.")],
    });
    let plan = plan(Some(mind(model.clone(), Some(tools.clone()))), "");
    let (line, _) = ScriptedLine::new();
    let line = line
        .says(1000, 1000, "Book me for Monday.")
        // Before the model's function call (at 2650), the caller goes on.
        .says(2400, 600, "Actually, Tuesday.")
        .hangs_up(9000);
    let end = run(line, &plan).await;
    let runs = tools.runs();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].0.id, "call-1-book");
    assert_eq!(end.conversation.events.len(), 1);
    // Both turns reached the model: the first as heard, the second with it.
    let requests = model.requests();
    assert_eq!(
        requests[1].messages.last(),
        Some(&ChatMessage::User("Actually, Tuesday.".into()))
    );
}

#[tokio::test(start_paused = true)]
async fn a_slow_tool_gets_the_filler_and_its_result_goes_back_to_the_model_once() {
    let tools = StandInTools::new(3000);
    let model = StandInModel::new(|_, n| match n {
        0 => vec![Step::Call("book", r#"{"day":"monday"}"#)],
        _ => vec![Step::Text("You are booked for Monday.")],
    });
    let plan = plan(Some(mind(model.clone(), Some(tools.clone()))), "");
    let (line, _) = ScriptedLine::new();
    let line = line
        .says(1000, 1000, "Book me for Monday.")
        .hangs_up(12_000);
    let end = run(line, &plan).await;
    let dispatched = 2000 + TRANSCRIBE;
    assert_eq!(tools.runs().len(), 1);
    let filler_at = dispatched + 1200 + SYNTH;
    let result_at = dispatched + 3000;
    let said = result_at + SYNTH + spoken_ms("You are booked for Monday.");
    assert_eq!(
        end.conversation.transcript[1],
        agent_turn(
            &format!("{FILLER_LINE} You are booked for Monday."),
            filler_at,
            said,
            false
        )
    );
    assert_eq!(end.conversation.events[0].at_ms, dispatched);
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[1].messages.contains(&ChatMessage::Tool {
        tool_call_id: "call-0-book".into(),
        content: r#"{"booked":true}"#.into(),
    }));
}

#[tokio::test(start_paused = true)]
async fn silence_asks_once_then_ends_the_call() {
    let mut plan = plan(Some(mind(silent_model(), None)), "");
    plan.silence_timeout = Duration::from_secs(5);
    let (line, log) = ScriptedLine::new();
    let end = run(line, &plan).await;
    let asked_end = 5000 + SYNTH + spoken_ms(STILL_THERE_LINE);
    assert_eq!(end.reason, EndReason::SilenceTimeout);
    assert_eq!(
        end.conversation.transcript,
        [agent_turn(STILL_THERE_LINE, 5000 + SYNTH, asked_end, false)]
    );
    assert_eq!(log.lock().unwrap().hung_up_at, Some(asked_end + 5000));
}

#[tokio::test(start_paused = true)]
async fn a_caller_who_never_pauses_has_the_turn_taken_at_the_limit() {
    let plan = plan(Some(mind(silent_model(), None)), "");
    let (line, log) = ScriptedLine::new();
    let end = run(line.speaks(1000).hangs_up(12_000), &plan).await;
    assert_eq!(end.reason, EndReason::CallerHangup);
    // `max_continuous_speech` is 10 s.
    assert_eq!(log.lock().unwrap().utterances_taken, [11_000]);
}

#[tokio::test(start_paused = true)]
async fn the_duration_limit_and_a_shutdown_are_kept_while_speech_hangs() {
    let mut plan = plan(None, "Please hang on.");
    plan.max_duration = Duration::from_secs(20);
    let (line, log) = ScriptedLine::new();
    let end = run(line, &plan).await;
    assert_eq!(end.reason, EndReason::MaxDuration);
    assert_eq!(log.lock().unwrap().hung_up_at, Some(20_000));
    assert_eq!(end.duration_secs, 20);

    let stop = CancellationToken::new();
    let stopper = stop.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(3000)).await;
        stopper.cancel();
    });
    let (line, log) = ScriptedLine::new();
    let end = run_until(line, &plan, stop).await;
    assert_eq!(end.reason, EndReason::Shutdown);
    assert_eq!(log.lock().unwrap().hung_up_at, Some(3000));
}

#[tokio::test(start_paused = true)]
async fn end_call_hangs_up_once_the_goodbye_has_played() {
    let model =
        StandInModel::new(|_, _| vec![Step::Text("Goodbye! "), Step::Call("end_call", "{}")]);
    let plan = plan(Some(mind(model, None)), "");
    let (line, log) = ScriptedLine::new();
    let end = run(line.says(1000, 1000, "Thanks, bye.").hangs_up(9000), &plan).await;
    let said = 2000 + TRANSCRIBE + SYNTH + spoken_ms("Goodbye!");
    assert_eq!(end.reason, EndReason::AgentHangup);
    assert_eq!(log.lock().unwrap().hung_up_at, Some(said));
    assert_eq!(end.conversation.events[0].name, "end_call");
    assert_eq!(end.conversation.transcript[1].end_ms, said);
}

#[tokio::test(start_paused = true)]
async fn a_model_that_times_out_gets_the_apology_said_and_recorded() {
    let model = StandInModel::new(|_, _| vec![Step::Wait(4000), Step::Fail(VendorError::Timeout)]);
    let plan = plan(Some(mind(model, None)), "");
    let (line, _) = ScriptedLine::new();
    let end = run(
        line.says(1000, 1000, "Hello there.").hangs_up(12_000),
        &plan,
    )
    .await;
    let failed = 2000 + TRANSCRIBE + 4000;
    let failure = &end.conversation.vendor_failures[0];
    assert_eq!(
        (failure.vendor.as_str(), failure.at_ms),
        ("chat_model", failed)
    );
    assert_eq!(
        end.conversation.transcript[1],
        agent_turn(
            APOLOGY_LINE,
            failed + SYNTH,
            failed + SYNTH + spoken_ms(APOLOGY_LINE),
            false
        )
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_transcription_gets_the_apology() {
    let plan = plan(Some(mind(silent_model(), None)), "");
    let (line, _) = ScriptedLine::new();
    let end = run(line.says(1000, 1000, "please fail").hangs_up(12_000), &plan).await;
    assert_eq!(end.conversation.vendor_failures[0].vendor, "transcriber");
    // The caller's turn is on the record, empty, with why; then the apology.
    let mut unheard = user_turn("", 1000, 2000);
    unheard.unheard = Some(crate::conversation::Unheard::TranscriptionFailed);
    assert_eq!(end.conversation.transcript[0], unheard);
    assert_eq!(end.conversation.transcript[1].text, APOLOGY_LINE);
    assert_eq!(
        end.conversation.transcript[1].start_ms,
        2000 + TRANSCRIBE + SYNTH
    );
}

#[tokio::test(start_paused = true)]
async fn a_finished_sentence_ends_the_turn_at_a_pause() {
    let model = StandInModel::new(|_, _| vec![Step::Text("Sure.")]);
    let plan = plan(Some(mind(model.clone(), None)), "");
    let (line, log) = ScriptedLine::new();
    // Paused at 1800 (after 400 ms of quiet): the early transcript ends the turn.
    let line = line
        .speaks(1000)
        .pauses(1800, "Can you help me?")
        .stops(2400, "Can you help me?")
        .hangs_up(9000);
    let end = run(line, &plan).await;
    assert_eq!(
        end.conversation.transcript[0],
        user_turn("Can you help me?", 1000, 1400)
    );
    assert_eq!(
        end.conversation.transcript[1].start_ms,
        1800 + TRANSCRIBE + SYNTH
    );
    assert_eq!(log.lock().unwrap().utterances_dropped, 1);
    assert_eq!(model.requests().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn unfinished_words_wait_for_the_grace() {
    let model = StandInModel::new(|_, _| vec![Step::Text("Go on.")]);
    let plan = plan(Some(mind(model.clone(), None)), "");
    let (line, _) = ScriptedLine::new();
    let line = line
        .says(1000, 1000, "I would like to")
        .says(2500, 500, "book a room.")
        .hangs_up(9000);
    let end = run(line, &plan).await;
    // The grace (800 ms) after "to" was not over when the caller went on: one turn.
    assert_eq!(
        end.conversation.transcript[0],
        user_turn("I would like to book a room.", 1000, 3000)
    );
    assert_eq!(model.requests().len(), 1);
}

fn amd_plan(greet_early: bool, voicemail: Option<&str>) -> AgentPlan {
    let mut plan = plan(None, GREETING);
    plan.amd = Some(AmdPlan {
        settings: AmdSettings::default(),
        voicemail_message: voicemail.map(str::to_string),
        greet_early,
    });
    plan
}

fn verdict(answered_by: AnsweredBy, after_ms: u32) -> AmdVerdict {
    AmdVerdict {
        answered_by,
        reason: AmdReason::Human {
            silence_ms: 800,
            limit_ms: 800,
        },
        after_ms,
    }
}

#[tokio::test(start_paused = true)]
async fn a_person_is_greeted_once_their_first_words_end() {
    let (line, log) = ScriptedLine::new();
    let line = line
        .says(300, 500, "Hello?")
        .verdict(1600, verdict(AnsweredBy::Human, 1600))
        .hangs_up(6000);
    let end = run(line, &amd_plan(true, None)).await;
    assert_eq!(end.answered_by, Some(AnsweredBy::Human));
    let greeted = 800 + SYNTH;
    let heard = log.lock().unwrap().heard.clone();
    assert_eq!(heard.len(), 1, "greeted once: {heard:?}");
    assert_eq!((heard[0].start_ms, heard[0].cut), (greeted, false));

    // Without greeting early, the person waits for the verdict.
    let (line, log) = ScriptedLine::new();
    let line = line
        .says(300, 500, "Hello?")
        .verdict(1600, verdict(AnsweredBy::Human, 1600))
        .hangs_up(6000);
    run(line, &amd_plan(false, None)).await;
    assert_eq!(log.lock().unwrap().heard[0].start_ms, 1600 + SYNTH);
}

#[tokio::test(start_paused = true)]
async fn a_machine_verdict_cuts_an_early_greeting_and_leaves_the_message_after_the_beep() {
    let message = "Please call Acme back.";
    let (line, log) = ScriptedLine::new();
    let line = line
        .says(300, 1500, "You have reached the voicemail of")
        .verdict(2400, verdict(AnsweredBy::Machine, 2400))
        .beep(5000);
    let end = run(line, &amd_plan(true, Some(message))).await;
    assert_eq!(end.reason, EndReason::VoicemailLeft);
    assert_eq!(end.answered_by, Some(AnsweredBy::Machine));
    let left = 5000 + SYNTH + spoken_ms(message);
    let log = log.lock().unwrap();
    assert!(
        log.heard[0].cut && log.heard[0].end_ms == 2400,
        "{:?}",
        log.heard
    );
    assert_eq!(log.heard[1].text, message);
    assert_eq!(log.hung_up_at, Some(left));
    let agent: Vec<&Turn> = end
        .conversation
        .transcript
        .iter()
        .filter(|t| t.role == Speaker::Agent)
        .collect();
    assert!(agent[0].interrupted);
    assert_eq!(agent[1].text, message);
}

#[tokio::test(start_paused = true)]
async fn a_machine_without_a_message_is_hung_up_on() {
    let (line, log) = ScriptedLine::new();
    let line = line.verdict(3000, verdict(AnsweredBy::Machine, 3000));
    let end = run(line, &amd_plan(true, None)).await;
    assert_eq!(end.reason, EndReason::AnsweringMachine);
    assert_eq!(log.lock().unwrap().hung_up_at, Some(3000));
    let (line, _) = ScriptedLine::new();
    let end = run(line.beep(2000), &amd_plan(true, Some("Hi."))).await;
    // No verdict yet: a beep alone leaves nothing; the call goes on to its limit.
    assert_eq!(end.reason, EndReason::MaxDuration);
}

#[tokio::test(start_paused = true)]
async fn a_text_line_converses_without_speech_vendors() {
    let model = StandInModel::new(|_, n| match n {
        0 => vec![
            Step::Text("We open at nine. "),
            Step::Text("Anything else?"),
        ],
        _ => vec![Step::Text("Goodbye. "), Step::Call("end_call", "{}")],
    });
    let plan = plan(Some(mind(model, None)), GREETING);
    let speech = StandInSpeech::new(SYNTH);
    let (line, mut caller) = text_line(CallParties::default());
    let dyn_speech: Arc<dyn Speech> = speech.clone();
    let agent = tokio::spawn(async move {
        converse(
            Box::new(line),
            &plan,
            &dyn_speech,
            Instant::now(),
            CancellationToken::new(),
        )
        .await
    });
    assert_eq!(caller.reply().await, (vec![GREETING.to_string()], false));
    assert!(caller.say("When do you open?"));
    assert_eq!(
        caller.reply().await,
        (
            vec!["We open at nine.".into(), "Anything else?".into()],
            false
        )
    );
    assert!(caller.say("No, thanks."));
    assert_eq!(caller.reply().await, (vec!["Goodbye.".into()], true));
    let end = agent.await.unwrap();
    assert_eq!(end.reason, EndReason::AgentHangup);
    assert_eq!(end.conversation.transcript.len(), 5);
    assert_eq!(*speech.calls.lock().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_hang_up_mid_sentence_keeps_the_words_played_so_far() {
    let (line, _) = ScriptedLine::new();
    let end = run(line.hangs_up(600), &plan(None, GREETING)).await;
    assert_eq!(end.reason, EndReason::CallerHangup);
    assert_eq!(
        end.conversation.transcript,
        [agent_turn("Hello,", SYNTH, 600, true)]
    );
}

#[tokio::test(start_paused = true)]
async fn without_speech_to_text_the_caller_is_unheard_and_the_fallback_said_once() {
    let (line, log) = ScriptedLine::new();
    let line = line
        .says(500, 1000, "Hello?")
        .says(6000, 1000, "Anyone there?")
        .hangs_up(9000);
    let end = run(line, &plan(None, "")).await;
    let fallback = agent_turn(
        FALLBACK_LINE,
        1500 + SYNTH,
        1500 + SYNTH + spoken_ms(FALLBACK_LINE),
        false,
    );
    // Nothing transcribes without speech to text: each of the caller's turns is on the record,
    // empty, with why, and the agent's line is said once.
    let unheard = |from, to| {
        let mut turn = user_turn("", from, to);
        turn.unheard = Some(crate::conversation::Unheard::NoSpeechToText);
        turn
    };
    assert_eq!(
        end.conversation.transcript,
        [unheard(500, 1500), fallback, unheard(6000, 7000)]
    );
    assert_eq!(log.lock().unwrap().heard.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_machine_whose_beep_never_comes_is_left_when_detection_stops_listening() {
    let (line, log) = ScriptedLine::new();
    let line = line.verdict(3000, verdict(AnsweredBy::Machine, 3000));
    let end = run(line, &amd_plan(false, Some("Please call back."))).await;
    assert_eq!(end.reason, EndReason::VoicemailNoBeep);
    // Detection listens for the beep for 30 s from the answer.
    assert_eq!(log.lock().unwrap().hung_up_at, Some(30_000));
}
