//! A flow agent on the turn loop, on the scripted line in virtual time: literal lines said
//! word for word, the model choosing edges, arguments extracted, an integration dispatched
//! and routed, the path and each turn's node on the record, and a barge-in that cuts a
//! transition's announcement short.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::scripted::{ScriptedLine, StandInModel, StandInSpeech, Step, stand_in_mind};
use super::{AgentEnd, AgentPlan, EndReason, Mind, Speech, converse};
use crate::call_tools::{IntegrationRun, Integrations};
use crate::conversation::{Speaker, ToolEvent, ToolStatus};
use crate::flow::tests::{compiled, trail};
use crate::flow::{FlowDirector, FlowRun, Outcome};

/// Greet, ask for a time, check it with the calendar, confirm, say goodbye.
fn flow() -> Value {
    json!({"nodes": [
        {"id": "start", "type": "start", "greeting": "Hi, this is Ada.", "is_literal": true, "next_step_id": "ask"},
        {"id": "ask", "type": "conversation", "instructions": "Ask when the caller wants to meet.",
         "variables": [{"name": "time", "description": "The start"}],
         "transitions": [{"next_step_id": "check", "condition": "the caller gave a time"}]},
        {"id": "check", "type": "integration_call", "integration_id": "cal", "provider": "google_calendar",
         "action": "check_availability",
         "args_template": {"start_time": "{{ask.time}}", "email": {"type": "ai_extract", "description": "The caller's email"}},
         "custom": [{"path": "$.busy", "equals": true, "next_step_id": "taken"}],
         "success_next_step_id": "confirm", "error_next_step_id": "bye"},
        {"id": "taken", "type": "conversation", "greeting": "That time is taken.", "is_literal": true,
         "transitions": [{"next_step_id": "ask", "condition": "the caller wants another time"}]},
        {"id": "confirm", "type": "conversation", "greeting": "Booked for {{ask.time}}.", "is_literal": true,
         "transitions": [{"next_step_id": "bye", "condition": "the caller is done"}]},
        {"id": "bye", "type": "end", "greeting": "Goodbye!", "is_literal": true}
    ]})
}

/// A calendar that answers after `delay_ms`, free unless asked for "noon".
struct Calendar {
    delay_ms: u64,
    runs: Mutex<Vec<Map<String, Value>>>,
}

impl Calendar {
    fn new(delay_ms: u64) -> Arc<Calendar> {
        Arc::new(Calendar {
            delay_ms,
            runs: Mutex::new(Vec::new()),
        })
    }
}

#[async_trait]
impl Integrations for Calendar {
    async fn run(
        &self,
        _node_id: &str,
        _integration_id: &str,
        provider: &str,
        action: &str,
        arguments: &Map<String, Value>,
    ) -> IntegrationRun {
        tokio::time::sleep(Duration::from_millis(self.delay_ms)).await;
        self.runs.lock().unwrap().push(arguments.clone());
        let busy = arguments.get("start_time") == Some(&json!("noon"));
        let result = json!({"busy": busy});
        IntegrationRun {
            outcome: Outcome::Done(result.clone()),
            event: ToolEvent {
                name: format!("{provider}.{action}"),
                tool_id: None,
                arguments: Value::Object(arguments.clone()),
                status: ToolStatus::Succeeded,
                latency_ms: self.delay_ms,
                response_preview: Some(result.to_string()),
                raw_response_preview: None,
                status_code: Some(200),
                error: None,
                delivery_id: None,
                at_ms: 0,
            },
        }
    }
}

fn plan(model: Arc<StandInModel>, calendar: Arc<Calendar>) -> AgentPlan {
    let flow = Arc::new(compiled(&flow()).expect("a valid flow"));
    let run = FlowRun::new(flow, Map::new(), HashMap::new());
    AgentPlan {
        greeting: "The prompt agent's greeting, never said.".into(),
        agent_speaks_first: true,
        voice: "alloy".into(),
        language: "en-US".into(),
        silence_timeout: Duration::from_secs(30),
        max_duration: Duration::from_secs(600),
        amd: None,
        mind: Some(Mind {
            integrations: Some(calendar),
            ..stand_in_mind(
                model,
                Box::new(FlowDirector::new(run, "You are Ada.".into(), None)),
            )
        }),
        turns: None,
    }
}

