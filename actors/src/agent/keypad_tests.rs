//! The keypad on the turn loop, on the scripted line in virtual time: a menu walked by keys
//! with no model and no speech to text, an entry gathered to its count, a key that cuts the
//! agent short, digits a flow sends on entering a node, and digits the model sends.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::director::PromptAgent;
use super::flow_tests::run;
use super::scripted::{ScriptedLine, StandInModel, Step, stand_in_mind};
use super::{AgentEnd, AgentPlan, EndReason};
use crate::conversation::{Speaker, ToolStatus, Unheard};
use crate::flow::tests::{compiled, trail};
use crate::flow::{FlowDirector, FlowRun};

/// Press 1 for hours, 2 to book (a four-digit member number), anything else: the menu again
/// (the flow the SIP keypad tests call too).
fn menu() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/flows/bistro_keypad.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("the keypad menu")).unwrap()
}

/// A plan for `flow` with neither a chat model nor speech to text.
fn keypad_only(flow: Value) -> AgentPlan {
    let flow = Arc::new(compiled(&flow).expect("a valid flow"));
    let run = FlowRun::new(flow, Map::new(), HashMap::new());
    let model = StandInModel::new(|_, _| vec![Step::Text("The model is never asked.")]);
    let mut mind = stand_in_mind(model, Box::new(FlowDirector::new(run, String::new(), None)));
    mind.model = None;
    mind.transcriber = None;
    plan(mind)
}

fn plan(mind: super::Mind) -> AgentPlan {
    AgentPlan {
        greeting: String::new(),
        agent_speaks_first: true,
        voice: "alloy".into(),
        language: "en-US".into(),
        silence_timeout: Duration::from_secs(30),
        max_duration: Duration::from_secs(600),
        amd: None,
        mind: Some(mind),
        turns: None,
    }
}

/// Each turn as (who, words, digits).
fn turns(end: &AgentEnd) -> Vec<(Speaker, String, Option<String>)> {
    end.conversation
        .transcript
        .iter()
        .map(|t| (t.role, t.text.clone(), t.digits.clone()))
        .collect()
}

