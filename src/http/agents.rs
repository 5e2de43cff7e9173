//! Agents: create, list (optionally by `is_active`), get, partial update and deactivate.
//! Every write is checked as a whole agent: the sent keys are merged over the stored agent (or
//! the defaults on create) and the result must satisfy every bound documented on [`Agent`].

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use switchboard_actors::ids::AgentId;
use utoipa::{IntoParams, PartialSchema, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::auth::Auth;
use crate::edge::webhooks;
use crate::http::error::ApiError;
use crate::http::extract::{JsonObject, ListResponse, Pagination, PathId, Q};
use crate::http::openapi::{
    body_schema, create_body, json_schema, patch_body, schema_json, strip_null, with_bounds,
};
use crate::http::state::AppState;
use crate::store::{Agent, AnsweringMachineDetection, ExtractionParameter, FlowNode};

use crate::app::agents::rules::*;
use crate::app::agents::save::{create_agent, update_agent};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(get_one, update))
        .routes(routes!(deactivate))
}

/// Query of `GET /agents`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AgentFilter {
    /// Only active (`true`) or only inactive (`false`) agents.
    is_active: Option<bool>,
    #[param(minimum = 1, maximum = 100)]
    limit: Option<i64>,
    #[param(minimum = 0)]
    offset: Option<i64>,
}

/// List agents
#[utoipa::path(get, path = "/agents", operation_id = "listAgents", tag = "agents", security(("bearer" = ["agents:read"])),
    params(AgentFilter), responses((status = 200, body = ListResponse<Agent>), (status = 400)))]
async fn list(
    State(state): State<AppState>,
    auth: Auth,
    Q(filter): Q<AgentFilter>,
) -> Result<Json<ListResponse<Agent>>, ApiError> {
    let page = Pagination {
        limit: filter.limit,
        offset: filter.offset,
    }
    .page()?;
    let agents = state
        .store
        .list_agents(auth.workspace_id, filter.is_active, page)
        .await?;
    Ok(Json(ListResponse::new(agents, page)))
}

/// Get an agent
#[utoipa::path(get, path = "/agents/{id}", operation_id = "getAgent", tag = "agents", security(("bearer" = ["agents:read"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = Agent), (status = 404)))]
async fn get_one(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<Agent>, ApiError> {
    let found = state
        .store
        .agent(auth.workspace_id, AgentId::from_uuid(id))
        .await?;
    found.map(Json).ok_or(ApiError::not_found("Agent"))
}

/// An agent as a save answers it: the agent, and what its flow needs that this service lacks.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentSaved {
    #[serde(flatten)]
    agent: Agent,
    /// A flow's nodes that need the chat model when none is configured (`model_not_configured`):
    /// the flow is saved and runs, but a call that reaches such a node ends there. Empty for a
    /// prompt agent and when nothing is missing.
    warnings: Vec<crate::runtime::flows::FlowWarning>,
}

impl AgentSaved {
    fn of(state: &AppState, agent: Agent) -> Self {
        AgentSaved {
            warnings: crate::app::agents::save::warnings(state, &agent),
            agent,
        }
    }
}

/// Create an agent
#[utoipa::path(post, path = "/agents", operation_id = "createAgent", tag = "agents", security(("bearer" = ["agents:create"])),
    request_body = AgentCreate, responses((status = 201, body = AgentSaved), (status = 400)))]
async fn create(
    State(state): State<AppState>,
    auth: Auth,
    JsonObject(body): JsonObject,
) -> Result<(StatusCode, Json<AgentSaved>), ApiError> {
    let created = create_agent(&state, &auth, body).await?;
    Ok((StatusCode::CREATED, Json(AgentSaved::of(&state, created))))
}

/// Update an agent (only the sent fields change)
#[utoipa::path(patch, path = "/agents/{id}", operation_id = "updateAgent", tag = "agents", security(("bearer" = ["agents:update"])),
    params(("id" = uuid::Uuid, Path)), request_body = AgentPatch, responses((status = 200, body = AgentSaved), (status = 400), (status = 404)))]
async fn update(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    JsonObject(body): JsonObject,
) -> Result<Json<AgentSaved>, ApiError> {
    let updated = update_agent(&state, &auth, AgentId::from_uuid(id), body).await?;
    Ok(Json(AgentSaved::of(&state, updated)))
}

