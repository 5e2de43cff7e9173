//! The workspace's tools: what creating, changing, deactivating, attaching and detaching one
//! do and refuse, and a webhook tool tried once (a test delivery with sample inputs, logged like
//! a real one).

use axum::http::StatusCode;
use serde_json::{Map, Value, json};
use switchboard_actors::ids::{AgentId, ToolId};

use crate::app::auth::Auth;
use crate::app::error::AppError;
use crate::app::fields::{Placed, check_fields, deleted, from_value, replayed, request_hash};
use crate::app::state::App;
use crate::edge::webhooks::{self, Outcome, WebhookConfig};
use crate::store::{Delivery, Tool};
use crate::store::{NewTool, ToolInsert, ToolType, ToolUpdate};
use serde::Deserialize;
use utoipa::ToSchema;

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
    if tool.tool_type != ToolType::Webhook {
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
pub async fn test_inputs(
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

pub async fn create(
    state: &App,
    auth: &Auth,
    mut body: Map<String, Value>,
) -> Result<Placed<Tool>, AppError> {
    check_fields(&body, CREATE_FIELDS)?;
    let request_hash = request_hash(&body);
    let tool_type = str_field(&body, "type")?.unwrap_or("webhook");
    let Some(tool_type) = ToolType::parse(tool_type) else {
        return Err(AppError::invalid_field(
            "type",
            "must be webhook or function",
        ));
    };
    let name = str_field(&body, "name")?.ok_or_else(|| AppError::missing_field("name"))?;
    let name = webhooks::tool_name("name", name)?;
    let description = description(
        str_field(&body, "description")?,
        tool_type == ToolType::Webhook,
    )?;
    let idempotency_key = str_field(&body, "idempotency_key")?.map(str::to_string);
    if idempotency_key
        .as_ref()
        .is_some_and(|k| k.is_empty() || k.chars().count() > IDEMPOTENCY_KEY_MAX)
    {
        return Err(AppError::invalid_field(
            "idempotency_key",
            format!("must be 1-{IDEMPOTENCY_KEY_MAX} characters"),
        ));
    }
    let mut config = match body.remove("config") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(c) => c,
    };
    // Payload settings sent beside config move into config.payload_config.
    for key in MIGRATED {
        if let Some(v) = body.remove(key) {
            if tool_type != ToolType::Webhook {
                return Err(AppError::invalid_field(
                    key,
                    "only webhook tools have payload settings",
                ));
            }
            let Some(obj) = config.as_object_mut() else {
                return Err(AppError::invalid_field("config", "must be an object"));
            };
            let pc = obj
                .entry("payload_config")
                .or_insert_with(|| Value::Object(Map::new()));
            let Some(pc) = pc.as_object_mut() else {
                return Err(AppError::invalid_field(
                    "config.payload_config",
                    "must be an object",
                ));
            };
            if pc.contains_key(key) {
                return Err(AppError::invalid_field(
                    key,
                    "also set in config.payload_config; send it once",
                ));
            }
            pc.insert(key.to_string(), v);
        }
    }
    let config = config_for(state, tool_type, &config).await?;
    let new = NewTool {
        name,
        description,
        tool_type,
        config,
        idempotency_key,
        request_hash: Some(request_hash.clone()),
    };
    match state.store.create_tool(auth.workspace_id, &new).await? {
        ToolInsert::Created(tool) => Ok(Placed::Created(tool)),
        ToolInsert::Replayed {
            tool,
            request_hash: first,
        } => replayed(tool, first.as_deref(), &request_hash),
    }
}

pub async fn update(
    state: &App,
    auth: &Auth,
    id: uuid::Uuid,
    body: Map<String, Value>,
) -> Result<Tool, AppError> {
    check_fields(&body, UPDATE_FIELDS)?;
    if body.is_empty() {
        return Err(AppError::bad_request(format!(
            "No writable field sent; writable fields: {}",
            UPDATE_FIELDS.join(", ")
        )));
    }
    let ws = auth.workspace_id;
    let id = ToolId::from_uuid(id);
    let tool = state
        .store
        .tool(ws, id)
        .await?
        .ok_or(AppError::not_found("Tool"))?;
    let webhook = tool.tool_type == ToolType::Webhook;
    let mut change = ToolUpdate::default();
    if let Some(name) = str_field(&body, "name")? {
        change.name = Some(webhooks::tool_name("name", name)?);
    } else if body.contains_key("name") {
        return Err(AppError::invalid_field("name", "must be a string"));
    }
    if body.contains_key("description") {
        change.description = Some(description(str_field(&body, "description")?, webhook)?);
    }
    if let Some(config) = body.get("config") {
        change.config = Some(config_for(state, tool.tool_type, config).await?);
    }
    match body.get("is_active") {
        None => {}
        Some(Value::Bool(b)) => change.is_active = Some(*b),
        Some(_) => {
            return Err(AppError::invalid_field("is_active", "must be a boolean"));
        }
    }
    state
        .store
        .update_tool(ws, id, &change)
        .await?
        .ok_or(AppError::not_found("Tool"))
}

pub async fn deactivate(state: &App, auth: &Auth, id: uuid::Uuid) -> Result<Value, AppError> {
    let change = ToolUpdate {
        is_active: Some(false),
        ..Default::default()
    };
    state
        .store
        .update_tool(auth.workspace_id, ToolId::from_uuid(id), &change)
        .await?
        .ok_or(AppError::not_found("Tool"))?;
    Ok(json!({"success": true, "id": id, "is_active": false}))
}

pub async fn attach(
    state: &App,
    auth: &Auth,
    agent: uuid::Uuid,
    tool: uuid::Uuid,
    body: Option<Map<String, Value>>,
) -> Result<Tool, AppError> {
    let body = body.unwrap_or_default();
    check_fields(&body, &["execution_order", "config_override"])?;
    let input: Attachment = from_value(Value::Object(body))?;
    let order = input.execution_order.unwrap_or(0);
    if !(0..=1000).contains(&order) {
        return Err(AppError::invalid_field(
            "execution_order",
            "must be from 0 to 1000",
        ));
    }
    let config_override = match input.config_override {
        None | Some(Value::Null) => None,
        Some(v @ Value::Object(_)) => Some(v),
        Some(_) => {
            return Err(AppError::invalid_field(
                "config_override",
                "must be an object",
            ));
        }
    };
    let (ws, agent, tool) = (
        auth.workspace_id,
        AgentId::from_uuid(agent),
        ToolId::from_uuid(tool),
    );
    if !state
        .store
        .attach_tool(ws, agent, tool, order, config_override.as_ref())
        .await?
    {
        return Err(AppError::not_found("Agent or tool"));
    }
    let mut found = state
        .store
        .tool(ws, tool)
        .await?
        .ok_or(AppError::not_found("Tool"))?;
    found.execution_order = Some(order);
    found.config_override = config_override;
    Ok(found)
}

pub async fn detach(
    state: &App,
    auth: &Auth,
    agent: uuid::Uuid,
    tool: uuid::Uuid,
) -> Result<Value, AppError> {
    let removed = state
        .store
        .detach_tool(
            auth.workspace_id,
            AgentId::from_uuid(agent),
            ToolId::from_uuid(tool),
        )
        .await?;
    deleted(removed, tool, "Attachment")
}

pub const CREATE_FIELDS: &[&str] = &[
    "name",
    "description",
    "type",
    "config",
    "idempotency_key",
    "extraction_parameters",
    "static_parameters",
    "include_standard_metadata",
];

pub const UPDATE_FIELDS: &[&str] = &["name", "description", "config", "is_active"];

/// The longest description, in characters (after trimming).
pub const DESCRIPTION_MAX: usize = 2000;

/// The longest idempotency key, in characters.
pub const IDEMPOTENCY_KEY_MAX: usize = 255;

pub const MIGRATED: [&str; 3] = [
    "extraction_parameters",
    "static_parameters",
    "include_standard_metadata",
];

pub fn str_field<'a>(body: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, AppError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(AppError::invalid_field(key, "must be a string")),
    }
}

