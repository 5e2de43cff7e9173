//! The providers of flows' integration_call nodes: Google Calendar ([`calendar`]) and Gmail
//! ([`gmail`]).
//!
//! Their REST clients and the OAuth refresh come with the runner of the `Integrations` port;
//! what is here already is what the spec fixes about their answers.

pub mod calendar;
pub mod gmail;
