//! Calls: status and direction.
//!
//! ```text
//! queued ──dispatched by the call queue──▶ dialing ──▶ ended (with an outcome)
//!   └──campaign stopped or archived, or cancelled──▶ cancelled
//! ```
//! **Invariant:** a call row exists (`queued`) before it is handed to the queue, and is marked
//! `dialing` before the dialer is asked to place it. After a crash a `dialing` call is ended as
//! `infra_error` with end reason `interrupted`; it is never placed again.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    /// Waiting in the call queue.
    Queued,
    /// Placed: the INVITE is on its way (outbound).
    Dialing,
    /// The far end rings (a 180 or 183 came back).
    Ringing,
    /// Answered: the call is connected.
    InProgress,
    Ended,
    Cancelled,
}

impl CallStatus {
    pub const ALL: [CallStatus; 6] = [
        Self::Queued,
        Self::Dialing,
        Self::Ringing,
        Self::InProgress,
        Self::Ended,
        Self::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Dialing => "dialing",
            Self::Ringing => "ringing",
            Self::InProgress => "in_progress",
            Self::Ended => "ended",
            Self::Cancelled => "cancelled",
        }
    }

    /// Placed and not yet over: it holds its slot.
    pub fn is_live(self) -> bool {
        matches!(self, Self::Dialing | Self::Ringing | Self::InProgress)
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallDirection {
    Outbound,
    Inbound,
}

impl CallDirection {
    pub const ALL: [CallDirection; 2] = [Self::Outbound, Self::Inbound];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Outbound => "outbound",
            Self::Inbound => "inbound",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

display_as_str!(CallStatus, CallDirection);

/// Priority of a call in the queue: higher goes first, FIFO within one priority.
pub const PRIORITY_MIN: i64 = 0;
pub const PRIORITY_MAX: i64 = 10;
/// The priority of campaign calls and of direct calls that do not set one.
pub const PRIORITY_DEFAULT: i64 = 5;

/// End reasons written by the engine (the dialer adds its own, such as `hangup`).
pub const END_INTERRUPTED: &str = "interrupted";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_directions_round_trip() {
        for status in CallStatus::ALL {
            assert_eq!(CallStatus::parse(status.as_str()), Some(status));
            assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
        }
        for direction in CallDirection::ALL {
            assert_eq!(CallDirection::parse(direction.as_str()), Some(direction));
            assert_eq!(serde_json::to_value(direction).unwrap(), direction.as_str());
        }
        assert_eq!(CallStatus::parse("answered"), None);
        assert_eq!(CallDirection::parse("Outbound"), None);
    }
}
