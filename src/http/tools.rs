//! Tools: create (idempotent), list (all, or one agent's in execution order), get, update,
//! deactivate, attach to and detach from agents, and `POST /tools/{id}/test`, which delivers
//! one request with the production payload contract.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use switchboard_actors::ids::{AgentId, ToolId};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::error::ApiError;
use super::extract::{
    JsonObject, ListResponse, OptionalJsonObject, Pagination, PathId, PathIds, Q, check_fields,
    replayed, request_hash,
};
use super::gate::Auth;
use super::openapi::body_schema;
use crate::store::{Delivery, NewTool, Tool, ToolInsert, ToolUpdate};
use crate::webhooks::{self, Outcome, WebhookConfig, WebhookMethod};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(get_one, update, deactivate))
        .routes(routes!(test))
        .routes(routes!(attach, detach))
}

const CREATE_FIELDS: &[&str] = &[
    "name",
    "description",
    "type",
    "config",
    "idempotency_key",
    "extraction_parameters",
    "static_parameters",
    "include_standard_metadata",
];
const UPDATE_FIELDS: &[&str] = &["name", "description", "config", "is_active"];
/// The longest description, in characters (after trimming).
const DESCRIPTION_MAX: usize = 2000;
/// The longest idempotency key, in characters.
const IDEMPOTENCY_KEY_MAX: usize = 255;
/// The keys of a test delivery's `context`.
const TEST_CONTEXT: [&str; 6] = [
    "call_id",
    "call_direction",
    "caller_number",
    "callee_number",
    "call_metadata",
    "call_variables",
];
/// The call directions a test delivery's `context.call_direction` may name.
const DIRECTIONS: [&str; 3] = ["inbound", "outbound", "web_call"];
const MIGRATED: [&str; 3] = [
    "extraction_parameters",
    "static_parameters",
    "include_standard_metadata",
];

fn str_field<'a>(body: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::invalid_field(key, "must be a string")),
    }
}

fn description(raw: Option<&str>, webhook: bool) -> Result<String, ApiError> {
    let d = raw.unwrap_or_default().trim().to_string();
    if webhook && d.is_empty() {
        return Err(ApiError::invalid_field(
            "description",
            "is required for webhook tools (it tells the model when to use the tool)",
        ));
    }
    if d.chars().count() > DESCRIPTION_MAX {
        return Err(ApiError::invalid_field(
            "description",
            format!("must be at most {DESCRIPTION_MAX} characters"),
        ));
    }
    Ok(d)
}

/// A type's config, validated (webhook) or checked to be an object (function).
async fn config_for(state: &AppState, tool_type: &str, config: &Value) -> Result<Value, ApiError> {
    if tool_type == "webhook" {
        let config = webhooks::webhook_config(&state.egress, config).await?;
        Ok(config.to_json().map_err(anyhow::Error::from)?)
    } else if config.is_object() {
        Ok(config.clone())
    } else {
        Err(ApiError::invalid_field("config", "must be an object"))
    }
}

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
fn name_schema() -> Value {
    json!({
        "type": "string",
        "pattern": webhooks::tool_name_pattern(),
        "description": format!("Normalized to camelCase: 1-{} letters or digits, starting with a letter.", webhooks::NAME_MAX),
    })
}

/// `name` as a pattern that ignores ASCII case.
fn any_case(name: &str) -> String {
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
fn header_name_schema() -> Value {
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
fn payload_properties() -> Value {
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
fn webhook_config_schema() -> Value {
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
        },
    })
}

