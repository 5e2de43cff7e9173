//! Calling windows: the days and hours, in a time zone, during which a contact may be called.
//!
//! A window is evaluated in local wall-clock time, so it stays correct across daylight-saving
//! changes: on the day clocks jump, `09:00-17:00` still means nine to five on the wall clock.
//!
//! **Invariant:** `start < end` (windows never cross midnight); the day named is the day the
//! window opens.

use std::collections::BTreeSet;

use chrono::{DateTime, Datelike, Duration, LocalResult, NaiveDate, NaiveTime, TimeZone, Utc, Weekday};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

/// How far ahead "reachable" looks when a campaign has no end date.
pub const REACHABLE_HORIZON_DAYS: i64 = 7;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    #[error("calling_window must be an object with timezone, days, start and end")]
    NotAnObject,
    #[error("calling_window.{field}: {message}")]
    Field { field: &'static str, message: String },
}

/// A calling window as sent and returned by the API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallingWindow {
    /// IANA zone the hours are read in (and the fallback zone for contacts).
    pub timezone: Tz,
    /// Days the window opens, Monday first.
    pub days: BTreeSet<DayOfWeek>,
    /// Opening time, `HH:MM`.
    #[serde(with = "hhmm")]
    pub start: NaiveTime,
    /// Closing time, `HH:MM`, exclusive.
    #[serde(with = "hhmm")]
    pub end: NaiveTime,
    /// Apply the hours in the contact's own zone (its timezone, else its number's country).
    pub use_contact_timezone: bool,
}

/// A day of the week as written in windows: `mon` .. `sun`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DayOfWeek {
    Mon,
    Tue,
    Wed,
    Thu,
    Fri,
    Sat,
    Sun,
}

impl DayOfWeek {
    pub fn from_weekday(day: Weekday) -> Self {
        match day {
            Weekday::Mon => Self::Mon,
            Weekday::Tue => Self::Tue,
            Weekday::Wed => Self::Wed,
            Weekday::Thu => Self::Thu,
            Weekday::Fri => Self::Fri,
            Weekday::Sat => Self::Sat,
            Weekday::Sun => Self::Sun,
        }
    }
}

mod hhmm {
    use chrono::NaiveTime;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &NaiveTime, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&t.format("%H:%M").to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<NaiveTime, D::Error> {
        let s = String::deserialize(d)?;
        super::parse_hhmm(&s).ok_or_else(|| serde::de::Error::custom(format!("`{s}` is not a time of day in HH:MM")))
    }
}

fn parse_hhmm(s: &str) -> Option<NaiveTime> {
    if s == "24:00" {
        return NaiveTime::from_hms_opt(23, 59, 59);
    }
    NaiveTime::parse_from_str(s, "%H:%M").ok().filter(|_| s.len() == 5)
}

impl CallingWindow {
    /// Every day, 09:00 to 20:00 in the given zone, in the contact's zone when known.
    pub fn default_in(timezone: Tz) -> Self {
        Self {
            timezone,
            days: [DayOfWeek::Mon, DayOfWeek::Tue, DayOfWeek::Wed, DayOfWeek::Thu, DayOfWeek::Fri, DayOfWeek::Sat, DayOfWeek::Sun]
                .into_iter()
                .collect(),
            start: NaiveTime::from_hms_opt(9, 0, 0).expect("valid time"),
            end: NaiveTime::from_hms_opt(20, 0, 0).expect("valid time"),
            use_contact_timezone: true,
        }
    }

