//! Agents: create, list (optionally by `is_active`), get, partial update and deactivate.
//! Every write is checked as a whole agent: the sent keys are merged over the stored agent (or
//! the defaults on create) and the result must satisfy every bound documented on [`Agent`].

use std::collections::{BTreeMap, HashSet};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use switchboard_actors::ids::{AgentId, WorkspaceId};
use utoipa::{IntoParams, PartialSchema, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::error::ApiError;
use super::extract::{
    JsonObject, ListResponse, Pagination, Patch, PathId, Q, check_fields, from_value,
};
use super::gate::Auth;
use super::openapi::{
    body_schema, create_body, json_schema, patch_body, schema_json, strip_null, with_bounds,
};
use crate::edge::webhooks;
use crate::store::{
    Agent, AgentType, AnsweringMachineDetection, ExtractionParameter, FlowConfig, FlowNode,
};

mod schema;
mod validate;

use schema::{AgentCreate, AgentPatch};
use validate::validate;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(get_one, update))
        .routes(routes!(deactivate))
}

const WRITABLE: &[&str] = &[
    "name",
    "type",
    "flow_config",
    "system_prompt",
    "description",
    "voice",
    "background_sound",
    "background_sound_volume",
    "language",
    "temperature",
    "greeting_message",
    "agent_speaks_first",
    "vad_stop_secs",
    "vad_start_secs",
    "vad_confidence",
    "silence_timeout_secs",
    "max_continuous_speech_secs",
    "max_call_duration_secs",
    "lead_memory_enabled",
    "lead_memory_trust_caller_id",
    "is_active",
    "webhook_url",
    "webhook_events",
    "webhook_headers",
    "extraction_parameters",
    "answering_machine_detection",
    "voicemail_message",
];

/// Fields that accept null (meaning: none).
const NULLABLE: &[&str] = &[
    "flow_config",
    "max_call_duration_secs",
    "webhook_url",
    "voicemail_message",
];

/// A text bound: from `.0` to `.1` characters.
#[derive(Clone, Copy)]
struct Chars(usize, usize);
/// A number bound: from `.0` to `.1`.
#[derive(Clone, Copy)]
struct Number(f64, f64);
/// An integer bound: from `.0` to `.1`.
#[derive(Clone, Copy)]
struct Integer(i64, i64);

const NAME: Chars = Chars(1, 200);
const SYSTEM_PROMPT: Chars = Chars(0, 100_000);
const DESCRIPTION: Chars = Chars(0, 2000);
const VOICE: Chars = Chars(1, 100);
const BACKGROUND_SOUND: Chars = Chars(1, 100);
const LANGUAGE: Chars = Chars(2, 35);
const GREETING_MESSAGE: Chars = Chars(0, 2000);
const BACKGROUND_SOUND_VOLUME: Number = Number(0.0, 1.0);
const TEMPERATURE: Number = Number(0.0, 2.0);
const VAD_SECS: Number = Number(0.0, 10.0);
const VAD_CONFIDENCE: Number = Number(0.0, 1.0);
const TIMEOUT_SECS: Integer = Integer(1, 3600);
const MAX_CALL_DURATION_SECS: Integer = Integer(1, 14_400);
const WEBHOOK_URL_MAX: usize = 2048;
const WEBHOOK_EVENTS_MAX: usize = 50;
const WEBHOOK_HEADERS_MAX: usize = 50;
const HEADER_NAME_MAX: usize = 256;
const HEADER_VALUE_MAX: usize = 4096;
const PARAMETERS_MAX: usize = 100;
const PARAMETER_NAME: Chars = Chars(1, 100);
const PARAMETER_DESCRIPTION: Chars = Chars(0, 1000);
const FLOW_NODES_MAX: usize = 500;
const NODE_ID: Chars = Chars(1, 100);
const NODE_TYPE: Chars = Chars(1, 50);
const NODE_NAME: Chars = Chars(0, 200);
const METADATA_KEYS_MAX: usize = 100;
const METADATA_KEY: Chars = Chars(1, 100);
const FLOW_CONFIG_VERSION: i64 = 1;
const VOICEMAIL_MESSAGE: Chars = Chars(1, 2000);

