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

display_as_str!(CallStatus, CallDirection, EndReason);

/// Priority of a call in the queue: higher goes first, FIFO within one priority.
pub const PRIORITY_MIN: i64 = 0;
pub const PRIORITY_MAX: i64 = 10;
/// The priority of campaign calls and of direct calls that do not set one.
pub const PRIORITY_DEFAULT: i64 = 5;

/// Declares [`EndReason`]: each variant with its stored name and what it means, once.
macro_rules! end_reasons {
    ($($(#[doc = $doc:literal])+ $variant:ident = $name:literal,)+) => {
        /// Why a call ended: its record's `end_reason`. The conversation's own reasons (an
        /// answered call), the dial's (a call never answered), and the engine's.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum EndReason {
            $($(#[doc = $doc])+ #[serde(rename = $name)] $variant,)+
        }

        impl EndReason {
            pub const ALL: &'static [EndReason] = &[$(Self::$variant,)+];

            /// Its name, as the call record keeps it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)+
                }
            }

            /// What it means, in a sentence.
            pub fn meaning(self) -> &'static str {
                match self {
                    $(Self::$variant => concat!($($doc),+).trim_ascii(),)+
                }
            }
        }
    };
}

end_reasons! {
    /// The caller of an inbound call hung up.
    CallerHangup = "caller_hangup",
    /// The callee of an outbound call hung up.
    CalleeHangup = "callee_hangup",
    /// The agent hung up: its model's `end_call`, after saying goodbye.
    AgentHangup = "agent_hangup",
    /// The caller cancelled before the call was set up.
    CallerCancelled = "caller_cancelled",
    /// Our answer was never acknowledged.
    AckTimeout = "ack_timeout",
    /// The peer stopped refreshing the session.
    SessionExpired = "session_expired",
    /// The call's signalling failed.
    SignallingError = "signalling_error",
    /// Neither side spoke for the agent's `silence_timeout_secs`.
    SilenceTimeout = "silence_timeout",
    /// The call reached its cap on length.
    MaxDuration = "max_duration",
    /// The service was stopped during the call.
    Shutdown = "shutdown",
    /// A machine answered and the agent has no voicemail message: it hung up at once.
    AnsweringMachine = "answering_machine",
    /// A machine answered; the agent left its voicemail message after the beep.
    VoicemailLeft = "voicemail_left",
    /// A machine answered but no beep came within the listening window: nothing was left.
    VoicemailNoBeep = "voicemail_no_beep",
    /// A flow's transfer node handed the call to its destination.
    Transferred = "transferred",
    /// The agent needed the chat model (to answer, decide or fill in a value) and none is
    /// configured: it said so and hung up.
    ModelNotConfigured = "model_not_configured",
    /// The simulated carrier's answered call ended.
    Hangup = "hangup",
    /// Nobody answered before our ring timeout.
    RingTimeout = "ring_timeout",
    /// The far end answered busy (486, 600).
    Busy = "busy",
    /// The far end did not answer (408, 480, 487).
    NoAnswer = "no_answer",
    /// The number does not exist (404, 410, 484, 485, 604).
    InvalidNumber = "invalid_number",
    /// The far end refused the call (403, 603, 607, 608, other 4xx-6xx).
    Rejected = "rejected",
    /// The trunk refused our credentials or media (401/407 after our answer, 488, 415).
    TrunkConfiguration = "trunk_configuration",
    /// The carrier failed (5xx from the last gateway).
    CarrierError = "carrier_error",
    /// No gateway answered anything.
    NoResponse = "no_response",
    /// No gateway could be reached.
    TransportError = "transport_error",
    /// The call could not be sent from here.
    LocalError = "local_error",
    /// No trunk serves the number.
    NoTrunk = "no_trunk",
    /// The call's trunk could not be read.
    RouteError = "route_error",
    /// The service runs with no carrier (`--carrier none`).
    NoCarrier = "no_carrier",
    /// The service died during the call (it is ended so at the next start), or its agent failed.
    Interrupted = "interrupted",
    /// The campaign was stopped or archived while the call was queued.
    CampaignClosed = "campaign_closed",
    /// The flow simulator's run reached its time limit.
    TimeLimit = "time_limit",
}

impl EndReason {
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|v| v.as_str() == s)
    }
}

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
        for reason in EndReason::ALL {
            assert_eq!(EndReason::parse(reason.as_str()), Some(*reason));
            assert_eq!(serde_json::to_value(reason).unwrap(), reason.as_str());
            assert!(reason.meaning().ends_with('.'), "{reason}");
        }
        assert_eq!(EndReason::parse("Busy"), None);
        assert_eq!(CallStatus::parse("answered"), None);
        assert_eq!(CallDirection::parse("Outbound"), None);
    }
}
