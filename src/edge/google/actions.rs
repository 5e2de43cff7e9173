//! The action catalog ([`crate::domain::integrations`]) run against Google: each [`Action`] as
//! the REST call it makes, Calendar's `create_event`, `list_events`, `check_availability` and
//! `cancel_event`, and Gmail's `send_email`. [`run`] matches every action without a catch-all,
//! so an action added to the catalog does not build until it has its call here.
//!
//! The arguments, their types and which are required are the catalog's; how they are read:
//! - Calendar: times are ISO 8601 (one without an offset is read in the zone), `time_zone`
//!   IANA (blank: the calendar's own), `calendar_id` defaults to `primary`, `attendees` is one
//!   address, a list or a comma-separated string.
//! - Gmail: addresses are one or a list, `html` true makes the body HTML; sent from the
//!   connected account.
//!
//! What the flow sees of a calendar answer is [`super::calendar::sanitize`]d;
//! `check_availability` adds `available` (true when no calendar asked about is busy).
//! `cancel_event` tries `primary`, then, on a 404, every other calendar the account can write.

use chrono::{DateTime, NaiveDateTime, TimeZone};
use chrono_tz::Tz;
use reqwest::Method;
use serde_json::{Map, Value, json};
use switchboard_actors::ids::IntegrationId;

use super::calendar::sanitize;
use super::client::{Failure, Google, OAuthGrant};
use super::gmail::{Email, EmailError};
use crate::domain::integrations::Action;

/// An action's answer: the flow's view of it, and what the provider said.
#[derive(Debug, Clone, PartialEq)]
pub struct Done {
    pub view: Value,
    pub raw: Value,
}

/// Why an action gave no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActionError {
    /// A required argument is absent or empty.
    Missing(String),
    /// An argument the provider would refuse (nothing was sent).
    Invalid(String),
    Failure(Failure),
}

impl From<Failure> for ActionError {
    fn from(f: Failure) -> Self {
        ActionError::Failure(f)
    }
}

/// One integration's account, as an action needs it.
pub struct Account<'a> {
    pub google: &'a Google,
    pub id: IntegrationId,
    pub grant: &'a OAuthGrant,
    /// The connected address (Gmail's sender).
    pub address: &'a str,
}

impl Account<'_> {
    async fn send(
        &self,
        method: Method,
        url: &str,
        body: Option<&Value>,
    ) -> Result<Value, Failure> {
        Ok(self
            .google
            .send(self.id, self.grant, method, url, body)
            .await?
            .body)
    }

    /// `base` with `segments` appended (each percent-encoded) and `query`.
    fn url(&self, base: &str, segments: &[&str], query: &[(&str, &str)]) -> String {
        let mut url = match url::Url::parse(base) {
            Ok(url) => url,
            Err(_) => return base.to_string(),
        };
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        url.to_string()
    }
}

/// Runs `action` with `args` on the account.
pub async fn run(
    account: &Account<'_>,
    action: Action,
    args: &Map<String, Value>,
) -> Result<Done, ActionError> {
    match action {
        Action::CreateEvent => create_event(account, args).await,
        Action::ListEvents => list_events(account, args).await,
        Action::CheckAvailability => check_availability(account, args).await,
        Action::CancelEvent => cancel_event(account, args).await,
        Action::SendEmail => send_email(account, args).await,
    }
}

/// A string argument, trimmed; `None` when absent or blank.
fn text<'a>(args: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    args.get(name)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

fn required<'a>(args: &'a Map<String, Value>, name: &str) -> Result<&'a str, ActionError> {
    text(args, name).ok_or_else(|| ActionError::Missing(name.to_string()))
}