/// Runs `plan` on `line` to the call's end, speech synthesized in 100 ms.
pub(super) async fn run(line: ScriptedLine, plan: &AgentPlan) -> AgentEnd {
    let speech: Arc<dyn Speech> = StandInSpeech::new(100);
    converse(
        Box::new(line),
        plan,
        &speech,
        Instant::now(),
        CancellationToken::new(),
    )
    .await
}

/// The model: in `ask` it takes the time; asked for arguments it fills the email; in
/// `confirm` it ends; anything else it answers in words.
fn booking_model(time: &'static str) -> Arc<StandInModel> {
    StandInModel::new(move |request, _| {
        let offered: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
        if request.force.as_deref() == Some("extract_arguments") {
            return vec![Step::Call(
                "extract_arguments",
                r#"{"email": "ada@example.com"}"#,
            )];
        }
        let said = last_said(request).to_lowercase();
        let gave_time = said.contains("ten") || said.contains("noon");
        if offered == ["go_to_check"] && gave_time {
            let args: &'static str = if time == "noon" {
                r#"{"time": "noon"}"#
            } else {
                r#"{"time": "ten"}"#
            };
            return vec![
                Step::Text("Let me check that."),
                Step::Call("go_to_check", args),
            ];
        }
        if offered == ["go_to_bye"] {
            return vec![Step::Call("go_to_bye", "{}")];
        }
        vec![Step::Text("When would you like to meet?")]
    })
}

