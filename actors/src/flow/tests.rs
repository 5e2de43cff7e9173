//! Flows read from JSON and walked step by step.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::graph::Kind;
use super::routing::HardFailure;
use super::run::{Dispatch, Outcome, Step};
use super::*;

/// Book a meeting: greet, ask for a time, check it, book it, confirm, end.
fn booking() -> Value {
    json!({"nodes": [
        {"id": "start", "type": "start", "greeting": "Hi, this is Ada from Acme.", "is_literal": true, "next_step_id": "ask"},
        {"id": "ask", "type": "conversation", "instructions": "Ask when the caller wants to meet.",
         "variables": [{"name": "time", "description": "The start, ISO 8601"}],
         "transitions": [
            {"next_step_id": "check", "condition": "the caller gave a time"},
            {"next_step_id": "vip", "when": {"variable": "metadata.tier", "equals": "vip"}}
         ]},
        {"id": "vip", "type": "conversation", "greeting": "Welcome back, valued customer.", "is_literal": true, "next_step_id": "check", "auto_advance": false,
         "transitions": [{"next_step_id": "check", "condition": "the caller gave a time"}]},
        {"id": "check", "type": "integration_call", "integration_id": "i1", "provider": "google_calendar", "action": "check_availability",
         "args_template": {"start_time": "{{ask.time}}", "attendee": {"type": "ai_extract", "description": "The caller's email for {{metadata.user_number}}"}},
         "custom": [{"path": "$.available", "equals": false, "next_step_id": "busy"}],
         "success_next_step_id": "book", "error_next_step_id": "sorry"},
        {"id": "book", "type": "integration_call", "integration_id": "i1", "provider": "google_calendar", "action": "create_event",
         "args_template": {"start_time": {"type": "literal", "value": "{{ask.time}}"}},
         "success_next_step_id": "confirm", "error_next_step_id": "sorry"},
        {"id": "busy", "type": "conversation", "greeting": "That time is taken.", "is_literal": true,
         "transitions": [{"next_step_id": "ask", "condition": "the caller wants another time"}]},
        {"id": "confirm", "type": "conversation", "greeting": "You are booked for {{ask.time}}.", "is_literal": true,
         "transitions": [{"next_step_id": "bye", "condition": "the caller has nothing else"}]},
        {"id": "sorry", "type": "end", "greeting": "Sorry, something went wrong.", "is_literal": true},
        {"id": "bye", "type": "end", "greeting": "Goodbye!", "is_literal": true, "is_global": true, "global_condition": "the caller wants to hang up"}
    ], "metadata": {"custom_metadata_keys": ["tier"]}})
}

/// A path as (node, reason) pairs.
pub(crate) fn trail(path: &[PathStep]) -> Vec<(&str, &str)> {
    path.iter()
        .map(|p| (p.node_id.as_str(), p.reason.as_str()))
        .collect()
}

/// A flow's JSON read as a save reads it, then built to run: the flow, or its issues.
pub(crate) fn compiled(config: &Value) -> Result<Flow, Vec<GraphIssue>> {
    let sent = read(config).expect("the flow's fields hold");
    if !sent.issues.is_empty() {
        return Err(sent.issues);
    }
    Ok(Flow::compile(&sent.flow).expect("a flow read whole compiles"))
}

fn codes(config: Value) -> Vec<(String, &'static str)> {
    match compiled(&config) {
        Ok(_) => Vec::new(),
        Err(issues) => issues.into_iter().map(|i| (i.node_id, i.code)).collect(),
    }
}

fn run_of(config: Value, metadata: Value) -> FlowRun {
    let flow = Arc::new(compiled(&config).expect("a valid flow"));
    let metadata: Map<String, Value> = metadata.as_object().cloned().unwrap_or_default();
    FlowRun::new(flow, metadata, HashMap::new())
}

#[test]
fn the_booking_flow_reads_whole() {
    let flow = compiled(&booking()).unwrap();
    assert_eq!(flow.nodes.len(), 9);
    assert_eq!(flow.node(flow.start).id, "start");
    assert_eq!(flow.globals, vec![flow.index("bye").unwrap()]);
    assert!(matches!(flow.node(3).kind, Kind::IntegrationCall { .. }));
}

