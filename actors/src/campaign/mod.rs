//! Campaigns: status and its transition table, what closing a campaign does, its audit events,
//! the launch preflight ([`preflight`]) and the rules and defaults of every campaign setting
//! ([`settings`]).
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

mod preflight;
mod settings;

pub use preflight::{
    AgentFacts, ConfigProblem, NumberFacts, NumberStatus, Preflight, PreflightProblem,
};
pub use settings::*;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
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
    pub const ALL: [AuditEvent; 10] = [
        Self::Created,
        Self::Updated,
        Self::ContactsEnrolled,
        Self::Launched,
        Self::Resumed,
        Self::Started,
        Self::Paused,
        Self::Stopped,
        Self::Archived,
        Self::Completed,
    ];

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == s)
    }

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

display_as_str!(CampaignStatus, AuditEvent);

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
        assert_eq!(CampaignStatus::parse("Running"), None);
    }

    #[test]
    fn audit_events_round_trip() {
        for event in AuditEvent::ALL {
            assert_eq!(AuditEvent::parse(event.as_str()), Some(event));
            assert_eq!(serde_json::to_value(event).unwrap(), event.as_str());
        }
        assert_eq!(AuditEvent::parse("deleted"), None);
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
}
