//! Flow agents at run time: a flow's nodes read and checked ([`read`], [`graph`]), a call's walk
//! through them ([`run`]), the routing of an integration's result ([`routing`]) and the
//! mustache tokens of its texts ([`tokens`]).

pub mod director;
mod edges;
pub mod graph;
mod read;
pub mod routing;
pub mod run;
#[cfg(test)]
pub(crate) mod tests;
pub mod tokens;

pub use director::FlowDirector;
pub use graph::{Flow, GraphIssue};
pub use read::{arg, read};
pub use run::{Dispatch, FlowRun, Outcome, PathStep, Step};