pub fn description(raw: Option<&str>, webhook: bool) -> Result<String, AppError> {
    let d = raw.unwrap_or_default().trim().to_string();
    if webhook && d.is_empty() {
        return Err(AppError::invalid_field(
            "description",
            "is required for webhook tools (it tells the model when to use the tool)",
        ));
    }
    if d.chars().count() > DESCRIPTION_MAX {
        return Err(AppError::invalid_field(
            "description",
            format!("must be at most {DESCRIPTION_MAX} characters"),
        ));
    }
    Ok(d)
}

/// A type's config, validated (webhook) or checked to be an object (function).
pub async fn config_for(
    state: &App,
    tool_type: ToolType,
    config: &Value,
) -> Result<Value, AppError> {
    if tool_type == ToolType::Webhook {
        let config = webhooks::webhook_config(&state.egress, config).await?;
        Ok(config.to_json().map_err(anyhow::Error::from)?)
    } else if config.is_object() {
        Ok(config.clone())
    } else {
        Err(AppError::invalid_field("config", "must be an object"))
    }
}

#[derive(Deserialize, ToSchema)]
pub struct Attachment {
    /// Order among the agent's tools (0-1000, default 0; lower runs first).
    #[schema(minimum = 0, maximum = 1000)]
    pub execution_order: Option<i64>,
    /// Settings this agent overrides (an object).
    #[schema(value_type = Option<Object>)]
    pub config_override: Option<Value>,
}
