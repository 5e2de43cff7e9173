//! Switchboard: a self-hosted telephony and campaign runtime for AI voice agents.
//!
//! The crate is cut in layers, each a folder; a layer imports only the layers below it.
//!
//! - Front doors, which only translate: [`http`] (the REST control plane, its discovery
//!   documents and its gate), [`dashboard`] (the operator's pages at `/app`) and [`cli`] (the
//!   `switchboard` command line).
//! - [`app`]: the service's operations (what a campaign launch, a PATCH, an agent save, a call
//!   placement or a key creation do and refuse), with their own error type; the three doors
//!   call them alike.
//! - [`runtime`]: what carries calls: the engine wired to the store, inbound and outbound SIP
//!   calls, the agent's tools and integrations on a call, flows' director, background jobs and
//!   the end-of-call analysis, agent webhooks' dispatcher, the flow simulator.
//! - [`store`]: the SQLite store, every query scoped to one workspace; it returns its own typed
//!   rows and imports nothing above it.
//! - [`edge`]: clients of the outside world: model and speech vendors, Google, webhook
//!   delivery, and the outbound URL policy they all obey.
//! - [`domain`]: the service's own values beneath the store: API keys and scopes, sealed
//!   secrets, signatures, trunks as managed, payment methods.
//!
//! Beside them, [`config`] (the service's settings) and [`service`] ([`serve`]: the whole
//! service on the HTTP listener and SIP sockets the caller binds, until a shutdown future
//! resolves, so tests run the real service in-process on port 0).

pub mod app;
pub mod cli;
pub mod config;
pub mod dashboard;
pub mod domain;
pub mod edge;
pub mod http;
pub mod runtime;
pub mod service;
pub mod store;

pub use config::Config;
pub use service::serve;
pub use store::Store;
