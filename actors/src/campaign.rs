//! Campaigns: status and its transition table, launch preflight, and the rules and defaults of
//! every campaign setting.
//!
//! ```text
//!              launch/resume (preflight)             engine: credit, budget, infra, config
//!   draft ─────────────────────────────▶ running ─────────────────────────────▶ paused_*
//!     │          (scheduled until          │ ▲  pause                               │
//!     │           starts_at)               │ └──────────── resume (preflight) ──────┘
//!     │                                    └─ all contacts terminal ─▶ completed
//!     └─ stop (any non-terminal) ─▶ stopped          DELETE (any) ─▶ archived
//! ```
//! **Invariant:** `completed`, `stopped` and `archived` are terminal. Status changes only through
//! [`transition`] (the API's commands) and the engine's own moves, never through an edit.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::contact::{ContactState, ExclusionReason};
use crate::window::CallingWindow;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CampaignStatus {
    Draft,
    Scheduled,
    Running,
    Paused,
    PausedInsufficientCredit,
    PausedBudget,
    PausedInfra,
    PausedConfig,
    Completed,
    Stopped,
    Archived,
}

impl CampaignStatus {
    pub const ALL: [CampaignStatus; 11] = [
        Self::Draft,
        Self::Scheduled,
        Self::Running,
        Self::Paused,
        Self::PausedInsufficientCredit,
        Self::PausedBudget,
        Self::PausedInfra,
        Self::PausedConfig,
        Self::Completed,
        Self::Stopped,
        Self::Archived,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Draft => "draft",
            Self::Scheduled => "scheduled",
            Self::Running => "running",
            Self::Paused => "paused",
            Self::PausedInsufficientCredit => "paused_insufficient_credit",
            Self::PausedBudget => "paused_budget",
            Self::PausedInfra => "paused_infra",
            Self::PausedConfig => "paused_config",
            Self::Completed => "completed",
            Self::Stopped => "stopped",
            Self::Archived => "archived",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|status| status.as_str() == s)
    }

    /// Completed, stopped and archived: no command moves them again (archive aside).
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Stopped | Self::Archived)
    }

    /// Any paused state, manual or automatic.
    pub fn is_paused(self) -> bool {
        matches!(
            self,
            Self::Paused
                | Self::PausedInsufficientCredit
                | Self::PausedBudget
                | Self::PausedInfra
                | Self::PausedConfig
        )
    }

    /// Launched and not paused: the engine evaluates it.
    pub fn is_active(self) -> bool {
        matches!(self, Self::Running | Self::Scheduled)
    }

    /// Whether the engine may still admit contacts in this state.
    pub fn admits(self) -> bool {
        self == Self::Running
    }

    /// Whether contacts may still be enrolled or settings edited.
    pub fn is_editable(self) -> bool {
        !self.is_terminal()
    }
}

/// A command sent through the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Launch,
    Resume,
    Pause,
    Stop,
    Archive,
}

/// What closing a campaign does to its contacts that are still open: which states leave the
/// campaign as `excluded`, and with which reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closing {
    pub excludes: &'static [ContactState],
    pub reason: ExclusionReason,
}

impl CampaignStatus {
    /// `Some` for the statuses that close a campaign for good. Stopping lets calls already on
    /// their way finish (their contacts settle without a retry); archiving takes every open
    /// contact out at once.
    pub fn closing(self) -> Option<Closing> {
        match self {
            Self::Archived => Some(Closing {
                excludes: &[
                    ContactState::Pending,
                    ContactState::Scheduled,
                    ContactState::Dialing,
                    ContactState::AwaitingDisposition,
                ],
                reason: ExclusionReason::CampaignArchived,
            }),
            Self::Stopped => Some(Closing {
                excludes: &[ContactState::Pending, ContactState::Scheduled],
                reason: ExclusionReason::CampaignStopped,
            }),
            _ => None,
        }
    }
}

/// The kinds of a campaign's audit events (`GET /campaigns/{id}/events`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditEvent {
    Created,
    /// Settings changed through the API.
    Updated,
    ContactsEnrolled,
    Launched,
    Resumed,
    /// A scheduled campaign reached `starts_at`.
    Started,
    Paused,
    Stopped,
    Archived,
    Completed,
}

