//! One campaign: its progress (updated every two seconds while it runs), the commands its
//! status allows (launch, pause, resume, stop, each through the API's own transition table and
//! launch preflight), a chart of admissions and outcomes over time, its settings as a form judged
//! by the PATCH rules, and its audit events. Creating a campaign starts here too.

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use maud::{Markup, html};
use serde_json::{Map, Value};
use switchboard_actors::campaign::{self as rules, CampaignStatus, Command, Transition};
use switchboard_actors::ids::CampaignId;

use super::campaign_form::{self, Choices};
use super::layout::{denied, money, page_with, respond, when};
use super::layout::{not_found, unavailable};
use super::pages::{evaluation, progress};
use super::session::{form_body, pairs};
use super::urls::Url;
use super::viewer::Viewer;
use crate::app::error::AppError;
use crate::app::state::App;
use crate::domain::auth::Scope;
use crate::http::error::app_status;
use crate::store::{CampaignRecord, Page};

/// The commands the status allows, as the buttons that send them.
const COMMANDS: [(Command, &str, &str); 4] = [
    (Command::Launch, "launch", "Launch"),
    (Command::Resume, "resume", "Resume"),
    (Command::Pause, "pause", "Pause"),
    (Command::Stop, "stop", "Stop"),
];

fn allowed(
    status: CampaignStatus,
) -> impl Iterator<Item = &'static (Command, &'static str, &'static str)> {
    // Launch and resume both start a draft or a paused campaign: each is offered where its
    // name fits.
    let draft = status == CampaignStatus::Draft;
    COMMANDS.iter().filter(move |(command, _, _)| {
        let named = match command {
            Command::Launch => draft,
            Command::Resume => !draft,
            _ => true,
        };
        named
            && matches!(
                rules::transition(status, *command),
                Ok(Transition::Start(_) | Transition::To(_))
            )
    })
}

/// A campaign of the viewer's workspace by the id in the address, or the page that says why not.
pub(super) async fn load(
    state: &App,
    viewer: &Viewer,
    id: &str,
) -> Result<CampaignRecord, Response> {
    if !viewer.scopes.allows(Scope::CampaignsManage) {
        return Err(denied(viewer, Scope::CampaignsManage));
    }
    let Ok(id) = uuid::Uuid::parse_str(id) else {
        return Err(not_found(Some(viewer.clone())).await);
    };
    match state
        .store
        .campaign(viewer.workspace_id, CampaignId::from_uuid(id))
        .await
    {
        Ok(Some(c)) => Ok(c),
        Ok(None) => Err(not_found(Some(viewer.clone())).await),
        Err(e) => Err(unavailable(viewer, e)),
    }
}

/// [`load`], and the campaign's view as JSON.
async fn load_view(state: &App, viewer: &Viewer, id: &str) -> Result<Value, Response> {
    let c = load(state, viewer, id).await?;
    view_json(state, viewer, c).await
}

async fn view_json(state: &App, viewer: &Viewer, c: CampaignRecord) -> Result<Value, Response> {
    crate::app::campaigns::view::view(state, viewer.workspace_id, c)
        .await
        .map(|v| serde_json::to_value(v).unwrap_or(Value::Null))
        .map_err(|e| unavailable(viewer, format!("{e:?}")))
}

/// The campaign's id in its view (the nil id for a view without one, which no view is).
fn view_id(c: &Value) -> CampaignId {
    c["id"]
        .as_str()
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| CampaignId::from_uuid(uuid::Uuid::nil()))
}

