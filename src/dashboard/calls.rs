//! Calls: the list with its filters, paged newest first, and one call with its transcript beside
//! its recording.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Days, NaiveDate, Utc};
use maud::{Markup, html};
use serde::Deserialize;
use switchboard_actors::call::{CallDirection, CallStatus};
use switchboard_actors::conversation::{Speaker, Unheard};
use switchboard_actors::ids::{AgentId, CallId, CampaignId};

use super::layout::{denied, empty, money, page, respond, when};
use super::layout::{not_found, unavailable};
use super::urls::Url;
use super::viewer::Viewer;
use super::workspace::masked_address;
use crate::app::state::App;
use crate::domain::auth::Scope;
use crate::store::{AnalysisSkip, AnalysisStatus, CallFilter};

/// Most calls a page of the list shows.
const ROWS: i64 = 50;
/// Most campaigns and agents offered as filters (newest first; one chosen elsewhere, through a
/// link from its own page, is offered too).
const CHOICES: i64 = 500;

/// The list's query: every filter as the form sends it (an empty value is no filter), and the
/// row to page on from.
#[derive(Deserialize, Default, Clone, PartialEq, Eq)]
pub struct CallsQuery {
    #[serde(default)]
    status: String,
    #[serde(default)]
    direction: String,
    #[serde(default)]
    campaign: String,
    #[serde(default)]
    agent: String,
    /// The first day (UTC), `YYYY-MM-DD`.
    #[serde(default)]
    from: String,
    /// The last day (UTC), `YYYY-MM-DD`, included.
    #[serde(default)]
    to: String,
    before: Option<i64>,
}

impl CallsQuery {
    /// The filter the query asks for, or the fields it cannot be read from, each with why.
    fn filter(&self) -> Result<CallFilter, Vec<(&'static str, String)>> {
        let mut errors = Vec::new();
        let given = |s: &str| Some(s.trim()).filter(|s| !s.is_empty()).map(str::to_owned);
        let mut filter = CallFilter::default();
        if let Some(s) = given(&self.status) {
            match CallStatus::parse(&s) {
                Some(s) => filter.status = Some(s),
                None => errors.push(("status", "That is not a status a call can have.".into())),
            }
        }
        if let Some(d) = given(&self.direction) {
            match CallDirection::parse(&d) {
                Some(d) => filter.direction = Some(d),
                None => errors.push(("direction", "A call is either outbound or inbound.".into())),
            }
        }
        if let Some(c) = given(&self.campaign) {
            match uuid::Uuid::parse_str(&c) {
                Ok(c) => filter.campaign_id = Some(CampaignId::from_uuid(c)),
                Err(_) => errors.push(("campaign", "That is not a campaign's id.".into())),
            }
        }
        if let Some(a) = given(&self.agent) {
            match uuid::Uuid::parse_str(&a) {
                Ok(a) => filter.agent_id = Some(AgentId::from_uuid(a)),
                Err(_) => errors.push(("agent", "That is not an agent's id.".into())),
            }
        }
        let day = |field: &'static str, s: &str, errors: &mut Vec<_>| -> Option<NaiveDate> {
            let s = given(s)?;
            NaiveDate::parse_from_str(&s, "%Y-%m-%d")
                .inspect_err(|_| errors.push((field, "Give a date as YYYY-MM-DD.".to_owned())))
                .ok()
        };
        let from = day("from", &self.from, &mut errors);
        let to = day("to", &self.to, &mut errors);
        if let (Some(f), Some(t)) = (from, to)
            && f > t
        {
            errors.push(("to", "The last day cannot come before the first.".into()));
        }
        filter.created_after = from.map(midnight);
        filter.created_before = to
            .and_then(|t| t.checked_add_days(Days::new(1)))
            .map(midnight);
        if errors.is_empty() {
            Ok(filter)
        } else {
            Err(errors)
        }
    }

    /// This list's address with the same filters, from `before` on (or from the newest).
    fn link(&self, before: Option<i64>) -> String {
        let mut url = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in [
            ("status", &self.status),
            ("direction", &self.direction),
            ("campaign", &self.campaign),
            ("agent", &self.agent),
            ("from", &self.from),
            ("to", &self.to),
        ] {
            if !v.trim().is_empty() {
                url.append_pair(k, v.trim());
            }
        }
        if let Some(b) = before {
            url.append_pair("before", &b.to_string());
        }
        let query = url.finish();
        if query.is_empty() {
            Url::Calls.to_string()
        } else {
            Url::Calls.with_query(&query)
        }
    }
}