/// `POST /tools`: a webhook tool (the default type) needs a description and a config; a
/// function tool takes any config object and no payload settings. Payload settings sent beside
/// `config` may not also be in `config.payload_config`.
fn create_schema() -> Value {
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
fn patch_schema() -> Value {
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
fn test_schema() -> Value {
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

/// Create a tool (a repeated idempotency_key with the same body returns the first tool)
#[utoipa::path(post, path = "/tools", operation_id = "createTool", tag = "tools", security(("bearer" = ["tools:create"])),
    request_body = ToolCreate,
    responses((status = 201, body = Tool), (status = 200, body = Tool, description = "The first tool of a repeated idempotency_key"), (status = 400)))]
async fn create(
    State(state): State<AppState>,
    auth: Auth,
    JsonObject(mut body): JsonObject,
) -> Result<(StatusCode, Json<Tool>), ApiError> {
    check_fields(&body, CREATE_FIELDS)?;
    let request_hash = request_hash(&body);
    let tool_type = str_field(&body, "type")?.unwrap_or("webhook").to_string();
    if tool_type != "webhook" && tool_type != "function" {
        return Err(ApiError::invalid_field(
            "type",
            "must be webhook or function",
        ));
    }
    let name = str_field(&body, "name")?.ok_or_else(|| ApiError::missing_field("name"))?;
    let name = webhooks::tool_name("name", name)?;
    let description = description(str_field(&body, "description")?, tool_type == "webhook")?;
    let idempotency_key = str_field(&body, "idempotency_key")?.map(str::to_string);
    if idempotency_key
        .as_ref()
        .is_some_and(|k| k.is_empty() || k.chars().count() > IDEMPOTENCY_KEY_MAX)
    {
        return Err(ApiError::invalid_field(
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
            if tool_type != "webhook" {
                return Err(ApiError::invalid_field(
                    key,
                    "only webhook tools have payload settings",
                ));
            }
            let Some(obj) = config.as_object_mut() else {
                return Err(ApiError::invalid_field("config", "must be an object"));
            };
            let pc = obj
                .entry("payload_config")
                .or_insert_with(|| Value::Object(Map::new()));
            let Some(pc) = pc.as_object_mut() else {
                return Err(ApiError::invalid_field(
                    "config.payload_config",
                    "must be an object",
                ));
            };
            if pc.contains_key(key) {
                return Err(ApiError::invalid_field(
                    key,
                    "also set in config.payload_config; send it once",
                ));
            }
            pc.insert(key.to_string(), v);
        }
    }
    let config = config_for(&state, &tool_type, &config).await?;
    let new = NewTool {
        name,
        description,
        tool_type,
        config,
        idempotency_key,
        request_hash: Some(request_hash.clone()),
    };
    match state.store.create_tool(auth.workspace_id, &new).await? {
        ToolInsert::Created(tool) => Ok((StatusCode::CREATED, Json(tool))),
        ToolInsert::Replayed {
            tool,
            request_hash: first,
        } => replayed(tool, first.as_deref(), &request_hash),
    }
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ToolQuery {
    /// Only the tools attached to this agent, in execution order (items then carry
    /// execution_order and config_override).
    agent_id: Option<uuid::Uuid>,
    /// 1-100 (default 50).
    #[param(minimum = 1, maximum = 100)]
    limit: Option<i64>,
    #[param(minimum = 0)]
    offset: Option<i64>,
}

/// List tools
#[utoipa::path(get, path = "/tools", operation_id = "listTools", tag = "tools", security(("bearer" = ["tools:read"])),
    params(ToolQuery), responses((status = 200, body = ListResponse<Tool>), (status = 400), (status = 404, description = "`agent_id` names no agent of the workspace")))]
async fn list(
    State(state): State<AppState>,
    auth: Auth,
    Q(q): Q<ToolQuery>,
) -> Result<Json<ListResponse<Tool>>, ApiError> {
    let page = Pagination {
        limit: q.limit,
        offset: q.offset,
    }
    .page()?;
    let agent = q.agent_id.map(AgentId::from_uuid);
    if let Some(agent) = agent
        && state.store.agent(auth.workspace_id, agent).await?.is_none()
    {
        return Err(ApiError::NotFound { resource: "Agent" });
    }
    Ok(Json(ListResponse::new(
        state
            .store
            .list_tools(auth.workspace_id, agent, page)
            .await?,
        page,
    )))
}

/// Get a tool
#[utoipa::path(get, path = "/tools/{id}", operation_id = "getTool", tag = "tools", security(("bearer" = ["tools:read"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = Tool), (status = 404)))]
async fn get_one(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<Tool>, ApiError> {
    state
        .store
        .tool(auth.workspace_id, ToolId::from_uuid(id))
        .await?
        .map(Json)
        .ok_or(ApiError::NotFound { resource: "Tool" })
}

/// Update a tool (config, when sent, is the complete configuration)
#[utoipa::path(patch, path = "/tools/{id}", operation_id = "updateTool", tag = "tools", security(("bearer" = ["tools:update"])),
    params(("id" = uuid::Uuid, Path)), request_body = ToolPatch,
    responses((status = 200, body = Tool), (status = 400), (status = 404)))]