impl AuditEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Updated => "updated",
            Self::ContactsEnrolled => "contacts_enrolled",
            Self::Launched => "launched",
            Self::Resumed => "resumed",
            Self::Started => "started",
            Self::Paused => "paused",
            Self::Stopped => "stopped",
            Self::Archived => "archived",
            Self::Completed => "completed",
        }
    }

    /// The event of a move the engine makes on its own.
    pub fn of_engine_move(from: CampaignStatus, to: CampaignStatus) -> Self {
        match (from, to) {
            (CampaignStatus::Scheduled, CampaignStatus::Running) => Self::Started,
            (_, CampaignStatus::Running) => Self::Resumed,
            (_, CampaignStatus::Completed) => Self::Completed,
            _ => Self::Paused,
        }
    }

    /// The event of a pause, stop or archive command moving the campaign to `to`.
    pub fn of_command(to: CampaignStatus) -> Self {
        match to {
            CampaignStatus::Paused => Self::Paused,
            CampaignStatus::Stopped => Self::Stopped,
            _ => Self::Archived,
        }
    }
}

/// What a command does to a campaign in a given status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Run the preflight; when it passes, move to [`start_status`] and record the event.
    Start(AuditEvent),
    /// Nothing changes; answer with this message (`Already running`).
    Unchanged(&'static str),
    /// Move to this status.
    To(CampaignStatus),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    /// The campaign is completed or stopped.
    #[error("Campaign is {}; a {} campaign cannot be changed", .0.as_str(), .0.as_str())]
    Terminal(CampaignStatus),
    /// The campaign is archived: it answers as not found.
    #[error("Campaign not found")]
    Archived,
    /// A draft cannot be paused: it was never started.
    #[error("Campaign is a draft; launch it first")]
    NotLaunched,
}

/// The campaign state table for API commands.
pub fn transition(status: CampaignStatus, command: Command) -> Result<Transition, TransitionError> {
    use CampaignStatus as S;
    if status == S::Archived {
        return Err(TransitionError::Archived);
    }
    match command {
        Command::Archive => Ok(Transition::To(S::Archived)),
        _ if status.is_terminal() => Err(TransitionError::Terminal(status)),
        Command::Stop => Ok(Transition::To(S::Stopped)),
        Command::Launch | Command::Resume => match status {
            S::Running => Ok(Transition::Unchanged("Already running")),
            S::Scheduled => Ok(Transition::Unchanged("Already scheduled")),
            _ => Ok(Transition::Start(if command == Command::Launch {
                AuditEvent::Launched
            } else {
                AuditEvent::Resumed
            })),
        },
        Command::Pause => match status {
            S::Draft => Err(TransitionError::NotLaunched),
            S::Paused => Ok(Transition::Unchanged("Already paused")),
            // A manual pause replaces an automatic one, so it is never lifted automatically.
            _ => Ok(Transition::To(S::Paused)),
        },
    }
}

/// The status a start moves to: `scheduled` while waiting for `starts_at`, else `running`.
pub fn start_status(now: DateTime<Utc>, starts_at: Option<DateTime<Utc>>) -> CampaignStatus {
    match starts_at {
        Some(at) if at > now => CampaignStatus::Scheduled,
        _ => CampaignStatus::Running,
    }
}

/// The lawful basis for calling, chosen by the customer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RegulatoryBasis {
    Consent,
    ExistingCustomer,
    NonMarketing,
    RegistryScreened,
}

impl RegulatoryBasis {
    pub const ALL: [RegulatoryBasis; 4] = [
        Self::Consent,
        Self::ExistingCustomer,
        Self::NonMarketing,
        Self::RegistryScreened,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Consent => "consent",
            Self::ExistingCustomer => "existing_customer",
            Self::NonMarketing => "non_marketing",
            Self::RegistryScreened => "registry_screened",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.as_str() == s)
    }
}

/// An integer setting and its allowed range (the spec's Limits table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntRule {
    pub field: &'static str,
    pub min: i64,
    pub max: i64,
    pub default: i64,
}

pub const MAX_ATTEMPTS: IntRule = IntRule {
    field: "max_attempts",
    min: 1,
    max: 999,
    default: 3,
};
pub const MAX_INFRA_RETRIES: IntRule = IntRule {
    field: "max_infra_retries",
    min: 0,
    max: 20,
    default: 3,
};
pub const RETRY_NO_ANSWER_SECONDS: IntRule = IntRule {
    field: "retry_no_answer_seconds",
    min: 30,
    max: 604_800,
    default: 3600,
};
pub const RETRY_COMPLETED_SECONDS: IntRule = IntRule {
    field: "retry_completed_seconds",
    min: 60,
    max: 604_800,
    default: 86_400,
};
pub const DOUBLE_DIAL_GAP_SECONDS: IntRule = IntRule {
    field: "double_dial_gap_seconds",
    min: 10,
    max: 3600,
    default: 30,
};
pub const MAX_CALLS_PER_DAY: IntRule = IntRule {
    field: "max_calls_per_day",
    min: 1,
    max: 100_000,
    default: 1000,
};
pub const MIN_SECONDS_BETWEEN_CALLS: IntRule = IntRule {
    field: "min_seconds_between_calls",
    min: 0,
    max: 86_400,
    default: 0,
};
pub const MAX_IN_FLIGHT: IntRule = IntRule {
    field: "max_in_flight",
    min: 1,
    max: 8,
    default: 1,
};

