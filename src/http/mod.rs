//! The REST control plane. Each resource module exposes `router()`, an `OpenApiRouter` whose
//! handlers declare method, path, scope and summary in `#[utoipa::path]`; [`router`] merges
//! them, derives the route table and discovery documents from the result, and puts the gate
//! (auth, scopes, rate limit) in front of everything.
//!
//! **Invariant:** handlers are thin: parse into valid types, call the application layer (or the
//! store, for plain reads), serialize. Only this layer knows status codes and JSON error
//! bodies.

pub mod access;
pub mod error;
pub mod extract;
pub mod gate;
pub mod openapi;
pub mod prometheus;
pub mod router;
pub mod routes;
pub mod state;
pub mod table;

pub mod affiliates;
pub mod agents;
pub mod billing;
pub mod call_windows;
pub mod calls;
pub mod campaigns;
pub mod carrier_accounts;
pub mod dispositions;
pub mod dnc;
pub mod flow_test;
pub mod integrations;
pub mod leads;
pub mod phone_numbers;
pub mod recordings;
pub mod shared_links;
pub mod sip_endpoints;
pub mod tools;
pub mod webhooks;