#[test]
fn what_cannot_run_is_named_at_its_node() {
    let cases = [
        (
            json!({"nodes": [{"id": "a", "type": "end"}]}),
            vec![("", "start_missing")],
        ),
        (
            json!({"nodes": [{"id": "s", "type": "start", "next_step_id": "e"}, {"id": "t", "type": "start", "next_step_id": "e"}, {"id": "e", "type": "end"}]}),
            vec![("t", "start_duplicate")],
        ),
        (
            json!({"nodes": [{"id": "s", "type": "start", "next_step_id": "e"}, {"id": "e", "type": "end"}, {"id": "lost", "type": "end"}]}),
            vec![("lost", "unreachable")],
        ),
        (
            json!({"nodes": [{"id": "s", "type": "start", "next_step_id": "c"}, {"id": "c", "type": "conversation"}]}),
            vec![("c", "no_way_out")],
        ),
        (
            json!({"nodes": [{"id": "s", "type": "start"}]}),
            vec![("s", "no_way_out")],
        ),
        // `next_step_id` without `auto_advance` is never followed from a conversation node.
        (
            json!({"nodes": [{"id": "s", "type": "start", "next_step_id": "c"}, {"id": "c", "type": "conversation", "next_step_id": "e"}, {"id": "e", "type": "end"}]}),
            vec![("c", "no_way_out"), ("e", "unreachable")],
        ),
        (
            json!({"nodes": [{"id": "s", "type": "start", "next_step_id": "t"}, {"id": "t", "type": "tool_call", "tool_id": "x"}]}),
            vec![("t", "no_way_out")],
        ),
        (
            json!({"nodes": [{"id": "s", "type": "start", "next_step_id": "e", "is_global": true, "global_condition": "x"}, {"id": "e", "type": "end"}]}),
            vec![("s", "is_global_not_allowed")],
        ),
        (
            json!({"nodes": [{"id": "s", "type": "start", "next_step_id": "e"}, {"id": "e", "type": "end", "is_global": true}]}),
            vec![("e", "global_condition_missing")],
        ),
        (
            json!({"nodes": [{"id": "s", "type": "start", "next_step_id": "e"}, {"id": "e", "type": "ending"}]}),
            vec![("e", "node_type_invalid")],
        ),
        (
            json!({"nodes": [{"id": "s", "type": "start", "next_step_id": "c"}, {"id": "c", "type": "conversation",
                "transitions": [{"next_step_id": "nowhere", "condition": "x"}, {"next_step_id": "e"}, {"next_step_id": "e", "when": {"variable": "x"}}]},
                {"id": "e", "type": "end"}]}),
            vec![
                ("c", "transition_dangling"),
                ("c", "transition_invalid"),
                ("c", "transition_invalid"),
                ("c", "no_way_out"),
                ("e", "unreachable"),
            ],
        ),
        (
            json!({"nodes": [{"id": "s", "type": "start", "next_step_id": "t"}, {"id": "t", "type": "transfer"}]}),
            vec![("t", "destination_missing")],
        ),
    ];
    for (config, want) in cases {
        let got = codes(config.clone());
        let want: Vec<(String, &str)> = want.into_iter().map(|(n, c)| (n.to_string(), c)).collect();
        assert_eq!(got, want, "{config}");
    }
    // A global node is a way out of every conversation node, and reachable from them.
    let ok = json!({"nodes": [
        {"id": "s", "type": "start", "next_step_id": "c"},
        {"id": "c", "type": "conversation"},
        {"id": "g", "type": "end", "is_global": true, "global_condition": "the caller says goodbye"}
    ]});
    assert_eq!(codes(ok), Vec::new());
}