/// The part of the page that follows the campaign: status, evaluation, progress, money, the
/// commands, the chart. While the campaign is live it reloads itself every two seconds.
fn summary_part(viewer: &Viewer, c: &Value, problem: Option<&str>) -> Markup {
    let id = view_id(c);
    let status_text = c["status"].as_str().unwrap_or_default();
    let status = CampaignStatus::parse(status_text).unwrap_or(CampaignStatus::Draft);
    let live = matches!(status, CampaignStatus::Running | CampaignStatus::Scheduled)
        || status_text.starts_with("paused");
    let stats = &c["stats"];
    let at = |k: &str| {
        c[k].as_str()
            .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
            .map(|t| when(&t.with_timezone(&Utc)))
    };
    html! {
        section id="summary" aria-labelledby="progress-title"
            hx-get=[live.then_some(Url::CampaignSummary { id })]
            hx-trigger=[live.then_some("every 2s")] hx-swap="outerHTML" {
            h2 id="progress-title" { "Progress" }
            @if let Some(message) = problem { p.problem role="alert" { (message) } }
            dl.facts {
                dt { "Status" } dd { span class=(format!("status st-{status_text}")) { (status_text) } }
                dt { "Last evaluation" } dd {
                    (evaluation(c["last_tick_result"].as_str()))
                    @if let Some(t) = at("last_tick_at") { span.muted { " · " (t) } }
                }
                @if let Some(e) = c["last_error"].as_str() { dt { "Last error" } dd { (e) } }
                dt { "Contacts" } dd { (progress(&stats["contacts"], stats["total_contacts"].as_i64().unwrap_or(0))) }
                dt { "Attempts" } dd { (stats["attempts"].as_i64().unwrap_or(0)) }
                dt { "Spend" } dd {
                    (money(c["spent_cents"].as_i64().unwrap_or(0)))
                    @if let Some(b) = c["budget_cents"].as_i64() { " of " (money(b)) }
                    @let reserved = c["reserved_cents"].as_i64().unwrap_or(0);
                    @if reserved > 0 { span.muted { " (" (money(reserved)) " held by calls under way)" } }
                }
                dt { "Admitted today" } dd { (c["daily_admitted_count"].as_i64().unwrap_or(0)) " of " (c["max_calls_per_day"].as_i64().unwrap_or(0)) }
                @if let Some(t) = at("started_at") { dt { "Started" } dd { (t) } }
                @if let Some(t) = at("completed_at") { dt { "Completed" } dd { (t) } }
            }
            div.actions {
                @for (_, path, label) in allowed(status) {
                    form method="post" action=(Url::CampaignCommand { id, command: path }) {
                        input type="hidden" name="csrf" value=(viewer.csrf);
                        // Ids that stay the same across the part's reloads: htmx gives the focus back
                        // to the element of the same id after each swap.
                        button type="submit" id=(format!("command-{path}")) class=[(*path == "stop").then_some("danger")] { (label) }
                    }
                }
                a id="contacts-link" href=(Url::CampaignContacts { id }) { "Contacts and upload" }
            }
        }
    }
}

async fn choices(state: &App, viewer: &Viewer) -> Result<Choices, Response> {
    let all = Page {
        limit: 100,
        offset: 0,
    };
    let ws = viewer.workspace_id;
    let read = async {
        Ok::<_, crate::store::StoreError>(Choices {
            agents: state.store.list_agents(ws, None, all).await?.items,
            numbers: state.store.list_phone_numbers(ws, all).await?.items,
            dispositions: state.store.list_dispositions(ws).await?,
        })
    };
    read.await.map_err(|e| unavailable(viewer, e))
}

/// What a page shows besides the campaign itself.
#[derive(Default)]
struct Shown<'a> {
    /// A refused command's message.
    problem: Option<&'a str>,
    /// A note that something was done.
    notice: Option<&'a str>,
    /// What the settings form holds when it was refused, and every refusal.
    form: Option<(&'a Value, &'a [AppError])>,
}

