//! Voice agents. The name, `is_active`, `max_call_duration_secs` and the timestamps are real
//! columns (filters, campaign preflight); the rest of the Agent object is kept as JSON in `doc`.
//! On read the columns win over the copy inside `doc`.

use std::collections::BTreeMap;

use chrono::SubsecRound;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use switchboard_actors::ids::{AgentId, WorkspaceId};
use switchboard_sip::amd::AmdSettings;
use utoipa::ToSchema;

use super::db::{Json, Row, query};
use super::{Page, Paged, Store, StoreError, StoreResult, ts};

/// How an agent converses: one system prompt, or a graph of flow nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AgentType {
    /// A single system prompt drives the whole call.
    Prompt,
    /// `flow_config.nodes` drive the call step by step.
    Flow,
}

/// A flow's typed form: one node variant per `type` (the actors crate's, which the run graph
/// is built from), stored in the agent's `doc` as sent.
pub use switchboard_actors::flow::{FlowConfig, FlowMetadata, FlowNode, NodePosition};

/// A value the agent extracts from the conversation at the end of a call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ExtractionParameter {
    /// 1-100 characters, unique within the agent.
    pub name: String,
    /// What to extract; at most 1000 characters.
    #[serde(default)]
    pub description: String,
}

/// Answering-machine detection on the agent's outbound calls, with the parameters of
/// Asterisk's `app_amd`. Each parameter left null takes Switchboard's default; the object is
/// written whole (a key left out is null).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AnsweringMachineDetection {
    /// Whether outbound calls tell machines from people (default true). Inbound calls never do.
    #[serde(default = "enabled")]
    pub enabled: bool,
    /// Whether the agent greets as soon as the callee's first words end, while detection
    /// still decides (default true): a person hears the agent at once, and a later machine
    /// verdict cuts the greeting short. Off: the greeting waits for the verdict.
    #[serde(default = "enabled")]
    pub greet_early: bool,
    /// Silence before the first word that makes a machine, in ms; 100-10000 (default 2500).
    #[serde(default)]
    pub initial_silence_ms: Option<u32>,
    /// Voice in a greeting that makes a machine, in ms; 100-10000 (default 1500).
    #[serde(default)]
    pub greeting_ms: Option<u32>,
    /// Silence after a short greeting that makes a person, in ms; 100-10000 (default 800).
    #[serde(default)]
    pub after_greeting_silence_ms: Option<u32>,
    /// Longest analysis, in ms; then the call counts as answered by a person (`unsure`);
    /// 1000-30000 (default 5000).
    #[serde(default)]
    pub total_analysis_time_ms: Option<u32>,
    /// Shortest voice that counts as a word, in ms; 20-2000 (default 100).
    #[serde(default)]
    pub min_word_length_ms: Option<u32>,
    /// Shortest silence that ends a word, in ms; 20-2000 (default 50).
    #[serde(default)]
    pub between_words_silence_ms: Option<u32>,
    /// Most words a person's greeting has (one more makes a machine); 1-100 (default 3).
    #[serde(default)]
    pub maximum_number_of_words: Option<u32>,
    /// Longest single word, in ms (longer makes a machine); 100-30000 (default 5000).
    #[serde(default)]
    pub maximum_word_length_ms: Option<u32>,
    /// Mean absolute sample value (16-bit) under which a frame is silence; 1-32767
    /// (default 256). On a noisy line the bar rises above the line's noise.
    #[serde(default)]
    pub silence_threshold: Option<u32>,
}

fn enabled() -> bool {
    true
}

impl Default for AnsweringMachineDetection {
    fn default() -> Self {
        Self {
            enabled: true,
            greet_early: true,
            initial_silence_ms: None,
            greeting_ms: None,
            after_greeting_silence_ms: None,
            total_analysis_time_ms: None,
            min_word_length_ms: None,
            between_words_silence_ms: None,
            maximum_number_of_words: None,
            maximum_word_length_ms: None,
            silence_threshold: None,
        }
    }
}