fn agent_lines(end: &AgentEnd) -> Vec<String> {
    turns(end)
        .into_iter()
        .filter(|(who, text, _)| *who == Speaker::Agent && !text.is_empty())
        .map(|(_, text, _)| text)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn keys_walk_a_menu_with_no_model_and_no_speech_to_text() {
    let plan = keypad_only(menu());
    let (line, _log) = ScriptedLine::new();
    let line = line
        // Speech nobody can transcribe: on the record, and the menu again.
        .says(5000, 800, "Hello?")
        // A key the menu does not take, then 2, then the member number.
        .presses(9000, "9")
        .presses(13_000, "2")
        .presses(17_000, "4711")
        .hangs_up(40_000);
    let end = run(line, &plan).await;
    assert_eq!(end.reason, EndReason::AgentHangup);
    assert_eq!(
        agent_lines(&end),
        [
            "Welcome to the Bistro. Press 1 for our hours, or 2 to book.",
            "Press 1 for our hours, or 2 to book.",
            "Press 1 for our hours, or 2 to book.",
            "Enter your member number, then hash.",
            "Member 4711, you are booked.",
        ]
    );
    let transcript = &end.conversation.transcript;
    let unheard = transcript.iter().find(|t| t.unheard.is_some()).unwrap();
    assert_eq!(unheard.unheard, Some(Unheard::NoSpeechToText));
    assert_eq!(unheard.node.as_deref(), Some("menu"));
    let keyed: Vec<(&str, &str)> = transcript
        .iter()
        .filter(|t| t.role == Speaker::User)
        .filter_map(|t| Some((t.digits.as_deref()?, t.node.as_deref()?)))
        .collect();
    assert_eq!(keyed, [("9", "menu"), ("2", "menu"), ("4711", "member")]);
    let entry = transcript
        .iter()
        .find(|t| t.digits.as_deref() == Some("4711"))
        .unwrap();
    assert_eq!((entry.start_ms, entry.end_ms), (17_000, 17_300));
    assert_eq!(
        trail(&end.conversation.path),
        [
            ("start", "start"),
            ("menu", "auto_advance"),
            ("member", "when: caller.digits equals 2"),
            ("booked", "when: caller.digits matches /^[0-9]{4}$/"),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn an_entry_short_of_its_count_ends_at_the_timeout_and_a_key_cuts_the_agent_short() {
    let plan = keypad_only(menu());
    let (line, _log) = ScriptedLine::new();
    let line = line
        // 2 while the menu is still being said: it stops there.
        .presses(2000, "2")
        // Three digits of four: the node's 5 s timeout ends the entry, which does not match.
        .presses(9000, "123")
        .hangs_up(30_000);
    let end = run(line, &plan).await;
    let transcript = &end.conversation.transcript;
    let menu = transcript
        .iter()
        .find(|t| t.text.starts_with("Welcome"))
        .unwrap_or_else(|| panic!("{transcript:#?}"));
    assert!(menu.interrupted, "{menu:?}");
    assert!(menu.text.starts_with("Welcome to the Bistro."), "{menu:?}");
    assert!(!menu.text.ends_with("2 to book."), "{menu:?}");
    let entry = transcript
        .iter()
        .find(|t| t.digits.as_deref() == Some("123"))
        .unwrap();
    assert_eq!(entry.node.as_deref(), Some("member"));
    // The member node asks again after the timeout.
    let asks = agent_lines(&end)
        .iter()
        .filter(|l| l.starts_with("Enter your member number"))
        .count();
    assert_eq!(asks, 2);
    let asked_again = transcript
        .iter()
        .rposition(|t| t.text.starts_with("Enter your member number"))
        .unwrap();
    assert!(transcript[asked_again].start_ms >= 9200 + 5000);
    assert_eq!(end.reason, EndReason::CallerHangup);
}

#[tokio::test(start_paused = true)]
async fn a_flow_sends_its_node_s_digits_on_entering_it() {
    let plan = keypad_only(json!({"nodes": [
        {"id": "start", "type": "start", "agent_speaks_first": false, "next_step_id": "wait"},
        {"id": "wait", "type": "conversation",
         "transitions": [{"next_step_id": "billing", "when": {"variable": "caller.last_words", "contains": "billing"}}]},
        {"id": "billing", "type": "conversation", "send_digits": "2#", "greeting": "One moment.", "is_literal": true,
         "transitions": [{"next_step_id": "bye", "when": {"variable": "caller.last_words", "contains": "goodbye"}}]},
        {"id": "bye", "type": "end"}
    ]}));
    let mut plan = plan;
    // Speech to text hears the company's menu.
    let mind = plan.mind.as_mut().unwrap();
    mind.transcriber = stand_in_mind(
        StandInModel::new(|_, _| Vec::new()),
        Box::new(PromptAgent {
            system_prompt: String::new(),
            temperature: None,
        }),
    )
    .transcriber;
    let (line, log) = ScriptedLine::new();
    let line = line
        .says(1000, 1500, "Press 2 for billing.")
        .says(6000, 1000, "Goodbye.")
        .hangs_up(20_000);
    let end = run(line, &plan).await;
    let sent = log.lock().unwrap().sent_digits.clone();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].1, "2#");
    let turn = end
        .conversation
        .transcript
        .iter()
        .find(|t| t.role == Speaker::Agent && t.digits.is_some())
        .unwrap();
    assert_eq!(turn.digits.as_deref(), Some("2#"));
    assert_eq!(turn.node.as_deref(), Some("billing"));
    assert_eq!(end.reason, EndReason::AgentHangup);
}

#[tokio::test(start_paused = true)]
async fn the_model_sends_digits_on_an_outbound_line_only() {
    let model = StandInModel::new(|request, _| {
        let offered = request.tools.iter().any(|t| t.name == "send_digits");
        let answered = matches!(
            request.messages.last(),
            Some(crate::vendors::ChatMessage::Tool { .. })
        );
        if answered {
            vec![Step::Text("Done.")]
        } else if offered {
            vec![Step::Call("send_digits", r#"{"digits": "3"}"#)]
        } else {
            vec![Step::Text("I cannot press keys here.")]
        }
    });
    let prompt = || {
        Box::new(PromptAgent {
            system_prompt: "Get to billing.".into(),
            temperature: None,
        })
    };
    let plan = plan(stand_in_mind(model.clone(), prompt()));
    let (line, log) = ScriptedLine::new();
    let line = line
        .says(1000, 1500, "Press 3 for billing.")
        .hangs_up(8000)
        .outbound();
    let end = run(line, &plan).await;
    assert_eq!(log.lock().unwrap().sent_digits.len(), 1);
    let event = end
        .conversation
        .events
        .iter()
        .find(|e| e.name == "send_digits")
        .unwrap();
    assert_eq!(event.status, ToolStatus::Succeeded);
    assert_eq!(event.arguments, json!({"digits": "3"}));
    // The model was told they were sent.
    let told = model.requests().iter().any(|r| {
        r.messages.iter().any(|m| {
            matches!(m, crate::vendors::ChatMessage::Tool { content, .. } if content.contains("\"sent\":\"3\""))
        })
    });
    assert!(told);
    // Inbound, the model is not offered the keypad.
    let (line, log) = ScriptedLine::new();
    let line = line.says(1000, 1500, "Press 3.").hangs_up(8000);
    let plan = plan_of(model);
    run(line, &plan).await;
    assert!(log.lock().unwrap().sent_digits.is_empty());
}

fn plan_of(model: Arc<StandInModel>) -> AgentPlan {
    plan(stand_in_mind(
        model,
        Box::new(PromptAgent {
            system_prompt: String::new(),
            temperature: None,
        }),
    ))
}

#[tokio::test(start_paused = true)]
async fn a_caller_who_talks_over_the_last_line_still_has_the_call_end() {
    let plan = keypad_only(menu());
    let (line, _log) = ScriptedLine::new();
    let line = line
        .presses(4000, "2")
        .presses(8000, "4719")
        // Over "Member 4719, you are booked.", which the end node says.
        .says(9500, 2000, "Four people, please.")
        .hangs_up(60_000);
    let end = run(line, &plan).await;
    assert_eq!(end.reason, EndReason::AgentHangup);
    let last = agent_lines(&end).last().cloned().unwrap_or_default();
    assert!(last.starts_with("Member"), "{:?}", agent_lines(&end));
    assert!(
        !agent_lines(&end).iter().any(|l| l.contains("Sorry")),
        "{:?}",
        agent_lines(&end)
    );
}

#[tokio::test(start_paused = true)]
async fn a_step_that_needs_a_model_talked_over_ends_the_call_at_once() {
    let plan = keypad_only(json!({"nodes": [
        {"id": "start", "type": "start", "greeting": "Hello.", "is_literal": true, "next_step_id": "chat"},
        {"id": "chat", "type": "conversation", "instructions": "Chat.",
         "transitions": [{"next_step_id": "bye", "condition": "done"}]},
        {"id": "bye", "type": "end"}
    ]}));
    let mut plan = plan;
    plan.mind.as_mut().unwrap().transcriber = stand_in_mind(
        StandInModel::new(|_, _| Vec::new()),
        Box::new(PromptAgent {
            system_prompt: String::new(),
            temperature: None,
        }),
    )
    .transcriber;
    let (line, _log) = ScriptedLine::new();
    let line = line
        .says(2000, 800, "Hi there.")
        // Over the fallback line.
        .says(3500, 3000, "Can you hear me? I said hi.")
        .hangs_up(60_000);
    let end = run(line, &plan).await;
    assert_eq!(end.reason, EndReason::ModelNotConfigured);
    let sorry = agent_lines(&end)
        .iter()
        .filter(|l| l.contains("Sorry"))
        .count();
    assert!(sorry <= 1, "{:?}", agent_lines(&end));
}
