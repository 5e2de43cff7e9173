//! Why a campaign admits nobody now, and why a contact is not dialled now: the pacing gates as
//! pure functions. The engine's evaluation and the API's contact view both decide through them,
//! so the reason a person reads is the reason the engine acts on.
//!
//! Each gate answers `None` (open) or a [`Blocked`] with a typed reason and, when known, the
//! instant it opens. [`TickResult`] is what an evaluation records in `last_tick_result`; its
//! string form is written in one place, [`TickResult::as_str`].

use std::fmt;

use chrono::{DateTime, Duration, NaiveDate, Utc};
use chrono_tz::Tz;

use crate::campaign::{CampaignStatus, ConfigProblem};
use crate::contact::ContactState;
use crate::policy::{contact_zone, local_date, next_local_midnight};
use crate::window::CallingWindow;

/// How far ahead the next opening of a calling window is looked for when the campaign has no
/// `ends_at`: a week and a day, so every weekly window opens within it.
const HORIZON_DAYS: i64 = 8;

/// What one evaluation of a campaign ended with: `last_tick_result`, and the reason of an
/// engine status change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TickResult {
    /// This many contacts were admitted.
    Admitted(i64),
    WaitingForStartsAt,
    StartsAtReached,
    CreditRestored,
    /// The balance does not cover one call's reservation: `paused_insufficient_credit`.
    InsufficientCredit,
    /// The campaign can no longer run as configured: `paused_config`.
    Config(ConfigProblem),
    AllContactsDone,
    DailyCapReached,
    MaxInFlight,
    /// With a gap between calls, the last admitted call has not been dialled yet.
    WaitingForQueue,
    MinSecondsBetweenCalls,
    OutsideCallingWindow,
    /// `budget_cents` cannot take one more reservation: `paused_budget`.
    BudgetReached,
    /// The budget is held by calls in flight; it may free up when they settle.
    BudgetReservedByCallsInFlight,
    /// The campaign's status changed under the evaluation.
    StatusChanged,
    /// Some were admitted before the balance ran short.
    InsufficientCreditForMore,
    /// Money changed under the evaluation; it looks again at once.
    FundsChanged,
    /// Nobody is due and calls are still open.
    WaitingForCalls,
    NoContactsDue,
    /// Too many carrier-side failures in a row: `paused_infra`.
    RepeatedInfraErrors,
}

impl TickResult {
    /// The recorded form (`admitted:3`, `daily_cap_reached`, ...).
    pub fn as_str(&self) -> std::borrow::Cow<'static, str> {
        use std::borrow::Cow::Borrowed;
        Borrowed(match self {
            Self::Admitted(n) => return format!("admitted:{n}").into(),
            Self::WaitingForStartsAt => "waiting_for_starts_at",
            Self::StartsAtReached => "starts_at_reached",
            Self::CreditRestored => "credit_restored",
            Self::InsufficientCredit => "insufficient_credit",
            Self::Config(problem) => problem.as_str(),
            Self::AllContactsDone => "all_contacts_done",
            Self::DailyCapReached => "daily_cap_reached",
            Self::MaxInFlight => "max_in_flight",
            Self::WaitingForQueue => "waiting_for_queue",
            Self::MinSecondsBetweenCalls => "min_seconds_between_calls",
            Self::OutsideCallingWindow => "outside_calling_window",
            Self::BudgetReached => "budget_reached",
            Self::BudgetReservedByCallsInFlight => "budget_reserved_by_calls_in_flight",
            Self::StatusChanged => "status_changed",
            Self::InsufficientCreditForMore => "insufficient_credit_for_more",
            Self::FundsChanged => "funds_changed",
            Self::WaitingForCalls => "waiting_for_calls",
            Self::NoContactsDue => "no_contacts_due",
            Self::RepeatedInfraErrors => "repeated_infra_errors",
        })
    }
}

