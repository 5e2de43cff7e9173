//! An agent's writable fields and their bounds, and how a body's fields are read and laid over
//! the stored agent.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};
use switchboard_actors::flow::GraphIssue;
use switchboard_actors::flow::read::{Read, bounds, read};
use switchboard_actors::ids::{AgentId, WorkspaceId};
use utoipa::ToSchema;

use crate::app::error::AppError;
use crate::app::fields::{Patch, check_fields, from_value};
use crate::app::state::App;
use crate::store::{Agent, AgentType, AnsweringMachineDetection, ExtractionParameter, FlowConfig};

pub const WRITABLE: &[&str] = &[
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
pub const NULLABLE: &[&str] = &[
    "flow_config",
    "max_call_duration_secs",
    "webhook_url",
    "voicemail_message",
];

/// A text bound: from `.0` to `.1` characters.
#[derive(Clone, Copy)]
pub struct Chars(pub usize, pub usize);

/// A number bound: from `.0` to `.1`.
#[derive(Clone, Copy)]
pub struct Number(pub f64, pub f64);

/// An integer bound: from `.0` to `.1`.
#[derive(Clone, Copy)]
pub struct Integer(pub i64, pub i64);
pub const NAME: Chars = Chars(1, 200);
pub const SYSTEM_PROMPT: Chars = Chars(0, 100_000);
pub const DESCRIPTION: Chars = Chars(0, 2000);
pub const VOICE: Chars = Chars(1, 100);
pub const BACKGROUND_SOUND: Chars = Chars(1, 100);
pub const LANGUAGE: Chars = Chars(2, 35);
pub const GREETING_MESSAGE: Chars = Chars(0, 2000);
pub const BACKGROUND_SOUND_VOLUME: Number = Number(0.0, 1.0);
pub const TEMPERATURE: Number = Number(0.0, 2.0);
pub const VAD_SECS: Number = Number(0.0, 10.0);
pub const VAD_CONFIDENCE: Number = Number(0.0, 1.0);
pub const TIMEOUT_SECS: Integer = Integer(1, 3600);
pub const MAX_CALL_DURATION_SECS: Integer = Integer(1, 14_400);
pub const WEBHOOK_URL_MAX: usize = 2048;
pub const WEBHOOK_EVENTS_MAX: usize = 50;
pub const WEBHOOK_HEADERS_MAX: usize = 50;
pub const HEADER_NAME_MAX: usize = 256;
pub const HEADER_VALUE_MAX: usize = 4096;
pub const PARAMETERS_MAX: usize = 100;
pub const PARAMETER_NAME: Chars = Chars(1, 100);
pub const PARAMETER_DESCRIPTION: Chars = Chars(0, 1000);
pub const FLOW_NODES_MAX: usize = bounds::NODES_MAX;
pub const METADATA_KEYS_MAX: usize = bounds::METADATA_KEYS_MAX;
pub const METADATA_KEY: Chars = Chars(bounds::METADATA_KEY.0, bounds::METADATA_KEY.1);
pub const FLOW_CONFIG_VERSION: i64 = bounds::FLOW_CONFIG_VERSION;
pub const VOICEMAIL_MESSAGE: Chars = Chars(1, 2000);

/// The bounds of the answering-machine detection parameters, by key (the same in the document
/// and in the rules).
pub const AMD_BOUNDS: &[(&str, Integer)] = &[
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
    pub name: Option<String>,
    /// `prompt` or `flow`.
    #[serde(rename = "type")]
    pub agent_type: Option<AgentType>,
    /// Flow of a `flow` agent (`flow_config_version` must be 1; node ids unique; every
    /// `next_step_id` names a node of the flow); null removes it from a prompt agent.
    #[serde(default)]
    #[schema(value_type = Option<FlowConfig>)]
    pub flow_config: Patch<Value>,
    /// The sent `flow_config` read into its typed form ([`parse_input`]).
    #[serde(skip)]
    pub flow: Option<Read>,
    /// At most 100000 characters.
    pub system_prompt: Option<String>,
    /// At most 2000 characters.
    pub description: Option<String>,
    /// 1-100 characters.
    pub voice: Option<String>,
    /// 1-100 characters, e.g. `none`, `office`.
    pub background_sound: Option<String>,
    /// 0-1.
    pub background_sound_volume: Option<f64>,
    /// BCP 47 tag, 2-35 characters.
    pub language: Option<String>,
    /// 0-2.
    pub temperature: Option<f64>,
    /// At most 2000 characters.
    pub greeting_message: Option<String>,
    pub agent_speaks_first: Option<bool>,
    /// 0-10 seconds.
    pub vad_stop_secs: Option<f64>,
    /// 0-10 seconds.
    pub vad_start_secs: Option<f64>,
    /// 0-1.
    pub vad_confidence: Option<f64>,
    /// Integer 1-3600.
    pub silence_timeout_secs: Option<i64>,
    /// Integer 1-3600.
    pub max_continuous_speech_secs: Option<i64>,
    /// Integer 1-14400, or null for no cap.
    #[serde(default)]
    #[schema(value_type = Option<i64>)]
    pub max_call_duration_secs: Patch<i64>,
    /// Gives the model what the workspace knows of the lead on the call.
    pub lead_memory_enabled: Option<bool>,
    /// Lets lead memory use the caller-ID of inbound SIP endpoint calls.
    pub lead_memory_trust_caller_id: Option<bool>,
    pub is_active: Option<bool>,
    /// http(s) URL, at most 2048 characters, or null.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub webhook_url: Patch<String>,
    /// At most 50 event kinds: `call.started`, `call.answered`, `call.ended`,
    /// `call.analyzed`, `transcript.final`, `tool.called`.
    pub webhook_events: Option<Vec<String>>,
    /// Header name to string value; at most 50. Sent with every webhook delivery; the
    /// service's own `X-Switchboard-*` headers and `Content-Type` are not overridden.
    pub webhook_headers: Option<BTreeMap<String, String>>,
    /// At most 100 `{name, description}`, names unique.
    pub extraction_parameters: Option<Vec<ExtractionParameter>>,
    /// Replaces the stored object; a parameter left out or null takes its default.
    pub answering_machine_detection: Option<AnsweringMachineDetection>,
    /// 1-2000 characters, or null to hang up on a machine at once.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub voicemail_message: Patch<String>,
}

/// Checks keys and null values, then reads the input.
pub fn parse_input(body: Map<String, Value>) -> Result<AgentInput, AppError> {
    check_fields(&body, WRITABLE)?;
    if let Some(key) = body
        .iter()
        .find(|(k, v)| v.is_null() && !NULLABLE.contains(&k.as_str()))
        .map(|(k, _)| k)
    {
        return Err(AppError::invalid_field(key, "must not be null"));
    }
    let mut input: AgentInput = from_value(Value::Object(body))?;
    if let Patch::Value(flow) = &input.flow_config {
        let sent = read(flow).map_err(|e| {
            let field = match e.field.as_str() {
                "" => "flow_config".to_string(),
                at => format!("flow_config.{at}"),
            };
            AppError::invalid_field(field, e.message)
        })?;
        input.flow = Some(sent);
    }
    Ok(input)
}

/// What a sent flow leaves to answer once the agent's other fields pass: every issue that
/// stops it running, and how many of its nodes could not be read at all.
#[derive(Debug, Default)]
pub struct FlowPending {
    pub issues: Vec<GraphIssue>,
    pub unread: usize,
}

/// Merges the sent fields over `agent`; a sent flow's issues are left to answer.
pub fn apply(agent: &mut Agent, input: AgentInput) -> FlowPending {
    let AgentInput {
        name,
        agent_type,
        flow_config,
        flow,
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
    let mut pending = FlowPending::default();
    match (flow_config, flow) {
        (Patch::Null, _) => agent.flow_config = None,
        (Patch::Value(_), Some(sent)) => {
            agent.flow_config = Some(sent.flow);
            pending = FlowPending {
                issues: sent.issues,
                unread: sent.unread,
            };
        }
        _ => {}
    }
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
    pending
}

pub async fn workspace_agent(
    state: &App,
    ws: WorkspaceId,
    field: &str,
    id: Patch<uuid::Uuid>,
) -> Result<Option<Option<AgentId>>, AppError> {
    match id {
        Patch::Absent => Ok(None),
        Patch::Null => Ok(Some(None)),
        Patch::Value(id) => {
            let agent = AgentId::from_uuid(id);
            if state.store.agent(ws, agent).await?.is_none() {
                return Err(AppError::invalid_field(
                    field,
                    format!("no agent {id} in this workspace"),
                ));
            }
            Ok(Some(Some(agent)))
        }
    }
}
