//! The analysis's prompt, its answer read back, and its retries.

use super::*;
use serde_json::json;

const PARAMETERS: &[&str] = &["budget", "moveInDate", "hasPets"];
const LABELS: &[&str] = &["Interested", "Not interested", "Callback requested"];

#[test]
fn the_first_json_object_is_found_in_fences_and_prose() {
    let fenced = "```json\n{\"summary\": \"Booked.\", \"disposition\": null}\n```";
    assert_eq!(first_json_object(fenced).unwrap()["summary"], "Booked.");
    let prose = "Sure! Here is {my answer}: {\"summary\": \"ok\"} and {\"other\": 1}";
    assert_eq!(
        first_json_object(prose).unwrap(),
        json!({"summary": "ok"}).as_object().unwrap().clone()
    );
    let nested = r#"{"summary": "a {brace} inside", "extracted": {"budget": 5}}"#;
    assert_eq!(first_json_object(nested).unwrap()["extracted"]["budget"], 5);
    assert_eq!(first_json_object("no JSON here"), None);
    assert_eq!(first_json_object("[1, 2] {broken"), None);
    assert_eq!(first_json_object(""), None);
}

#[test]
fn a_good_answer_is_read_whole() {
    let answer = r#"{"summary": " The caller wants a flat. ", "extracted": {"budget": "1200 EUR", "moveInDate": "2026-07-01", "hasPets": false}, "disposition": "Interested"}"#;
    let a = parse(answer, PARAMETERS, LABELS).unwrap();
    assert_eq!(a.summary.as_deref(), Some("The caller wants a flat."));
    assert_eq!(
        Value::Object(a.extracted),
        json!({"budget": "1200 EUR", "moveInDate": "2026-07-01", "hasPets": false})
    );
    assert_eq!(a.disposition.as_deref(), Some("Interested"));
}

#[test]
fn extra_keys_are_dropped_and_wrong_types_are_null() {
    let answer = r#"{"summary": 42, "extracted": {"budget": ["a"], "moveInDate": "  ", "hasPets": {"x": 1}, "ssn": "123"}, "disposition": 7, "mood": "happy"}"#;
    let a = parse(answer, PARAMETERS, LABELS).unwrap();
    assert_eq!(a.summary, None);
    assert_eq!(
        Value::Object(a.extracted),
        json!({"budget": null, "moveInDate": null, "hasPets": null})
    );
    assert_eq!(a.disposition, None);

    let not_an_object = r#"{"summary": "s", "extracted": "budget is 5", "disposition": null}"#;
    let a = parse(not_an_object, PARAMETERS, LABELS).unwrap();
    assert!(a.extracted.values().all(Value::is_null));
    assert_eq!(a.extracted.len(), 3);
}

#[test]
fn only_offered_labels_are_dispositions() {
    let with = |label: &str| {
        let answer = json!({"summary": "s", "disposition": label}).to_string();
        parse(&answer, PARAMETERS, LABELS).unwrap().disposition
    };
    assert_eq!(
        with("Callback requested").as_deref(),
        Some("Callback requested")
    );
    assert_eq!(with(" not interested ").as_deref(), Some("Not interested"));
    assert_eq!(with("Maybe"), None);
    assert_eq!(with(""), None);
}

#[test]
fn an_answer_without_json_is_unusable() {
    assert_eq!(parse("I cannot help with that.", PARAMETERS, LABELS), None);
    assert_eq!(
        parse("```json\n{\"summary\": \n```", PARAMETERS, LABELS),
        None
    );
}

#[test]
fn long_values_are_cut() {
    let long = "x".repeat(5_000);
    let answer = json!({"summary": long, "extracted": {"budget": long}}).to_string();
    let a = parse(&answer, PARAMETERS, LABELS).unwrap();
    assert!(a.summary.unwrap().chars().count() < MAX_SUMMARY_CHARS + 20);
    let budget = a.extracted["budget"].as_str().unwrap().chars().count();
    assert!(budget < MAX_VALUE_CHARS + 20);
}

#[test]
fn retries_wait_30_seconds_doubling() {
    let waits: Vec<u64> = (1..=4).map(|a| retry_delay(a).as_secs()).collect();
    assert_eq!(waits, [30, 60, 120, 240]);
    assert_eq!(retry_delay(0).as_secs(), 30);
}

#[test]
fn the_request_names_parameters_dispositions_tools_and_the_latest_turns() {
    let turn = |role, text: &str, start_ms| Turn {
        role,
        text: text.into(),
        start_ms,
        end_ms: start_ms + 500,
        interrupted: false,
        node: None,
        unheard: None,
        digits: None,
    };
    let mut transcript = vec![
        turn(Speaker::Agent, "Hello, this is Dana from Acme.", 0),
        turn(Speaker::User, "Hi, I'd like a flat for 1200.", 65_000),
    ];
    transcript.extend((0..2_000).map(|i| turn(Speaker::User, "filler words here", i)));
    transcript.push(turn(Speaker::User, "Call me back Monday.", 90_000));
    let parameters = vec![ExtractionParameter {
        name: "budget".into(),
        description: "The monthly rent they can pay".into(),
    }];
    let dispositions = vec![Disposition {
        id: switchboard_actors::ids::DispositionId::new(),
        label: "Callback requested".into(),
        description: "They asked to be called again".into(),
        color: "#000000".into(),
        position: 0,
        is_protected: false,
        created_at: chrono::Utc::now(),
    }];
    let events = vec![ToolEvent {
        name: "checkCalendar".into(),
        tool_id: None,
        arguments: json!({"day": "monday"}),
        status: ToolStatus::Succeeded,
        latency_ms: 120,
        response_preview: Some("{\"free\": [\"10:00\"]}".into()),
        raw_response_preview: None,
        status_code: Some(200),
        error: None,
        delivery_id: None,
        at_ms: 70_000,
    }];
    let r = request(&transcript, &events, &parameters, &dispositions);
    let ChatMessage::User(user) = &r.messages[1] else {
        panic!("{:?}", r.messages);
    };
    assert!(user.contains("- budget: The monthly rent they can pay"));
    assert!(user.contains("- Callback requested: They asked to be called again"));
    assert!(user.contains("- checkCalendar (succeeded, 120 ms) with {\"day\":\"monday\"}"));
    assert!(
        user.contains("[01:30] user: Call me back Monday."),
        "{user}"
    );
    assert!(user.contains("earlier turns left out"));
    assert!(
        !user.contains("Dana from Acme"),
        "the earliest turns give way"
    );
    assert!(user.chars().count() < PROMPT_TRANSCRIPT_CHARS + 2_000);
    assert!(r.tools.is_empty());
}