/// The zone named by `time_zone`, else the calendar's own.
async fn zone(
    account: &Account<'_>,
    args: &Map<String, Value>,
    calendar: &str,
) -> Result<Tz, ActionError> {
    let name = match text(args, "time_zone") {
        Some(name) => name.to_string(),
        None => {
            let url = account.url(&account.google.urls.calendar, &["calendars", calendar], &[]);
            let answer = account.send(Method::GET, &url, None).await?;
            answer["timeZone"].as_str().unwrap_or("UTC").to_string()
        }
    };
    name.parse::<Tz>()
        .map_err(|_| ActionError::Invalid(format!("`time_zone` {name:?} is not an IANA time zone")))
}

/// An ISO 8601 time as RFC 3339; one without an offset is read as wall-clock time in `zone`.
pub fn instant(name: &str, value: &str, zone: Tz) -> Result<String, ActionError> {
    if let Ok(at) = DateTime::parse_from_rfc3339(value) {
        return Ok(at.to_rfc3339());
    }
    for format in [
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(naive) = NaiveDateTime::parse_from_str(value, format)
            && let Some(at) = zone.from_local_datetime(&naive).earliest()
        {
            return Ok(at.to_rfc3339());
        }
    }
    Err(ActionError::Invalid(format!(
        "`{name}` {value:?} is not an ISO 8601 time"
    )))
}

fn window(
    args: &Map<String, Value>,
    zone: Tz,
    need: bool,
) -> Result<Option<(String, String)>, ActionError> {
    let (start, end) = if need {
        (
            Some(required(args, "start_time")?),
            Some(required(args, "end_time")?),
        )
    } else {
        (text(args, "start_time"), text(args, "end_time"))
    };
    match (start, end) {
        (Some(s), Some(e)) => Ok(Some((
            instant("start_time", s, zone)?,
            instant("end_time", e, zone)?,
        ))),
        (Some(s), None) => Ok(Some((instant("start_time", s, zone)?, String::new()))),
        _ => Ok(None),
    }
}

fn calendar_of(args: &Map<String, Value>) -> &str {
    text(args, "calendar_id").unwrap_or("primary")
}

/// `attendees` as Calendar's attendee list.
fn attendees(args: &Map<String, Value>) -> Vec<Value> {
    let one = |v: &Value| {
        v.as_str()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| json!({"email": s}))
    };
    match args.get("attendees") {
        Some(Value::Array(items)) => items.iter().filter_map(one).collect(),
        Some(Value::String(list)) => list
            .split(',')
            .filter_map(|s| one(&Value::String(s.to_string())))
            .collect(),
        _ => Vec::new(),
    }
}

/// A slot's calendar, zone, start and end, both times required.
async fn slot<'a>(
    account: &Account<'_>,
    args: &'a Map<String, Value>,
) -> Result<(&'a str, Tz, String, String), ActionError> {
    required(args, "start_time")?;
    required(args, "end_time")?;
    let calendar = calendar_of(args);
    let zone = zone(account, args, calendar).await?;
    let Some((start, end)) = window(args, zone, true)? else {
        return Err(ActionError::Missing("start_time".into()));
    };
    Ok((calendar, zone, start, end))
}

async fn create_event(
    account: &Account<'_>,
    args: &Map<String, Value>,
) -> Result<Done, ActionError> {
    let (calendar, zone, start, end) = slot(account, args).await?;
    let mut event = json!({
        "summary": text(args, "summary").unwrap_or("Meeting"),
        "start": {"dateTime": start, "timeZone": zone.name()},
        "end": {"dateTime": end, "timeZone": zone.name()},
    });
    for field in ["description", "location"] {
        if let Some(value) = text(args, field) {
            event[field] = json!(value);
        }
    }
    let attendees = attendees(args);
    let notify = if attendees.is_empty() { "none" } else { "all" };
    if !attendees.is_empty() {
        event["attendees"] = Value::Array(attendees);
    }
    let url = account.url(
        &account.google.urls.calendar,
        &["calendars", calendar, "events"],
        &[("sendUpdates", notify)],
    );
    let raw = account.send(Method::POST, &url, Some(&event)).await?;
    Ok(Done {
        view: sanitize(&raw, zone),
        raw,
    })
}