#[test]
fn a_call_walks_the_booking_flow_from_greeting_to_goodbye() {
    let mut run = run_of(booking(), json!({"user_number": "+15550001111"}));
    assert_eq!(
        run.start(0),
        vec![Step::Say("Hi, this is Ada from Acme.".into())]
    );
    // The caller's first turn is answered in the node after the start.
    assert_eq!(run.caller_turn("", 1000), vec![Step::Reply]);
    assert_eq!(run.node().id, "ask");
    let edges = run.edges();
    let names: Vec<&str> = edges.iter().map(|e| e.function.name.as_str()).collect();
    assert_eq!(names, ["go_to_check", "go_to_bye"]);
    assert_eq!(
        edges[0].function.parameters["properties"]["time"]["type"],
        "string"
    );
    assert!(
        run.instructions()
            .contains("Ask when the caller wants to meet.")
    );
    // The model takes the edge with the time: the check extracts the attendee first.
    let steps = run
        .take("go_to_check", &json!({"time": "2026-12-01T10:00"}), 2000)
        .unwrap();
    let [Step::Extract(spec)] = steps.as_slice() else {
        panic!("{steps:?}")
    };
    assert_eq!(
        spec.parameters["properties"]["attendee"]["description"],
        "The caller's email for +15550001111"
    );
    let steps = run.extracted(&json!({"attendee": "ada@example.com"}));
    let [
        Step::Dispatch(Dispatch::Integration {
            action, arguments, ..
        }),
    ] = steps.as_slice()
    else {
        panic!("{steps:?}")
    };
    assert_eq!(action, "check_availability");
    assert_eq!(
        Value::Object(arguments.clone()),
        json!({"start_time": "2026-12-01T10:00", "attendee": "ada@example.com"})
    );
    // Free: no custom branch matches, the success edge books it.
    let (steps, reason) = run.dispatched(Outcome::Done(json!({"available": true})), 3000);
    assert_eq!(reason, "success_next_step_id: no custom branch matched");
    let [Step::Dispatch(Dispatch::Integration { action, .. })] = steps.as_slice() else {
        panic!("{steps:?}")
    };
    assert_eq!(action, "create_event");
    let (steps, _) = run.dispatched(Outcome::Done(json!({"id": "ev1"})), 4000);
    assert_eq!(
        steps,
        vec![Step::Say("You are booked for 2026-12-01T10:00.".into())]
    );
    let steps = run.take("go_to_bye", &json!({}), 5000).unwrap();
    assert_eq!(steps, vec![Step::Say("Goodbye!".into()), Step::Hangup]);
    let path = trail(run.path());
    assert_eq!(
        path,
        [
            ("start", "start"),
            ("ask", "next_step_id"),
            ("check", "model: the caller gave a time"),
            ("book", "success_next_step_id: no custom branch matched"),
            ("confirm", "success_next_step_id: no custom branch matched"),
            ("bye", "model: the caller has nothing else"),
        ]
    );
    assert_eq!(run.values()["check.result"], json!({"available": true}));
    // Results go to the model's next round.
    assert_eq!(run.results.len(), 2);
}

#[test]
fn a_custom_branch_and_a_hard_failure_route_as_the_spec_says() {
    let mut run = run_of(booking(), json!({}));
    run.start(0);
    run.caller_turn("", 10);
    run.take("go_to_check", &json!({"time": "t"}), 20);
    run.extracted(&json!({"attendee": "a@b.c"}));
    let (steps, reason) = run.dispatched(Outcome::Done(json!({"available": "false"})), 30);
    assert_eq!(reason, "custom[0] matched");
    assert_eq!(steps, vec![Step::Say("That time is taken.".into())]);
    // Back to asking, then a provider failure.
    run.take("go_to_ask", &json!({}), 40);
    run.take("go_to_check", &json!({"time": "t2"}), 50);
    run.extracted(&json!({}));
    let (steps, reason) = run.dispatched(Outcome::Failed(HardFailure::Provider(503)), 60);
    assert_eq!(reason, "error_next_step_id: provider_5xx");
    assert_eq!(
        steps,
        vec![
            Step::Say("Sorry, something went wrong.".into()),
            Step::Hangup
        ]
    );
}

#[test]
fn deterministic_checks_come_before_the_model() {
    let mut run = run_of(booking(), json!({"tier": "vip"}));
    run.start(0);
    // In `ask`, the check on the metadata holds at once: the caller's turn moves on to `vip`.
    let steps = run.caller_turn("", 100);
    assert_eq!(run.node().id, "vip");
    assert_eq!(
        steps,
        vec![Step::Say("Welcome back, valued customer.".into())]
    );
    assert_eq!(run.path()[2].reason, "when: metadata.tier equals vip");
}

