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
//! - `edge::webhooks::signed` is the one signed POST both use.
//! - [`turns`] raises `transcript.final` as a call's turns become final, in order.
//!
//! **Invariant:** every request goes through the outbound URL policy, checked at send time;
//! the signing secret, the agent's headers and the URL's query never reach a log.

pub mod dispatcher;
pub mod tool_call;
pub mod turns;

pub use crate::edge::webhooks::signed::{SendOutcome, SignedPost};
pub use crate::store::enqueue_event;
pub use dispatcher::{DispatcherSettings, backoff};
pub use tool_call::{FunctionToolCall, ToolCallError, call_function_tool};
