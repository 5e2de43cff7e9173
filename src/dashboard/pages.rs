//! Campaigns, calls, and one call with its transcript beside its recording.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{Redirect, Response};
use maud::{Markup, html};
use serde_json::Value;
use switchboard_actors::ids::CampaignId;

use super::layout::{denied, empty, money, page, respond, unavailable};
use super::urls::Url;
use super::viewer::Viewer;
use crate::app::state::App;
use crate::domain::auth::Scope;
use crate::store::Page;

/// Most rows a list page shows.
const ROWS: i64 = 50;

/// The first page the key may see.
pub fn landing(scopes: &crate::domain::auth::Scopes) -> Url {
    if scopes.allows(Scope::CampaignsManage) {
        Url::Campaigns
    } else if scopes.allows(Scope::CallsRead) {
        Url::Calls
    } else {
        Url::Keys
    }
}

pub async fn home(viewer: Viewer) -> Redirect {
    landing(&viewer.scopes).redirect()
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

pub async fn campaigns(State(state): State<App>, viewer: Viewer) -> Response {
    campaigns_with(&state, &viewer, StatusCode::OK, "", None).await
}

/// The campaigns, and the form that creates one (with `name` and its `error` when it was
/// refused).
pub(super) async fn campaigns_with(
    state: &App,
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
        match crate::app::campaigns::view::view(state, viewer.workspace_id, c).await {
            Ok(v) => rows.push((
                CampaignId::from_uuid(v.id),
                serde_json::to_value(v).unwrap_or(Value::Null),
            )),
            Err(e) => return unavailable(viewer, format!("{e:?}")),
        }
    }
    let body = html! {
        form.inline method="post" action=(Url::Campaigns) {
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
                    @for (id, c) in &rows {
                        @let stats = &c["stats"];
                        tr {
                            td { a href=(Url::Campaign { id: *id }) { (c["name"].as_str().unwrap_or_default()) } }
                            td { span class=(format!("status st-{}", c["status"].as_str().unwrap_or_default())) { (c["status"].as_str().unwrap_or_default()) } }
                            td { (progress(&stats["contacts"], stats["total_contacts"].as_i64().unwrap_or(0))) }
                            td.num { (stats["attempts"].as_i64().unwrap_or(0)) }
                            td.num {
                                (money(c["spent_cents"].as_i64().unwrap_or(0)))
                                @if let Some(budget) = c["budget_cents"].as_i64() { " of " (money(budget)) }
                            }
                            td { (evaluation(c["last_tick_result"].as_str())) }
                        }
                    }
                }
            }
            @if listed.total > ROWS { p.muted { "The " (ROWS) " newest of " (listed.total) " campaigns." } }
        }
    };
    respond(
        status,
        page(Some(viewer), "Campaigns", Some(Url::Campaigns), body),
    )
}

/// The last evaluation's result, in words.
pub fn evaluation(result: Option<&str>) -> String {
    let Some(result) = result else {
        return "Not evaluated yet".into();
    };
    if let Some(n) = result.strip_prefix("admitted:") {
        return format!("Admitted {n} contact(s) to be dialled");
    }
    match result {
        "waiting_for_starts_at" => "Waiting for its start time",
        "starts_at_reached" => "Its start time came; it is running",
        "credit_restored" => "Credit was added; it is running again",
        "insufficient_credit" => "Paused: the balance does not cover one more call",
        "agent_unavailable" => "Paused: its agent is missing or inactive",
        "agent_without_duration_cap" => "Paused: its agent has no maximum call duration",
        "from_number_inactive" => "Paused: its caller number is not active",
        "no_reachable_calling_window" => "Paused: its calling window never opens before it ends",
        "all_contacts_done" => "Every contact is done",
        "daily_cap_reached" => "The day's call cap is reached; it goes on tomorrow",
        "max_in_flight" => "As many calls as it may place at once are under way",
        "waiting_for_queue" => "Waiting for the last admitted call to be dialled",
        "min_seconds_between_calls" => "Waiting the gap between calls",
        "outside_calling_window" => "Outside its calling window",
        "budget_reached" => "Paused: its budget cannot take one more call",
        "budget_reserved_by_calls_in_flight" => {
            "The budget is held by calls under way; it may free up when they end"
        }
        "status_changed" => "Its status changed during the evaluation",
        "insufficient_credit_for_more" => "Admitted some; the balance ran short for more",
        "funds_changed" => "Money changed during the evaluation; it looks again at once",
        "waiting_for_calls" => "Nobody is due; calls are still under way",
        "no_contacts_due" => "Nobody is due now",
        "repeated_infra_errors" => "Paused: the carrier failed too many calls in a row",
        other => return format!("Last evaluation: {other}"),
    }
    .into()
}
