//! The typed form of a flow: every node type read from its JSON and written back the same,
//! a stored flow of before reads, and what a save refuses is named at its field.

use serde_json::{Value, json};

use super::node::{ArgMode, ArgTemplate, FlowConfig, FlowNode};
use super::read::{FieldError, read};

/// A flow with every node type and every key each one reads.
fn every_type() -> Value {
    json!({"nodes": [
        {"id": "start", "type": "start", "name": "Start", "position": {"x": 1.0, "y": 2.5},
         "greeting": "Hi.", "is_literal": true, "agent_speaks_first": false,
         "next_step_id": "ask", "auto_advance": true},
        {"id": "ask", "type": "conversation", "name": "", "position": {"x": 0.0, "y": 0.0},
         "greeting": "When?", "is_literal": false, "instructions": "Ask for a time.",
         "variables": [{"name": "time", "description": "When"}, {"name": "note"}],
         "transitions": [
            {"next_step_id": "tool", "condition": "the caller gave a time"},
            {"next_step_id": "bye", "when": {"variable": "ask.time", "path": "$.a", "equals": null}},
            {"next_step_id": "bye", "when": {"variable": "metadata.tier", "exists": true}}],
         "next_step_id": "tool", "auto_advance": false,
         "is_global": true, "global_condition": "the caller asks again"},
        {"id": "tool", "type": "tool_call", "name": "", "position": {"x": 0.0, "y": 0.0},
         "tool_id": "t1", "next_step_id": "book", "error_next_step_id": "bye",
         "sample_result": {"ok": true}},
        {"id": "book", "type": "integration_call", "name": "", "position": {"x": 0.0, "y": 0.0},
         "integration_id": "i1", "provider": "google_calendar", "action": "create_event",
         "args_template": {"a": "{{ask.time}}", "b": {"type": "literal", "value": "x"},
                           "c": {"type": "ai_extract", "description": "The email"}},
         "success_next_step_id": "hand", "error_next_step_id": "bye",
         "custom": [{"path": "$.busy", "equals": true, "next_step_id": "ask"}],
         "sample_result": null},
        {"id": "hand", "type": "transfer", "name": "", "position": {"x": 0.0, "y": 0.0},
         "destination": "+15550001111", "error_next_step_id": "bye", "is_global": false},
        {"id": "bye", "type": "end", "name": "", "position": {"x": 0.0, "y": 0.0},
         "greeting": "Goodbye!", "is_literal": true, "is_global": true,
         "global_condition": "the caller wants to hang up"}
    ], "flow_config_version": 1, "metadata": {"custom_metadata_keys": ["tier"]}})
}

#[test]
fn every_node_type_reads_into_its_variant_and_writes_back_the_same() {
    let sent = every_type();
    let read = read(&sent).expect("its fields hold");
    assert_eq!(read.issues, Vec::new());
    let kinds: Vec<&str> = read.flow.nodes.iter().map(FlowNode::kind).collect();
    assert_eq!(
        kinds,
        [
            "start",
            "conversation",
            "tool_call",
            "integration_call",
            "transfer",
            "end"
        ]
    );
    let FlowNode::IntegrationCall(book) = &read.flow.nodes[3] else {
        panic!("{:?}", read.flow.nodes[3])
    };
    let args = book.args_template.as_ref().unwrap();
    assert_eq!(args["a"], ArgTemplate::Text("{{ask.time}}".into()));
    assert!(matches!(
        &args["c"],
        ArgTemplate::Mode(ArgMode::AiExtract { .. })
    ));
    assert_eq!(serde_json::to_value(&read.flow).unwrap(), sent);
    // Stored and read back, it is the same typed flow.
    let stored: FlowConfig = serde_json::from_value(sent.clone()).unwrap();
    assert_eq!(stored, read.flow);
    assert!(super::Flow::compile(&stored).is_ok());
}