async fn list_events(
    account: &Account<'_>,
    args: &Map<String, Value>,
) -> Result<Done, ActionError> {
    let calendar = calendar_of(args);
    let zone = zone(account, args, calendar).await?;
    let mut query = vec![
        ("singleEvents", "true".to_string()),
        ("orderBy", "startTime".to_string()),
        ("maxResults", "50".to_string()),
        ("timeZone", zone.name().to_string()),
    ];
    if let Some((start, end)) = window(args, zone, false)? {
        query.push(("timeMin", start));
        if !end.is_empty() {
            query.push(("timeMax", end));
        }
    }
    if let Some(q) = text(args, "query") {
        query.push(("q", q.to_string()));
    }
    let query: Vec<(&str, &str)> = query.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let url = account.url(
        &account.google.urls.calendar,
        &["calendars", calendar, "events"],
        &query,
    );
    let raw = account.send(Method::GET, &url, None).await?;
    Ok(Done {
        view: sanitize(&raw, zone),
        raw,
    })
}

async fn check_availability(
    account: &Account<'_>,
    args: &Map<String, Value>,
) -> Result<Done, ActionError> {
    let (calendar, zone, start, end) = slot(account, args).await?;
    let body = json!({
        "timeMin": start, "timeMax": end, "timeZone": zone.name(),
        "items": [{"id": calendar}],
    });
    let url = account.url(&account.google.urls.calendar, &["freeBusy"], &[]);
    let raw = account.send(Method::POST, &url, Some(&body)).await?;
    let mut view = sanitize(&raw, zone);
    let available = raw["calendars"].as_object().is_some_and(|calendars| {
        calendars
            .values()
            .all(|c| c["busy"].as_array().is_none_or(Vec::is_empty) && c.get("errors").is_none())
    });
    if let Value::Object(top) = &mut view {
        top.insert("available".into(), Value::Bool(available));
    }
    Ok(Done { view, raw })
}