#[test]
fn an_edge_not_offered_here_moves_nothing() {
    let mut run = run_of(booking(), json!({}));
    run.start(0);
    run.caller_turn("", 10);
    assert_eq!(run.take("go_to_book", &json!({}), 20), None);
    assert_eq!(run.node().id, "ask");
}

/// A keypad-free front desk that routes on the caller's words alone: no model decides.
fn front_desk() -> Value {
    json!({"nodes": [
        {"id": "start", "type": "start", "greeting": "Hello. Do you want to book a table, or hear our hours?", "is_literal": true, "next_step_id": "menu"},
        {"id": "menu", "type": "conversation", "greeting": "Say book, or hours.", "is_literal": true,
         "transitions": [
            {"next_step_id": "book", "when": {"variable": "caller.last_words", "contains": ["book", "reserve", "a table"]}},
            {"next_step_id": "hours", "when": {"variable": "caller.last_words", "matches": "\\b(hours?|open(ing)?)\\b"}}
         ]},
        {"id": "book", "type": "conversation", "greeting": "For how many people?", "is_literal": true,
         "transitions": [{"next_step_id": "done", "when": {"variable": "caller.last_words", "matches": "\\b([1-9]|one|two|three|four|five|six)\\b"}}]},
        {"id": "hours", "type": "end", "greeting": "We are open from noon to ten.", "is_literal": true},
        {"id": "done", "type": "end", "greeting": "Booked. Goodbye!", "is_literal": true}
    ]})
}

#[test]
fn the_caller_s_words_route_a_flow_case_and_punctuation_aside() {
    let mut run = run_of(front_desk(), json!({}));
    run.start(0);
    // The first words are checked in the node after the start, as if said there.
    let steps = run.caller_turn("Hi! I'd like to RESERVE, please.", 100);
    assert_eq!(steps, vec![Step::Say("For how many people?".into())]);
    assert_eq!(trail(run.path())[1], ("menu", "next_step_id"));
    assert_eq!(
        trail(run.path()).last(),
        Some(&(
            "book",
            "when: caller.last_words contains \"book\" or \"reserve\" or \"a table\""
        ))
    );
    // Words heard in the node before do not count in the next: the node waits for its own.
    assert_eq!(run.node().id, "book");
    // "Bookings" is not the word "book"; a number matches the pattern.
    let steps = run.caller_turn("Four of us.", 200);
    assert_eq!(
        steps,
        vec![Step::Say("Booked. Goodbye!".into()), Step::Hangup]
    );
}

#[test]
fn phrases_are_whole_words_and_a_miss_is_left_to_the_node() {
    let mut run = run_of(front_desk(), json!({}));
    run.start(0);
    run.caller_turn("Hello there", 100);
    assert_eq!(run.node().id, "menu");
    // The node is decided by its checks alone: on a miss it asks again, in its own words.
    assert_eq!(
        run.caller_turn("bookings?", 200),
        vec![Step::Say("Say book, or hours.".into())]
    );
    assert_eq!(run.node().id, "menu");
    run.caller_turn("When are you OPEN?", 300);
    assert_eq!(run.node().id, "hours");
    assert_eq!(super::graph::words("  Yes,   please!! "), "yes please");
    assert_eq!(super::graph::words("Café — ÜBER"), "café über");
}

#[test]
fn word_checks_of_the_wrong_shape_are_refused_at_save() {
    let flow = |when: Value| {
        json!({"nodes": [
            {"id": "start", "type": "start", "next_step_id": "a"},
            {"id": "a", "type": "conversation", "transitions": [{"next_step_id": "b", "when": when}]},
            {"id": "b", "type": "end"}
        ]})
    };
    for bad in [
        json!({"variable": "caller.last_words", "contains": 3}),
        json!({"variable": "caller.last_words", "contains": []}),
        json!({"variable": "caller.last_words", "contains": ["", "x"]}),
        json!({"variable": "caller.last_words", "contains": "!!"}),
        json!({"variable": "caller.last_words", "matches": "("}),
        json!({"variable": "caller.last_words", "matches": "a".repeat(201)}),
        json!({"variable": "caller.last_words", "contains": "yes", "equals": "yes"}),
        json!({"variable": "caller.mood", "contains": "yes"}),
    ] {
        let issues = codes(flow(bad.clone()));
        assert!(
            issues.iter().any(|(_, code)| *code == "transition_invalid"),
            "{bad}: {issues:?}"
        );
    }
    assert!(
        codes(flow(
            json!({"variable": "caller.last_words", "contains": "yes"})
        ))
        .is_empty()
    );
    assert!(
        codes(flow(
            json!({"variable": "caller.last_words", "matches": "^no\\b"})
        ))
        .is_empty()
    );
}

