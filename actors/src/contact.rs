//! Contact states and call outcomes.
//!
//! ```text
//! pending ──admit──▶ dialing ──call ends──▶ awaiting_disposition ──▶ scheduled ──admit──▶ dialing …
//!                                                                 ├─▶ retired    (stop disposition)
//!                                                                 └─▶ exhausted  (max_attempts)
//! any non-terminal ──do-not-call / invalid / campaign archived or stopped──▶ excluded
//! ```
//! **Invariant:** `retired`, `exhausted` and `excluded` are terminal: nothing revives them.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContactState {
    Pending,
    Dialing,
    AwaitingDisposition,
    Scheduled,
    Retired,
    Exhausted,
    Excluded,
}

impl ContactState {
    pub const ALL: [ContactState; 7] = [
        Self::Pending,
        Self::Dialing,
        Self::AwaitingDisposition,
        Self::Scheduled,
        Self::Retired,
        Self::Exhausted,
        Self::Excluded,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Dialing => "dialing",
            Self::AwaitingDisposition => "awaiting_disposition",
            Self::Scheduled => "scheduled",
            Self::Retired => "retired",
            Self::Exhausted => "exhausted",
            Self::Excluded => "excluded",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.as_str() == s)
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Retired | Self::Exhausted | Self::Excluded)
    }
}

/// Why a contact was excluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExclusionReason {
    DoNotCall,
    InvalidNumber,
    CampaignArchived,
    CampaignStopped,
}

impl ExclusionReason {
    pub const ALL: [ExclusionReason; 4] = [
        Self::DoNotCall,
        Self::InvalidNumber,
        Self::CampaignArchived,
        Self::CampaignStopped,
    ];

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::DoNotCall => "do_not_call",
            Self::InvalidNumber => "invalid_number",
            Self::CampaignArchived => "campaign_archived",
            Self::CampaignStopped => "campaign_stopped",
        }
    }
}

/// The system outcome every attempt ends with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallOutcome {
    Answered,
    NoAnswer,
    Busy,
    Voicemail,
    /// Number-level failure: invalid, rejected.
    Failed,
    /// Our side or the carrier's: 5xx, timeouts.
    InfraError,
}

impl CallOutcome {
    pub const ALL: [CallOutcome; 6] = [
        Self::Answered,
        Self::NoAnswer,
        Self::Busy,
        Self::Voicemail,
        Self::Failed,
        Self::InfraError,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Answered => "answered",
            Self::NoAnswer => "no_answer",
            Self::Busy => "busy",
            Self::Voicemail => "voicemail",
            Self::Failed => "failed",
            Self::InfraError => "infra_error",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == s)
    }
}

display_as_str!(ContactState, ExclusionReason, CallOutcome);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_and_terminal_states_are_the_three_final_ones() {
        for state in ContactState::ALL {
            assert_eq!(ContactState::parse(state.as_str()), Some(state));
            assert_eq!(serde_json::to_value(state).unwrap(), state.as_str());
        }
        let terminal: Vec<_> = ContactState::ALL
            .into_iter()
            .filter(|s| s.is_terminal())
            .collect();
        assert_eq!(
            terminal,
            [
                ContactState::Retired,
                ContactState::Exhausted,
                ContactState::Excluded
            ]
        );
        assert_eq!(ContactState::parse("done"), None);
    }

    #[test]
    fn outcomes_serialize_as_their_names() {
        for outcome in CallOutcome::ALL {
            assert_eq!(CallOutcome::parse(outcome.as_str()), Some(outcome));
            assert_eq!(serde_json::to_value(outcome).unwrap(), outcome.as_str());
        }
        assert_eq!(CallOutcome::parse("Answered"), None);
    }

    #[test]
    fn exclusion_reasons_round_trip() {
        for reason in ExclusionReason::ALL {
            assert_eq!(ExclusionReason::parse(reason.as_str()), Some(reason));
            assert_eq!(serde_json::to_value(reason).unwrap(), reason.as_str());
        }
        assert_eq!(ExclusionReason::parse("opted_out"), None);
    }
}
