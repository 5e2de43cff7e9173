//! Campaigns, calls, and one call with its transcript beside its recording.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::Value;
use switchboard_actors::conversation::Speaker;
use switchboard_actors::ids::CallId;

use super::layout::{denied, empty, money, page, problem, respond, when};
use super::session::Viewer;
use crate::auth::Scope;
use crate::http::AppState;
use crate::store::{AnalysisStatus, CallFilter, Page};
use switchboard_actors::call::CallStatus;

/// Most rows a list page shows.
const ROWS: i64 = 50;

/// The first page the key may see.
pub fn landing(scopes: &crate::auth::Scopes) -> &'static str {
    if scopes.allows(Scope::CampaignsManage) {
        "/app/campaigns"
    } else if scopes.allows(Scope::CallsRead) {
        "/app/calls"
    } else {
        "/app/settings/keys"
    }
}

pub async fn home(viewer: Viewer) -> Redirect {
    Redirect::to(landing(&viewer.scopes))
}

/// An unknown address under `/app`.
pub async fn not_found(viewer: Option<Viewer>) -> Response {
    problem(
        viewer.as_ref(),
        StatusCode::NOT_FOUND,
        "Not found",
        "There is nothing here. It may belong to another workspace, or it was removed.",
    )
}

pub(super) fn unavailable(viewer: &Viewer, error: impl std::fmt::Display) -> Response {
    tracing::error!(%error, "a dashboard page could not be read");
    problem(
        Some(viewer),
        StatusCode::SERVICE_UNAVAILABLE,
        "Unavailable",
        "The service cannot read this right now. Try again shortly.",
    )
}

/// Contacts per state as a stacked bar, with its legend in words.
pub(super) fn progress(contacts: &Value, total: i64) -> Markup {
    let states: Vec<(&str, i64)> = contacts
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.as_str(), v.as_i64()?)))
        .filter(|(_, n)| *n > 0)
        .collect();
    let words: Vec<String> = states.iter().map(|(s, n)| format!("{n} {s}")).collect();
    html! {
        @if total == 0 {
            span.muted { "No contacts" }
        } @else {
            div.bar role="img" aria-label=(format!("{total} contacts: {}", words.join(", "))) {
                @for (state, n) in &states {
                    span class=(format!("seg s-{state} w-{}", (n * 20 / total).max(1) * 5)) {}
                }
            }
            span.legend { (words.join(" · ")) }
        }
    }
}

pub async fn campaigns(State(state): State<AppState>, viewer: Viewer) -> Response {
    campaigns_with(&state, &viewer, StatusCode::OK, "", None).await
}

/// The campaigns, and the form that creates one (with `name` and its `error` when it was
/// refused).
pub(super) async fn campaigns_with(
    state: &AppState,
    viewer: &Viewer,
    status: StatusCode,
    name: &str,
    error: Option<&str>,
) -> Response {
    if !viewer.scopes.allows(Scope::CampaignsManage) {
        return denied(viewer, Scope::CampaignsManage);
    }
    let page_of = Page {
        limit: ROWS,
        offset: 0,
    };
    let listed = match state
        .store
        .list_campaigns(viewer.workspace_id, None, page_of)
        .await
    {
        Ok(listed) => listed,
        Err(e) => return unavailable(viewer, e),
    };
    let mut rows = Vec::new();
    for c in listed.items {
        match crate::http::campaigns::view(state, viewer.workspace_id, c).await {
            Ok(v) => rows.push(serde_json::to_value(v).unwrap_or(Value::Null)),
            Err(e) => return unavailable(viewer, format!("{e:?}")),
        }
    }
    let body = html! {
        form.inline method="post" action="/app/campaigns" {
            input type="hidden" name="csrf" value=(viewer.csrf);
            label for="new-name" { "New campaign" }
            input id="new-name" name="name" type="text" required maxlength="200" value=(name)
                placeholder="Name" aria-describedby=[error.map(|_| "new-name-error")];
            button type="submit" { "Create" }
            @if let Some(e) = error { p.field-error id="new-name-error" { (e) } }
        }
        @if rows.is_empty() {
            (empty("campaigns", html! { "Create one above (or with " code { "POST /campaigns" } "), then enroll contacts and launch it." }))
        } @else {
            table {
                caption.sr-only { "Campaigns, newest first" }
                thead { tr {
                    th scope="col" { "Name" } th scope="col" { "Status" } th scope="col" { "Contacts" }
                    th scope="col" { "Attempts" } th scope="col" { "Spend" } th scope="col" { "Last evaluation" }
                } }
                tbody {
                    @for c in &rows {
                        @let stats = &c["stats"];
                        tr {
                            td { a href=(format!("/app/campaigns/{}", c["id"].as_str().unwrap_or_default())) { (c["name"].as_str().unwrap_or_default()) } }
                            td { span class=(format!("status st-{}", c["status"].as_str().unwrap_or_default())) { (c["status"].as_str().unwrap_or_default()) } }
                            td { (progress(&stats["contacts"], stats["total_contacts"].as_i64().unwrap_or(0))) }
                            td.num { (stats["attempts"].as_i64().unwrap_or(0)) }
                            td.num {
                                (money(c["spent_cents"].as_i64().unwrap_or(0)))
                                @if let Some(budget) = c["budget_cents"].as_i64() { " of " (money(budget)) }
                            }
                            td { (super::campaign::evaluation(c["last_tick_result"].as_str())) }
                        }
                    }
                }
            }
            @if listed.total > ROWS { p.muted { "The " (ROWS) " newest of " (listed.total) " campaigns." } }
        }
    };
    respond(
        status,
        page(Some(viewer), "Campaigns", "/app/campaigns", body),
    )
}