impl TickResult {
    /// Every result but `Admitted`, which carries its count.
    const NAMED: [TickResult; 22] = [
        Self::WaitingForStartsAt,
        Self::StartsAtReached,
        Self::CreditRestored,
        Self::InsufficientCredit,
        Self::Config(ConfigProblem::ALL[0]),
        Self::Config(ConfigProblem::ALL[1]),
        Self::Config(ConfigProblem::ALL[2]),
        Self::Config(ConfigProblem::ALL[3]),
        Self::AllContactsDone,
        Self::DailyCapReached,
        Self::MaxInFlight,
        Self::WaitingForQueue,
        Self::MinSecondsBetweenCalls,
        Self::OutsideCallingWindow,
        Self::BudgetReached,
        Self::BudgetReservedByCallsInFlight,
        Self::StatusChanged,
        Self::InsufficientCreditForMore,
        Self::FundsChanged,
        Self::WaitingForCalls,
        Self::NoContactsDue,
        Self::RepeatedInfraErrors,
    ];

    /// Reads the recorded form back.
    pub fn parse(s: &str) -> Option<Self> {
        if let Some(n) = s.strip_prefix("admitted:") {
            return n.parse().ok().filter(|n| *n >= 0).map(Self::Admitted);
        }
        Self::NAMED.into_iter().find(|r| r.as_str() == s)
    }
}

impl serde::Serialize for TickResult {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.as_str())
    }
}

impl fmt::Display for TickResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str())
    }
}

/// A closed gate: why, and when it opens if that is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Blocked {
    pub reason: TickResult,
    pub until: Option<DateTime<Utc>>,
}

/// Where the search for a window's next opening stops: the campaign's end, else a week ahead.
pub fn horizon(ends_at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> DateTime<Utc> {
    ends_at.unwrap_or(now + Duration::days(HORIZON_DAYS))
}

/// Admissions counted against `max_calls_per_day` on `today` (the counter belongs to the day
/// it was last written on).
pub fn admitted_on(day: Option<NaiveDate>, count: i64, today: NaiveDate) -> i64 {
    if day == Some(today) { count } else { 0 }
}

/// The daily cap, counted per calendar day of the window's zone; opens at the next local
/// midnight.
pub fn daily_cap(
    admitted_today: i64,
    max_calls_per_day: i64,
    zone: Tz,
    now: DateTime<Utc>,
) -> Option<Blocked> {
    (admitted_today >= max_calls_per_day).then(|| Blocked {
        reason: TickResult::DailyCapReached,
        until: Some(next_local_midnight(now, zone)),
    })
}

/// The calling window in `zone`; opens at its next opening before the horizon.
pub fn calling_window(
    window: &CallingWindow,
    zone: Tz,
    now: DateTime<Utc>,
    horizon: DateTime<Utc>,
) -> Option<Blocked> {
    (!window.is_open_at(now, zone)).then(|| Blocked {
        reason: TickResult::OutsideCallingWindow,
        until: window.next_open(now, horizon, zone),
    })
}

/// What the campaign-wide gates look at, as of one evaluation.
#[derive(Debug, Clone, Copy)]
pub struct Pacing<'a> {
    pub now: DateTime<Utc>,
    pub window: &'a CallingWindow,
    pub ends_at: Option<DateTime<Utc>>,
    pub admitted_today: i64,
    pub max_calls_per_day: i64,
    /// Calls of the campaign queued or live.
    pub in_flight: i64,
    pub max_in_flight: i64,
    /// Of those, calls still waiting in the call queue.
    pub queued: i64,
    /// `min_seconds_between_calls`.
    pub gap: Duration,
    /// The last dial or admission, whichever is later: the gap counts from here.
    pub last_call_at: Option<DateTime<Utc>>,
}

