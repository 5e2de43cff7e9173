//! What carries calls, beneath the application layer: it uses the store and the edge, and
//! implements the ports of `switchboard-actors` over them.
//!
//! - [`engine`]: the campaign engine wired to the store and the configured carrier.
//! - [`inbound`]: inbound SIP calls: routing slugs to endpoints and agents, and their records.
//! - [`outbound`]: outbound SIP calls: the dialer's directory and INVITE journal.
//! - [`vendors`]: the vendors a call converses with, as the settings choose them.
//! - [`call_tools`]: the agent's tools on a call, snapshotted when it starts, run for its model.
//! - [`integrations`]: what flows' integration_call nodes dispatch to.
//! - [`flows`]: the director a flow agent's call runs under.
//! - [`lead_memory`]: what the workspace knows of the other party, for the model.
//! - [`live_turns`]: each live call's latest turn, for the dashboard's live page.
//! - [`agent_webhooks`]: agents' call events delivered from the store's outbox.
//! - [`charges`]: debits of a workspace's balance for calls and purchases.
//! - [`jobs`]: background work: activating purchased numbers, end-of-call analyses.
//! - [`analysis`]: the end-of-call analysis of answered calls.
//! - [`node_watch`]: this node's heartbeat, and the calls of nodes found gone ended.
//! - [`retry`]: a call's end written however long the database is away.
//! - [`schedule`]: work run on an interval until shutdown.
//! - [`simulator`]: the flow simulator: a flow agent on the text line.
//! - [`scripted_model`]: the simulator's model played from the choices a request scripts.
//! - [`simulation`]: the engine and store against the simulated carrier under virtual time.

pub mod agent_webhooks;
pub mod analysis;
pub mod call_tools;
pub mod charges;
pub mod engine;
pub mod flows;
pub mod inbound;
pub mod integrations;
pub mod jobs;
pub mod lead_memory;
pub mod live_turns;
pub mod node_watch;
pub mod outbound;
pub mod retry;
pub mod schedule;
pub mod scripted_model;
pub mod simulation;
pub mod simulator;
pub mod vendors;
