//! Agents: what saving one does and refuses. Every write is checked as a whole agent: the sent
//! keys are laid over the stored agent (or the defaults on create) and the result must satisfy
//! every bound documented on `store::Agent`.
//!
//! - [`rules`]: the writable fields and their bounds; a body read and laid over an agent;
//! - [`validate`]: the agent as it will be saved, checked against every rule;
//! - [`save`]: creation and PATCH, with the flow's checks and its versions.

pub mod rules;
pub mod save;
pub mod validate;