/// Every bounded integer setting.
pub const INT_RULES: [IntRule; 8] = [
    MAX_ATTEMPTS,
    MAX_INFRA_RETRIES,
    RETRY_NO_ANSWER_SECONDS,
    RETRY_COMPLETED_SECONDS,
    DOUBLE_DIAL_GAP_SECONDS,
    MAX_CALLS_PER_DAY,
    MIN_SECONDS_BETWEEN_CALLS,
    MAX_IN_FLIGHT,
];

/// The boolean settings (all default false).
pub const BOOL_FIELDS: [&str; 5] = [
    "stop_on_no_answer",
    "stop_on_voicemail",
    "stop_on_unclassified",
    "randomize_retry_time",
    "double_dial_enabled",
];

/// Fields a client may write on create and PATCH, in the spec's order.
pub const WRITABLE_FIELDS: [&str; 23] = [
    "name",
    "description",
    "agent_id",
    "from_phone_number_id",
    "regulatory_basis",
    "stop_disposition_ids",
    "stop_on_no_answer",
    "stop_on_voicemail",
    "stop_on_unclassified",
    "randomize_retry_time",
    "double_dial_enabled",
    "max_attempts",
    "max_infra_retries",
    "retry_no_answer_seconds",
    "retry_completed_seconds",
    "double_dial_gap_seconds",
    "max_calls_per_day",
    "min_seconds_between_calls",
    "max_in_flight",
    "budget_cents",
    "calling_window",
    "starts_at",
    "ends_at",
];

/// A campaign field rule was broken; the message names the field and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct RuleError {
    pub field: &'static str,
    pub message: String,
}

impl IntRule {
    pub fn check(&self, value: i64) -> Result<i64, RuleError> {
        if (self.min..=self.max).contains(&value) {
            Ok(value)
        } else {
            Err(RuleError {
                field: self.field,
                message: format!("must be an integer from {} to {}", self.min, self.max),
            })
        }
    }
}

/// budget_cents: a positive integer.
pub fn check_budget(value: i64) -> Result<i64, RuleError> {
    if value > 0 {
        Ok(value)
    } else {
        Err(RuleError {
            field: "budget_cents",
            message: "must be a positive integer or null".into(),
        })
    }
}

/// A campaign name: trimmed, non-empty, at most 200 characters.
pub fn check_name(name: &str) -> Result<String, RuleError> {
    let trimmed = name.trim();
    if trimmed.is_empty() {
        return Err(RuleError {
            field: "name",
            message: "must not be empty".into(),
        });
    }
    if trimmed.chars().count() > 200 {
        return Err(RuleError {
            field: "name",
            message: "must be at most 200 characters".into(),
        });
    }
    Ok(trimmed.to_owned())
}

/// `starts_at` must come before `ends_at` when both are set.
pub fn check_schedule(
    starts_at: Option<DateTime<Utc>>,
    ends_at: Option<DateTime<Utc>>,
) -> Result<(), RuleError> {
    match (starts_at, ends_at) {
        (Some(s), Some(e)) if s >= e => Err(RuleError {
            field: "ends_at",
            message: "must be later than starts_at".into(),
        }),
        _ => Ok(()),
    }
}

/// What the preflight needs to know about the campaign's agent.
#[derive(Debug, Clone, Copy)]
pub struct AgentFacts {
    pub is_active: bool,
    pub max_call_duration_secs: Option<i64>,
}

