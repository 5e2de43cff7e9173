//! The workspace's tools on a call: the service's side of the call actor's
//! [`CallTools`] port.
//!
//! [`Toolbox::load`] snapshots the agent's attached, active tools when the call starts, in
//! execution order, each with the agent's `config_override` applied (an RFC 7386 merge patch
//! over the tool's `config`): an edit made during the call applies to new calls only.
//!
//! - A **webhook** tool's function takes its `payload_config.extraction_parameters` (strings;
//!   the required ones required). A call is delivered once, through the outbound URL policy,
//!   with the payload `POST /tools/{id}/test` sends, its nine standard metadata fields holding
//!   this call's values, and logged as a delivery of kind `call`.
//! - A **function** tool's function takes the JSON Schema in its config's `parameters` (an
//!   object with no properties when absent). A call is sent to the agent's `webhook_url` as a
//!   `tool.called` event (see [`crate::runtime::agent_webhooks::tool_call`]); its answer is the result.
//!   It waits `timeout_seconds` of the config (1-60) or [`FUNCTION_TIMEOUT`].
//!
//! Arguments that are not a JSON object, or that lack a required parameter, are answered to
//! the model as an error and nothing is sent.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use switchboard_actors::agent::AgentPlan;
use switchboard_actors::call_tools::{CallParties, CallTools, ToolRun};
use switchboard_actors::conversation::{ToolEvent, ToolStatus};
use switchboard_actors::ids::{AgentId, CallId, EventId, ToolId, WorkspaceId};
use switchboard_actors::vendors::{ToolCall, ToolSpec};

use crate::edge::egress::Egress;
use crate::edge::webhooks::{self, Outcome, WebhookConfig};
use crate::runtime::agent_webhooks::{FunctionToolCall, ToolCallError, tool_call};
use crate::store::{Delivery, Store, StoreResult, Tool, ToolType};

/// How long a `function` tool's answer is waited for when its config sets no
/// `timeout_seconds`.
pub const FUNCTION_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest response preview kept on the call's record, in characters.
const EVENT_PREVIEW_CHARS: usize = 500;

/// The call a toolbox serves: what the nine standard metadata fields say.
#[derive(Debug, Clone)]
pub struct CallFacts {
    pub workspace_id: WorkspaceId,
    pub agent_id: AgentId,
    pub agent_name: String,
    pub call_id: CallId,
    /// `inbound` or `outbound`.
    pub direction: &'static str,
    /// `metadata` of `POST /calls` (empty for other calls).
    pub metadata: Map<String, Value>,
    /// The values of the agent's `{{variables}}`.
    pub variables: Map<String, Value>,
}

/// How a snapshotted tool is run.
#[derive(Debug, Clone)]
enum Kind {
    Webhook(Box<WebhookConfig>),
    Function { timeout: Duration },
}

/// One tool as it was when the call started.
#[derive(Debug, Clone)]
struct Snapshot {
    id: ToolId,
    name: String,
    kind: Kind,
    /// Parameters the model must give.
    required: Vec<String>,
}

/// The tools of one call.
pub struct Toolbox {
    store: Store,
    egress: Egress,
    facts: CallFacts,
    tools: Vec<Snapshot>,
    specs: Vec<ToolSpec>,
}

impl Toolbox {
    /// The agent's tools for the call `facts` describes, as they are now; `None` if it has
    /// none.
    pub async fn load(
        store: &Store,
        egress: &Egress,
        facts: CallFacts,
    ) -> StoreResult<Option<Toolbox>> {
        let attached = store.call_tools(facts.workspace_id, facts.agent_id).await?;
        let mut tools = Vec::new();
        let mut specs = Vec::new();
        for tool in attached {
            match snapshot(&tool) {
                Some((snap, spec)) => {
                    tools.push(snap);
                    specs.push(spec);
                }
                None => tracing::warn!(
                    tool = %tool.id,
                    "a tool's configuration (with the agent's override) is not valid: it is not offered"
                ),
            }
        }
        if tools.is_empty() {
            return Ok(None);
        }
        Ok(Some(Toolbox {
            store: store.clone(),
            egress: egress.clone(),
            facts,
            tools,
            specs,
        }))
    }
}