impl Pacing<'_> {
    /// The first closed campaign-wide gate, in the order the engine checks them: daily cap,
    /// calls in flight, the gap between calls, then the window when it is the same for every
    /// contact (without `use_contact_timezone`; otherwise each contact's zone decides).
    pub fn blocked(&self) -> Option<Blocked> {
        daily_cap(
            self.admitted_today,
            self.max_calls_per_day,
            self.window.timezone,
            self.now,
        )
        .or_else(|| self.in_flight_cap())
        .or_else(|| self.min_gap())
        .or_else(|| {
            if self.window.use_contact_timezone {
                return None;
            }
            calling_window(
                self.window,
                self.window.timezone,
                self.now,
                horizon(self.ends_at, self.now),
            )
        })
    }

    fn in_flight_cap(&self) -> Option<Blocked> {
        (self.in_flight >= self.max_in_flight).then_some(Blocked {
            reason: TickResult::MaxInFlight,
            until: None,
        })
    }

    /// With a gap, one call at a time leaves the queue, and the next waits the gap out.
    fn min_gap(&self) -> Option<Blocked> {
        if self.gap <= Duration::zero() {
            return None;
        }
        if self.queued > 0 {
            return Some(Blocked {
                reason: TickResult::WaitingForQueue,
                until: None,
            });
        }
        let opens = self.last_call_at? + self.gap;
        (opens > self.now).then_some(Blocked {
            reason: TickResult::MinSecondsBetweenCalls,
            until: Some(opens),
        })
    }

    /// How many contacts this evaluation may admit once every gate is open.
    pub fn free_slots(&self) -> i64 {
        let slots =
            (self.max_in_flight - self.in_flight).min(self.max_calls_per_day - self.admitted_today);
        if self.gap > Duration::zero() {
            slots.min(1)
        } else {
            slots
        }
    }
}

/// The campaign, as the contact view needs it.
#[derive(Debug, Clone, Copy)]
pub struct CampaignFacts<'a> {
    pub status: CampaignStatus,
    pub window: &'a CallingWindow,
    pub ends_at: Option<DateTime<Utc>>,
    pub daily_window_date: Option<NaiveDate>,
    pub daily_admitted_count: i64,
    pub max_calls_per_day: i64,
    /// How long an answered call waits for a disposition.
    pub disposition_timeout: Duration,
}

/// One contact, as the contact view needs it.
#[derive(Debug, Clone, Copy)]
pub struct ContactFacts<'a> {
    pub state: ContactState,
    pub attempts: i64,
    pub excluded_reason: Option<&'a str>,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub timezone: Option<&'a str>,
    pub phone_number: &'a str,
    /// When the contact's last call ended.
    pub last_call_ended_at: Option<DateTime<Utc>>,
}

/// Why a contact is, or is not, being dialled now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContactHold {
    CallInProgress,
    AwaitingDisposition {
        until: Option<DateTime<Utc>>,
    },
    Retired,
    Exhausted {
        attempts: i64,
    },
    Excluded {
        reason: String,
    },
    CampaignNotRunning {
        status: CampaignStatus,
    },
    OutsideCallingWindow {
        zone: Tz,
        until: Option<DateTime<Utc>>,
    },
    RetryScheduled {
        at: DateTime<Utc>,
    },
    DailyCapReached {
        cap: i64,
        day: NaiveDate,
        until: Option<DateTime<Utc>>,
    },
    /// Due: admitted as the campaign-wide pacing allows.
    WaitingForASlot,
}

impl ContactHold {
    /// The machine-readable reason (`outside_calling_window`, `excluded:do_not_call`, ...).
    pub fn reason(&self) -> String {
        match self {
            Self::CallInProgress => "call_in_progress".into(),
            Self::AwaitingDisposition { .. } => "awaiting_disposition".into(),
            Self::Retired => "retired".into(),
            Self::Exhausted { .. } => "exhausted".into(),
            Self::Excluded { reason } => format!("excluded:{reason}"),
            Self::CampaignNotRunning { status } => format!("campaign_{}", status.as_str()),
            Self::OutsideCallingWindow { .. } => TickResult::OutsideCallingWindow.to_string(),
            Self::RetryScheduled { .. } => "retry_scheduled".into(),
            Self::DailyCapReached { .. } => TickResult::DailyCapReached.to_string(),
            Self::WaitingForASlot => "waiting_for_a_slot".into(),
        }
    }

