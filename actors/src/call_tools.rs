//! The workspace's tools on a call, as a port: the functions a conversing agent's model may
//! call besides the built-in ones, and running one of them once.
//!
//! The service implements it ([`CallTools`]) with the agent's attached, active tools as they
//! were when the call started (a later edit applies to new calls only): webhook tools are
//! delivered through the outbound URL policy, `function` tools are answered by the agent's
//! webhook. The call actor decides *whether* a call is run (never for a stale generation);
//! the port only runs it.

use async_trait::async_trait;

use crate::conversation::ToolEvent;
use crate::vendors::{ToolCall, ToolSpec};

/// The two parties of the call a tool runs for, as the call knows them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallParties {
    /// The calling party: the caller inbound, our number outbound.
    pub from: String,
    /// The called party: the callee's number outbound, the endpoint's slug inbound.
    pub to: String,
}

/// How one run went: what the call records, and what the model is told.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRun {
    /// The run as the call records it (`at_ms` is set by the call).
    pub event: ToolEvent,
    /// The result the model reads: the tool's answer, or an error it can act on.
    pub content: String,
}

/// The tools of one call.
#[async_trait]
pub trait CallTools: Send + Sync + 'static {
    /// The functions offered to the model, in the agent's execution order.
    fn specs(&self) -> &[ToolSpec];

    /// The functions by their tools' ids (a flow's tool_call nodes name tools by id).
    fn by_id(&self) -> std::collections::HashMap<String, ToolSpec> {
        std::collections::HashMap::new()
    }

    /// Runs the model's `call` once. Never fails: a refused, failed or timed-out run is a
    /// [`ToolRun`] saying so.
    async fn run(&self, call: &ToolCall, parties: &CallParties) -> ToolRun;
}

/// What an integration_call node's run came back with: its outcome (a result's sanitized
/// view, or a hard failure) and its record.
#[derive(Debug, Clone)]
pub struct IntegrationRun {
    pub outcome: crate::flow::Outcome,
    pub event: ToolEvent,
}

/// Runs a flow's integrations (a calendar, an email account) for a call.
#[async_trait]
pub trait Integrations: Send + Sync + 'static {
    /// Runs `action` of `provider` on the integration `integration_id` once, for the flow's
    /// node `node_id`. Never fails: a failure is an outcome.
    async fn run(
        &self,
        node_id: &str,
        integration_id: &str,
        provider: &str,
        action: &str,
        arguments: &serde_json::Map<String, serde_json::Value>,
    ) -> IntegrationRun;
}