/// Gives a conversing plan the agent's tools for the call `facts` describes, and its flow's
/// integrations. A store failure leaves the call without tools rather than without an agent.
pub async fn equip(
    plan: &mut AgentPlan,
    store: &Store,
    vendors: &crate::runtime::vendors::Vendors,
    facts: CallFacts,
) {
    let Some(mind) = plan.mind.as_mut() else {
        return;
    };
    let call = facts.call_id;
    mind.integrations = Some(vendors.providers.for_call(facts.workspace_id));
    match Toolbox::load(store, &vendors.egress, facts).await {
        Ok(Some(toolbox)) => mind.tools = Some(Arc::new(toolbox)),
        Ok(None) => {}
        Err(error) => {
            tracing::warn!(%call, %error, "the agent's tools could not be read: the call has none")
        }
    }
}

/// RFC 7386: `patch` merged into `target`.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(fields) = target {
        for (key, value) in patch {
            if value.is_null() {
                fields.remove(key);
            } else {
                merge_patch(fields.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

/// The tool as the call runs it and as the model sees it; `None` if its effective
/// configuration is not valid.
fn snapshot(tool: &Tool) -> Option<(Snapshot, ToolSpec)> {
    let mut config = tool.config.clone();
    if let Some(patch) = &tool.config_override {
        merge_patch(&mut config, patch);
    }
    let (kind, parameters, required) = match tool.tool_type {
        ToolType::Webhook => {
            let webhook = WebhookConfig::from_stored(&config)?;
            let params = &webhook.payload_config.extraction_parameters;
            let properties: Map<String, Value> = params
                .iter()
                .map(|p| {
                    (
                        p.name.clone(),
                        json!({"type": "string", "description": p.description}),
                    )
                })
                .collect();
            let required: Vec<String> = params
                .iter()
                .filter(|p| p.required)
                .map(|p| p.name.clone())
                .collect();
            (
                Kind::Webhook(Box::new(webhook)),
                json!({"type": "object", "properties": properties, "required": required}),
                required,
            )
        }
        ToolType::Function => {
            let timeout = config
                .get("timeout_seconds")
                .and_then(Value::as_u64)
                .filter(|s| (1..=60).contains(s))
                .map_or(FUNCTION_TIMEOUT, Duration::from_secs);
            let parameters = match config.get("parameters") {
                Some(schema @ Value::Object(_)) => schema.clone(),
                _ => json!({"type": "object", "properties": {}}),
            };
            let required = parameters
                .get("required")
                .and_then(Value::as_array)
                .map(|r| {
                    r.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            (Kind::Function { timeout }, parameters, required)
        }
    };
    Some((
        Snapshot {
            id: tool.id,
            name: tool.name.clone(),
            kind,
            required,
        },
        ToolSpec {
            name: tool.name.clone(),
            description: tool.description.clone(),
            parameters,
        },
    ))
}

/// Why the model's arguments cannot be sent, if they cannot.
fn check_arguments(arguments: &str, required: &[String]) -> Result<Map<String, Value>, String> {
    let text = if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    };
    let Ok(Value::Object(given)) = serde_json::from_str::<Value>(text) else {
        return Err("the arguments are not a JSON object".into());
    };
    let missing: Vec<&str> = required
        .iter()
        .filter(|name| {
            given
                .get(name.as_str())
                .is_none_or(|v| v.is_null() || v.as_str().is_some_and(|s| s.trim().is_empty()))
        })
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "missing required arguments: {}",
            missing.join(", ")
        ));
    }
    Ok(given)
}

/// A value as a webhook argument: strings as they are, anything else as compact JSON.
fn as_argument(value: &Value) -> Value {
    match value {
        Value::String(_) => value.clone(),
        other => Value::String(other.to_string()),
    }
}

fn shortened(text: &str) -> String {
    text.chars().take(EVENT_PREVIEW_CHARS).collect()
}

impl Toolbox {
    /// The nine standard metadata fields for this call.
    fn metadata(&self, parties: &CallParties) -> Map<String, Value> {
        let number = |n: &str| {
            if n.is_empty() { Value::Null } else { json!(n) }
        };
        let f = &self.facts;
        let mut m = Map::new();
        m.insert("company_id".into(), json!(f.workspace_id));
        m.insert("agent_id".into(), json!(f.agent_id));
        m.insert("agent_name".into(), json!(f.agent_name));
        m.insert("call_id".into(), json!(f.call_id));
        m.insert("call_direction".into(), json!(f.direction));
        m.insert("caller_number".into(), number(&parties.from));
        // An inbound call is to a SIP endpoint, which has no number.
        let callee = if f.direction == "inbound" {
            ""
        } else {
            &parties.to
        };
        m.insert("callee_number".into(), number(callee));
        m.insert("call_metadata".into(), Value::Object(f.metadata.clone()));
        m.insert("call_variables".into(), Value::Object(f.variables.clone()));
        m
    }

    async fn run_webhook(
        &self,
        tool: &Snapshot,
        config: &WebhookConfig,
        given: &Map<String, Value>,
        parties: &CallParties,
    ) -> (ToolEvent, String) {
        let arguments: Map<String, Value> = config
            .payload_config
            .extraction_parameters
            .iter()
            .filter_map(|p| {
                given
                    .get(&p.name)
                    .filter(|v| !v.is_null())
                    .map(|v| (p.name.clone(), as_argument(v)))
            })
            .collect();
        let payload = webhooks::payload(config, &self.metadata(parties), &arguments);
        let started = Instant::now();
        let outcome = webhooks::deliver(&self.egress, config, &payload).await;
        let latency = started.elapsed();
        let logged = self
            .store
            .log_delivery(&Delivery {
                workspace_id: self.facts.workspace_id,
                tool_id: tool.id,
                kind: "call",
                method: config.method.as_str(),
                url: webhooks::logged_url(&config.url),
                outcome: outcome.name(),
                status_code: outcome.status(),
                duration_ms: latency.as_millis() as i64,
                at: self.store.now(),
            })
            .await;
        let delivery_id = match logged {
            Ok(id) => Some(id.as_uuid()),
            Err(e) => {
                tracing::warn!(error = %e, "a tool delivery could not be logged");
                None
            }
        };
        let mut event = ToolEvent {
            name: tool.name.clone(),
            tool_id: Some(tool.id.as_uuid()),
            arguments: Value::Object(arguments),
            status: ToolStatus::Succeeded,
            latency_ms: latency.as_millis() as u64,
            response_preview: None,
            raw_response_preview: None,
            status_code: outcome.status(),
            error: None,
            delivery_id,
            at_ms: 0,
        };
        let content = match outcome {
            Outcome::Delivered { body, .. } => {
                event.response_preview = Some(shortened(&body));
                if body.trim().is_empty() {
                    json!({"ok": true}).to_string()
                } else {
                    body
                }
            }
            Outcome::Status { status, body } => {
                let error = format!("the tool's endpoint answered HTTP {status}");
                event.status = ToolStatus::Failed;
                event.response_preview = Some(shortened(&body));
                event.error = Some(error.clone());
                json!({"error": error, "response": body}).to_string()
            }
            Outcome::Timeout => {
                let error = format!(
                    "the tool did not answer within {} seconds",
                    config.timeout_seconds
                );
                event.status = ToolStatus::TimedOut;
                event.error = Some(error.clone());
                json!({"error": error}).to_string()
            }
            Outcome::Network(reason) => {
                event.status = if webhooks::is_refusal(&reason) {
                    ToolStatus::Refused
                } else {
                    ToolStatus::Failed
                };
                event.error = Some(reason.clone());
                json!({"error": reason}).to_string()
            }
        };
        (event, content)
    }

    async fn run_function(
        &self,
        tool: &Snapshot,
        timeout: Duration,
        given: Map<String, Value>,
    ) -> (ToolEvent, String) {
        let id = EventId::new();
        let call = FunctionToolCall {
            workspace_id: self.facts.workspace_id,
            call_id: self.facts.call_id,
            agent_id: self.facts.agent_id,
            tool_id: tool.id,
            tool_name: tool.name.clone(),
            arguments: given.clone(),
        };
        let started = Instant::now();
        let answer =
            tool_call::send_tool_called(&self.store, &self.egress, &call, timeout, id).await;
        let mut event = ToolEvent {
            name: tool.name.clone(),
            tool_id: Some(tool.id.as_uuid()),
            arguments: Value::Object(given),
            status: ToolStatus::Succeeded,
            latency_ms: started.elapsed().as_millis() as u64,
            response_preview: None,
            raw_response_preview: None,
            status_code: None,
            error: None,
            delivery_id: None,
            at_ms: 0,
        };
        let sent = !matches!(
            answer,
            Err(ToolCallError::NoAgent | ToolCallError::NoWebhookUrl | ToolCallError::Store(_))
        );
        event.delivery_id = sent.then(|| id.as_uuid());
        let content = match answer {
            Ok(value) => {
                let text = value.to_string();
                event.response_preview = Some(shortened(&text));
                text
            }
            Err(error) => {
                event.status = match error {
                    ToolCallError::Timeout { .. } => ToolStatus::TimedOut,
                    ToolCallError::Refused { .. } => ToolStatus::Refused,
                    _ => ToolStatus::Failed,
                };
                if let ToolCallError::Status { status } = error {
                    event.status_code = Some(status);
                }
                let error = error.to_string();
                event.error = Some(error.clone());
                json!({"error": error}).to_string()
            }
        };
        (event, content)
    }
}

#[async_trait]
impl CallTools for Toolbox {
    fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    fn by_id(&self) -> std::collections::HashMap<String, ToolSpec> {
        self.tools
            .iter()
            .zip(&self.specs)
            .map(|(tool, spec)| (tool.id.to_string(), spec.clone()))
            .collect()
    }

    async fn run(&self, call: &ToolCall, parties: &CallParties) -> ToolRun {
        let refused = |error: String, tool_id: Option<ToolId>| ToolRun {
            content: json!({"error": error}).to_string(),
            event: ToolEvent {
                tool_id: tool_id.map(|id| id.as_uuid()),
                ..ToolEvent::at_once(
                    &call.name,
                    serde_json::from_str(&call.arguments)
                        .unwrap_or_else(|_| Value::String(call.arguments.clone())),
                    ToolStatus::Failed,
                    Some(error),
                )
            },
        };
        let Some(tool) = self.tools.iter().find(|t| t.name == call.name) else {
            return refused(format!("there is no tool named {:?}", call.name), None);
        };
        let given = match check_arguments(&call.arguments, &tool.required) {
            Ok(given) => given,
            Err(error) => return refused(error, Some(tool.id)),
        };
        let (event, content) = match &tool.kind {
            Kind::Webhook(config) => self.run_webhook(tool, config, &given, parties).await,
            Kind::Function { timeout } => self.run_function(tool, *timeout, given).await,
        };
        tracing::info!(
            call = %self.facts.call_id,
            tool = %tool.id,
            status = ?event.status,
            latency_ms = event.latency_ms,
            "a tool ran"
        );
        ToolRun { event, content }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_override_is_merged_as_a_patch() {
        let mut config = json!({"url": "https://a.example/x", "timeout_seconds": 5,
            "headers": {"A": "1", "B": "2"}});
        merge_patch(
            &mut config,
            &json!({"timeout_seconds": 9, "headers": {"B": null, "C": "3"}}),
        );
        assert_eq!(
            config,
            json!({"url": "https://a.example/x", "timeout_seconds": 9,
                   "headers": {"A": "1", "C": "3"}})
        );
    }

    #[test]
    fn arguments_are_checked_before_anything_is_sent() {
        let required = vec!["orderNumber".to_string()];
        assert!(check_arguments(r#"{"orderNumber": "A1"}"#, &required).is_ok());
        assert_eq!(
            check_arguments(r#"{"orderNumber": " "}"#, &required).unwrap_err(),
            "missing required arguments: orderNumber"
        );
        assert_eq!(
            check_arguments("[1]", &required).unwrap_err(),
            "the arguments are not a JSON object"
        );
        assert!(check_arguments("", &[]).unwrap().is_empty());
    }
}
