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
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn tick_results_read_back() {
        assert_eq!(
            TickResult::parse("admitted:3"),
            Some(TickResult::Admitted(3))
        );
        assert_eq!(TickResult::parse("admitted:-1"), None);
        assert_eq!(TickResult::parse("admitted:"), None);
        assert_eq!(TickResult::parse("paused"), None);
        for result in TickResult::NAMED {
            assert_eq!(
                TickResult::parse(&result.as_str()),
                Some(result),
                "{result}"
            );
            // A new result must be listed in NAMED to be read back: the match makes it named here.
            match result {
                TickResult::Admitted(_) => panic!("Admitted is not named"),
                TickResult::WaitingForStartsAt
                | TickResult::StartsAtReached
                | TickResult::CreditRestored
                | TickResult::InsufficientCredit
                | TickResult::Config(_)
                | TickResult::AllContactsDone
                | TickResult::DailyCapReached
                | TickResult::MaxInFlight
                | TickResult::WaitingForQueue
                | TickResult::MinSecondsBetweenCalls
                | TickResult::OutsideCallingWindow
                | TickResult::BudgetReached
                | TickResult::BudgetReservedByCallsInFlight
                | TickResult::StatusChanged
                | TickResult::InsufficientCreditForMore
                | TickResult::FundsChanged
                | TickResult::WaitingForCalls
                | TickResult::NoContactsDue
                | TickResult::RepeatedInfraErrors => {}
            }
        }
        let names: std::collections::HashSet<_> =
            TickResult::NAMED.iter().map(|r| r.as_str()).collect();
        assert_eq!(names.len(), TickResult::NAMED.len());
    }

    fn window(json: serde_json::Value) -> CallingWindow {
        CallingWindow::from_json(&json).expect("a valid window")
    }

    fn pacing(window: &CallingWindow, now: DateTime<Utc>) -> Pacing<'_> {
        Pacing {
            now,
            window,
            ends_at: None,
            admitted_today: 0,
            max_calls_per_day: 100,
            in_flight: 0,
            max_in_flight: 2,
            queued: 0,
            gap: Duration::zero(),
            last_call_at: None,
        }
    }

    #[test]
    fn tick_results_have_one_string_form() {
        assert_eq!(TickResult::Admitted(3).to_string(), "admitted:3");
        assert_eq!(TickResult::DailyCapReached.as_str(), "daily_cap_reached");
        assert_eq!(
            TickResult::Config(ConfigProblem::AgentUnavailable).as_str(),
            "agent_unavailable"
        );
    }

    #[test]
    fn campaign_gates_close_in_order_and_say_when_they_open() {
        let w = window(
            serde_json::json!({"timezone": "UTC", "days": ["mon","tue","wed","thu","fri","sat","sun"], "start": "00:00", "end": "23:59", "use_contact_timezone": false}),
        );
        let now = Utc.with_ymd_and_hms(2026, 3, 4, 12, 0, 0).unwrap();
        assert_eq!(pacing(&w, now).blocked(), None);
        assert_eq!(pacing(&w, now).free_slots(), 2);

        let capped = Pacing {
            admitted_today: 100,
            in_flight: 2,
            ..pacing(&w, now)
        };
        let blocked = capped.blocked().expect("the daily cap closes first");
        assert_eq!(blocked.reason, TickResult::DailyCapReached);
        assert_eq!(
            blocked.until,
            Some(Utc.with_ymd_and_hms(2026, 3, 5, 0, 0, 0).unwrap())
        );

        let full = Pacing {
            in_flight: 2,
            ..pacing(&w, now)
        };
        assert_eq!(
            full.blocked().map(|b| b.reason),
            Some(TickResult::MaxInFlight)
        );

        let spaced = Pacing {
            gap: Duration::seconds(30),
            last_call_at: Some(now - Duration::seconds(10)),
            ..pacing(&w, now)
        };
        assert_eq!(
            spaced.blocked(),
            Some(Blocked {
                reason: TickResult::MinSecondsBetweenCalls,
                until: Some(now + Duration::seconds(20)),
            })
        );
        assert_eq!(spaced.free_slots(), 1);
        let waiting = Pacing {
            queued: 1,
            ..spaced
        };
        assert_eq!(
            waiting.blocked().map(|b| b.reason),
            Some(TickResult::WaitingForQueue)
        );
    }

    #[test]
    fn the_window_is_a_campaign_gate_only_without_contact_zones() {
        let hours = |own: bool| {
            window(
                serde_json::json!({"timezone": "UTC", "days": ["mon","tue","wed","thu","fri"], "start": "09:00", "end": "17:00", "use_contact_timezone": own}),
            )
        };
        // A Wednesday at 20:00 UTC.
        let now = Utc.with_ymd_and_hms(2026, 3, 4, 20, 0, 0).unwrap();
        let shared = hours(false);
        let blocked = pacing(&shared, now).blocked().expect("closed at 20:00");
        assert_eq!(blocked.reason, TickResult::OutsideCallingWindow);
        assert_eq!(
            blocked.until,
            Some(Utc.with_ymd_and_hms(2026, 3, 5, 9, 0, 0).unwrap())
        );
        let per_contact = hours(true);
        assert_eq!(pacing(&per_contact, now).blocked(), None);
    }

    #[test]
    fn a_contact_hold_names_the_first_reason_the_engine_would_act_on() {
        let w = window(
            serde_json::json!({"timezone": "Asia/Jerusalem", "days": ["sun","mon","tue","wed","thu","fri","sat"], "start": "09:00", "end": "20:00", "use_contact_timezone": true}),
        );
        // 12:00 in Jerusalem, 05:00 in New York.
        let now = Utc.with_ymd_and_hms(2026, 3, 4, 10, 0, 0).unwrap();
        let campaign = CampaignFacts {
            status: CampaignStatus::Running,
            window: &w,
            ends_at: None,
            daily_window_date: Some(local_date(now, w.timezone)),
            daily_admitted_count: 5,
            max_calls_per_day: 5,
            disposition_timeout: Duration::minutes(5),
        };
        let contact = ContactFacts {
            state: ContactState::Pending,
            attempts: 0,
            excluded_reason: None,
            next_attempt_at: None,
            timezone: None,
            phone_number: "+972501234567",
            last_call_ended_at: None,
        };
        let hold = contact_hold(&campaign, &contact, now);
        assert_eq!(hold.reason(), "daily_cap_reached");
        assert_eq!(
            hold.message(None),
            "max_calls_per_day (5) reached for 2026-03-04"
        );

        let abroad = ContactFacts {
            phone_number: "+12125550100",
            ..contact
        };
        let hold = contact_hold(&campaign, &abroad, now);
        assert_eq!(hold.reason(), "outside_calling_window");
        assert_eq!(
            hold.until(),
            Some(Utc.with_ymd_and_hms(2026, 3, 4, 14, 0, 0).unwrap()),
            "09:00 in New York (EST, before its switch to summer time)"
        );

        let paused = CampaignFacts {
            status: CampaignStatus::Paused,
            ..campaign
        };
        assert_eq!(
            contact_hold(&paused, &contact, now).reason(),
            "campaign_paused"
        );
        let excluded = ContactFacts {
            state: ContactState::Excluded,
            excluded_reason: Some("do_not_call"),
            ..contact
        };
        assert_eq!(
            contact_hold(&paused, &excluded, now).reason(),
            "excluded:do_not_call"
        );
        let open = CampaignFacts {
            daily_admitted_count: 4,
            ..campaign
        };
        let retry = ContactFacts {
            next_attempt_at: Some(now + Duration::hours(1)),
            ..contact
        };
        assert_eq!(
            contact_hold(&open, &retry, now),
            ContactHold::RetryScheduled {
                at: now + Duration::hours(1)
            }
        );
        assert_eq!(
            contact_hold(&open, &contact, now),
            ContactHold::WaitingForASlot
        );
    }
}
