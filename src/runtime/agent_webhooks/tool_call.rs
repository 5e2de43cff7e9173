//! `tool.called`: a `function` tool has no URL of its own, so the agent's webhook answers it.
//! [`call_function_tool`] POSTs the signed envelope once, waits for the answer, and returns its
//! JSON body as the tool's result. Like webhook tools it is never retried (the caller is on the
//! line); the exchange is recorded as a delivery (`delivered` or `failed`) for the API to show,
//! and the dispatcher never picks it up.
//!
//! It is sent whenever a function tool runs, whether or not the agent lists `tool.called` in
//! its `webhook_events`: the answer is the tool's result.

use std::time::Duration;

use serde_json::{Map, Value};
use switchboard_actors::events::{Envelope, EventKind, ToolCalled};
use switchboard_actors::ids::{AgentId, CallId, EventId, ToolId, WorkspaceId};

use crate::edge::egress::Egress;
use crate::edge::webhooks::signed::{SendOutcome, SignedPost, send};
use crate::store::{AttemptRecord, Store, StoreError};

/// The largest answer accepted as a tool's result.
pub const ANSWER_LIMIT: usize = 64 * 1024;

/// A function tool the agent called during a call.
#[derive(Debug, Clone)]
pub struct FunctionToolCall {
    pub workspace_id: WorkspaceId,
    pub call_id: CallId,
    pub agent_id: AgentId,
    pub tool_id: ToolId,
    pub tool_name: String,
    pub arguments: Map<String, Value>,
}

/// Why a function tool has no result.
#[derive(Debug, thiserror::Error)]
pub enum ToolCallError {
    #[error("the agent does not exist")]
    NoAgent,
    #[error("the agent has no webhook_url: function tools are answered by the agent's webhook")]
    NoWebhookUrl,
    #[error("the agent's webhook_url is not allowed: {reason}")]
    Refused { reason: String },
    #[error("the agent's webhook did not answer within {} seconds", .timeout.as_secs_f64())]
    Timeout { timeout: Duration },
    #[error("the agent's webhook could not be reached: {reason}")]
    Network { reason: String },
    #[error("the agent's webhook answered HTTP {status}")]
    Status { status: u16 },
    #[error("the agent's webhook answered more than {ANSWER_LIMIT} bytes")]
    TooLarge,
    #[error("the agent's webhook answer is not JSON: {reason}")]
    NotJson { reason: String },
    #[error("the store failed: {0}")]
    Store(#[from] StoreError),
}

/// Sends `tool.called` for `call` to its agent's webhook once, waiting at most `timeout`, and
/// returns the answer's JSON body (an empty body is `null`).
pub async fn call_function_tool(
    store: &Store,
    egress: &Egress,
    call: &FunctionToolCall,
    timeout: Duration,
) -> Result<Value, ToolCallError> {
    send_tool_called(store, egress, call, timeout, EventId::new()).await
}

/// [`call_function_tool`] with the event's id chosen by the caller: the id of the delivery
/// it records (none is recorded when the agent or its webhook URL is missing).
pub async fn send_tool_called(
    store: &Store,
    egress: &Egress,
    call: &FunctionToolCall,
    timeout: Duration,
    id: EventId,
) -> Result<Value, ToolCallError> {
    let agent = store
        .agent(call.workspace_id, call.agent_id)
        .await?
        .ok_or(ToolCallError::NoAgent)?;
    let url = agent.webhook_url.ok_or(ToolCallError::NoWebhookUrl)?;
    let data = ToolCalled {
        call_id: call.call_id,
        tool_id: call.tool_id,
        tool_name: call.tool_name.clone(),
        arguments: call.arguments.clone(),
    };
    let envelope = Envelope {
        id,
        kind: EventKind::ToolCalled,
        created_at: store.now(),
        call_id: call.call_id,
        data: serde_json::to_value(&data).unwrap_or(Value::Null),
    };
    let body = serde_json::to_vec(&envelope).unwrap_or_default();
    let (secret, _) = store.webhook_signing_secret(call.workspace_id).await?;
    let outcome = send(
        egress,
        SignedPost {
            url: &url,
            event_id: envelope.id,
            kind: EventKind::ToolCalled.as_str(),
            body: &body,
            secret: &secret,
            headers: &agent.webhook_headers,
            timestamp: store.now().timestamp(),
            timeout,
            read_limit: ANSWER_LIMIT + 1,
        },
    )
    .await;
    let result = match outcome.clone() {
        SendOutcome::Delivered { body, .. } if body.len() > ANSWER_LIMIT => {
            Err(ToolCallError::TooLarge)
        }
        SendOutcome::Delivered { body, .. } if body.iter().all(u8::is_ascii_whitespace) => {
            Ok(Value::Null)
        }
        SendOutcome::Delivered { body, .. } => {
            serde_json::from_slice(&body).map_err(|e| ToolCallError::NotJson {
                reason: e.to_string(),
            })
        }
        SendOutcome::Status { status } => Err(ToolCallError::Status { status }),
        SendOutcome::Refused(reason) => Err(ToolCallError::Refused { reason }),
        SendOutcome::Timeout => Err(ToolCallError::Timeout { timeout }),
        SendOutcome::Network(reason) => Err(ToolCallError::Network { reason }),
    };
    let record = AttemptRecord {
        at: store.now(),
        status_code: outcome.status_code(),
        error: result.as_ref().err().map(ToString::to_string),
        next_attempt_at: None,
    };
    if let Err(error) = store
        .record_tool_call(
            (call.workspace_id, call.agent_id, call.call_id),
            &url,
            &envelope,
            &record,
        )
        .await
    {
        tracing::warn!(event = %envelope.id, %error, "a tool.called exchange could not be recorded");
    }
    match &result {
        Ok(_) => {
            tracing::info!(event = %envelope.id, tool = %call.tool_id, "function tool answered")
        }
        Err(error) => {
            tracing::warn!(event = %envelope.id, tool = %call.tool_id, %error, "function tool failed")
        }
    }
    result
}
