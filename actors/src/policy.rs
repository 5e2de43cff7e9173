//! The engine's rules as pure functions: where a contact's calling hours are read, what an
//! attempt costs, and how an attempt's result moves the contact.

use chrono::{DateTime, Duration, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;
use rand::Rng;

use crate::campaign::CampaignRules;
use crate::contact::{CallOutcome, ContactState, ExclusionReason};
use crate::ids::DispositionId;
use crate::phone::PhoneNumber;
use crate::window::CallingWindow;

/// The zone used for a country's built-in calling hours and for contacts known only by their
/// number: the zone most of its people live in (UTC when unmapped).
pub fn country_zone(country: &str) -> Tz {
    match country.trim().to_ascii_uppercase().as_str() {
        "IL" | "PS" => Tz::Asia__Jerusalem,
        "US" => Tz::America__New_York,
        "CA" => Tz::America__Toronto,
        "MX" => Tz::America__Mexico_City,
        "BR" => Tz::America__Sao_Paulo,
        "AR" => Tz::America__Argentina__Buenos_Aires,
        "GB" => Tz::Europe__London,
        "IE" => Tz::Europe__Dublin,
        "FR" => Tz::Europe__Paris,
        "DE" => Tz::Europe__Berlin,
        "ES" => Tz::Europe__Madrid,
        "IT" => Tz::Europe__Rome,
        "NL" => Tz::Europe__Amsterdam,
        "BE" => Tz::Europe__Brussels,
        "CH" => Tz::Europe__Zurich,
        "AT" => Tz::Europe__Vienna,
        "PT" => Tz::Europe__Lisbon,
        "PL" => Tz::Europe__Warsaw,
        "SE" => Tz::Europe__Stockholm,
        "NO" => Tz::Europe__Oslo,
        "DK" => Tz::Europe__Copenhagen,
        "FI" => Tz::Europe__Helsinki,
        "GR" => Tz::Europe__Athens,
        "CY" => Tz::Asia__Nicosia,
        "TR" => Tz::Europe__Istanbul,
        "UA" => Tz::Europe__Kyiv,
        "RU" => Tz::Europe__Moscow,
        "AE" => Tz::Asia__Dubai,
        "IN" => Tz::Asia__Kolkata,
        "SG" => Tz::Asia__Singapore,
        "JP" => Tz::Asia__Tokyo,
        "KR" => Tz::Asia__Seoul,
        "CN" => Tz::Asia__Shanghai,
        "HK" => Tz::Asia__Hong_Kong,
        "AU" => Tz::Australia__Sydney,
        "NZ" => Tz::Pacific__Auckland,
        "ZA" => Tz::Africa__Johannesburg,
        _ => Tz::UTC,
    }
}

/// The zone a contact's calling hours are read in: with `use_contact_timezone`, its own zone,
/// else its number's country's, else the window's.
pub fn contact_zone(window: &CallingWindow, timezone: Option<&str>, phone: &str) -> Tz {
    if !window.use_contact_timezone {
        return window.timezone;
    }
    if let Some(zone) = timezone.and_then(|t| t.parse::<Tz>().ok()) {
        return zone;
    }
    let number = PhoneNumber::from_e164_unchecked(phone.to_owned());
    match number.country() {
        Some(country) => match country_zone(&country) {
            Tz::UTC => window.timezone,
            zone => zone,
        },
        None => window.timezone,
    }
}

/// The local calendar date of `at` in `zone`.
pub fn local_date(at: DateTime<Utc>, zone: Tz) -> NaiveDate {
    at.with_timezone(&zone).date_naive()
}

/// The first instant of the local day after `at`'s, in `zone` (DST-correct).
pub fn next_local_midnight(at: DateTime<Utc>, zone: Tz) -> DateTime<Utc> {
    let next = local_date(at, zone) + Duration::days(1);
    // Midnight can fall in a DST gap in a few zones: take the first valid minute after it.
    (0..=180)
        .find_map(|m| {
            let naive = next.and_hms_opt(0, 0, 0)? + Duration::minutes(m);
            zone.from_local_datetime(&naive).earliest()
        })
        .map_or(at + Duration::days(1), |t| t.with_timezone(&Utc))
}

/// A retry delay of `base` seconds, spread by up to +/-20% when `randomize`.
pub fn retry_delay(base: i64, randomize: bool, rng: &mut impl Rng) -> Duration {
    if !randomize || base <= 0 {
        return Duration::seconds(base);
    }
    let spread = base / 5;
    Duration::seconds(base + rng.random_range(-spread..=spread))
}

/// How an attempt ended, as the settlement sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// An answered call and its disposition; `None` is unclassified (no disposition in time).
    Answered(Option<DispositionId>),
    /// Any other system outcome.
    Ended(CallOutcome),
    /// The call was live when the service stopped: the attempt counts, nothing is redialled.
    Interrupted,
    /// The queued call was cancelled before it was dialled (campaign stopped or archived).
    Cancelled,
}