#[derive(Deserialize)]
pub struct CallsQuery {
    status: Option<String>,
}

pub async fn calls(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(q): Query<CallsQuery>,
) -> Response {
    if !viewer.scopes.allows(Scope::CallsRead) {
        return denied(&viewer, Scope::CallsRead);
    }
    let status = q.status.as_deref().filter(|s| !s.is_empty());
    let parsed = status.map(CallStatus::parse);
    if let Some(None) = parsed {
        return problem(
            Some(&viewer),
            StatusCode::BAD_REQUEST,
            "Calls",
            "That status is not one a call can have.",
        );
    }
    let filter = CallFilter {
        status: parsed.flatten(),
        ..CallFilter::default()
    };
    let listed = match state
        .store
        .list_calls(
            viewer.workspace_id,
            &filter,
            Page {
                limit: ROWS,
                offset: 0,
            },
        )
        .await
    {
        Ok(listed) => listed,
        Err(e) => return unavailable(&viewer, e),
    };
    let body = html! {
        form.filters method="get" action="/app/calls" {
            label for="status" { "Status" }
            select id="status" name="status" {
                option value="" { "Any" }
                @for s in CallStatus::ALL {
                    option value=(s.as_str()) selected[status == Some(s.as_str())] { (s.as_str()) }
                }
            }
            button type="submit" { "Filter" }
        }
        @if listed.items.is_empty() {
            (empty("calls", html! { "Place one with " code { "POST /calls" } ", or send a SIP call to one of your endpoints." }))
        } @else {
            table {
                caption.sr-only { "Calls, newest first" }
                thead { tr {
                    th scope="col" { "Created" } th scope="col" { "Direction" } th scope="col" { "From" }
                    th scope="col" { "To" } th scope="col" { "Status" } th scope="col" { "Duration" } th scope="col" { "Cost" }
                } }
                tbody {
                    @for c in &listed.items {
                        tr {
                            td { a href=(format!("/app/calls/{}", c.id)) { (when(&c.created_at)) } }
                            td { (c.direction) }
                            td { (c.from_number) }
                            td { (c.to_number) }
                            td { (c.status) @if let Some(o) = &c.outcome { " · " (o) } }
                            td.num { (c.duration_secs) " s" }
                            td.num { (money(c.cost_cents)) }
                        }
                    }
                }
            }
        }
    };
    respond(
        StatusCode::OK,
        page(Some(&viewer), "Calls", "/app/calls", body),
    )
}

fn clock(ms: u64) -> String {
    format!("{}:{:02}", ms / 60_000, (ms / 1000) % 60)
}

pub async fn call(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(id): Path<String>,
) -> Response {
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
    let c = crate::http::recordings::present(&state, detail.call.clone());
    let title = if c.direction == "inbound" {
        format!("Call from {}", c.from_number)
    } else {
        format!("Call to {}", c.to_number)
    };
    let body = html! {
        dl.facts {
            dt { "Direction" } dd { (c.direction) }
            dt { "From" } dd { (c.from_number) }
            dt { "To" } dd { (c.to_number) }
            dt { "Status" } dd { (c.status) @if let Some(o) = &c.outcome { " · " (o) } }
            dt { "End reason" } dd { (c.end_reason.as_deref().unwrap_or("—")) }
            dt { "Answered by" } dd { (c.answered_by.as_deref().unwrap_or("—")) }
            dt { "Codec" } dd { (c.codec.as_deref().unwrap_or("—")) }
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
        section aria-labelledby="transcript" {
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
                            p { (t.text) @if t.interrupted { " " em { "(interrupted)" } } }
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
                (None, Some(AnalysisStatus::Skipped)) => p.muted { "Not analysed: the call was not answered, nothing was said, or no chat model is configured." },
                (None, Some(AnalysisStatus::Failed)) => p.muted { "The analysis failed: " (detail.analysis_error.as_deref().unwrap_or("no reason was given")) },
                (None, Some(AnalysisStatus::Pending)) => p.muted { "The analysis is under way." },
                (None, _) => p.muted { "No analysis yet: the call has not ended." },
            }
        }
    };
    respond(
        StatusCode::OK,
        page(Some(&viewer), &title, "/app/calls", body),
    )
}