/// The bounds of the answering-machine detection parameters, by key (the same in the document
/// and in the rules).
const AMD_BOUNDS: &[(&str, Integer)] = &[
    ("initial_silence_ms", Integer(100, 10_000)),
    ("greeting_ms", Integer(100, 10_000)),
    ("after_greeting_silence_ms", Integer(100, 10_000)),
    ("total_analysis_time_ms", Integer(1000, 30_000)),
    ("min_word_length_ms", Integer(20, 2000)),
    ("between_words_silence_ms", Integer(20, 2000)),
    ("maximum_number_of_words", Integer(1, 100)),
    ("maximum_word_length_ms", Integer(100, 30_000)),
    ("silence_threshold", Integer(1, 32_767)),
];

/// Writable agent fields; bounds as documented on the Agent object. On update only the sent
/// fields change.
#[derive(Deserialize, ToSchema)]
pub struct AgentInput {
    /// 1-200 characters; required on create.
    name: Option<String>,
    /// `prompt` or `flow`.
    #[serde(rename = "type")]
    agent_type: Option<AgentType>,
    /// Flow of a `flow` agent (`flow_config_version` must be 1; node ids unique; every
    /// `next_step_id` names a node of the flow); null removes it from a prompt agent.
    #[serde(default)]
    #[schema(value_type = Option<FlowConfig>)]
    flow_config: Patch<FlowConfig>,
    /// At most 100000 characters.
    system_prompt: Option<String>,
    /// At most 2000 characters.
    description: Option<String>,
    /// 1-100 characters.
    voice: Option<String>,
    /// 1-100 characters, e.g. `none`, `office`.
    background_sound: Option<String>,
    /// 0-1.
    background_sound_volume: Option<f64>,
    /// BCP 47 tag, 2-35 characters.
    language: Option<String>,
    /// 0-2.
    temperature: Option<f64>,
    /// At most 2000 characters.
    greeting_message: Option<String>,
    agent_speaks_first: Option<bool>,
    /// 0-10 seconds.
    vad_stop_secs: Option<f64>,
    /// 0-10 seconds.
    vad_start_secs: Option<f64>,
    /// 0-1.
    vad_confidence: Option<f64>,
    /// Integer 1-3600.
    silence_timeout_secs: Option<i64>,
    /// Integer 1-3600.
    max_continuous_speech_secs: Option<i64>,
    /// Integer 1-14400, or null for no cap.
    #[serde(default)]
    #[schema(value_type = Option<i64>)]
    max_call_duration_secs: Patch<i64>,
    /// Gives the model what the workspace knows of the lead on the call.
    lead_memory_enabled: Option<bool>,
    /// Lets lead memory use the caller-ID of inbound SIP endpoint calls.
    lead_memory_trust_caller_id: Option<bool>,
    is_active: Option<bool>,
    /// http(s) URL, at most 2048 characters, or null.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    webhook_url: Patch<String>,
    /// At most 50 event kinds: `call.started`, `call.answered`, `call.ended`,
    /// `call.analyzed`, `transcript.final`, `tool.called`.
    webhook_events: Option<Vec<String>>,
    /// Header name to string value; at most 50. Sent with every webhook delivery; the
    /// service's own `X-Switchboard-*` headers and `Content-Type` are not overridden.
    webhook_headers: Option<BTreeMap<String, String>>,
    /// At most 100 `{name, description}`, names unique.
    extraction_parameters: Option<Vec<ExtractionParameter>>,
    /// Replaces the stored object; a parameter left out or null takes its default.
    answering_machine_detection: Option<AnsweringMachineDetection>,
    /// 1-2000 characters, or null to hang up on a machine at once.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    voicemail_message: Patch<String>,
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

/// Checks keys and null values, then reads the input.
fn parse_input(body: Map<String, Value>) -> Result<AgentInput, ApiError> {
    check_fields(&body, WRITABLE)?;
    if let Some(key) = body
        .iter()
        .find(|(k, v)| v.is_null() && !NULLABLE.contains(&k.as_str()))
        .map(|(k, _)| k)
    {
        return Err(ApiError::invalid_field(key, "must not be null"));
    }
    from_value(Value::Object(body))
}

/// Merges the sent fields over `agent`.
fn apply(agent: &mut Agent, input: AgentInput) {
    let AgentInput {
        name,
        agent_type,
        flow_config,
        system_prompt,
        description,
        voice,
        background_sound,
        background_sound_volume,
        language,
        temperature,
        greeting_message,
        agent_speaks_first,
        vad_stop_secs,
        vad_start_secs,
        vad_confidence,
        silence_timeout_secs,
        max_continuous_speech_secs,
        max_call_duration_secs,
        lead_memory_enabled,
        lead_memory_trust_caller_id,
        is_active,
        webhook_url,
        webhook_events,
        webhook_headers,
        extraction_parameters,
        answering_machine_detection,
        voicemail_message,
    } = input;
    fn set<T>(slot: &mut T, value: Option<T>) {
        if let Some(v) = value {
            *slot = v;
        }
    }
    set(&mut agent.name, name.map(|n| n.trim().to_owned()));
    set(&mut agent.agent_type, agent_type);
    set(&mut agent.flow_config, flow_config.into_option());
    set(&mut agent.system_prompt, system_prompt);
    set(&mut agent.description, description);
    set(&mut agent.voice, voice);
    set(&mut agent.background_sound, background_sound);
    set(&mut agent.background_sound_volume, background_sound_volume);
    set(&mut agent.language, language);
    set(&mut agent.temperature, temperature);
    set(&mut agent.greeting_message, greeting_message);
    set(&mut agent.agent_speaks_first, agent_speaks_first);
    set(&mut agent.vad_stop_secs, vad_stop_secs);
    set(&mut agent.vad_start_secs, vad_start_secs);
    set(&mut agent.vad_confidence, vad_confidence);
    set(&mut agent.silence_timeout_secs, silence_timeout_secs);
    set(
        &mut agent.max_continuous_speech_secs,
        max_continuous_speech_secs,
    );
    set(
        &mut agent.max_call_duration_secs,
        max_call_duration_secs.into_option(),
    );
    set(&mut agent.lead_memory_enabled, lead_memory_enabled);
    set(
        &mut agent.lead_memory_trust_caller_id,
        lead_memory_trust_caller_id,
    );
    set(&mut agent.is_active, is_active);
    set(&mut agent.webhook_url, webhook_url.into_option());
    set(&mut agent.webhook_events, webhook_events);
    set(&mut agent.webhook_headers, webhook_headers);
    set(&mut agent.extraction_parameters, extraction_parameters);
    set(
        &mut agent.answering_machine_detection,
        answering_machine_detection,
    );
    set(
        &mut agent.voicemail_message,
        voicemail_message.into_option(),
    );
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
    found
        .map(Json)
        .ok_or(ApiError::NotFound { resource: "Agent" })
}

/// Create an agent
#[utoipa::path(post, path = "/agents", operation_id = "createAgent", tag = "agents", security(("bearer" = ["agents:create"])),
    request_body = AgentCreate, responses((status = 201, body = Agent), (status = 400)))]