    /// Parses a window from API JSON, naming the field at fault.
    pub fn from_json(value: &serde_json::Value) -> Result<Self, WindowError> {
        let obj = value.as_object().ok_or(WindowError::NotAnObject)?;
        const KNOWN: [&str; 5] = ["timezone", "days", "start", "end", "use_contact_timezone"];
        if let Some(unknown) = obj.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(WindowError::Field {
                field: "unknown",
                message: format!("unknown field `{unknown}`; allowed: {}", KNOWN.join(", ")),
            });
        }
        let field = |field: &'static str, message: String| WindowError::Field { field, message };
        let timezone = match obj.get("timezone") {
            Some(serde_json::Value::String(s)) => s
                .parse::<Tz>()
                .map_err(|_| field("timezone", format!("`{s}` is not an IANA time zone")))?,
            Some(_) => return Err(field("timezone", "must be a string".into())),
            None => return Err(field("timezone", "is required".into())),
        };
        let days = match obj.get("days") {
            Some(serde_json::Value::Array(items)) => {
                let mut days = BTreeSet::new();
                for item in items {
                    let day: DayOfWeek = serde_json::from_value(item.clone())
                        .map_err(|_| field("days", format!("{item} is not one of mon, tue, wed, thu, fri, sat, sun")))?;
                    days.insert(day);
                }
                if days.is_empty() {
                    return Err(field("days", "must name at least one day".into()));
                }
                days
            }
            None => Self::default_in(timezone).days,
            Some(_) => return Err(field("days", "must be an array of days".into())),
        };
        let time = |name: &'static str| -> Result<NaiveTime, WindowError> {
            match obj.get(name) {
                Some(serde_json::Value::String(s)) => {
                    parse_hhmm(s).ok_or_else(|| field(name, format!("`{s}` is not a time of day in HH:MM")))
                }
                Some(_) => Err(field(name, "must be a string in HH:MM".into())),
                None => Err(field(name, "is required".into())),
            }
        };
        let start = time("start")?;
        let end = time("end")?;
        if start >= end {
            return Err(field("end", "must be later than start (windows do not cross midnight)".into()));
        }
        let use_contact_timezone = match obj.get("use_contact_timezone") {
            None => true,
            Some(serde_json::Value::Bool(b)) => *b,
            Some(_) => return Err(field("use_contact_timezone", "must be a boolean".into())),
        };
        Ok(Self { timezone, days, start, end, use_contact_timezone })
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// Whether `at` falls inside the window, read in `zone`.
    pub fn is_open_at(&self, at: DateTime<Utc>, zone: Tz) -> bool {
        let local = at.with_timezone(&zone);
        let time = local.time();
        self.days.contains(&DayOfWeek::from_weekday(local.weekday())) && time >= self.start && time < self.end
    }

    /// The window's interval on one local date, in UTC, if it opens that day. A start inside a
    /// DST gap opens at the first instant after the gap.
    fn interval_on(&self, date: NaiveDate, zone: Tz) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        if !self.days.contains(&DayOfWeek::from_weekday(date.weekday())) {
            return None;
        }
        let open = resolve_local(zone, date, self.start)?;
        let close = resolve_local(zone, date, self.end)?;
        (open < close).then_some((open, close))
    }

    /// The first instant at or after `from` and before `until` at which the window is open, in
    /// `zone`.
    pub fn next_open(&self, from: DateTime<Utc>, until: DateTime<Utc>, zone: Tz) -> Option<DateTime<Utc>> {
        if from >= until {
            return None;
        }
        let first_day = from.with_timezone(&zone).date_naive();
        // One day of slack on each side covers zones far from UTC.
        let days = (until - from).num_days() + 2;
        for offset in 0..=days {
            let date = first_day + Duration::days(offset);
            if let Some((open, close)) = self.interval_on(date, zone) {
                let candidate = open.max(from);
                if candidate < close && candidate < until {
                    return Some(candidate);
                }
            }
        }
        None
    }

    /// Whether a call could be placed at any instant between `now` and `ends_at` (or the next
    /// seven days when there is no end).
    pub fn reachable(&self, now: DateTime<Utc>, starts_at: Option<DateTime<Utc>>, ends_at: Option<DateTime<Utc>>) -> bool {
        let from = starts_at.map_or(now, |s| s.max(now));
        let until = ends_at.unwrap_or(from + Duration::days(REACHABLE_HORIZON_DAYS));
        self.next_open(from, until, self.timezone).is_some()
    }
}

