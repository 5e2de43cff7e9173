//! Webhook tools tried once: a test delivery with sample inputs, logged like a real one.

use axum::http::StatusCode;
use serde_json::{Map, Value, json};
use switchboard_actors::ids::{AgentId, ToolId};

use crate::app::auth::Auth;
use crate::app::error::AppError;
use crate::app::fields::check_fields;
use crate::app::state::App;
use crate::edge::webhooks::{self, Outcome, WebhookConfig};
use crate::store::{Delivery, Tool};

/// One test delivery of a webhook tool (`body` as `POST /tools/{id}/test` reads it); the
/// answer's JSON, or the delivery's failure.
pub async fn test_tool(
    state: &App,
    auth: &Auth,
    id: ToolId,
    body: Option<Map<String, Value>>,
) -> Result<Value, AppError> {
    let tool = state
        .store
        .tool(auth.workspace_id, id)
        .await?
        .ok_or(AppError::not_found("Tool"))?;
    if tool.tool_type != "webhook" {
        return Err(AppError::bad_request(
            "Only webhook tools can be tested: this is a function tool",
        ));
    }
    let config = WebhookConfig::from_stored(&tool.config).ok_or_else(|| {
        AppError::bad_request(
            "The saved webhook configuration is not valid: save the tool's config again",
        )
    })?;
    let (metadata, arguments) = test_inputs(state, auth, &tool, body).await?;
    let payload = webhooks::payload(&config, &metadata, &arguments);
    let started = std::time::Instant::now();
    let outcome = webhooks::deliver(&state.egress, &config, &payload).await;
    let logged = state
        .store
        .log_delivery(&Delivery {
            workspace_id: auth.workspace_id,
            tool_id: tool.id,
            kind: "test",
            method: config.method.as_str(),
            url: webhooks::logged_url(&config.url),
            outcome: outcome.name(),
            status_code: outcome.status(),
            duration_ms: started.elapsed().as_millis() as i64,
            at: state.store.now(),
        })
        .await;
    let delivery_id = match logged {
        Ok(id) => json!(id),
        Err(e) => {
            tracing::warn!(error = %e, "a tool delivery could not be logged");
            Value::Null
        }
    };
    let payload_sent = Value::Object(payload);
    let failure = |status: StatusCode,
                   code: &'static str,
                   message: String,
                   details: String,
                   status_code: Value,
                   downstream: Value| {
        AppError::Webhook {
            status: status.as_u16(),
            code,
            message,
            extra: json!({
                "details": details,
                "status_code": status_code,
                "downstream_response": downstream,
                "payload_sent": payload_sent.clone(),
                "delivery_id": delivery_id.clone(),
            }),
        }
    };
    match outcome {
        Outcome::Delivered { status, body } => Ok(json!({
            "success": true,
            "status_code": status,
            "response_body": body,
            "payload_sent": payload_sent,
            "delivery_id": delivery_id,
        })),
        Outcome::Status { status, body } => Err(failure(
            StatusCode::BAD_GATEWAY,
            "DOWNSTREAM_HTTP_ERROR",
            format!("The webhook answered {status}"),
            if (300..400).contains(&status) {
                "redirects are not followed".into()
            } else {
                "the webhook answered with a non-2xx status".into()
            },
            json!(status),
            json!(body),
        )),
        Outcome::Timeout => Err(failure(
            StatusCode::GATEWAY_TIMEOUT,
            "WEBHOOK_TIMEOUT",
            format!(
                "The webhook did not answer within {} s",
                config.timeout_seconds
            ),
            "timeout".into(),
            Value::Null,
            Value::Null,
        )),
        Outcome::Network(reason) => Err(failure(
            StatusCode::BAD_GATEWAY,
            "WEBHOOK_NETWORK_ERROR",
            "The webhook could not be reached".into(),
            reason,
            Value::Null,
            Value::Null,
        )),
    }
}