fn midnight(day: NaiveDate) -> DateTime<Utc> {
    day.and_time(chrono::NaiveTime::MIN).and_utc()
}

pub async fn calls(
    State(state): State<App>,
    viewer: Viewer,
    Query(q): Query<CallsQuery>,
) -> Response {
    if !viewer.scopes.allows(Scope::CallsRead) {
        return denied(&viewer, Scope::CallsRead);
    }
    let names = match state
        .store
        .call_filter_names(viewer.workspace_id, CHOICES)
        .await
    {
        Ok(names) => names,
        Err(e) => return unavailable(&viewer, e),
    };
    let (filter, errors) = match q.filter() {
        Ok(filter) => (Some(filter), Vec::new()),
        Err(errors) => (None, errors),
    };
    let mut rows = Vec::new();
    if let Some(filter) = &filter {
        rows = match state
            .store
            .calls_before(viewer.workspace_id, filter, q.before, ROWS + 1)
            .await
        {
            Ok(rows) => rows,
            Err(e) => return unavailable(&viewer, e),
        };
    }
    let older = (rows.len() as i64 > ROWS).then(|| {
        rows.truncate(ROWS as usize);
        rows.last().map(|(cursor, _)| *cursor)
    });
    let filtered = filter.as_ref().is_some_and(|f| *f != CallFilter::default());
    let body = html! {
        (filters(&q, &names, &errors))
        @if !errors.is_empty() {
            p.muted { "Mend the filters above to see calls." }
        } @else if rows.is_empty() && q.before.is_some() {
            p { "No older calls match." } p { a href=(q.link(None)) { "Back to the newest" } }
        } @else if rows.is_empty() && filtered {
            p { "No call matches these filters. " a href=(Url::Calls) { "Show every call" } }
        } @else if rows.is_empty() {
            (empty("calls", html! { "Place one with " code { "POST /calls" } ", or send a SIP call to one of your endpoints." }))
        } @else {
            (table(&rows, &names))
            nav.pager aria-label="Call pages" {
                @if q.before.is_some() { a href=(q.link(None)) { "Newest" } }
                @if let Some(Some(cursor)) = older { a href=(q.link(Some(cursor))) { "Older" } }
            }
        }
    };
    let status = if errors.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    };
    respond(status, page(Some(&viewer), "Calls", Some(Url::Calls), body))
}

type Names = (Vec<(CampaignId, String)>, Vec<(AgentId, String)>);

