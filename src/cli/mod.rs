//! The `switchboard` command line: `serve`, and the operator commands for what the spec keeps
//! dashboard-only (workspaces and their webhook signing secrets, API keys, owned numbers,
//! credits). Every command takes
//! `--database-url` (default `sqlite://switchboard.db`, created if missing). `nodes.rs` is
//! `switchboard nodes`.

pub mod args;
pub mod nodes;
pub mod operator;
pub mod serve;

pub use args::*;
pub use operator::run_operator;
pub use serve::{ListenOrNone, PortRange, ServeArgs};
