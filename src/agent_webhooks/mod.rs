//! Agent webhooks: events about an agent's calls, sent to the agent's `webhook_url`, signed
//! with the workspace's secret.
//!
//! - The kinds, the envelope and their data are `switchboard_actors::events`.
//! - An event is a row of the outbox (`webhook_deliveries`), written in the same store
//!   transaction as the change that causes it (`store::webhooks`); [`enqueue_event`] is how
//!   other parts of the service raise `call.analyzed` and `transcript.final`.
//! - [`dispatcher`] delivers the rows: a signed POST through the outbound URL policy, retried
//!   with exponential backoff for the retry window, in order per call.
//! - [`tool_call`] sends `tool.called` for a `function` tool: once, synchronously, and its
//!   answer is the tool's result.
//! - [`send`] is the one signed POST both use.
//! - [`turns`] raises `transcript.final` as a call's turns become final, in order.
//!
//! **Invariant:** every request goes through the outbound URL policy, checked at send time;
//! the signing secret, the agent's headers and the URL's query never reach a log.

pub mod dispatcher;
pub mod send;
pub mod tool_call;
pub mod turns;

pub use crate::store::enqueue_event;
pub use dispatcher::{DispatcherSettings, backoff};
pub use send::{SendOutcome, SignedPost};
pub use tool_call::{FunctionToolCall, ToolCallError, call_function_tool};

/// The signature header: `v1=<hex HMAC-SHA256 over "{timestamp}.{body}">`.
pub const SIGNATURE_HEADER: &str = "X-Switchboard-Signature";
/// The Unix time (seconds) the signature covers.
pub const TIMESTAMP_HEADER: &str = "X-Switchboard-Timestamp";
/// The event kind, e.g. `call.ended`.
pub const EVENT_HEADER: &str = "X-Switchboard-Event";
/// The event's id (the same on every attempt).
pub const DELIVERY_HEADER: &str = "X-Switchboard-Delivery";