async fn render(
    state: &App,
    viewer: &Viewer,
    status: StatusCode,
    c: &Value,
    shown: Shown<'_>,
) -> Response {
    let id = view_id(c);
    let summary = summary_part(viewer, c, shown.problem);
    let choices = match choices(state, viewer).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let events = match recent_events(state, viewer, id).await {
        Ok(e) => e,
        Err(r) => return r,
    };
    let refused: Vec<(Option<String>, String)> = shown
        .form
        .map(|(_, errors)| errors)
        .unwrap_or_default()
        .iter()
        .map(|e| {
            (
                campaign_form::error_field(e).map(str::to_owned),
                campaign_form::error_words(e),
            )
        })
        .collect();
    let values = shown.form.map(|(v, _)| v).unwrap_or(c);
    let editable = !CampaignStatus::parse(c["status"].as_str().unwrap_or_default())
        .is_some_and(|s| s.is_terminal());
    let body = html! {
        @if let Some(note) = shown.notice { div.notice role="status" { (note) } }
        @if let Some(d) = c["description"].as_str().filter(|d| !d.is_empty()) { p { (d) } }
        (summary)
        section aria-labelledby="chart-title" {
            h2 id="chart-title" { "Over time" }
            // Counted apart from the page (every call of the campaign is read), and again every
            // half minute while it is open.
            div id="chart" hx-get=(Url::CampaignChart { id }) hx-trigger="load, every 30s" hx-swap="innerHTML" {
                p.muted { "Counting the campaign's calls…" }
            }
            @if viewer.scopes.allows(Scope::CallsRead) {
                p { a href=(Url::Calls.with_query(&format!("campaign={id}"))) { "Every call of this campaign" } }
            }
        }
        section aria-labelledby="settings-title" {
            h2 id="settings-title" { "Settings" }
            @if editable {
                (campaign_form::form(Url::CampaignSettings { id }, &viewer.csrf, values, &choices, &refused))
            } @else {
                p.muted { "A " (c["status"].as_str().unwrap_or_default()) " campaign cannot be edited." }
            }
        }
        section aria-labelledby="events-title" {
            h2 id="events-title" { "Audit events" }
            (events)
        }
    };
    let name = c["name"].as_str().unwrap_or("Campaign");
    respond(
        status,
        page_with(
            Some(viewer),
            name,
            Some(Url::Campaigns),
            super::chart::STYLES,
            super::chart::SCRIPTS,
            body,
        ),
    )
}

/// The campaign's page with a note that something was done.
async fn noticed(state: &App, viewer: &Viewer, c: &Value, note: &str) -> Response {
    let shown = Shown {
        notice: Some(note),
        ..Shown::default()
    };
    render(state, viewer, StatusCode::OK, c, shown).await
}

/// The newest audit events, newest first.
async fn recent_events(state: &App, viewer: &Viewer, id: CampaignId) -> Result<Markup, Response> {
    const SHOWN: i64 = 25;
    let read = async {
        let first = state
            .store
            .campaign_events(
                viewer.workspace_id,
                id,
                Page {
                    limit: 1,
                    offset: 0,
                },
            )
            .await?;
        let offset = (first.total - SHOWN).max(0);
        state
            .store
            .campaign_events(
                viewer.workspace_id,
                id,
                Page {
                    limit: SHOWN,
                    offset,
                },
            )
            .await
    };
    let events = read.await.map_err(|e| unavailable(viewer, e))?;
    Ok(html! {
        @if events.items.is_empty() {
            p.muted { "Nothing has happened to this campaign yet." }
        } @else {
            table {
                caption.sr-only { "Audit events, newest first" }
                thead { tr { th scope="col" { "When" } th scope="col" { "What" } th scope="col" { "Status" } th scope="col" { "By" } th scope="col" { "Details" } } }
                tbody {
                    @for e in events.items.iter().rev() {
                        tr {
                            td { (when(&e.created_at)) }
                            td { (e.kind.as_str().replace('_', " ")) }
                            td { @if let (Some(from), Some(to)) = (&e.from_status, &e.to_status) { (from) " → " (to) } }
                            td { @if e.actor_key_id.is_some() { "an API key" } @else { "the engine" } }
                            td { (e.message.as_deref().unwrap_or("")) }
                        }
                    }
                }
            }
            @if events.total > SHOWN { p.muted { "The " (SHOWN) " newest of " (events.total) " events; " code { "GET /campaigns/{id}/events" } " has them all." } }
        }
    })
}