/// The caller's last turn the model was given.
fn last_said(request: &crate::vendors::ChatRequest) -> String {
    request
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            crate::vendors::ChatMessage::User(text) => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

fn texts(end: &AgentEnd) -> Vec<(Speaker, String, Option<String>)> {
    end.conversation
        .transcript
        .iter()
        .map(|t| (t.role, t.text.clone(), t.node.clone()))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_flow_call_books_from_greeting_to_goodbye() {
    let model = booking_model("ten");
    let calendar = Calendar::new(200);
    let plan = plan(model.clone(), calendar.clone());
    let (line, log) = ScriptedLine::new();
    let line = line
        .says(2000, 1000, "I'd like a meeting.")
        .says(6000, 1000, "Ten o'clock.")
        .says(12_000, 800, "That's all, thanks.")
        .hangs_up(30_000);
    let end = run(line, &plan).await;
    assert_eq!(end.reason, EndReason::AgentHangup);
    let node = |n: &str| Some(n.to_string());
    assert_eq!(
        texts(&end),
        [
            (Speaker::Agent, "Hi, this is Ada.".into(), node("start")),
            (Speaker::User, "I'd like a meeting.".into(), node("start")),
            (
                Speaker::Agent,
                "When would you like to meet?".into(),
                node("ask")
            ),
            (Speaker::User, "Ten o'clock.".into(), node("ask")),
            (
                Speaker::Agent,
                "Let me check that. Booked for ten.".into(),
                node("confirm")
            ),
            (Speaker::User, "That's all, thanks.".into(), node("confirm")),
            (Speaker::Agent, "Goodbye!".into(), node("bye")),
        ]
    );
    let path = trail(&end.conversation.path);
    assert_eq!(
        path,
        [
            ("start", "start"),
            ("ask", "next_step_id"),
            ("check", "model: the caller gave a time"),
            ("confirm", "success_next_step_id: no custom branch matched"),
            ("bye", "model: the caller is done"),
        ]
    );
    // The integration ran once, with its template resolved and the extracted email.
    assert_eq!(
        *calendar.runs.lock().unwrap(),
        [json!({"start_time": "ten", "email": "ada@example.com"})
            .as_object()
            .unwrap()
            .clone()]
    );
    let events: Vec<&str> = end
        .conversation
        .events
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(
        events,
        [
            "go_to_check",
            "extract_arguments",
            "google_calendar.check_availability",
            "go_to_bye"
        ]
    );
    // The model was told each node's instructions, and offered only its edges.
    let requests = model.requests();
    let system = |n: usize| match &requests[n].messages[0] {
        crate::vendors::ChatMessage::System(text) => text.clone(),
        other => panic!("{other:?}"),
    };
    assert!(
        system(0).contains("Ask when the caller wants to meet."),
        "{}",
        system(0)
    );
    assert!(
        requests
            .iter()
            .all(|r| r.tools.iter().all(|t| t.name != "end_call"))
    );
    // The literal lines were said as written: no model request made them.
    assert!(
        log.lock()
            .unwrap()
            .heard
            .iter()
            .any(|h| h.text == "Booked for ten.")
    );
}

#[tokio::test(start_paused = true)]
async fn a_busy_slot_takes_the_custom_branch() {
    let model = booking_model("noon");
    let calendar = Calendar::new(200);
    let plan = plan(model, calendar);
    let (line, _) = ScriptedLine::new();
    let line = line
        .says(2000, 1000, "I'd like a meeting.")
        .says(6000, 1000, "Noon.")
        .hangs_up(12_000);
    let end = run(line, &plan).await;
    let last = end.conversation.path.last().unwrap();
    assert_eq!(
        (last.node_id.as_str(), last.reason.as_str()),
        ("taken", "custom[0] matched")
    );
    assert!(
        texts(&end)
            .iter()
            .any(|t| t.1 == "Let me check that. That time is taken.")
    );
}

/// In `ask` the model announces the check; `first` says whether it takes the edge before its
/// words (else after a second of them).
fn announcing_model(edge_first: bool) -> Arc<StandInModel> {
    StandInModel::new(move |request, _| {
        let offered: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
        if request.force.is_some() {
            return vec![Step::Call(
                "extract_arguments",
                r#"{"email": "ada@example.com"}"#,
            )];
        }
        let said = last_said(request);
        let gave_time = said.contains("ten") || said.contains("email");
        if offered != ["go_to_check"] || !gave_time {
            return vec![Step::Text("When?")];
        }
        let heard_email = request
            .messages
            .iter()
            .any(|m| matches!(m, crate::vendors::ChatMessage::User(t) if t.contains("email")));
        // Its words end a sentence: they are said while the model goes on.
        let announce = Step::Text("Let me check the calendar for ten o'clock, one moment please. ");
        let edge = Step::Call("go_to_check", r#"{"time": "ten"}"#);
        match (edge_first, heard_email) {
            (_, true) => vec![edge],
            (true, false) => vec![edge, announce],
            (false, false) => vec![announce, Step::Wait(1000), edge],
        }
    })
}

fn bargeing_caller() -> ScriptedLine {
    let (line, _) = ScriptedLine::new();
    line.says(2000, 1000, "A meeting please.")
        .says(5000, 800, "At ten.")
        // The announcement plays from about 6050: the caller cuts it at 6600.
        .says(6600, 900, "And my email is ada@example.com.")
        .hangs_up(15_000)
}

/// The call with the announcing model and the caller who talks over it; the calendar
/// answers after `delay_ms`.
async fn barged(edge_first: bool, delay_ms: u64) -> (AgentEnd, Arc<Calendar>) {
    let calendar = Calendar::new(delay_ms);
    let plan = plan(announcing_model(edge_first), calendar.clone());
    (run(bargeing_caller(), &plan).await, calendar)
}

fn cut_turn(end: &AgentEnd) -> &crate::conversation::Turn {
    let transcript = &end.conversation.transcript;
    transcript
        .iter()
        .find(|t| t.interrupted)
        .expect("a cut turn")
}

/// The nodes of the call's path.
fn nodes(end: &AgentEnd) -> Vec<&str> {
    end.conversation
        .path
        .iter()
        .map(|p| p.node_id.as_str())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_barge_in_after_the_edge_leaves_the_flow_in_its_new_node() {
    let (end, calendar) = barged(true, 2000).await;
    let transcript = &end.conversation.transcript;
    let cut = cut_turn(&end);
    // 550 ms of the announcement were played: its first words.
    assert_eq!(
        (cut.text.as_str(), cut.start_ms, cut.end_ms),
        ("Let me", 6050, 6600)
    );
    // The edge was taken with the words that announced it: both are in `check`.
    assert_eq!(cut.node.as_deref(), Some("check"));
    assert_eq!(nodes(&end), ["start", "ask", "check", "confirm"]);
    // The next turn went on from `check`: its dispatch, under way, was awaited and ran once.
    let email = transcript
        .iter()
        .position(|t| t.text == "And my email is ada@example.com.")
        .unwrap();
    assert_eq!(transcript[email].node.as_deref(), Some("check"));
    assert_eq!(calendar.runs.lock().unwrap().len(), 1);
    assert_eq!(transcript[email + 1].text, "Booked for ten.");
    assert_eq!(transcript[email + 1].node.as_deref(), Some("confirm"));
}

#[tokio::test(start_paused = true)]
async fn a_barge_in_before_the_edge_leaves_the_flow_where_it_was() {
    let (end, calendar) = barged(false, 200).await;
    let transcript = &end.conversation.transcript;
    let cut = cut_turn(&end);
    // Cut before the model took the edge: its call was dropped, and the flow stayed in `ask`.
    assert_eq!(cut.node.as_deref(), Some("ask"));
    let email = transcript
        .iter()
        .position(|t| t.text == "And my email is ada@example.com.")
        .unwrap();
    assert_eq!(transcript[email].node.as_deref(), Some("ask"));
    // From `ask`, the next turn took the edge once.
    assert_eq!(nodes(&end), ["start", "ask", "check", "confirm"]);
    assert_eq!(calendar.runs.lock().unwrap().len(), 1);
    assert!(
        transcript[email..]
            .iter()
            .any(|t| t.text == "Booked for ten.")
    );
}

/// A plan for `flow` with no chat model at all.
fn modelless(flow: Value) -> AgentPlan {
    let flow = Arc::new(compiled(&flow).expect("a valid flow"));
    let run = FlowRun::new(flow, Map::new(), HashMap::new());
    let mut plan = plan(booking_model("ten"), Calendar::new(0));
    let mind = plan.mind.as_mut().expect("a mind");
    mind.model = None;
    mind.director = Box::new(FlowDirector::new(run, String::new(), None));
    plan
}

#[tokio::test(start_paused = true)]
async fn a_flow_of_words_and_literal_lines_converses_with_no_model() {
    let plan = modelless(json!({"nodes": [
        {"id": "start", "type": "start", "greeting": "Hello. Book a table, or hear our hours?", "is_literal": true, "next_step_id": "menu"},
        {"id": "menu", "type": "conversation", "greeting": "Say book, or hours.", "is_literal": true,
         "transitions": [
            {"next_step_id": "party", "when": {"variable": "caller.last_words", "contains": "book"}},
            {"next_step_id": "hours", "when": {"variable": "caller.last_words", "contains": "hours"}}
         ]},
        {"id": "party", "type": "conversation", "greeting": "For how many?", "is_literal": true,
         "transitions": [{"next_step_id": "booked", "when": {"variable": "caller.last_words", "matches": "\\b(two|three|four)\\b"}}]},
        {"id": "hours", "type": "end", "greeting": "Noon to ten.", "is_literal": true},
        {"id": "booked", "type": "end", "greeting": "Booked. Goodbye!", "is_literal": true}
    ]}));
    let (line, _log) = ScriptedLine::new();
    let line = line
        .says(4000, 800, "Pardon?")
        .says(8000, 900, "Book, please.")
        .says(12_000, 700, "Four of us.")
        .hangs_up(30_000);
    let end = run(line, &plan).await;
    assert_eq!(end.reason, EndReason::AgentHangup);
    let said: Vec<String> = texts(&end)
        .into_iter()
        .filter(|(who, ..)| *who == Speaker::Agent)
        .map(|(_, text, _)| text)
        .collect();
    assert_eq!(
        said,
        [
            "Hello. Book a table, or hear our hours?",
            "Say book, or hours.",
            "For how many?",
            "Booked. Goodbye!"
        ]
    );
    assert_eq!(
        trail(&end.conversation.path).last(),
        Some(&(
            "booked",
            "when: caller.last_words matches /\\b(two|three|four)\\b/"
        ))
    );
}

#[tokio::test(start_paused = true)]
async fn a_step_that_needs_the_model_without_one_says_so_and_ends_the_call() {
    let plan = modelless(flow());
    let (line, _log) = ScriptedLine::new();
    let line = line
        .says(2000, 1000, "I'd like a meeting.")
        .hangs_up(60_000);
    let end = run(line, &plan).await;
    assert_eq!(end.reason, EndReason::ModelNotConfigured);
    let said: Vec<(String, Option<String>)> = texts(&end)
        .into_iter()
        .filter(|(who, ..)| *who == Speaker::Agent)
        .map(|(_, text, node)| (text, node))
        .collect();
    assert_eq!(
        said,
        [
            ("Hi, this is Ada.".to_string(), Some("start".to_string())),
            (
                crate::turns::FALLBACK_LINE.to_string(),
                Some("ask".to_string())
            )
        ]
    );
}
