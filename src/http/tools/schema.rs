//! The request bodies of the tool routes as the OpenAPI document describes them, built from the
//! same limits the handlers check.

use super::*;

body_schema!(
    /// The body of `POST /tools`.
    ToolCreate = json(create_schema())
);
body_schema!(
    /// The body of `PATCH /tools/{id}`.
    ToolPatch = json(patch_schema())
);
body_schema!(
    /// The body of `POST /tools/{id}/test`.
    ToolTestBody = json(test_schema())
);

/// A tool or parameter name as [`webhooks::tool_name`] reads it.
pub(super) fn name_schema() -> Value {
    json!({
        "type": "string",
        "pattern": webhooks::tool_name_pattern(),
        "description": format!("Normalized to camelCase: 1-{} letters or digits, starting with a letter.", webhooks::NAME_MAX),
    })
}

/// `name` as a pattern that ignores ASCII case.
pub(super) fn any_case(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphabetic() {
                format!("[{}{}]", c.to_ascii_uppercase(), c.to_ascii_lowercase())
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// The header names a webhook may set: RFC 9110 tokens, none the HTTP client owns.
pub(super) fn header_name_schema() -> Value {
    let forbidden: Vec<String> = webhooks::FORBIDDEN_HEADERS
        .iter()
        .map(|f| match f.strip_suffix('-') {
            Some(prefix) => format!("{}-.*", any_case(prefix)),
            None => any_case(f),
        })
        .collect();
    json!({
        "pattern": webhooks::header_name_pattern(),
        "not": {"pattern": format!("^(?:{})$", forbidden.join("|"))},
    })
}

/// The payload settings, in `config.payload_config` (or beside `config` on create).
pub(super) fn payload_properties() -> Value {
    json!({
        "extraction_parameters": {
            "type": ["array", "null"],
            "description": "Values the model extracts from the conversation; names unique after camelCase.",
            "items": {
                "type": "object",
                "additionalProperties": false,
                "required": ["name", "description"],
                "properties": {
                    "name": name_schema(),
                    "description": {"type": "string", "pattern": "\\S"},
                    "required": {"type": "boolean"},
                },
            },
        },
        "static_parameters": {"type": ["object", "null"], "description": "Sent as they are with every delivery."},
        "include_standard_metadata": {"type": "boolean", "description": "Default true."},
    })
}

/// A webhook tool's `config`, as [`webhooks::webhook_config`] reads it.
pub(super) fn webhook_config_schema() -> Value {
    let methods: Vec<&str> = WebhookMethod::ALL.iter().map(|m| m.as_str()).collect();
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["url"],
        "properties": {
            "url": {
                "type": "string",
                "maxLength": webhooks::URL_MAX,
                "description": "http(s) URL; its host must resolve to addresses the outbound policy allows.",
            },
            "method": {"type": "string", "enum": methods, "description": "Default POST."},
            "timeout_seconds": {
                "type": "integer",
                "minimum": webhooks::TIMEOUT_SECONDS.start(),
                "maximum": webhooks::TIMEOUT_SECONDS.end(),
                "description": "Default 30.",
            },
            "headers": {
                "type": ["object", "null"],
                "propertyNames": header_name_schema(),
                "additionalProperties": {
                    "type": "string",
                    "maxLength": webhooks::HEADER_VALUE_MAX,
                    "pattern": "^[^\\r\\n\\x00]*$",
                },
            },
            "payload_config": {
                "type": ["object", "null"],
                "additionalProperties": false,
                "properties": payload_properties(),
            },
            "sample_result": {
                "description": "What the flow simulator's dry runs answer for this tool when its tool_call node declares no sample_result (any JSON); never sent.",
            },
        },
    })
}

/// `POST /tools`: a webhook tool (the default type) needs a description and a config; a
/// function tool takes any config object and no payload settings. Payload settings sent beside
/// `config` may not also be in `config.payload_config`.
pub(super) fn create_schema() -> Value {
    let mut properties = json!({
        "name": name_schema(),
        "description": {
            "type": ["string", "null"],
            "maxLength": DESCRIPTION_MAX,
            "description": "When the model should use the tool; required (not blank) for webhook tools.",
        },
        "type": {"type": ["string", "null"], "enum": ["webhook", "function", null], "description": "Default webhook."},
        "config": {"description": "A webhook tool's settings (url, method, timeout_seconds, headers, payload_config); any object for a function tool."},
        "idempotency_key": {"type": ["string", "null"], "minLength": 1, "maxLength": IDEMPOTENCY_KEY_MAX},
    });
    if let (Value::Object(all), Value::Object(payload)) = (&mut properties, payload_properties()) {
        all.extend(payload);
    }
    let mut function_only: Map<String, Value> = MIGRATED
        .iter()
        .map(|k| (k.to_string(), Value::Bool(false)))
        .collect();
    function_only.insert("config".into(), json!({"type": ["object", "null"]}));
    let sent_once: Vec<Value> = MIGRATED
        .iter()
        .map(|k| {
            json!({
                "if": {"required": [k]},
                "then": {"properties": {"config": {"properties": {"payload_config": {"type": "object", "not": {"required": [k]}}}}}},
            })
        })
        .collect();
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["name"],
        "properties": properties,
        "if": {"required": ["type"], "properties": {"type": {"const": "function"}}},
        "then": {"properties": function_only},
        "else": {
            "required": ["description", "config"],
            "properties": {"description": {"type": "string", "pattern": "\\S"}, "config": webhook_config_schema()},
            "allOf": sent_once,
        },
    })
}

/// `PATCH /tools/{id}`: `config`, when sent, is the complete configuration of the tool's type.
pub(super) fn patch_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "minProperties": 1,
        "properties": {
            "name": name_schema(),
            "description": {
                "type": ["string", "null"],
                "maxLength": DESCRIPTION_MAX,
                "description": "Not blank for a webhook tool.",
            },
            "config": {"type": "object", "description": "As on create, for the tool's type."},
            "is_active": {"type": "boolean"},
        },
    })
}

/// `POST /tools/{id}/test`: all optional; arguments default to `<name>` placeholders.
pub(super) fn test_schema() -> Value {
    let mut directions: Vec<Value> = DIRECTIONS.iter().map(|d| json!(d)).collect();
    directions.push(Value::Null);
    let nullable = |t: &str| json!({"type": [t, "null"]});
    let context: Map<String, Value> = TEST_CONTEXT
        .iter()
        .map(|&key| {
            let schema = match key {
                "call_id" => json!({"type": ["string", "null"], "format": "uuid"}),
                "call_direction" => json!({"enum": directions, "description": "Default outbound."}),
                "call_metadata" | "call_variables" => nullable("object"),
                _ => nullable("string"),
            };
            (key.to_owned(), schema)
        })
        .collect();
    json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "agent_id": {"type": ["string", "null"], "format": "uuid", "description": "An agent of the workspace, named in the metadata."},
            "arguments": {
                "type": ["object", "null"],
                "additionalProperties": {"type": "string"},
                "description": "Values of the tool's extraction parameters (only those).",
            },
            "context": {"type": ["object", "null"], "additionalProperties": false, "properties": context},
        },
    })
}