/// Deactivate an agent (it is kept, with `is_active` false)
#[utoipa::path(post, path = "/agents/{id}/deactivate", operation_id = "deactivateAgent", tag = "agents", security(("bearer" = ["agents:update"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = Agent), (status = 404)))]
async fn deactivate(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<Agent>, ApiError> {
    Ok(Json(
        crate::app::agents::save::deactivate(&state, &auth, id).await?,
    ))
}

body_schema!(
    /// The body of `POST /agents`: `name` required; a `flow` agent needs a flow with at least
    /// one node.
    AgentCreate = json(create_schema())
);
body_schema!(
    /// The body of `PATCH /agents/{id}`: at least one writable field.
    AgentPatch = json(patch_schema())
);

fn text(Chars(min, max): Chars) -> Value {
    json!({"minLength": min, "maxLength": max})
}

fn number_range(Number(min, max): Number) -> Value {
    json!({"minimum": min, "maximum": max})
}

fn integer_range(Integer(min, max): Integer) -> Value {
    json!({"minimum": min, "maximum": max})
}

/// A flow as its reading checks it (node ids unique and `next_step_id` naming a node are
/// rules between items, which a schema cannot state).
fn flow_schema() -> Value {
    let node = schema_json(&<FlowNode as PartialSchema>::schema());
    let Chars(key_min, key_max) = METADATA_KEY;
    json!({
        "type": "object",
        "description": "The flow of a `flow` agent.",
        "required": ["nodes"],
        "properties": {
            "nodes": {"type": "array", "maxItems": FLOW_NODES_MAX, "items": node},
            "flow_config_version": {"type": "integer", "const": FLOW_CONFIG_VERSION, "description": "Default 1."},
            "metadata": {
                "type": "object",
                "properties": {
                    "custom_metadata_keys": {
                        "type": "array",
                        "maxItems": METADATA_KEYS_MAX,
                        "items": {"type": "string", "minLength": key_min, "maxLength": key_max},
                    },
                },
            },
        },
    })
}

/// The answering-machine detection object as [`check_amd`] reads it: every parameter an
/// integer within its bounds or null, no other keys.
fn amd_schema() -> Value {
    let bounds: Map<String, Value> = AMD_BOUNDS
        .iter()
        .map(|(key, bound)| (key.to_string(), integer_range(*bound)))
        .collect();
    let mut schema = with_bounds(
        schema_json(&<AnsweringMachineDetection as PartialSchema>::schema()),
        Value::Object(bounds),
    );
    if let Value::Object(schema) = &mut schema {
        schema.insert("additionalProperties".into(), json!(false));
        schema.remove("required");
    }
    schema
}

/// [`AgentInput`] with every bound [`validate`] checks on a field alone; null only where
/// [`NULLABLE`] allows it.
fn input_schema() -> Value {
    let header_name = webhooks::header_name_pattern();
    let parameter = with_bounds(
        schema_json(&<ExtractionParameter as PartialSchema>::schema()),
        json!({"name": text(PARAMETER_NAME), "description": text(PARAMETER_DESCRIPTION)}),
    );
    let mut name = text(NAME);
    if let Value::Object(name) = &mut name {
        name.insert("pattern".into(), json!("\\S"));
    }
    let mut language = text(LANGUAGE);
    if let Value::Object(language) = &mut language {
        language.insert("pattern".into(), json!("^[A-Za-z0-9-]*$"));
    }
    let mut input = with_bounds(
        schema_json(&<AgentInput as PartialSchema>::schema()),
        json!({
            "name": name,
            "system_prompt": text(SYSTEM_PROMPT),
            "description": text(DESCRIPTION),
            "voice": text(VOICE),
            "background_sound": text(BACKGROUND_SOUND),
            "background_sound_volume": number_range(BACKGROUND_SOUND_VOLUME),
            "language": language,
            "temperature": number_range(TEMPERATURE),
            "greeting_message": text(GREETING_MESSAGE),
            "vad_stop_secs": number_range(VAD_SECS),
            "vad_start_secs": number_range(VAD_SECS),
            "vad_confidence": number_range(VAD_CONFIDENCE),
            "silence_timeout_secs": integer_range(TIMEOUT_SECS),
            "max_continuous_speech_secs": integer_range(TIMEOUT_SECS),
            "max_call_duration_secs": integer_range(MAX_CALL_DURATION_SECS),
            "webhook_url": {"maxLength": WEBHOOK_URL_MAX},
            "webhook_events": {
                "maxItems": WEBHOOK_EVENTS_MAX,
                "items": {"type": "string", "enum": switchboard_actors::events::EventKind::ALL.map(|k| k.as_str())},
            },
            "webhook_headers": {
                "maxProperties": WEBHOOK_HEADERS_MAX,
                "propertyNames": {"pattern": header_name, "maxLength": HEADER_NAME_MAX},
                "additionalProperties": {"type": "string", "maxLength": HEADER_VALUE_MAX, "pattern": "^[^\\r\\n]*$"},
            },
            "extraction_parameters": {"maxItems": PARAMETERS_MAX, "items": parameter},
            "voicemail_message": text(VOICEMAIL_MESSAGE),
        }),
    );
    if let Some(Value::Object(properties)) = input.get_mut("properties") {
        properties.insert(
            "flow_config".into(),
            json!({"oneOf": [flow_schema(), {"type": "null"}]}),
        );
        properties.insert("answering_machine_detection".into(), amd_schema());
        for (field, property) in properties.iter_mut() {
            if !NULLABLE.contains(&field.as_str()) {
                strip_null(property);
            }
        }
    }
    input
}

/// A body that makes the agent a `flow` agent: the flow it sends has at least one node (on
/// create it must send one).
fn flow_rule(body: &mut Value, flow_required: bool) {
    let required: &[&str] = if flow_required { &["flow_config"] } else { &[] };
    if let Value::Object(body) = body {
        body.insert(
            "if".into(),
            json!({"required": ["type"], "properties": {"type": {"const": "flow"}}}),
        );
        body.insert(
            "then".into(),
            json!({
                "required": required,
                "properties": {"flow_config": {"type": "object", "properties": {"nodes": {"minItems": 1}}}},
            }),
        );
    }
}

fn create_schema() -> Value {
    let mut body = schema_json(&create_body(json_schema(input_schema()), &["name"]));
    flow_rule(&mut body, true);
    body
}

fn patch_schema() -> Value {
    let mut body = schema_json(&patch_body(json_schema(input_schema()), WRITABLE));
    flow_rule(&mut body, false);
    body
}