async fn update(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    JsonObject(body): JsonObject,
) -> Result<Json<Tool>, ApiError> {
    check_fields(&body, UPDATE_FIELDS)?;
    if body.is_empty() {
        return Err(ApiError::bad_request(format!(
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
        .ok_or(ApiError::NotFound { resource: "Tool" })?;
    let webhook = tool.tool_type == "webhook";
    let mut change = ToolUpdate::default();
    if let Some(name) = str_field(&body, "name")? {
        change.name = Some(webhooks::tool_name("name", name)?);
    } else if body.contains_key("name") {
        return Err(ApiError::invalid_field("name", "must be a string"));
    }
    if body.contains_key("description") {
        change.description = Some(description(str_field(&body, "description")?, webhook)?);
    }
    if let Some(config) = body.get("config") {
        change.config = Some(config_for(&state, &tool.tool_type, config).await?);
    }
    match body.get("is_active") {
        None => {}
        Some(Value::Bool(b)) => change.is_active = Some(*b),
        Some(_) => {
            return Err(ApiError::invalid_field("is_active", "must be a boolean"));
        }
    }
    state
        .store
        .update_tool(ws, id, &change)
        .await?
        .map(Json)
        .ok_or(ApiError::NotFound { resource: "Tool" })
}

/// Deactivate a tool (soft delete)
#[utoipa::path(delete, path = "/tools/{id}", operation_id = "deactivateTool", tag = "tools", security(("bearer" = ["tools:update"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, description = "{success: true, id, is_active: false}"), (status = 404)))]
async fn deactivate(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<Value>, ApiError> {
    let change = ToolUpdate {
        is_active: Some(false),
        ..Default::default()
    };
    state
        .store
        .update_tool(auth.workspace_id, ToolId::from_uuid(id), &change)
        .await?
        .ok_or(ApiError::NotFound { resource: "Tool" })?;
    Ok(Json(json!({"success": true, "id": id, "is_active": false})))
}

body_schema!(
    /// The body of `PUT /agents/{id}/tools/{tool_id}`.
    AttachmentBody = create_body(Attachment, &[])
);

#[derive(Deserialize, ToSchema)]
pub struct Attachment {
    /// Order among the agent's tools (0-1000, default 0; lower runs first).
    #[schema(minimum = 0, maximum = 1000)]
    execution_order: Option<i64>,
    /// Settings this agent overrides (an object).
    #[schema(value_type = Option<Object>)]
    config_override: Option<Value>,
}

/// Attach a tool to an agent (or change its order and override)
#[utoipa::path(put, path = "/agents/{id}/tools/{tool_id}", operation_id = "attachAgentTool", tag = "tools", security(("bearer" = ["tools:update"])),
    params(("id" = uuid::Uuid, Path), ("tool_id" = uuid::Uuid, Path)), request_body(content = Option<AttachmentBody>, description = "Optional: no body attaches with the defaults"),
    responses((status = 200, body = Tool), (status = 400), (status = 404)))]
async fn attach(
    State(state): State<AppState>,
    auth: Auth,
    PathIds(agent, tool): PathIds,
    OptionalJsonObject(body): OptionalJsonObject,
) -> Result<Json<Tool>, ApiError> {
    let body = body.unwrap_or_default();
    check_fields(&body, &["execution_order", "config_override"])?;
    let input: Attachment = super::extract::from_value(Value::Object(body))?;
    let order = input.execution_order.unwrap_or(0);
    if !(0..=1000).contains(&order) {
        return Err(ApiError::invalid_field(
            "execution_order",
            "must be from 0 to 1000",
        ));
    }
    let config_override = match input.config_override {
        None | Some(Value::Null) => None,
        Some(v @ Value::Object(_)) => Some(v),
        Some(_) => {
            return Err(ApiError::invalid_field(
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
        return Err(ApiError::NotFound {
            resource: "Agent or tool",
        });
    }
    let mut found = state
        .store
        .tool(ws, tool)
        .await?
        .ok_or(ApiError::NotFound { resource: "Tool" })?;
    found.execution_order = Some(order);
    found.config_override = config_override;
    Ok(Json(found))
}

/// Detach a tool from an agent
#[utoipa::path(delete, path = "/agents/{id}/tools/{tool_id}", operation_id = "detachAgentTool", tag = "tools", security(("bearer" = ["tools:update"])),
    params(("id" = uuid::Uuid, Path), ("tool_id" = uuid::Uuid, Path)),
    responses((status = 200, description = "{success: true, id}"), (status = 404)))]
async fn detach(
    State(state): State<AppState>,
    auth: Auth,
    PathIds(agent, tool): PathIds,
) -> Result<Json<Value>, ApiError> {
    let removed = state
        .store
        .detach_tool(
            auth.workspace_id,
            AgentId::from_uuid(agent),
            ToolId::from_uuid(tool),
        )
        .await?;
    super::extract::deleted(removed, tool, "Attachment")
}

/// The metadata and arguments of a test delivery, from its optional body.
async fn test_inputs(
    state: &AppState,
    auth: &Auth,
    tool: &Tool,
    body: Option<Map<String, Value>>,
) -> Result<(Map<String, Value>, Map<String, Value>), ApiError> {
    let body = body.unwrap_or_default();
    check_fields(&body, &["agent_id", "arguments", "context"])?;
    let mut agent_id = Value::Null;
    let mut agent_name = Value::Null;
    match body.get("agent_id") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => {
            let id: AgentId = s
                .parse()
                .map_err(|_| ApiError::invalid_field("agent_id", "must be a UUID"))?;
            let agent = state
                .store
                .agent(auth.workspace_id, id)
                .await?
                .ok_or_else(|| {
                    ApiError::invalid_field("agent_id", "no such agent in this workspace")
                })?;
            agent_id = json!(agent.id);
            agent_name = json!(agent.name);
        }
        Some(_) => {
            return Err(ApiError::invalid_field("agent_id", "must be a UUID"));
        }
    }
    let empty = Map::new();
    let context = match body.get("context") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(c)) => c,
        Some(_) => {
            return Err(ApiError::invalid_field("context", "must be an object"));
        }
    };
    if let Some(k) = context.keys().find(|k| !TEST_CONTEXT.contains(&k.as_str())) {
        return Err(ApiError::invalid_field(
            format!("context.{k}"),
            format!("allowed: {}", TEST_CONTEXT.join(", ")),
        ));
    }
    let call_id = match context.get("call_id") {
        None | Some(Value::Null) => Value::Null,
        Some(Value::String(s)) if uuid::Uuid::parse_str(s).is_ok() => json!(s),
        Some(_) => {
            return Err(ApiError::invalid_field(
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
            return Err(ApiError::invalid_field(
                "context.call_direction",
                "must be inbound, outbound, web_call or null",
            ));
        }
    };
    let number = |key: &str| -> Result<Value, ApiError> {
        match context.get(key) {
            None | Some(Value::Null) => Ok(Value::Null),
            Some(v @ Value::String(_)) => Ok(v.clone()),
            Some(_) => Err(ApiError::invalid_field(
                format!("context.{key}"),
                "must be a string or null",
            )),
        }
    };
    let object = |key: &str| -> Result<Value, ApiError> {
        match context.get(key) {
            None | Some(Value::Null) => Ok(json!({})),
            Some(v @ Value::Object(_)) => Ok(v.clone()),
            Some(_) => Err(ApiError::invalid_field(
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
            return Err(ApiError::invalid_field(
                "arguments",
                "must be a flat object of strings",
            ));
        }
    };
    for (k, v) in &given {
        if !names.contains(k) {
            return Err(ApiError::invalid_field(
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
            return Err(ApiError::invalid_field(
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

/// Deliver one test request to a webhook tool with the production payload contract
#[utoipa::path(post, path = "/tools/{id}/test", operation_id = "testTool", tag = "tools", security(("bearer" = ["tools:update"])),
    params(("id" = uuid::Uuid, Path)), request_body(content = Option<ToolTestBody>, description = "Optional: no body tests with placeholder arguments"),
    responses((status = 200, description = "{success, status_code, response_body, payload_sent, delivery_id}"),
        (status = 400), (status = 404),
        (status = 502, description = "DOWNSTREAM_HTTP_ERROR or WEBHOOK_NETWORK_ERROR"),
        (status = 504, description = "WEBHOOK_TIMEOUT")))]
async fn test(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    OptionalJsonObject(body): OptionalJsonObject,
) -> Result<Json<Value>, ApiError> {
    let tool = state
        .store
        .tool(auth.workspace_id, ToolId::from_uuid(id))
        .await?
        .ok_or(ApiError::NotFound { resource: "Tool" })?;
    if tool.tool_type != "webhook" {
        return Err(ApiError::bad_request(
            "Only webhook tools can be tested: this is a function tool",
        ));
    }
    let config = WebhookConfig::from_stored(&tool.config).ok_or_else(|| {
        ApiError::bad_request(
            "The saved webhook configuration is not valid: save the tool's config again",
        )
    })?;
    let (metadata, arguments) = test_inputs(&state, &auth, &tool, body).await?;
    let payload = webhooks::payload(&config, &metadata, &arguments);
    let started = std::time::Instant::now();
    let outcome = webhooks::deliver(&state.egress, &config, &payload).await;
    let url = config
        .url
        .split(['?', '#'])
        .next()
        .unwrap_or_default()
        .to_string();
    let logged = state
        .store
        .log_delivery(&Delivery {
            workspace_id: auth.workspace_id,
            tool_id: tool.id,
            kind: "test",
            method: config.method.as_str(),
            url: &url,
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
        ApiError::Webhook {
            status,
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
        Outcome::Delivered { status, body } => Ok(Json(json!({
            "success": true,
            "status_code": status,
            "response_body": body,
            "payload_sent": payload_sent,
            "delivery_id": delivery_id,
        }))),
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
