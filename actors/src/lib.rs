//! `switchboard-actors`: Switchboard's domain model and its actor runtime.
//!
//! - [`ids`]: typed UUID identifiers for every resource.
//! - [`money`]: `Cents`, the one money type where amounts are computed.
//! - [`phone`]: E.164 phone numbers, parsed from international or national forms.
//! - [`campaign`]: campaign status, its transition table, launch preflight and the rules and
//!   defaults of every campaign setting.
//! - [`window`]: calling windows (days and hours in a time zone), DST-correct.
//! - [`contact`]: contact states and call outcomes.
//! - [`call`]: call status, direction and priority.
//! - [`clock`]: the injectable clock every engine decision reads.
//! - [`policy`]: the engine's rules as pure functions (settlement, costs, zones).
//! - [`pacing`]: the pacing gates as pure functions: why a campaign admits nobody now, why a
//!   contact is not dialled now, and what an evaluation records.
//! - [`ports`]: what the engine needs from outside: the store and the dialer.
//! - [`engine`]: the ractor runtime: supervisor, campaign and contact actors, call queue, calls.
//! - [`slug`]: SIP endpoint slugs: the one rule for prefixes and drawn slugs.
//! - [`sim`]: the simulated carrier.
//! - [`inbound`]: the call actor of an answered inbound SIP call and its agent.
//! - [`flow`]: flow agents at run time: the node graph, a call's walk through it, the routing
//!   of integration results.
//! - [`endpoint`]: SIP endpoint actors: one endpoint's source filter, live calls, cap and
//!   `last_call_at`.
//! - [`vendors`]: the model vendors' ports: speech to text and streamed chat completions.
//! - [`events`]: agent webhook events: their kinds, the envelope, and their data.
//!
//! **Invariant:** this crate does no HTTP and no SQL. Storage and dialing are ports (traits) that
//! the service implements.

/// `Display` for types that name a closed set of values: each writes its `as_str`.
macro_rules! display_as_str {
    ($($t:ty),+ $(,)?) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    )+};
}

pub mod agent;
pub mod call;
pub mod call_tools;
pub mod campaign;
pub mod clock;
pub mod contact;
pub mod conversation;
pub mod endpoint;
pub mod engine;
pub mod events;
pub mod flow;
pub mod ids;
pub mod inbound;
pub mod limits;
pub mod money;
pub mod pacing;
pub mod phone;
pub mod policy;
pub mod ports;
pub mod sim;
pub mod sip_dialer;
pub mod slug;
pub mod turns;
pub mod vendors;
pub mod window;
