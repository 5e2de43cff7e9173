//! `switchboard-actors`: Switchboard's domain model, and (with the engine) its actor runtime.
//!
//! - [`ids`]: typed UUID identifiers for every resource.
//! - [`phone`]: E.164 phone numbers, parsed from international or national forms.
//! - [`campaign`]: campaign status, its transition table, launch preflight and the rules and
//!   defaults of every campaign setting.
//! - [`window`]: calling windows (days and hours in a time zone), DST-correct.
//! - [`contact`]: contact states and call outcomes.
//!
//! **Invariant:** this crate does no HTTP and no SQL. Storage and dialing are ports (traits) that
//! the service implements.

pub mod campaign;
pub mod contact;
pub mod ids;
pub mod phone;
pub mod window;