async fn create(
    State(state): State<AppState>,
    auth: Auth,
    JsonObject(body): JsonObject,
) -> Result<(StatusCode, Json<Agent>), ApiError> {
    let input = parse_input(body)?;
    let Some(name) = input.name.as_deref() else {
        return Err(ApiError::missing_field("name"));
    };
    let mut agent = Agent::new(name.trim().to_owned());
    apply(&mut agent, input);
    validate(&agent, &state.egress)?;
    check_flow_links(&state, &auth, &agent).await?;
    let created = state.store.create_agent(auth.workspace_id, &agent).await?;
    save_flow_version(&state, &auth, &created).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// Update an agent (only the sent fields change)
#[utoipa::path(patch, path = "/agents/{id}", operation_id = "updateAgent", tag = "agents", security(("bearer" = ["agents:update"])),
    params(("id" = uuid::Uuid, Path)), request_body = AgentPatch, responses((status = 200, body = Agent), (status = 400), (status = 404)))]
async fn update(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    JsonObject(body): JsonObject,
) -> Result<Json<Agent>, ApiError> {
    Ok(Json(
        update_agent(&state, &auth, AgentId::from_uuid(id), body).await?,
    ))
}

/// PATCH of an agent: the sent fields, by the same rules; answers the agent as it now is.
pub(crate) async fn update_agent(
    state: &AppState,
    auth: &Auth,
    id: AgentId,
    body: Map<String, Value>,
) -> Result<Agent, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_request(format!(
            "No writable field given. Writable fields: {}",
            WRITABLE.join(", ")
        )));
    }
    let flow_sent = body.get("flow_config").is_some_and(|v| !v.is_null());
    let input = parse_input(body)?;
    let Some(mut agent) = state.store.agent(auth.workspace_id, id).await? else {
        return Err(ApiError::NotFound { resource: "Agent" });
    };
    apply(&mut agent, input);
    validate(&agent, &state.egress)?;
    if flow_sent {
        check_flow_links(state, auth, &agent).await?;
    }
    let updated = state
        .store
        .update_agent(auth.workspace_id, &agent)
        .await?
        .ok_or(ApiError::NotFound { resource: "Agent" })?;
    if flow_sent {
        save_flow_version(state, auth, &updated).await?;
    }
    Ok(updated)
}