async fn cancel_event(
    account: &Account<'_>,
    args: &Map<String, Value>,
) -> Result<Done, ActionError> {
    let event = required(args, "event_id")?;
    let base = &account.google.urls.calendar;
    let delete = |calendar: String| {
        let url = account.url(
            base,
            &["calendars", &calendar, "events", event],
            &[("sendUpdates", "all")],
        );
        async move {
            account
                .send(Method::DELETE, &url, None)
                .await
                .map(|_| calendar)
        }
    };
    let cancelled = match delete("primary".into()).await {
        Err(Failure::Status(404, why)) => {
            let url = account.url(
                base,
                &["users", "me", "calendarList"],
                &[("minAccessRole", "writer")],
            );
            let list = account.send(Method::GET, &url, None).await?;
            let others: Vec<String> = list["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|c| c["primary"] != json!(true))
                .filter_map(|c| c["id"].as_str().map(str::to_string))
                .collect();
            let mut found = Err(Failure::Status(404, why));
            for calendar in others {
                match delete(calendar).await {
                    Err(Failure::Status(404, why)) => found = Err(Failure::Status(404, why)),
                    other => {
                        found = other;
                        break;
                    }
                }
            }
            found?
        }
        other => other?,
    };
    let view = json!({"cancelled": true, "event_id": event, "calendar_id": cancelled});
    Ok(Done {
        view,
        raw: Value::Null,
    })
}

async fn send_email(account: &Account<'_>, args: &Map<String, Value>) -> Result<Done, ActionError> {
    let email = Email::of(args).map_err(|e| match e {
        EmailError::Missing(field) => ActionError::Missing(field.to_string()),
        invalid => ActionError::Invalid(invalid.to_string()),
    })?;
    let url = account.url(
        &account.google.urls.gmail,
        &["users", "me", "messages", "send"],
        &[],
    );
    let raw = account
        .send(
            Method::POST,
            &url,
            Some(&json!({"raw": email.raw(account.address)})),
        )
        .await?;
    Ok(Done {
        view: raw.clone(),
        raw,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::integrations::ArgKind;

    #[test]
    fn a_time_without_an_offset_is_read_in_the_zone_across_a_dst_change() {
        let ny: Tz = "America/New_York".parse().unwrap();
        assert_eq!(
            instant("t", "2026-03-07 10:00", ny).unwrap(),
            "2026-03-07T10:00:00-05:00"
        );
        assert_eq!(
            instant("t", "2026-03-09T10:00", ny).unwrap(),
            "2026-03-09T10:00:00-04:00"
        );
        assert_eq!(
            instant("t", "2026-03-09T10:00:00+01:00", ny).unwrap(),
            "2026-03-09T10:00:00+01:00"
        );
        // 02:30 does not exist on the day the clocks spring forward.
        assert!(instant("t", "2026-03-08 02:30", ny).is_err());
        let err = instant("start_time", "tomorrow at ten", ny).unwrap_err();
        assert_eq!(
            err,
            ActionError::Invalid("`start_time` \"tomorrow at ten\" is not an ISO 8601 time".into())
        );
    }

    /// A value of the argument's kind that its action accepts.
    fn sample(kind: ArgKind) -> Value {
        match kind {
            ArgKind::Text => json!("x"),
            ArgKind::Time => json!("2026-03-09T10:00:00Z"),
            ArgKind::TimeZone => json!("UTC"),
            ArgKind::Addresses => json!("ada@example.com"),
            ArgKind::Flag => json!(true),
        }
    }

    #[tokio::test]
    async fn every_action_has_a_runner_that_requires_exactly_the_catalog_s_arguments() {
        // Loopback is outside the outbound policy: whatever passes the arguments' checks is
        // refused before anything is sent.
        let base = "http://127.0.0.1:9";
        let urls = super::super::GoogleUrls {
            authorize: format!("{base}/authorize"),
            token: format!("{base}/token"),
            userinfo: format!("{base}/userinfo"),
            calendar: format!("{base}/calendar/v3"),
            gmail: format!("{base}/gmail/v1"),
        };
        let google = Google::new(
            crate::edge::egress::Egress::system(Vec::new()),
            urls,
            std::time::Duration::from_millis(500),
        );
        let grant = OAuthGrant {
            client_id: "c".into(),
            client_secret: "s".into(),
            refresh_token: "r".into(),
        };
        let account = Account {
            google: &google,
            id: IntegrationId::new(),
            grant: &grant,
            address: "desk@example.com",
        };
        for action in Action::ALL {
            let all: Map<String, Value> = action
                .required_args()
                .map(|a| (a.name.to_string(), sample(a.kind)))
                .collect();
            let ran = run(&account, action, &all).await;
            assert!(
                !matches!(ran, Err(ActionError::Missing(_) | ActionError::Invalid(_))),
                "{action:?} with its required arguments: {ran:?}"
            );
            for arg in action.required_args() {
                let mut args = all.clone();
                args.remove(arg.name);
                assert_eq!(
                    run(&account, action, &args).await,
                    Err(ActionError::Missing(arg.name.to_string())),
                    "{action:?} without {}",
                    arg.name
                );
            }
        }
    }

    #[test]
    fn attendees_are_one_address_a_list_or_a_comma_separated_string() {
        let args = |v: Value| json!({"attendees": v}).as_object().unwrap().clone();
        assert_eq!(
            attendees(&args(json!("a@x.io"))),
            [json!({"email": "a@x.io"})]
        );
        assert_eq!(attendees(&args(json!("a@x.io, b@x.io"))).len(), 2);
        assert_eq!(attendees(&args(json!(["a@x.io", " ", "c@x.io"]))).len(), 2);
        assert!(attendees(&Map::new()).is_empty());
    }
}
