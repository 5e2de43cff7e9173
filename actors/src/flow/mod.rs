//! Flow agents: a flow's typed form ([`node`], what is stored and shown), read from JSON with
//! every check of a save ([`read`]), built into the graph a call runs ([`compile`], [`graph`]),
//! a call's walk through it ([`run`]), the routing of an integration's result ([`routing`]) and
//! the mustache tokens of its texts ([`tokens`]).

mod compile;
pub mod director;
mod edges;
pub mod graph;
mod keys;
pub mod needs;
pub mod node;
pub mod read;
pub mod routing;
pub mod run;
#[cfg(test)]
pub(crate) mod tests;
pub mod tokens;
#[cfg(test)]
mod typed_tests;

pub use director::FlowDirector;
pub use graph::{Flow, GraphIssue};
pub use needs::ModelNeed;
pub use node::{FlowConfig, FlowMetadata, FlowNode, NodePosition};
pub use read::{FieldError, Read, read};
pub use run::{Dispatch, FlowRun, Outcome, PathStep, Step};