/// The metadata and arguments of a test delivery, from its optional body.
async fn test_inputs(
    state: &App,
    auth: &Auth,
    tool: &Tool,
    body: Option<Map<String, Value>>,
) -> Result<(Map<String, Value>, Map<String, Value>), AppError> {
    let body = body.unwrap_or_default();
    check_fields(&body, &["agent_id", "arguments", "context"])?;
    let mut agent_id = Value::Null;
    let mut agent_name = Value::Null;
    match body.get("agent_id") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => {
            let id: AgentId = s
                .parse()
                .map_err(|_| AppError::invalid_field("agent_id", "must be a UUID"))?;
            let agent = state
                .store
                .agent(auth.workspace_id, id)
                .await?
                .ok_or_else(|| {
                    AppError::invalid_field("agent_id", "no such agent in this workspace")
                })?;
            agent_id = json!(agent.id);
            agent_name = json!(agent.name);
        }
        Some(_) => {
            return Err(AppError::invalid_field("agent_id", "must be a UUID"));
        }
    }
    let empty = Map::new();
    let context = match body.get("context") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(c)) => c,
        Some(_) => {
            return Err(AppError::invalid_field("context", "must be an object"));
        }
    };
    if let Some(k) = context.keys().find(|k| !TEST_CONTEXT.contains(&k.as_str())) {
        return Err(AppError::invalid_field(
            format!("context.{k}"),
            format!("allowed: {}", TEST_CONTEXT.join(", ")),
        ));
    }
    let call_id = match context.get("call_id") {
        None | Some(Value::Null) => Value::Null,
        Some(Value::String(s)) if uuid::Uuid::parse_str(s).is_ok() => json!(s),
        Some(_) => {
            return Err(AppError::invalid_field(
                "context.call_id",
                "must be a UUID or null",
            ));
        }
    };
    let direction = match context.get("call_direction") {
        None | Some(Value::Null) => json!("outbound"),
        Some(Value::String(d)) if DIRECTIONS.contains(&d.as_str()) => {
            json!(d)
        }
        Some(_) => {
            return Err(AppError::invalid_field(
                "context.call_direction",
                "must be inbound, outbound, web_call or null",
            ));
        }
    };
    let number = |key: &str| -> Result<Value, AppError> {
        match context.get(key) {
            None | Some(Value::Null) => Ok(Value::Null),
            Some(v @ Value::String(_)) => Ok(v.clone()),
            Some(_) => Err(AppError::invalid_field(
                format!("context.{key}"),
                "must be a string or null",
            )),
        }
    };
    let object = |key: &str| -> Result<Value, AppError> {
        match context.get(key) {
            None | Some(Value::Null) => Ok(json!({})),
            Some(v @ Value::Object(_)) => Ok(v.clone()),
            Some(_) => Err(AppError::invalid_field(
                format!("context.{key}"),
                "must be an object",
            )),
        }
    };
    let mut metadata = Map::new();
    metadata.insert("company_id".into(), json!(auth.workspace_id));
    metadata.insert("agent_id".into(), agent_id);
    metadata.insert("agent_name".into(), agent_name);
    metadata.insert("call_id".into(), call_id);
    metadata.insert("call_direction".into(), direction);
    metadata.insert("caller_number".into(), number("caller_number")?);
    metadata.insert("callee_number".into(), number("callee_number")?);
    metadata.insert("call_metadata".into(), object("call_metadata")?);
    metadata.insert("call_variables".into(), object("call_variables")?);

    let names = webhooks::parameter_names(&tool.config);
    let given = match body.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(a)) => a.clone(),
        Some(_) => {
            return Err(AppError::invalid_field(
                "arguments",
                "must be a flat object of strings",
            ));
        }
    };
    for (k, v) in &given {
        if !names.contains(k) {
            return Err(AppError::invalid_field(
                format!("arguments.{k}"),
                format!(
                    "not an extraction parameter of this tool (parameters: {})",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                ),
            ));
        }
        if !v.is_string() {
            return Err(AppError::invalid_field(
                format!("arguments.{k}"),
                "must be a string",
            ));
        }
    }
    let mut arguments = Map::new();
    for name in names {
        let value = given
            .get(&name)
            .cloned()
            .unwrap_or_else(|| Value::String(format!("<{name}>")));
        arguments.insert(name, value);
    }
    Ok((metadata, arguments))
}

/// The keys of a test delivery's `context`.
pub const TEST_CONTEXT: [&str; 6] = [
    "call_id",
    "call_direction",
    "caller_number",
    "callee_number",
    "call_metadata",
    "call_variables",
];

/// The call directions a test delivery's `context.call_direction` may name.
pub const DIRECTIONS: [&str; 3] = ["inbound", "outbound", "web_call"];
