//! The launch preflight: what must hold before a campaign starts (and, checked again at every
//! evaluation, for it to keep running).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::limits::TrunkLimits;
use crate::window::CallingWindow;

/// What the preflight needs to know about the campaign's agent.
#[derive(Debug, Clone, Copy)]
pub struct AgentFacts {
    pub is_active: bool,
    pub max_call_duration_secs: Option<i64>,
}

/// A held phone number's status: a purchased number is `pending_requirements` until its
/// regulatory review completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NumberStatus {
    Active,
    PendingRequirements,
}

impl NumberStatus {
    pub const ALL: [NumberStatus; 2] = [Self::Active, Self::PendingRequirements];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::PendingRequirements => "pending_requirements",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

display_as_str!(NumberStatus);

/// What the preflight needs to know about the campaign's from-number.
#[derive(Debug, Clone)]
pub struct NumberFacts {
    pub is_active: bool,
    pub status: NumberStatus,
    pub number: String,
    /// The trunk that carries the number's calls, with its caps (the queue enforces them);
    /// `None` when no trunk's caps apply.
    pub trunk: Option<TrunkLimits>,
}

/// Everything a launch or resume preflight checks.
#[derive(Debug, Clone)]
pub struct Preflight<'a> {
    pub agent_id_set: bool,
    /// `None` when the id is set but no such agent exists in the workspace.
    pub agent: Option<AgentFacts>,
    pub from_number_id_set: bool,
    /// `None` when the id is set but no such number exists (or it was released).
    pub from_number: Option<NumberFacts>,
    pub window: &'a CallingWindow,
    pub now: DateTime<Utc>,
    pub starts_at: Option<DateTime<Utc>>,
    pub ends_at: Option<DateTime<Utc>>,
}

/// Why a campaign cannot start; each message names the problem and its fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PreflightProblem {
    #[error("agent_id is not set; assign an agent before launching")]
    NoAgent,
    #[error("the campaign's agent no longer exists; assign another agent")]
    AgentMissing,
    #[error("the campaign's agent is deactivated; assign an active agent")]
    AgentInactive,
    #[error(
        "the campaign's agent has no positive max_call_duration_secs; set a call duration cap on the agent"
    )]
    AgentNoDurationCap,
    #[error("from_phone_number_id is not set; assign an active phone number before launching")]
    NoFromNumber,
    #[error("the campaign's from-number no longer belongs to the workspace; assign another number")]
    FromNumberMissing,
    #[error(
        "the campaign's from-number {number} is not active (status {status}); assign an active number"
    )]
    FromNumberInactive {
        number: String,
        status: NumberStatus,
    },
    #[error("ends_at is in the past; move ends_at later")]
    EndedAlready,
    #[error("no reachable calling window before ends_at (or within 7 days); fix the calling hours")]
    NoReachableWindow,
}

impl PreflightProblem {
    /// What the engine records when the problem appears on a running campaign (which it moves
    /// to `paused_config`).
    pub fn config_problem(&self) -> ConfigProblem {
        match self {
            Self::NoAgent | Self::AgentMissing | Self::AgentInactive => {
                ConfigProblem::AgentUnavailable
            }
            Self::AgentNoDurationCap => ConfigProblem::AgentWithoutDurationCap,
            Self::NoFromNumber | Self::FromNumberMissing | Self::FromNumberInactive { .. } => {
                ConfigProblem::FromNumberInactive
            }
            Self::EndedAlready | Self::NoReachableWindow => ConfigProblem::NoReachableCallingWindow,
        }
    }
}

/// Why a running campaign was moved to `paused_config`, in the words `last_tick_result` uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigProblem {
    AgentUnavailable,
    AgentWithoutDurationCap,
    FromNumberInactive,
    NoReachableCallingWindow,
}

impl ConfigProblem {
    pub const ALL: [ConfigProblem; 4] = [
        Self::AgentUnavailable,
        Self::AgentWithoutDurationCap,
        Self::FromNumberInactive,
        Self::NoReachableCallingWindow,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::AgentUnavailable => "agent_unavailable",
            Self::AgentWithoutDurationCap => "agent_without_duration_cap",
            Self::FromNumberInactive => "from_number_inactive",
            Self::NoReachableCallingWindow => "no_reachable_calling_window",
        }
    }
}

