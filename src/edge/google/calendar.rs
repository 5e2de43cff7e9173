//! Google Calendar answers as a flow sees them. The spec's post-processing of
//! `create_event`, `list_events` and `check_availability`: every event's `start.dateTime` and
//! `end.dateTime` become wall-clock times in the zone (`YYYY-MM-DD HH:MM`, no offset, no
//! seconds), their `timeZone` goes, and the answer gains a top-level `timeZone` and
//! `timeZone_note`. The zone is the `time_zone` argument, else the calendar's own. Free/busy
//! periods (`calendars.<id>.busy[].start` and `.end`) are wall-clock times the same way. The
//! answer as Google gave it is kept apart (`raw_response_preview` in the call's events);
//! custom branches match this view.

use chrono::DateTime;
use chrono_tz::Tz;
use serde_json::{Map, Value};

/// The note added beside `timeZone`.
pub fn zone_note(zone: Tz) -> String {
    format!(
        "Times are wall-clock times in {}, written YYYY-MM-DD HH:MM without an offset.",
        zone.name()
    )
}

/// `answer` as the flow sees it, its times in `zone`.
pub fn sanitize(answer: &Value, zone: Tz) -> Value {
    let mut view = answer.clone();
    walk(&mut view, zone);
    if let Value::Object(top) = &mut view {
        top.insert("timeZone".into(), Value::String(zone.name().to_string()));
        top.insert("timeZone_note".into(), Value::String(zone_note(zone)));
    }
    view
}

/// An RFC 3339 instant as wall-clock time in `zone`; `None` if it is not one.
fn wall_clock(text: &str, zone: Tz) -> Option<String> {
    let at = DateTime::parse_from_rfc3339(text).ok()?;
    Some(at.with_timezone(&zone).format("%Y-%m-%d %H:%M").to_string())
}

fn walk(value: &mut Value, zone: Tz) {
    match value {
        Value::Object(object) => {
            let period = object.contains_key("start") && object.contains_key("end");
            for key in ["start", "end"] {
                match object.get_mut(key) {
                    // An event's time: {dateTime, timeZone}.
                    Some(Value::Object(time)) => event_time(time, zone),
                    // A free/busy period's bound: an instant.
                    Some(Value::String(text)) if period => {
                        if let Some(wall) = wall_clock(text, zone) {
                            *text = wall;
                        }
                    }
                    _ => {}
                }
            }
            for (_, child) in object.iter_mut() {
                walk(child, zone);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| walk(item, zone)),
        _ => {}
    }
}

fn event_time(time: &mut Map<String, Value>, zone: Tz) {
    let Some(Value::String(text)) = time.get("dateTime") else {
        // An all-day event's `date` stays as it is.
        return;
    };
    if let Some(wall) = wall_clock(text, zone) {
        time.insert("dateTime".into(), Value::String(wall));
        time.remove("timeZone");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Events on either side of a zone's spring change, as `events.list` answers them.
    fn listed(zone: &str, before: &str, after: &str) -> Value {
        json!({
            "kind": "calendar#events",
            "summary": "desk@example.com",
            "timeZone": zone,
            "items": [
                {"id": "a", "summary": "Before", "start": {"dateTime": before, "timeZone": zone},
                 "end": {"dateTime": before, "timeZone": zone}},
                {"id": "b", "summary": "After", "start": {"dateTime": after, "timeZone": zone},
                 "end": {"dateTime": after, "timeZone": zone}},
                {"id": "c", "summary": "All day", "start": {"date": "2026-03-08"}, "end": {"date": "2026-03-09"}}
            ]
        })
    }

    fn times(view: &Value) -> Vec<String> {
        view["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                e["start"]["dateTime"]
                    .as_str()
                    .or(e["start"]["date"].as_str())
                    .unwrap()
                    .to_string()
            })
            .collect()
    }

    #[test]
    fn new_york_s_clocks_spring_forward_on_march_8() {
        // 15:00 UTC is 10:00 EST the day before, 11:00 EDT the day after.
        let answer = listed(
            "America/New_York",
            "2026-03-07T15:00:00Z",
            "2026-03-09T15:00:00Z",
        );
        let view = sanitize(&answer, chrono_tz::America::New_York);
        assert_eq!(
            times(&view),
            ["2026-03-07 10:00", "2026-03-09 11:00", "2026-03-08"]
        );
        assert_eq!(view["timeZone"], "America/New_York");
        assert_eq!(
            view["timeZone_note"],
            zone_note(chrono_tz::America::New_York)
        );
        for item in view["items"].as_array().unwrap() {
            assert!(item["start"].get("timeZone").is_none(), "{item}");
            assert!(item["end"].get("timeZone").is_none(), "{item}");
        }
        // Nothing else changed.
        assert_eq!(view["items"][0]["summary"], "Before");
        assert_eq!(view["kind"], "calendar#events");
    }

    #[test]
    fn berlin_s_clocks_spring_forward_on_march_29_and_offsets_are_read_as_given() {
        // Google writes instants with the calendar's offset: +01:00 before, +02:00 after.
        let answer = listed(
            "Europe/Berlin",
            "2026-03-28T10:00:00+01:00",
            "2026-03-30T10:00:00+02:00",
        );
        let view = sanitize(&answer, chrono_tz::Europe::Berlin);
        assert_eq!(
            times(&view),
            ["2026-03-28 10:00", "2026-03-30 10:00", "2026-03-08"]
        );
        // The same answer in the zone the node asked for (its `time_zone` argument).
        let view = sanitize(&answer, chrono_tz::America::New_York);
        // New York is on EDT (UTC-4) since March 8: 05:00 and 04:00.
        assert_eq!(
            times(&view),
            ["2026-03-28 05:00", "2026-03-30 04:00", "2026-03-08"]
        );
        assert_eq!(view["timeZone"], "America/New_York");
    }

    #[test]
    fn free_busy_periods_are_wall_clock_too() {
        let answer = json!({
            "kind": "calendar#freeBusy",
            "timeMin": "2026-10-24T00:00:00.000Z",
            "timeMax": "2026-10-27T00:00:00.000Z",
            "calendars": {"primary": {"busy": [
                {"start": "2026-10-24T08:00:00Z", "end": "2026-10-24T09:30:00Z"},
                {"start": "2026-10-26T08:00:00Z", "end": "2026-10-26T09:30:00Z"}
            ]}}
        });
        // Berlin falls back on October 25: 10:00 CEST before, 09:00 CET after.
        let view = sanitize(&answer, chrono_tz::Europe::Berlin);
        let busy = &view["calendars"]["primary"]["busy"];
        assert_eq!(
            busy[0],
            json!({"start": "2026-10-24 10:00", "end": "2026-10-24 11:30"})
        );
        assert_eq!(
            busy[1],
            json!({"start": "2026-10-26 09:00", "end": "2026-10-26 10:30"})
        );
        // The query's own bounds are not periods: kept as given.
        assert_eq!(view["timeMin"], "2026-10-24T00:00:00.000Z");
    }

    #[test]
    fn a_created_event_is_one_event_and_a_broken_time_is_left_alone() {
        let answer = json!({
            "id": "ev1", "status": "confirmed",
            "start": {"dateTime": "2026-11-02T14:30:00-05:00", "timeZone": "America/New_York"},
            "end": {"dateTime": "not a time", "timeZone": "America/New_York"}
        });
        let view = sanitize(&answer, chrono_tz::America::New_York);
        assert_eq!(view["start"], json!({"dateTime": "2026-11-02 14:30"}));
        assert_eq!(
            view["end"],
            json!({"dateTime": "not a time", "timeZone": "America/New_York"})
        );
    }
}