    /// When the reason is expected to change, if known.
    pub fn until(&self) -> Option<DateTime<Utc>> {
        match self {
            Self::AwaitingDisposition { until }
            | Self::OutsideCallingWindow { until, .. }
            | Self::DailyCapReached { until, .. } => *until,
            Self::RetryScheduled { at } => Some(*at),
            _ => None,
        }
    }

    /// A sentence for a person; `last_tick` is the campaign's last evaluation.
    pub fn message(&self, last_tick: Option<TickResult>) -> String {
        match self {
            Self::CallInProgress => "A call of this attempt is queued or live".into(),
            Self::AwaitingDisposition { .. } => {
                "The call was answered; waiting for a disposition (unclassified after the timeout)"
                    .into()
            }
            Self::Retired => "A stop outcome or disposition landed; never dialled again".into(),
            Self::Exhausted { attempts } => format!(
                "All {attempts} attempts were made; raising max_attempts does not revive it"
            ),
            Self::Excluded { reason } => format!("Excluded ({reason}); never dialled again"),
            Self::CampaignNotRunning { status } => {
                format!("The campaign is {}; nobody is admitted", status.as_str())
            }
            Self::OutsideCallingWindow { zone, .. } => {
                format!("Outside the calling window in {zone}")
            }
            Self::RetryScheduled { .. } => "Waiting for the retry time".into(),
            Self::DailyCapReached { cap, day, .. } => {
                format!("max_calls_per_day ({cap}) reached for {day}")
            }
            Self::WaitingForASlot => format!(
                "Due; admitted as pacing allows (last evaluation: {})",
                last_tick.map_or("none yet".into(), |t| t.as_str())
            ),
        }
    }
}

/// Why `contact` is, or is not, being dialled at `now`: its own state first, then the
/// campaign's status, then the gates the engine applies to it (its calling hours in its zone,
/// its retry time, the daily cap).
pub fn contact_hold(
    c: &CampaignFacts<'_>,
    k: &ContactFacts<'_>,
    now: DateTime<Utc>,
) -> ContactHold {
    match k.state {
        ContactState::Dialing => return ContactHold::CallInProgress,
        ContactState::AwaitingDisposition => {
            return ContactHold::AwaitingDisposition {
                until: k
                    .last_call_ended_at
                    .and_then(|t| t.checked_add_signed(c.disposition_timeout)),
            };
        }
        ContactState::Retired => return ContactHold::Retired,
        ContactState::Exhausted => {
            return ContactHold::Exhausted {
                attempts: k.attempts,
            };
        }
        ContactState::Excluded => {
            return ContactHold::Excluded {
                reason: k.excluded_reason.unwrap_or_default().to_owned(),
            };
        }
        ContactState::Pending | ContactState::Scheduled => {}
    }
    if c.status != CampaignStatus::Running {
        return ContactHold::CampaignNotRunning { status: c.status };
    }
    let zone = contact_zone(c.window, k.timezone, k.phone_number);
    if let Some(blocked) = calling_window(c.window, zone, now, horizon(c.ends_at, now)) {
        return ContactHold::OutsideCallingWindow {
            zone,
            until: blocked.until,
        };
    }
    if let Some(at) = k.next_attempt_at
        && at > now
    {
        return ContactHold::RetryScheduled { at };
    }
    let today = local_date(now, c.window.timezone);
    let admitted = admitted_on(c.daily_window_date, c.daily_admitted_count, today);
    if let Some(blocked) = daily_cap(admitted, c.max_calls_per_day, c.window.timezone, now) {
        return ContactHold::DailyCapReached {
            cap: c.max_calls_per_day,
            day: today,
            until: blocked.until,
        };
    }
    ContactHold::WaitingForASlot
}

#[cfg(test)]
mod tests;