impl Preflight<'_> {
    /// Checks in the order a person would fix them: agent, number, then hours.
    pub fn check(&self) -> Result<(), PreflightProblem> {
        if !self.agent_id_set {
            return Err(PreflightProblem::NoAgent);
        }
        let agent = self.agent.ok_or(PreflightProblem::AgentMissing)?;
        if !agent.is_active {
            return Err(PreflightProblem::AgentInactive);
        }
        if agent.max_call_duration_secs.is_none_or(|secs| secs <= 0) {
            return Err(PreflightProblem::AgentNoDurationCap);
        }
        if !self.from_number_id_set {
            return Err(PreflightProblem::NoFromNumber);
        }
        let number = self
            .from_number
            .as_ref()
            .ok_or(PreflightProblem::FromNumberMissing)?;
        if !number.is_active || number.status != NumberStatus::Active {
            return Err(PreflightProblem::FromNumberInactive {
                number: number.number.clone(),
                status: number.status,
            });
        }
        if self.ends_at.is_some_and(|end| end <= self.now) {
            return Err(PreflightProblem::EndedAlready);
        }
        if !self
            .window
            .reachable(self.now, self.starts_at, self.ends_at)
        {
            return Err(PreflightProblem::NoReachableWindow);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_statuses_round_trip() {
        for status in NumberStatus::ALL {
            assert_eq!(NumberStatus::parse(status.as_str()), Some(status));
            assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
        }
        assert_eq!(NumberStatus::parse("released"), None);
    }

    fn preflight(window: &CallingWindow) -> Preflight<'_> {
        Preflight {
            agent_id_set: true,
            agent: Some(AgentFacts {
                is_active: true,
                max_call_duration_secs: Some(300),
            }),
            from_number_id_set: true,
            from_number: Some(NumberFacts {
                is_active: true,
                status: NumberStatus::Active,
                number: "+972501234567".into(),
                trunk: None,
            }),
            window,
            now: "2026-11-21T10:00:00Z".parse().unwrap(),
            starts_at: None,
            ends_at: None,
        }
    }

    #[test]
    fn preflight_names_each_problem() {
        let window = CallingWindow::default_in(chrono_tz::UTC);
        assert_eq!(preflight(&window).check(), Ok(()));
        let mut p = preflight(&window);
        p.agent_id_set = false;
        assert_eq!(p.check(), Err(PreflightProblem::NoAgent));
        let mut p = preflight(&window);
        p.agent = Some(AgentFacts {
            is_active: true,
            max_call_duration_secs: None,
        });
        assert_eq!(p.check(), Err(PreflightProblem::AgentNoDurationCap));
        let mut p = preflight(&window);
        p.agent = Some(AgentFacts {
            is_active: true,
            max_call_duration_secs: Some(0),
        });
        assert_eq!(p.check(), Err(PreflightProblem::AgentNoDurationCap));
        let mut p = preflight(&window);
        p.from_number = Some(NumberFacts {
            is_active: true,
            status: NumberStatus::PendingRequirements,
            number: "+972501234567".into(),
            trunk: None,
        });
        let err = p.check().unwrap_err();
        assert!(err.to_string().contains("pending_requirements"));
        assert_eq!(err.config_problem().as_str(), "from_number_inactive");
        let mut p = preflight(&window);
        p.ends_at = Some(p.now - chrono::Duration::minutes(1));
        assert_eq!(p.check(), Err(PreflightProblem::EndedAlready));
        let mut p = preflight(&window);
        p.ends_at = Some(p.now + chrono::Duration::minutes(1));
        // 10:00 UTC is inside the default 09:00-20:00 window.
        assert_eq!(p.check(), Ok(()));
        let late = CallingWindow::from_json(
            &serde_json::json!({"timezone": "UTC", "start": "18:00", "end": "19:00"}),
        )
        .unwrap();
        let mut p = preflight(&late);
        p.ends_at = Some(p.now + chrono::Duration::hours(2));
        assert_eq!(p.check(), Err(PreflightProblem::NoReachableWindow));
    }
}
