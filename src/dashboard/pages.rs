//! Campaigns, calls, and one call with its transcript beside its recording.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{Redirect, Response};
use maud::{Markup, html};
use serde_json::Value;
use switchboard_actors::campaign::ConfigProblem;
use switchboard_actors::ids::CampaignId;
use switchboard_actors::pacing::TickResult;

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
    // Each campaign's progress, all in one read (not a view of each: a list of fifty is one
    // query, not two hundred).
    let ids: Vec<CampaignId> = listed.items.iter().map(|c| c.id).collect();
    let mut each = match state
        .store
        .campaigns_progress(viewer.workspace_id, &ids)
        .await
    {
        Ok(progress) => progress,
        Err(e) => return unavailable(viewer, e),
    };
    let rows: Vec<(CampaignId, Value)> = listed
        .items
        .into_iter()
        .map(|c| {
            let stats = each.remove(&c.id).unwrap_or_default();
            let row = serde_json::json!({
                "name": c.settings.name,
                "status": c.status.as_str(),
                "stats": stats,
                "spent_cents": c.spent_cents,
                "budget_cents": c.settings.rules.budget_cents.map(|b| b.get()),
                "last_tick_result": c.last_tick_result,
            });
            (c.id, row)
        })
        .collect();
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
    let Some(recorded) = result else {
        return "Not evaluated yet".into();
    };
    let Some(result) = TickResult::parse(recorded) else {
        return format!("Last evaluation: {recorded}");
    };
    match result {
        TickResult::Admitted(n) => return format!("Admitted {n} contact(s) to be dialled"),
        TickResult::WaitingForStartsAt => "Waiting for its start time",
        TickResult::StartsAtReached => "Its start time came; it is running",
        TickResult::CreditRestored => "Credit was added; it is running again",
        TickResult::InsufficientCredit => "Paused: the balance does not cover one more call",
        TickResult::Config(ConfigProblem::AgentUnavailable) => {
            "Paused: its agent is missing or inactive"
        }
        TickResult::Config(ConfigProblem::AgentWithoutDurationCap) => {
            "Paused: its agent has no maximum call duration"
        }
        TickResult::Config(ConfigProblem::FromNumberInactive) => {
            "Paused: its caller number is not active"
        }
        TickResult::Config(ConfigProblem::NoReachableCallingWindow) => {
            "Paused: its calling window never opens before it ends"
        }
        TickResult::AllContactsDone => "Every contact is done",
        TickResult::DailyCapReached => "The day's call cap is reached; it goes on tomorrow",
        TickResult::MaxInFlight => "As many calls as it may place at once are under way",
        TickResult::WaitingForQueue => "Waiting for the last admitted call to be dialled",
        TickResult::MinSecondsBetweenCalls => "Waiting the gap between calls",
        TickResult::OutsideCallingWindow => "Outside its calling window",
        TickResult::BudgetReached => "Paused: its budget cannot take one more call",
        TickResult::BudgetReservedByCallsInFlight => {
            "The budget is held by calls under way; it may free up when they end"
        }
        TickResult::StatusChanged => "Its status changed during the evaluation",
        TickResult::InsufficientCreditForMore => "Admitted some; the balance ran short for more",
        TickResult::FundsChanged => "Money changed during the evaluation; it looks again at once",
        TickResult::WaitingForCalls => "Nobody is due; calls are still under way",
        TickResult::NoContactsDue => "Nobody is due now",
        TickResult::RepeatedInfraErrors => "Paused: the carrier failed too many calls in a row",
    }
    .into()
}