/// The UTC instant of a local wall-clock time; a time inside a DST gap moves to the gap's end,
/// an ambiguous one takes its earlier reading.
fn resolve_local(zone: Tz, date: NaiveDate, time: NaiveTime) -> Option<DateTime<Utc>> {
    let naive = date.and_time(time);
    match zone.from_local_datetime(&naive) {
        LocalResult::Single(t) => Some(t.with_timezone(&Utc)),
        LocalResult::Ambiguous(a, _) => Some(a.with_timezone(&Utc)),
        LocalResult::None => {
            // Walk forward minute by minute out of the gap (gaps are at most a few hours).
            (1..=180).find_map(|m| match zone.from_local_datetime(&(naive + Duration::minutes(m))) {
                LocalResult::Single(t) => Some(t.with_timezone(&Utc)),
                LocalResult::Ambiguous(a, _) => Some(a.with_timezone(&Utc)),
                LocalResult::None => None,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn window(v: serde_json::Value) -> CallingWindow {
        CallingWindow::from_json(&v).unwrap()
    }

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn parses_and_round_trips() {
        let w = window(json!({"timezone": "Asia/Jerusalem", "days": ["sun", "mon"], "start": "09:00", "end": "17:30"}));
        assert!(w.use_contact_timezone);
        let back = CallingWindow::from_json(&w.to_json()).unwrap();
        assert_eq!(back, w);
        assert_eq!(w.to_json()["start"], "09:00");
    }

    #[test]
    fn bad_windows_name_the_field() {
        let cases = [
            (json!("9-5"), "object"),
            (json!({"timezone": "Mars/Base", "start": "09:00", "end": "10:00"}), "timezone"),
            (json!({"timezone": "UTC", "days": ["funday"], "start": "09:00", "end": "10:00"}), "days"),
            (json!({"timezone": "UTC", "start": "9am", "end": "10:00"}), "start"),
            (json!({"timezone": "UTC", "start": "18:00", "end": "10:00"}), "end"),
            (json!({"timezone": "UTC", "start": "09:00", "end": "10:00", "extra": 1}), "extra"),
            (json!({"timezone": "UTC", "start": "09:00", "end": "10:00", "use_contact_timezone": "yes"}), "use_contact_timezone"),
        ];
        for (value, needle) in cases {
            let err = CallingWindow::from_json(&value).unwrap_err().to_string();
            assert!(err.contains(needle), "{err} should mention {needle}");
        }
    }

    #[test]
    fn open_hours_follow_the_zone_and_the_days() {
        let w = window(json!({"timezone": "America/New_York", "days": ["mon", "tue", "wed", "thu", "fri"], "start": "09:00", "end": "17:00"}));
        let ny: Tz = "America/New_York".parse().unwrap();
        // Monday 2026-11-23 10:00 in New York is 15:00 UTC.
        assert!(w.is_open_at(utc("2026-11-23T15:00:00Z"), ny));
        assert!(!w.is_open_at(utc("2026-11-23T13:59:00Z"), ny));
        assert!(!w.is_open_at(utc("2026-11-23T22:00:00Z"), ny));
        // Saturday.
        assert!(!w.is_open_at(utc("2026-11-21T15:00:00Z"), ny));
        // From Saturday the next opening is Monday 09:00 local.
        let next = w.next_open(utc("2026-11-21T15:00:00Z"), utc("2026-12-01T00:00:00Z"), ny).unwrap();
        assert_eq!(next, utc("2026-11-23T14:00:00Z"));
    }

    #[test]
    fn windows_keep_wall_clock_hours_across_dst_changes() {
        let w = window(json!({"timezone": "America/New_York", "start": "09:00", "end": "17:00"}));
        let ny: Tz = "America/New_York".parse().unwrap();
        // 2026-03-08: clocks spring forward; 09:00 EDT is 13:00 UTC (the day before, 14:00 UTC).
        assert_eq!(w.next_open(utc("2026-03-08T05:00:00Z"), utc("2026-03-10T00:00:00Z"), ny), Some(utc("2026-03-08T13:00:00Z")));
        assert_eq!(w.next_open(utc("2026-03-07T05:00:00Z"), utc("2026-03-10T00:00:00Z"), ny), Some(utc("2026-03-07T14:00:00Z")));
        // 2026-11-01: clocks fall back; 09:00 EST is 14:00 UTC.
        assert_eq!(w.next_open(utc("2026-11-01T05:00:00Z"), utc("2026-11-03T00:00:00Z"), ny), Some(utc("2026-11-01T14:00:00Z")));
    }

    #[test]
    fn a_start_inside_the_dst_gap_opens_when_the_gap_ends() {
        let w = window(json!({"timezone": "America/New_York", "start": "02:30", "end": "04:00"}));
        let ny: Tz = "America/New_York".parse().unwrap();
        // 02:30 does not exist on 2026-03-08; 03:00 EDT (07:00 UTC) is the first open instant.
        assert_eq!(w.next_open(utc("2026-03-08T05:00:00Z"), utc("2026-03-09T00:00:00Z"), ny), Some(utc("2026-03-08T07:00:00Z")));
    }

    #[test]
    fn reachability_respects_the_end_date() {
        let w = window(json!({"timezone": "UTC", "days": ["mon"], "start": "09:00", "end": "10:00"}));
        let saturday = utc("2026-11-21T12:00:00Z");
        assert!(w.reachable(saturday, None, None));
        assert!(!w.reachable(saturday, None, Some(utc("2026-11-23T08:00:00Z"))));
        assert!(w.reachable(saturday, None, Some(utc("2026-11-23T09:30:00Z"))));
        // Starting after the end: never reachable.
        assert!(!w.reachable(saturday, Some(utc("2026-12-01T00:00:00Z")), Some(utc("2026-11-30T00:00:00Z"))));
    }
}