/// The filter form: each control labelled, each refusal beside its field.
fn filters(q: &CallsQuery, names: &Names, errors: &[(&'static str, String)]) -> Markup {
    let err = |field: &str| {
        errors
            .iter()
            .find(|(f, _)| *f == field)
            .map(|(_, m)| m.as_str())
    };
    let invalid = |field: &str| err(field).map(|_| "true");
    let described = |field: &str| err(field).map(|_| format!("{field}-error"));
    let said = |field: &str| {
        html! { @if let Some(e) = err(field) { p.field-error id=(format!("{field}-error")) { (e) } } }
    };
    let choose = |field: &str, label: &str, current: &str, options: Vec<(String, String)>| {
        let current = current.trim();
        let known = current.is_empty() || options.iter().any(|(v, _)| v == current);
        html! {
            div.field {
                label for=(field) { (label) }
                select id=(field) name=(field) aria-invalid=[invalid(field)] aria-describedby=[described(field)] {
                    option value="" { "Any" }
                    @for (value, text) in &options {
                        option value=(value) selected[value == current] { (text) }
                    }
                    @if !known { option value=(current) selected { (current) } }
                }
                (said(field))
            }
        }
    };
    let day = |field: &str, label: &str, current: &str| {
        html! {
            div.field {
                label for=(field) { (label) }
                input id=(field) name=(field) type="date" value=(current)
                    aria-invalid=[invalid(field)] aria-describedby=[described(field)];
                (said(field))
            }
        }
    };
    let pairs = |v: &[(&'static str, &'static str)]| {
        v.iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    };
    html! {
        form.filters method="get" action=(Url::Calls) aria-label="Filter calls" {
            (choose("status", "Status", &q.status,
                CallStatus::ALL.iter().map(|s| (s.as_str().to_owned(), s.as_str().replace('_', " "))).collect()))
            (choose("direction", "Direction", &q.direction, pairs(&[("outbound", "outbound"), ("inbound", "inbound")])))
            (choose("campaign", "Campaign", &q.campaign,
                names.0.iter().map(|(id, n)| (id.to_string(), n.clone())).collect()))
            (choose("agent", "Agent", &q.agent,
                names.1.iter().map(|(id, n)| (id.to_string(), n.clone())).collect()))
            (day("from", "From (UTC)", &q.from))
            (day("to", "To (UTC, included)", &q.to))
            button type="submit" { "Filter" }
            @if *q != CallsQuery::default() { a href=(Url::Calls) { "Clear" } }
        }
    }
}

fn table(rows: &[(i64, crate::store::CallRecord)], names: &Names) -> Markup {
    let campaigns: HashMap<CampaignId, &str> =
        names.0.iter().map(|(id, n)| (*id, n.as_str())).collect();
    let agents: HashMap<AgentId, &str> = names.1.iter().map(|(id, n)| (*id, n.as_str())).collect();
    html! {
        table {
            caption.sr-only { "Calls, newest first" }
            thead { tr {
                th scope="col" { "Created" } th scope="col" { "Direction" } th scope="col" { "From" }
                th scope="col" { "To" } th scope="col" { "Agent" } th scope="col" { "Campaign" }
                th scope="col" { "Status" } th scope="col" { "Duration" } th scope="col" { "Cost" }
            } }
            tbody {
                @for (_, c) in rows {
                    tr {
                        td { a href=(Url::Call { id: c.id }) { (when(&c.created_at)) } }
                        td { (c.direction) }
                        td { (c.from_number) }
                        td { (masked_address(&c.to_number)) }
                        td { @if let Some(a) = c.agent_id { (agents.get(&a).copied().unwrap_or("an older agent")) } @else { "—" } }
                        td { @if let Some(id) = c.campaign_id {
                            a href=(Url::Campaign { id }) { (campaigns.get(&id).copied().unwrap_or("an older campaign")) }
                        } @else { "—" } }
                        td { (c.status) @if let Some(o) = &c.outcome { " · " (o) } }
                        td.num { (c.duration_secs) " s" }
                        td.num { (money(c.cost_cents)) }
                    }
                }
            }
        }
    }
}

fn clock(ms: u64) -> String {
    format!("{}:{:02}", ms / 60_000, (ms / 1000) % 60)
}

pub async fn call(State(state): State<App>, viewer: Viewer, Path(id): Path<String>) -> Response {
    if !viewer.scopes.allows(Scope::CallsRead) {
        return denied(&viewer, Scope::CallsRead);
    }
    let Ok(id) = uuid::Uuid::parse_str(&id) else {
        return not_found(Some(viewer)).await;
    };
    let detail = match state
        .store
        .call_detail(viewer.workspace_id, CallId::from_uuid(id))
        .await
    {
        Ok(Some(d)) => d,
        Ok(None) => return not_found(Some(viewer)).await,
        Err(e) => return unavailable(&viewer, e),
    };
    let mut c = detail.call.clone().presented(state.recording_links());
    // The player fetches the signed link from this page's own origin: the public URL the link
    // is made with may name another host than the one the operator reached (a proxy's), which
    // the page's policy (`media-src 'self'`) would refuse.
    let public = state.public_url();
    c.recording_url = c.recording_url.map(|url| match url.strip_prefix(&public) {
        Some(path) if path.starts_with('/') => path.to_owned(),
        _ => url,
    });
    let title = if c.direction == CallDirection::Inbound {
        format!("Call from {}", c.from_number)
    } else {
        format!("Call to {}", masked_address(&c.to_number))
    };
    let body = html! {
        // Side by side on a wide screen: the facts and the player (kept in view), then the
        // transcript whose turns seek it.
        div.call-layout {
            div.call-side {
                dl.facts {
                    dt { "Direction" } dd { (c.direction) }
                    dt { "From" } dd { (c.from_number) }
                    dt { "To" } dd { (masked_address(&c.to_number)) }
                    dt { "Status" } dd { (c.status) @if let Some(o) = &c.outcome { " · " (o) } }
                    dt { "End reason" } dd { (c.end_reason.map_or("—", |r| r.as_str())) }
                    dt { "Answered by" } dd { (c.answered_by.map_or("—", |a| a.as_str())) }
                    dt { "Codec" } dd { (c.codec.map_or("—", |c| c.name())) }
                    dt { "SIP code" } dd { (c.sip_code.map(|s| s.to_string()).unwrap_or_else(|| "—".into())) }
                    dt { "Duration" } dd { (c.duration_secs) " s" }
                    dt { "Cost" } dd { (money(c.cost_cents)) }
                    dt { "Created" } dd { (when(&c.created_at)) }
                }
                @if let Some(url) = &c.recording_url {
                    section aria-labelledby="recording" {
                        h2 id="recording" { "Recording" }
                        audio id="player" controls preload="metadata" src=(url) { "Your browser cannot play the recording." }
                    }
                }
            }
            section.call-main aria-labelledby="transcript" {
                h2 id="transcript" { "Transcript" }
                @if detail.transcript.is_empty() {
                    p.muted { "Nothing was said on this call." }
                } @else {
                    ol.transcript {
                        @for t in &detail.transcript {
                            @let who = if t.role == Speaker::Agent { "Agent" } else { "Caller" };
                            li class=(if t.role == Speaker::Agent { "agent" } else { "caller" }) {
                                @if c.recording_url.is_some() {
                                    button.seek type="button" data-seek-ms=(t.start_ms)
                                        aria-label=(format!("Play the recording from {}", clock(t.start_ms))) { (clock(t.start_ms)) }
                                } @else {
                                    span.at { (clock(t.start_ms)) }
                                }
                                " "
                                strong { (who) }
                                @if let Some(node) = &t.node { " " span.node { "in " (node) } }
                                p {
                                    (t.text) @if t.interrupted { " " em { "(interrupted)" } }
                                    @if let Some(digits) = &t.digits {
                                        @if t.role == Speaker::Agent { "Sent keys " } @else { "Pressed " }
                                        kbd.digits { (digits) }
                                    }
                                    @match t.unheard {
                                        Some(Unheard::NoSpeechToText) => em.muted { "Not heard: no speech to text is configured (--stt-url)." },
                                        Some(Unheard::TranscriptionFailed) => em.muted { "Not heard: speech to text failed (see the vendor failures)." },
                                        None => {}
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if !detail.flow_path.is_empty() {
            section aria-labelledby="path" {
                h2 id="path" { "Flow path" }
                ol.path {
                    @for step in &detail.flow_path {
                        li { span.at { (clock(step.entered_ms)) } " " strong { (step.node_id) } " — " (step.reason) }
                    }
                }
            }
        }
        @if !detail.events.is_empty() {
            section aria-labelledby="events" {
                h2 id="events" { "Tools and integrations" }
                table {
                    thead { tr { th scope="col" { "At" } th scope="col" { "Name" } th scope="col" { "Status" } th scope="col" { "Result" } } }
                    tbody {
                        @for e in &detail.events {
                            tr {
                                td { (clock(e.at_ms)) }
                                td { (e.name) }
                                td { (format!("{:?}", e.status).to_lowercase()) }
                                td.preview { (e.error.as_deref().or(e.response_preview.as_deref()).unwrap_or("")) }
                            }
                        }
                    }
                }
            }
        }
        section aria-labelledby="analysis" {
            h2 id="analysis" { "Analysis" }
            @match (&detail.summary, detail.analysis_status) {
                (Some(summary), _) => p { (summary) },
                (None, Some(AnalysisStatus::Skipped)) => p.muted { (match detail.analysis_skipped {
                    Some(AnalysisSkip::NotAnswered) => "Not analysed: the call was not answered by a person.",
                    Some(AnalysisSkip::NothingSaid) => "Not analysed: nothing was said on the call.",
                    Some(AnalysisSkip::NoChatModel) | None => "Not analysed: no chat model is configured (--llm-url).",
                }) },
                (None, Some(AnalysisStatus::Failed)) => p.muted { "The analysis failed: " (detail.analysis_error.as_deref().unwrap_or("no reason was given")) },
                (None, Some(AnalysisStatus::Pending)) => p.muted { "The analysis is under way." },
                (None, _) => p.muted { "No analysis yet: the call has not ended." },
            }
            @if let Some(found) = detail.extracted.as_ref().filter(|f| !f.is_empty()) {
                dl.facts.extracted {
                    @for (name, value) in found {
                        dt { (name) }
                        dd { @match value {
                            serde_json::Value::Null => span.muted { "not found" },
                            serde_json::Value::String(s) => (s),
                            other => (other.to_string()),
                        } }
                    }
                }
            }
        }
    };
    respond(
        StatusCode::OK,
        page(Some(&viewer), &title, Some(Url::Calls), body),
    )
}