impl AnsweringMachineDetection {
    /// The settings an outbound call detects with (the overrides over the defaults); `None`
    /// when detection is off.
    pub fn settings(&self) -> Option<AmdSettings> {
        if !self.enabled {
            return None;
        }
        let d = AmdSettings::default();
        Some(AmdSettings {
            initial_silence_ms: self.initial_silence_ms.unwrap_or(d.initial_silence_ms),
            greeting_ms: self.greeting_ms.unwrap_or(d.greeting_ms),
            after_greeting_silence_ms: self
                .after_greeting_silence_ms
                .unwrap_or(d.after_greeting_silence_ms),
            total_analysis_time_ms: self
                .total_analysis_time_ms
                .unwrap_or(d.total_analysis_time_ms),
            min_word_length_ms: self.min_word_length_ms.unwrap_or(d.min_word_length_ms),
            between_words_silence_ms: self
                .between_words_silence_ms
                .unwrap_or(d.between_words_silence_ms),
            maximum_number_of_words: self
                .maximum_number_of_words
                .unwrap_or(d.maximum_number_of_words),
            maximum_word_length_ms: self
                .maximum_word_length_ms
                .unwrap_or(d.maximum_word_length_ms),
            silence_threshold: self.silence_threshold.unwrap_or(d.silence_threshold),
        })
    }
}

/// The spec's Agent object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Agent {
    #[schema(value_type = uuid::Uuid)]
    pub id: AgentId,
    /// 1-200 characters (trimmed); required on create.
    pub name: String,
    /// `prompt` (default) or `flow`; a `flow` agent needs a `flow_config` with at least one node.
    #[serde(rename = "type")]
    pub agent_type: AgentType,
    /// The flow of a `flow` agent; null for prompt agents that never had one.
    pub flow_config: Option<FlowConfig>,
    /// Instructions for the model; at most 100000 characters (default empty).
    pub system_prompt: String,
    /// At most 2000 characters (default empty).
    pub description: String,
    /// Voice id of the text-to-speech engine; 1-100 characters (default `alloy`).
    pub voice: String,
    /// Ambient sound mixed under the agent's voice, e.g. `none`, `office`; 1-100 characters (default `none`).
    pub background_sound: String,
    /// Volume of the background sound, 0-1 (default 0.5).
    pub background_sound_volume: f64,
    /// BCP 47 language tag, e.g. `en-US`, `he-IL`; 2-35 characters (default `en-US`).
    pub language: String,
    /// Sampling temperature of the model, 0-2 (default 0.7).
    pub temperature: f64,
    /// First words of the agent; at most 2000 characters (default empty).
    pub greeting_message: String,
    /// Whether the agent talks first when the call connects (default true).
    pub agent_speaks_first: bool,
    /// Seconds of silence that end the caller's turn, 0-10 (default 0.8).
    pub vad_stop_secs: f64,
    /// Seconds of speech before the caller's turn starts, 0-10 (default 0.2).
    pub vad_start_secs: f64,
    /// Voice-activity confidence threshold, 0-1 (default 0.7).
    pub vad_confidence: f64,
    /// Seconds of silence on the line before the agent hangs up, 1-3600 (default 30).
    pub silence_timeout_secs: i64,
    /// Longest the caller may speak without pause before the agent interjects, 1-3600 seconds (default 60).
    pub max_continuous_speech_secs: i64,
    /// Hard cap on call length in seconds, 1-14400, or null for no cap (default 1800). Campaigns
    /// need a cap.
    pub max_call_duration_secs: Option<i64>,
    /// Lead memory (default false): when the other party's number is a lead of the workspace,
    /// the model gets the lead's fields and the summaries of its last calls. Outbound calls
    /// use the dialled number; inbound SIP calls only with `lead_memory_trust_caller_id`.
    pub lead_memory_enabled: bool,
    /// Let lead memory trust the caller-ID (the From user) of inbound SIP endpoint calls
    /// (default false). Anyone can send any caller-ID, so only turn it on for endpoints whose
    /// callers are vouched for (a trunk that sets the number, `allowed_source_ips`). It also
    /// lets earlier inbound calls from the number count among the lead's last calls.
    #[serde(default)]
    pub lead_memory_trust_caller_id: bool,
    /// Inactive agents are kept but not used for new calls (default true).
    pub is_active: bool,
    /// http(s) URL receiving the agent's call events, at most 2048 characters, or null.
    pub webhook_url: Option<String>,
    /// Event kinds delivered to `webhook_url`: `call.started`, `call.answered`, `call.ended`,
    /// `call.analyzed`, `transcript.final`, `tool.called`; at most 50.
    pub webhook_events: Vec<String>,
    /// Extra headers sent with every webhook delivery: header name to string value; at most 50.
    /// They never replace the service's own `X-Switchboard-*` headers or `Content-Type`.
    pub webhook_headers: BTreeMap<String, String>,
    /// Values extracted from each call; at most 100, names unique.
    pub extraction_parameters: Vec<ExtractionParameter>,
    /// Answering-machine detection on outbound calls (on by default). A machine makes the
    /// call's outcome `voicemail`; `unsure` counts as a person.
    #[serde(default)]
    pub answering_machine_detection: AnsweringMachineDetection,
    /// What the agent says after the beep when a machine answers; 1-2000 characters, or null
    /// to hang up at once (default null).
    #[serde(default)]
    pub voicemail_message: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Agent {
    /// A new agent with every default, named `name`.
    pub fn new(name: String) -> Self {
        let at = chrono::Utc::now().trunc_subsecs(6);
        Self {
            id: AgentId::new(),
            name,
            agent_type: AgentType::Prompt,
            flow_config: None,
            system_prompt: String::new(),
            description: String::new(),
            voice: "alloy".into(),
            background_sound: "none".into(),
            background_sound_volume: 0.5,
            language: "en-US".into(),
            temperature: 0.7,
            greeting_message: String::new(),
            agent_speaks_first: true,
            vad_stop_secs: 0.8,
            vad_start_secs: 0.2,
            vad_confidence: 0.7,
            silence_timeout_secs: 30,
            max_continuous_speech_secs: 60,
            max_call_duration_secs: Some(1800),
            lead_memory_enabled: false,
            lead_memory_trust_caller_id: false,
            is_active: true,
            webhook_url: None,
            webhook_events: Vec::new(),
            webhook_headers: BTreeMap::new(),
            extraction_parameters: Vec::new(),
            answering_machine_detection: AnsweringMachineDetection::default(),
            voicemail_message: None,
            created_at: at,
            updated_at: at,
        }
    }
}