/// What the preflight needs to know about the campaign's from-number.
#[derive(Debug, Clone)]
pub struct NumberFacts {
    pub is_active: bool,
    pub status: String,
    pub number: String,
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
    FromNumberInactive { number: String, status: String },
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
        if !number.is_active || number.status != "active" {
            return Err(PreflightProblem::FromNumberInactive {
                number: number.number.clone(),
                status: number.status.clone(),
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
    use CampaignStatus as S;

    #[test]
    fn statuses_round_trip() {
        for status in CampaignStatus::ALL {
            assert_eq!(CampaignStatus::parse(status.as_str()), Some(status));
            assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
        }
    }

    #[test]
    fn launch_and_resume_start_drafts_and_every_paused_state() {
        for status in [
            S::Draft,
            S::Paused,
            S::PausedInsufficientCredit,
            S::PausedBudget,
            S::PausedInfra,
            S::PausedConfig,
        ] {
            assert_eq!(
                transition(status, Command::Launch),
                Ok(Transition::Start(AuditEvent::Launched)),
                "{status:?}"
            );
            assert_eq!(
                transition(status, Command::Resume),
                Ok(Transition::Start(AuditEvent::Resumed)),
                "{status:?}"
            );
        }
    }

    #[test]
    fn resuming_a_running_campaign_changes_nothing() {
        assert_eq!(
            transition(S::Running, Command::Resume),
            Ok(Transition::Unchanged("Already running"))
        );
        assert_eq!(
            transition(S::Running, Command::Launch),
            Ok(Transition::Unchanged("Already running"))
        );
    }

    #[test]
    fn terminal_campaigns_refuse_every_command_but_archive() {
        for status in [S::Completed, S::Stopped] {
            for command in [
                Command::Launch,
                Command::Resume,
                Command::Pause,
                Command::Stop,
            ] {
                assert_eq!(
                    transition(status, command),
                    Err(TransitionError::Terminal(status))
                );
            }
            assert_eq!(
                transition(status, Command::Archive),
                Ok(Transition::To(S::Archived))
            );
        }
        for command in [
            Command::Launch,
            Command::Resume,
            Command::Pause,
            Command::Stop,
            Command::Archive,
        ] {
            assert_eq!(
                transition(S::Archived, command),
                Err(TransitionError::Archived)
            );
        }
    }

    #[test]
    fn pause_applies_to_launched_campaigns_and_replaces_automatic_pauses() {
        assert_eq!(
            transition(S::Running, Command::Pause),
            Ok(Transition::To(S::Paused))
        );
        assert_eq!(
            transition(S::Scheduled, Command::Pause),
            Ok(Transition::To(S::Paused))
        );
        assert_eq!(
            transition(S::PausedBudget, Command::Pause),
            Ok(Transition::To(S::Paused))
        );
        assert_eq!(
            transition(S::Paused, Command::Pause),
            Ok(Transition::Unchanged("Already paused"))
        );
        assert_eq!(
            transition(S::Draft, Command::Pause),
            Err(TransitionError::NotLaunched)
        );
    }

    #[test]
    fn stop_and_archive_apply_to_every_non_terminal_status() {
        for status in CampaignStatus::ALL.into_iter().filter(|s| !s.is_terminal()) {
            assert_eq!(
                transition(status, Command::Stop),
                Ok(Transition::To(S::Stopped))
            );
            assert_eq!(
                transition(status, Command::Archive),
                Ok(Transition::To(S::Archived))
            );
        }
    }

    #[test]
    fn a_future_start_waits_as_scheduled() {
        let now: DateTime<Utc> = "2026-11-21T10:00:00Z".parse().unwrap();
        assert_eq!(start_status(now, None), S::Running);
        assert_eq!(
            start_status(now, Some(now - chrono::Duration::hours(1))),
            S::Running
        );
        assert_eq!(
            start_status(now, Some(now + chrono::Duration::hours(1))),
            S::Scheduled
        );
    }

    #[test]
    fn integer_rules_match_the_spec_limits() {
        assert!(MAX_ATTEMPTS.check(0).is_err());
        assert!(MAX_ATTEMPTS.check(999).is_ok());
        assert!(MAX_ATTEMPTS.check(1000).is_err());
        assert!(MAX_IN_FLIGHT.check(8).is_ok());
        assert!(MAX_IN_FLIGHT.check(9).is_err());
        assert!(RETRY_NO_ANSWER_SECONDS.check(29).is_err());
        assert!(RETRY_COMPLETED_SECONDS.check(59).is_err());
        assert!(MIN_SECONDS_BETWEEN_CALLS.check(0).is_ok());
        let err = MAX_CALLS_PER_DAY.check(100_001).unwrap_err();
        assert_eq!(
            err.to_string(),
            "max_calls_per_day: must be an integer from 1 to 100000"
        );
        for rule in INT_RULES {
            assert!(
                rule.check(rule.default).is_ok(),
                "{} default within range",
                rule.field
            );
        }
        assert!(check_budget(0).is_err());
        assert!(check_budget(1).is_ok());
    }

    #[test]
    fn names_are_trimmed_and_required() {
        assert_eq!(check_name("  Spring  ").unwrap(), "Spring");
        assert!(check_name("   ").is_err());
        assert!(check_name(&"x".repeat(201)).is_err());
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
                status: "active".into(),
                number: "+972501234567".into(),
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
            status: "pending_requirements".into(),
            number: "+972501234567".into(),
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