pub async fn show(State(state): State<App>, viewer: Viewer, Path(id): Path<String>) -> Response {
    match load_view(&state, &viewer, &id).await {
        Ok(v) => render(&state, &viewer, StatusCode::OK, &v, Shown::default()).await,
        Err(r) => r,
    }
}

/// The chart of the campaign's calls over time, for the page to load after it.
pub async fn chart(State(state): State<App>, viewer: Viewer, Path(id): Path<String>) -> Response {
    fragment(
        async {
            let v = load_view(&state, &viewer, &id).await?;
            super::chart::timeline(&state, &viewer, &v).await
        }
        .await,
    )
}

/// The progress part alone, for the page to reload while the campaign is live.
pub async fn summary(State(state): State<App>, viewer: Viewer, Path(id): Path<String>) -> Response {
    fragment(
        load_view(&state, &viewer, &id)
            .await
            .map(|v| summary_part(&viewer, &v, None)),
    )
}

/// A part of the page that htmx swaps in, or the page that says why it cannot be shown.
fn fragment(part: Result<Markup, Response>) -> Response {
    match part {
        Ok(m) => axum::response::Html(m.into_string()).into_response(),
        Err(r) => r,
    }
}

/// The answer to an API error on a campaign's page: its own page for a missing campaign, else
/// the campaign again with the message.
async fn refused(
    state: &App,
    viewer: &Viewer,
    id: &str,
    e: AppError,
    form: Option<&Value>,
) -> Response {
    refused_all(state, viewer, id, vec![e], form).await
}

/// The page again with every refusal of the settings form (`errors`, the first deciding the
/// status), beside the values submitted.
async fn refused_all(
    state: &App,
    viewer: &Viewer,
    id: &str,
    errors: Vec<AppError>,
    form: Option<&Value>,
) -> Response {
    let Some(e) = errors.first() else {
        return not_found(Some(viewer.clone())).await;
    };
    if matches!(e, AppError::NotFound { .. }) {
        return not_found(Some(viewer.clone())).await;
    }
    if let AppError::Internal(_) = e {
        return unavailable(viewer, format!("{e:?}"));
    }
    let v = match load_view(state, viewer, id).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let message = e.to_string();
    let shown = match form {
        Some(values) => Shown {
            form: Some((values, &errors)),
            ..Shown::default()
        },
        None => Shown {
            problem: Some(&message),
            ..Shown::default()
        },
    };
    render(state, viewer, app_status(e), &v, shown).await
}

/// Launch, resume, pause or stop.
pub async fn command(
    State(state): State<App>,
    viewer: Viewer,
    Path((id, action)): Path<(String, String)>,
    req: Request,
) -> Response {
    let pairs = pairs(&form_body(req).await);
    if !viewer.checks_pairs(&pairs) {
        return viewer.refused();
    }
    let Some((command, _, _)) = COMMANDS.iter().find(|(_, path, _)| *path == action) else {
        return not_found(Some(viewer)).await;
    };
    let c = match load(&state, &viewer, &id).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    match crate::app::campaigns::commands::command(&state, &viewer.auth(), c.id.as_uuid(), *command)
        .await
    {
        Ok(v) => match v.message.clone() {
            Some(message) => {
                let v = serde_json::to_value(v).unwrap_or(Value::Null);
                noticed(&state, &viewer, &v, &message).await
            }
            None => Url::Campaign { id: c.id }.redirect().into_response(),
        },
        Err(e) => refused(&state, &viewer, &id, e, None).await,
    }
}