impl Verdict {
    pub fn outcome(self) -> CallOutcome {
        match self {
            Self::Answered(_) => CallOutcome::Answered,
            Self::Ended(outcome) => outcome,
            Self::Interrupted | Self::Cancelled => CallOutcome::InfraError,
        }
    }
}

/// Where a settled attempt leaves the contact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub state: ContactState,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub refund_attempt: bool,
    pub infra_retry: bool,
    pub excluded_reason: Option<ExclusionReason>,
}

/// How far a contact has come: `attempts` counts the attempt being settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tries {
    pub attempts: i64,
    pub infra_retries: i64,
}

/// Settles one attempt.
///
/// `closed` is set when the campaign was stopped or archived
/// meanwhile, so a contact that would be retried is excluded instead.
pub fn settle(
    rules: &CampaignRules,
    tries: Tries,
    verdict: Verdict,
    now: DateTime<Utc>,
    infra_retry_delay: Duration,
    closed: Option<ExclusionReason>,
    rng: &mut impl Rng,
) -> Decision {
    let Tries {
        attempts,
        infra_retries,
    } = tries;
    let retire = Decision {
        state: ContactState::Retired,
        next_attempt_at: None,
        refund_attempt: false,
        infra_retry: false,
        excluded_reason: None,
    };
    let exclude = |reason, refund| Decision {
        state: ContactState::Excluded,
        next_attempt_at: None,
        refund_attempt: refund,
        infra_retry: false,
        excluded_reason: Some(reason),
    };
    let retry_base = match verdict {
        Verdict::Cancelled => {
            return exclude(closed.unwrap_or(ExclusionReason::CampaignStopped), true);
        }
        Verdict::Ended(CallOutcome::InfraError) if infra_retries < rules.max_infra_retries => {
            if let Some(reason) = closed {
                return exclude(reason, true);
            }
            return Decision {
                state: ContactState::Scheduled,
                next_attempt_at: Some(now + infra_retry_delay),
                refund_attempt: true,
                infra_retry: true,
                excluded_reason: None,
            };
        }
        Verdict::Ended(CallOutcome::NoAnswer | CallOutcome::Busy) if rules.stop_on_no_answer => {
            return retire;
        }
        Verdict::Ended(CallOutcome::Voicemail) if rules.stop_on_voicemail => return retire,
        Verdict::Answered(Some(id)) if rules.stop_disposition_ids.contains(&id) => return retire,
        Verdict::Answered(None) if rules.stop_on_unclassified => return retire,
        Verdict::Answered(_) | Verdict::Ended(CallOutcome::Answered) => {
            rules.retry_completed_seconds
        }
        Verdict::Ended(_) | Verdict::Interrupted => rules.retry_no_answer_seconds,
    };
    if attempts >= rules.max_attempts {
        return Decision {
            state: ContactState::Exhausted,
            next_attempt_at: None,
            refund_attempt: false,
            infra_retry: false,
            excluded_reason: None,
        };
    }
    if let Some(reason) = closed {
        return exclude(reason, false);
    }
    Decision {
        state: ContactState::Scheduled,
        next_attempt_at: Some(now + retry_delay(retry_base, rules.randomize_retry_time, rng)),
        refund_attempt: false,
        infra_retry: false,
        excluded_reason: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn rules() -> CampaignRules {
        CampaignRules {
            max_attempts: 3,
            max_infra_retries: 2,
            retry_no_answer_seconds: 3600,
            retry_completed_seconds: 86400,
            randomize_retry_time: false,
            double_dial_enabled: false,
            double_dial_gap_seconds: 30,
            max_calls_per_day: 1000,
            min_seconds_between_calls: 0,
            max_in_flight: 1,
            budget_cents: None,
            stop_disposition_ids: vec![],
            stop_on_no_answer: false,
            stop_on_voicemail: false,
            stop_on_unclassified: false,
            starts_at: None,
            ends_at: None,
        }
    }

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn run(rules: &CampaignRules, attempts: i64, infra: i64, verdict: Verdict) -> Decision {
        let mut rng = StdRng::seed_from_u64(7);
        settle(
            rules,
            Tries {
                attempts,
                infra_retries: infra,
            },
            verdict,
            at("2026-01-01T10:00:00Z"),
            Duration::seconds(60),
            None,
            &mut rng,
        )
    }

    #[test]
    fn no_answer_retries_after_the_no_answer_delay_until_the_cap() {
        let r = rules();
        let d = run(&r, 1, 0, Verdict::Ended(CallOutcome::NoAnswer));
        assert_eq!(d.state, ContactState::Scheduled);
        assert_eq!(d.next_attempt_at, Some(at("2026-01-01T11:00:00Z")));
        let d = run(&r, 3, 0, Verdict::Ended(CallOutcome::NoAnswer));
        assert_eq!(d.state, ContactState::Exhausted);
    }

    #[test]
    fn answered_calls_retry_after_the_completed_delay() {
        let d = run(&rules(), 1, 0, Verdict::Answered(None));
        assert_eq!(d.next_attempt_at, Some(at("2026-01-02T10:00:00Z")));
    }

    #[test]
    fn stop_set_retires() {
        let mut r = rules();
        let stop = DispositionId::new();
        r.stop_disposition_ids = vec![stop];
        assert_eq!(
            run(&r, 1, 0, Verdict::Answered(Some(stop))).state,
            ContactState::Retired
        );
        assert_eq!(
            run(&r, 1, 0, Verdict::Answered(Some(DispositionId::new()))).state,
            ContactState::Scheduled
        );
        r.stop_on_no_answer = true;
        r.stop_on_voicemail = true;
        r.stop_on_unclassified = true;
        for v in [
            Verdict::Ended(CallOutcome::NoAnswer),
            Verdict::Ended(CallOutcome::Busy),
            Verdict::Ended(CallOutcome::Voicemail),
            Verdict::Answered(None),
        ] {
            assert_eq!(run(&r, 1, 0, v).state, ContactState::Retired, "{v:?}");
        }
        assert_eq!(
            run(&r, 1, 0, Verdict::Ended(CallOutcome::Failed)).state,
            ContactState::Scheduled
        );
    }

    #[test]
    fn infra_errors_give_the_attempt_back_until_max_infra_retries() {
        let r = rules();
        let d = run(&r, 1, 0, Verdict::Ended(CallOutcome::InfraError));
        assert!(d.refund_attempt && d.infra_retry);
        assert_eq!(d.next_attempt_at, Some(at("2026-01-01T10:01:00Z")));
        let d = run(&r, 1, 2, Verdict::Ended(CallOutcome::InfraError));
        assert!(!d.refund_attempt);
        assert_eq!(d.next_attempt_at, Some(at("2026-01-01T11:00:00Z")));
        let d = run(&r, 3, 2, Verdict::Ended(CallOutcome::InfraError));
        assert_eq!(d.state, ContactState::Exhausted);
    }

    #[test]
    fn an_interrupted_call_spends_its_attempt() {
        let d = run(&rules(), 3, 0, Verdict::Interrupted);
        assert_eq!(d.state, ContactState::Exhausted);
        let d = run(&rules(), 1, 0, Verdict::Interrupted);
        assert!(!d.refund_attempt);
        assert_eq!(d.state, ContactState::Scheduled);
    }

    #[test]
    fn a_closed_campaign_excludes_instead_of_retrying() {
        let mut rng = StdRng::seed_from_u64(1);
        let d = settle(
            &rules(),
            Tries {
                attempts: 1,
                infra_retries: 0,
            },
            Verdict::Ended(CallOutcome::NoAnswer),
            at("2026-01-01T10:00:00Z"),
            Duration::seconds(60),
            Some(ExclusionReason::CampaignStopped),
            &mut rng,
        );
        assert_eq!(d.state, ContactState::Excluded);
        assert_eq!(d.excluded_reason, Some(ExclusionReason::CampaignStopped));
    }

    #[test]
    fn randomized_retries_stay_within_twenty_percent() {
        let mut rng = StdRng::seed_from_u64(3);
        for _ in 0..1000 {
            let d = retry_delay(3600, true, &mut rng).num_seconds();
            assert!((2880..=4320).contains(&d), "{d}");
        }
    }

    #[test]
    fn next_midnight_respects_dst() {
        // New York springs forward on 2026-03-08.
        let zone = Tz::America__New_York;
        let m = next_local_midnight(at("2026-03-08T12:00:00Z"), zone);
        assert_eq!(m, at("2026-03-09T04:00:00Z"));
        let m = next_local_midnight(at("2026-03-07T12:00:00Z"), zone);
        assert_eq!(m, at("2026-03-08T05:00:00Z"));
    }

    #[test]
    fn contact_zone_prefers_the_contact_then_the_number() {
        let window = CallingWindow::default_in(Tz::Asia__Jerusalem);
        assert_eq!(
            contact_zone(&window, Some("Europe/Paris"), "+972501234567"),
            Tz::Europe__Paris
        );
        assert_eq!(
            contact_zone(&window, None, "+12125550100"),
            Tz::America__New_York
        );
        let mut fixed = window.clone();
        fixed.use_contact_timezone = false;
        assert_eq!(
            contact_zone(&fixed, Some("Europe/Paris"), "+12125550100"),
            Tz::Asia__Jerusalem
        );
    }
}