#[test]
fn a_node_s_keypad_settings_are_checked_at_save() {
    let flow = |extra: Value| {
        let mut node = json!({"id": "a", "type": "conversation",
            "transitions": [{"next_step_id": "b", "when": {"variable": "caller.digits", "matches": "^[0-9]{4}$"}}]});
        node.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({"nodes": [
            {"id": "start", "type": "start", "next_step_id": "a"},
            node,
            {"id": "b", "type": "end"}
        ]})
    };
    for (bad, code) in [
        (json!({"gather": {"max_digits": 0}}), "gather_invalid"),
        (json!({"gather": {"max_digits": 33}}), "gather_invalid"),
        (json!({"gather": {"terminator": "##"}}), "gather_invalid"),
        (json!({"gather": {"terminator": "x"}}), "gather_invalid"),
        (json!({"gather": {"timeout_secs": 0.1}}), "gather_invalid"),
        (json!({"gather": {"timeout_secs": "5"}}), "gather_invalid"),
        (json!({"gather": 4}), "gather_invalid"),
        (json!({"send_digits": "12x"}), "send_digits_invalid"),
        (json!({"send_digits": ""}), "send_digits_invalid"),
        (
            json!({"send_digits": "1".repeat(33)}),
            "send_digits_invalid",
        ),
        (json!({"send_digits": 12}), "send_digits_invalid"),
    ] {
        let issues = codes(flow(bad.clone()));
        assert!(issues.iter().any(|(_, c)| *c == code), "{bad}: {issues:?}");
    }
    let fine = json!({"gather": {"max_digits": 4, "terminator": "", "timeout_secs": 10}, "send_digits": "9w"});
    assert!(!codes(flow(fine)).is_empty(), "w is no key");
    let fine = json!({"gather": {"max_digits": 4, "terminator": "*", "timeout_secs": 10}, "send_digits": "*9#"});
    assert!(codes(flow(fine.clone())).is_empty());
    let compiled = compiled(&flow(fine)).unwrap();
    let node = &compiled.nodes[compiled.index("a").unwrap()];
    let gather = node.gather.unwrap();
    assert_eq!(gather.max_digits, Some(4));
    assert_eq!(gather.terminator.map(|d| d.as_char()), Some('*'));
    assert_eq!(gather.timeout, std::time::Duration::from_secs(10));
    assert_eq!(node.send_digits.as_deref(), Some("*9#"));
}

#[test]
fn keyed_digits_route_as_keyed_and_are_kept_at_their_node() {
    let mut run = run_of(
        json!({"nodes": [
            {"id": "start", "type": "start", "greeting": "Press 1, or star.", "is_literal": true, "next_step_id": "menu"},
            {"id": "menu", "type": "conversation", "greeting": "Press 1, or star.", "is_literal": true,
             "transitions": [
                {"next_step_id": "one", "when": {"variable": "caller.digits", "equals": "1"}},
                {"next_step_id": "star", "when": {"variable": "caller.digits", "matches": "^\\*"}}
             ]},
            {"id": "one", "type": "end", "greeting": "One.", "is_literal": true},
            {"id": "star", "type": "end", "greeting": "Star {{menu.digits}}.", "is_literal": true}
        ]}),
        json!({}),
    );
    run.start(0);
    // The first entry is the next node's, as if keyed there.
    assert_eq!(
        run.caller_digits("*5", 100),
        vec![Step::Say("Star *5.".into()), Step::Hangup]
    );
    assert_eq!(
        trail(run.path()).last(),
        Some(&("star", "when: caller.digits matches /^\\*/"))
    );
    assert_eq!(run.gather(), crate::agent::director::Gather::default());
}