/// Deactivate an agent (it is kept, with `is_active` false)
#[utoipa::path(post, path = "/agents/{id}/deactivate", operation_id = "deactivateAgent", tag = "agents", security(("bearer" = ["agents:update"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = Agent), (status = 404)))]
async fn deactivate(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<Agent>, ApiError> {
    let done = state
        .store
        .deactivate_agent(auth.workspace_id, AgentId::from_uuid(id))
        .await?;
    done.map(Json)
        .ok_or(ApiError::NotFound { resource: "Agent" })
}

/// Refuses a flow that cannot run, or whose integration_call nodes do not hold together
/// (`FLOW_INVALID`, every issue listed).
async fn check_flow_links(state: &AppState, auth: &Auth, agent: &Agent) -> Result<(), ApiError> {
    let Some(flow) = &agent.flow_config else {
        return Ok(());
    };
    let issues = flow_issues(state, auth.workspace_id, flow).await?;
    if issues.is_empty() {
        Ok(())
    } else {
        Err(ApiError::FlowInvalid { issues })
    }
}

/// What would stop `flow` from saving now: its graph's issues, and its integration_call
/// nodes' against the workspace's integrations and tools (one issue per node, code and field).
pub(crate) async fn flow_issues(
    state: &AppState,
    ws: WorkspaceId,
    flow: &FlowConfig,
) -> Result<Vec<crate::runtime::flows::FlowIssue>, ApiError> {
    let mut issues = crate::runtime::flows::graph_issues(flow);
    if flow.nodes.iter().any(|n| n.node_type == "integration_call") {
        let integrations = state.store.list_integrations(ws).await?;
        let mut tool_params = std::collections::HashMap::new();
        for id in crate::runtime::flows::linked_tools(flow) {
            if let Ok(tool_id) = id.parse()
                && let Some(tool) = state.store.tool(ws, tool_id).await?
            {
                tool_params.insert(id, crate::edge::webhooks::parameter_names(&tool.config));
            }
        }
        issues.extend(crate::runtime::flows::integration_issues(
            flow,
            &crate::runtime::flows::FlowContext {
                integrations: &integrations,
                tool_params: &tool_params,
            },
        ));
    }
    let mut seen = std::collections::HashSet::new();
    issues.retain(|i| seen.insert((i.node_id.clone(), i.code, i.field.clone())));
    Ok(issues)
}

/// Every save of a flow is a new version.
async fn save_flow_version(state: &AppState, auth: &Auth, agent: &Agent) -> Result<(), ApiError> {
    if let Some(flow) = &agent.flow_config {
        let value = serde_json::to_value(flow).map_err(|e| ApiError::Internal(e.into()))?;
        state
            .store
            .record_flow_version(auth.workspace_id, agent.id, &value)
            .await?;
    }
    Ok(())
}