const COLUMNS: &str = "id, name, is_active, max_call_duration_secs, doc, created_at, updated_at";

fn agent_row(r: Row) -> StoreResult<Agent> {
    let doc: String = r.try_get("doc")?;
    let mut agent: Agent =
        serde_json::from_str(&doc).map_err(|e| StoreError::Corrupt(format!("agent doc: {e}")))?;
    agent.id = AgentId::from_uuid(r.try_get("id")?);
    agent.name = r.try_get("name")?;
    agent.is_active = r.try_get("is_active")?;
    agent.max_call_duration_secs = r.try_get("max_call_duration_secs")?;
    agent.created_at = r.try_get("created_at")?;
    agent.updated_at = r.try_get("updated_at")?;
    Ok(agent)
}

fn doc(agent: &Agent) -> StoreResult<String> {
    serde_json::to_string(agent).map_err(|e| StoreError::Corrupt(format!("agent doc: {e}")))
}

impl Store {
    /// An agent of the workspace, active or not.
    pub async fn agent(&self, ws: WorkspaceId, id: AgentId) -> StoreResult<Option<Agent>> {
        Self::agent_on(self.read_conn().await?, ws, id).await
    }

    pub(super) async fn agent_on(
        mut conn: super::Conn<'_>,
        ws: WorkspaceId,
        id: AgentId,
    ) -> StoreResult<Option<Agent>> {
        let row = query(format!(
            "SELECT {COLUMNS} FROM agents WHERE workspace_id = ? AND id = ?"
        ))
        .bind(ws.as_uuid())
        .bind(id.as_uuid())
        .fetch_optional(&mut conn)
        .await?;
        row.map(agent_row).transpose()
    }