#[test]
fn a_stored_flow_of_before_reads_with_its_extra_keys_kept_as_sent() {
    // As the API stored it: integer positions, keys of other types and unknown keys, values
    // of a shape no node reads.
    let doc = json!({"nodes": [
        {"id": "start", "type": "start", "name": "Start", "position": {"x": 0, "y": 10.5},
         "next_step_id": "c", "instructions": "kept", "foo": [1, 2]},
        {"id": "c", "type": "conversation", "instructions": 5, "variables": "none",
         "transitions": [{"next_step_id": "done", "condition": "done"}], "tool_id": "t"},
        {"id": "done", "type": "end", "is_global": "yes"}
    ], "flow_config_version": 1, "metadata": {"custom_metadata_keys": []}});
    let flow: FlowConfig = serde_json::from_value(doc).unwrap();
    let FlowNode::Start(start) = &flow.nodes[0] else {
        panic!()
    };
    assert_eq!(start.base.position.y, 10.5);
    assert_eq!(start.base.extra["instructions"], "kept");
    let FlowNode::Conversation(c) = &flow.nodes[1] else {
        panic!()
    };
    assert_eq!(c.instructions, None);
    assert_eq!(c.base.extra["instructions"], 5);
    let back = serde_json::to_value(&flow).unwrap();
    assert_eq!(back["nodes"][0]["foo"], json!([1, 2]));
    assert_eq!(back["nodes"][0]["position"], json!({"x": 0.0, "y": 10.5}));
    assert_eq!(back["nodes"][1]["variables"], "none");
    assert_eq!(back["nodes"][1]["tool_id"], "t");
    assert_eq!(back["nodes"][2]["is_global"], "yes");
    // A node of no known type is not a flow this service stored.
    let odd = json!({"nodes": [{"id": "x", "type": "ending"}]});
    assert!(serde_json::from_value::<FlowConfig>(odd).is_err());
}

#[test]
fn a_sent_flow_s_fields_are_checked_first_with_their_path() {
    let cases = [
        (
            json!({"nodes": [{"type": "start"}]}),
            "nodes[0]",
            "missing field `id`",
        ),
        (
            json!({"nodes": [{"id": "s", "type": "start", "is_literal": "yes"}]}),
            "nodes[0].is_literal",
            "invalid type: string \"yes\", expected a boolean",
        ),
        (
            json!(5),
            "",
            "invalid type: integer `5`, expected struct FlowConfig",
        ),
        (
            json!({"nodes": [{"id": "s", "type": "start"}], "flow_config_version": 2}),
            "flow_config_version",
            "must be 1",
        ),
        (
            json!({"nodes": [{"id": "s", "type": "start"}, {"id": "s", "type": "end"}]}),
            "nodes[1].id",
            "node id `s` is used more than once",
        ),
        (
            json!({"nodes": [{"id": "s", "type": "end", "next_step_id": "nowhere"}]}),
            "nodes[0].next_step_id",
            "`nowhere` is not a node of this flow",
        ),
    ];
    for (sent, field, message) in cases {
        let want = FieldError {
            field: field.into(),
            message: message.into(),
        };
        assert_eq!(read(&sent).err(), Some(want), "{sent}");
    }
}

#[test]
fn invalid_nodes_are_named_at_their_fields_as_sent() {
    let sent = json!({"nodes": [
        {"id": "s", "type": "start", "next_step_id": "c", "is_global": true},
        {"id": "c", "type": "conversation", "next_step_id": "e",
         "transitions": [5, {"next_step_id": "e"}, {"condition": "x"},
                         {"next_step_id": "e", "when": {"variable": "nodot", "equals": 1}}]},
        {"id": "b", "type": "integration_call", "args_template": {"odd": 5},
         "custom": [{"equals": 1}, {"path": "nope", "equals": 1, "next_step_id": "e"}]},
        {"id": "e", "type": "end", "is_global": true},
        {"id": "t", "type": "transfer", "destination": " "}
    ]});
    let read = read(&sent).expect("its fields hold");
    let mut got: Vec<(&str, &str, &str)> = read
        .issues
        .iter()
        .map(|i| (i.node_id.as_str(), i.code, i.field.as_str()))
        .collect();
    got.sort();
    let mut want = vec![
        ("s", "is_global_not_allowed", "is_global"),
        ("c", "transition_invalid", "transitions[0]"),
        ("c", "transition_invalid", "transitions[1]"),
        ("c", "transition_invalid", "transitions[2].next_step_id"),
        ("c", "transition_invalid", "transitions[3].when"),
        ("c", "no_way_out", "auto_advance"),
        ("b", "args_template_invalid", "args_template.odd"),
        ("b", "transition_invalid", "custom[0].path"),
        ("b", "transition_invalid", "custom[1].path"),
        ("b", "no_way_out", "success_next_step_id"),
        ("b", "unreachable", "id"),
        ("e", "global_condition_missing", "global_condition"),
        ("e", "unreachable", "id"),
        ("t", "destination_missing", "destination"),
        ("t", "unreachable", "id"),
    ];
    want.sort();
    assert_eq!(got, want);
    // An unknown type stops the reading at the nodes' own issues.
    let odd = json!({"nodes": [{"id": "s", "type": "start"}, {"id": "x", "type": "ending"}]});
    let read = super::read::read(&odd).unwrap();
    assert_eq!(read.unread, 1);
    let codes: Vec<&str> = read.issues.iter().map(|i| i.code).collect();
    assert_eq!(codes, ["node_type_invalid"]);
}