/// Saves the settings form through the PATCH rules.
pub async fn save(
    State(state): State<App>,
    viewer: Viewer,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let pairs = pairs(&form_body(req).await);
    if !viewer.checks_pairs(&pairs) {
        return viewer.refused();
    }
    let c = match load(&state, &viewer, &id).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let current = match view_json(&state, &viewer, c.clone()).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    // What the form said, to show again if it is refused.
    let mut submitted = current.clone();
    for (k, v) in &pairs {
        if k != "csrf" && k != "has_flags" && k != "stop_disposition_ids" {
            submitted[k] = Value::String(v.clone());
        }
    }
    let body = match campaign_form::changes(&pairs, &current) {
        Ok(body) => body,
        Err(e) => return refused(&state, &viewer, &id, e, Some(&submitted)).await,
    };
    if body.is_empty() {
        return noticed(&state, &viewer, &current, "Nothing changed.").await;
    }
    match crate::app::campaigns::patch::update_campaign(&state, &viewer.auth(), c.id, &body).await {
        Ok(v) => {
            let v = serde_json::to_value(v).unwrap_or(Value::Null);
            let fields: Vec<&str> = body.keys().map(String::as_str).collect();
            let note = format!("Saved: {}.", fields.join(", "));
            noticed(&state, &viewer, &v, &note).await
        }
        // A field refused: every field's refusal is shown at once.
        Err(e @ AppError::InvalidField { .. }) => {
            let auth = viewer.auth();
            let all = crate::app::campaigns::patch::refusals(&state, &auth, c.id, &body).await;
            let errors = match all {
                Ok(all) if !all.is_empty() => all,
                _ => vec![e],
            };
            refused_all(&state, &viewer, &id, errors, Some(&submitted)).await
        }
        Err(e) => refused(&state, &viewer, &id, e, Some(&submitted)).await,
    }
}

/// Creates a draft campaign with a name, then opens it.
pub async fn create(State(state): State<App>, viewer: Viewer, req: Request) -> Response {
    if !viewer.scopes.allows(Scope::CampaignsManage) {
        return denied(&viewer, Scope::CampaignsManage);
    }
    let pairs = pairs(&form_body(req).await);
    if !viewer.checks_pairs(&pairs) {
        return viewer.refused();
    }
    let name = pairs
        .iter()
        .find(|(k, _)| k == "name")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let mut body = Map::new();
    body.insert("name".into(), Value::String(name.clone()));
    match crate::app::campaigns::patch::create_campaign(&state, &viewer.auth(), &body).await {
        Ok(v) => Url::Campaign { id: v.id.into() }.redirect().into_response(),
        Err(AppError::Internal(e)) => unavailable(&viewer, e),
        Err(e) => {
            super::pages::campaigns_with(
                &state,
                &viewer,
                StatusCode::BAD_REQUEST,
                &name,
                Some(&campaign_form::error_words(&e)),
            )
            .await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_recorded_evaluation_reads_as_words() {
        for (result, words) in [
            ("admitted:3", "Admitted 3 contact(s) to be dialled"),
            ("outside_calling_window", "Outside its calling window"),
            (
                "budget_reached",
                "Paused: its budget cannot take one more call",
            ),
        ] {
            assert_eq!(evaluation(Some(result)), words);
        }
        assert_eq!(evaluation(None), "Not evaluated yet");
        assert_eq!(evaluation(Some("new_thing")), "Last evaluation: new_thing");
    }

    #[test]
    fn commands_follow_the_transition_table() {
        let paths = |s| allowed(s).map(|(_, p, _)| *p).collect::<Vec<_>>();
        assert_eq!(paths(CampaignStatus::Draft), ["launch", "stop"]);
        assert_eq!(
            paths(CampaignStatus::PausedBudget),
            ["resume", "pause", "stop"]
        );
        assert_eq!(paths(CampaignStatus::Running), ["pause", "stop"]);
        assert!(paths(CampaignStatus::Completed).is_empty());
    }
}