    /// Agents of the workspace, oldest first, optionally only active or inactive ones.
    pub async fn list_agents(
        &self,
        ws: WorkspaceId,
        is_active: Option<bool>,
        page: Page,
    ) -> StoreResult<Paged<Agent>> {
        let total: i64 = query(
            "SELECT COUNT(*) FROM agents WHERE workspace_id = ? AND (? IS NULL OR is_active = ?)",
        )
        .bind(ws.as_uuid())
        .bind(is_active)
        .bind(is_active)
        .scalar(&mut self.conn().await?)
        .await?;
        let rows = query(format!(
            "SELECT {COLUMNS} FROM agents WHERE workspace_id = ? AND (? IS NULL OR is_active = ?) ORDER BY created_at, id LIMIT ? OFFSET ?"
        ))
        .bind(ws.as_uuid())
        .bind(is_active)
        .bind(is_active)
        .bind(page.limit)
        .bind(page.offset)
        .fetch_all(&mut self.conn().await?)
        .await?;
        let items = rows
            .into_iter()
            .map(agent_row)
            .collect::<StoreResult<_>>()?;
        Ok(Paged { items, total })
    }

    /// Stores a new agent (already validated) in the workspace.
    pub async fn create_agent(&self, ws: WorkspaceId, agent: &Agent) -> StoreResult<Agent> {
        query("INSERT INTO agents (id, workspace_id, name, is_active, max_call_duration_secs, doc, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
            .bind(agent.id.as_uuid())
            .bind(ws.as_uuid())
            .bind(&agent.name)
            .bind(agent.is_active)
            .bind(agent.max_call_duration_secs)
            .bind(Json(doc(agent)?))
            .bind(ts(agent.created_at))
            .bind(ts(agent.updated_at))
            .execute(&mut self.conn().await?)
            .await
            .map_err(super::classify)?;
        self.agent(ws, agent.id)
            .await?
            .ok_or_else(|| StoreError::Corrupt("agent vanished after insert".into()))
    }

    /// Replaces an agent's fields (already validated); `None` when it is not in the workspace.
    pub async fn update_agent(&self, ws: WorkspaceId, agent: &Agent) -> StoreResult<Option<Agent>> {
        let done = query("UPDATE agents SET name = ?, is_active = ?, max_call_duration_secs = ?, doc = ?, updated_at = ? WHERE workspace_id = ? AND id = ?")
            .bind(&agent.name)
            .bind(agent.is_active)
            .bind(agent.max_call_duration_secs)
            .bind(Json(doc(agent)?))
            .bind(ts(self.now()))
            .bind(ws.as_uuid())
            .bind(agent.id.as_uuid())
            .execute(&mut self.conn().await?)
            .await?;
        if done.rows_affected() == 0 {
            return Ok(None);
        }
        self.agent(ws, agent.id).await
    }

    /// Marks an agent inactive; `None` when it is not in the workspace.
    pub async fn deactivate_agent(
        &self,
        ws: WorkspaceId,
        id: AgentId,
    ) -> StoreResult<Option<Agent>> {
        let done = query(
            "UPDATE agents SET is_active = FALSE, updated_at = ? WHERE workspace_id = ? AND id = ?",
        )
        .bind(ts(self.now()))
        .bind(ws.as_uuid())
        .bind(id.as_uuid())
        .execute(&mut self.conn().await?)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(None);
        }
        self.agent(ws, id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_detects_machines_with_its_overrides_over_the_defaults() {
        let defaults = AnsweringMachineDetection::default().settings();
        assert_eq!(defaults, Some(AmdSettings::default()));
        let amd = AnsweringMachineDetection {
            greeting_ms: Some(2000),
            maximum_number_of_words: Some(2),
            silence_threshold: Some(400),
            ..AnsweringMachineDetection::default()
        };
        let settings = amd.settings().expect("on");
        assert_eq!(settings.greeting_ms, 2000);
        assert_eq!(settings.maximum_number_of_words, 2);
        assert_eq!(settings.silence_threshold, 400);
        assert_eq!(settings.initial_silence_ms, 2500);
        let off = AnsweringMachineDetection {
            enabled: false,
            ..amd
        };
        assert_eq!(off.settings(), None);
    }

    #[test]
    fn an_agent_stored_before_detection_reads_with_the_defaults() {
        let mut doc = serde_json::to_value(Agent::new("Old".into())).unwrap();
        let fields = doc.as_object_mut().unwrap();
        fields.remove("answering_machine_detection");
        fields.remove("voicemail_message");
        let agent: Agent = serde_json::from_value(doc).unwrap();
        assert_eq!(
            agent.answering_machine_detection,
            AnsweringMachineDetection::default()
        );
        assert_eq!(agent.voicemail_message, None);
    }
}
