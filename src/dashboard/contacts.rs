//! A campaign's contacts: filtered by state, each with why it is or is not being dialled now
//! (the reasons of `GET /campaigns/{id}/contacts/{contact_id}`), and a CSV upload enrolled
//! exactly as `POST /campaigns/{id}/contacts` enrolls a `text/csv` body, answered with its
//! report (the invalid rows listed).

use axum::extract::{Multipart, Path, Query, Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum_htmx::HxRequest;
use maud::{Markup, html};
use serde::Deserialize;
use switchboard_actors::contact::ContactState;

use super::campaign::load;
use super::layout::unavailable;
use super::layout::{page, problem, respond, when};
use super::urls::Url;
use super::viewer::Viewer;
use crate::app::campaigns::contacts::dialing_statuses;
use crate::app::campaigns::enroll::{EnrollReport, enroll_csv_upload};
use crate::app::error::AppError;
use crate::app::state::App;
use crate::domain::auth::constant_time_eq;
use crate::http::error::app_status;
use crate::store::CampaignRecord;

/// Contacts a page shows.
const ROWS: i64 = 50;
/// Invalid rows an upload's report lists.
const INVALID_SHOWN: usize = 200;

#[derive(Deserialize)]
pub struct ContactsQuery {
    state: Option<String>,
    /// Where the previous page ended.
    after: Option<i64>,
}

fn upload_form(viewer: &Viewer, c: &CampaignRecord) -> Markup {
    let action = Url::CampaignContacts { id: c.id };
    html! {
        @if c.status.is_terminal() {
            p.muted { "A " (c.status.as_str()) " campaign takes no more contacts." }
        } @else {
            form.card.upload method="post" action=(action) enctype="multipart/form-data"
                hx-post=(action) hx-encoding="multipart/form-data" hx-target="main" hx-select="main" hx-swap="outerHTML"
                hx-indicator="#upload-progress" hx-disabled-elt="find button" {
                input type="hidden" name="csrf" value=(viewer.csrf);
                label for="file" { "CSV file" }
                input id="file" name="file" type="file" accept=".csv,text/csv" required aria-describedby="file-hint";
                span.hint id="file-hint" {
                    "A header row naming a " code { "phone_number" } " column; "
                    code { "timezone" } " and " code { "lead_id" } " are optional, any other column is a variable."
                }
                button type="submit" { "Upload and enroll" }
                div id="upload-progress" class="indicator" role="status" {
                    label for="upload-bar" { "Uploading" }
                    progress id="upload-bar" max="100" {}
                }
            }
        }
    }
}

fn report(r: &EnrollReport) -> Markup {
    html! {
        div.notice role="status" {
            p { strong { (r.counts.enrolled) } " enrolled, " strong { (r.counts.duplicates) } " duplicates (already in the campaign, or earlier in the upload), "
                strong { (r.counts.excluded) } " on the do-not-call list, " strong { (r.invalid_total) } " invalid." }
        }
        @if !r.invalid.is_empty() {
            table {
                caption { "Invalid rows (data rows, after the header)" }
                thead { tr { th scope="col" { "Row" } th scope="col" { "Why" } } }
                tbody {
                    @for row in &r.invalid { tr { td.num { (row.row) } td { (row.error) } } }
                }
            }
            @if r.invalid_total > r.invalid.len() {
                p.muted { "The first " (r.invalid.len()) " of " (r.invalid_total) " invalid rows." }
            }
        }
    }
}

async fn render(
    state: &App,
    viewer: &Viewer,
    c: &CampaignRecord,
    q: &ContactsQuery,
    status: StatusCode,
    upload: Option<Result<&EnrollReport, String>>,
) -> Response {
    let filter = q.state.as_deref().filter(|s| !s.is_empty());
    let parsed = filter.map(ContactState::parse);
    if let Some(None) = parsed {
        return problem(
            Some(viewer),
            StatusCode::BAD_REQUEST,
            "Contacts",
            "That state is not one a contact can have.",
        );
    }
    let (items, last, total) = match state
        .store
        .contacts_after(viewer.workspace_id, c.id, parsed.flatten(), q.after, ROWS)
        .await
    {
        Ok(l) => l,
        Err(e) => return unavailable(viewer, e),
    };
    let why = match dialing_statuses(state, c, &items).await {
        Ok(w) => w,
        Err(e) => return unavailable(viewer, format!("{e:?}")),
    };
    let base = Url::CampaignContacts { id: c.id };
    let link = |after: i64| format!("{base}?state={}&after={after}", filter.unwrap_or(""));
    let body = html! {
        p { a href=(Url::Campaign { id: c.id }) { "← " (c.settings.name) } }
        section aria-labelledby="upload-title" {
            h2 id="upload-title" { "Upload contacts" }
            (upload_form(viewer, c))
            div id="report" aria-live="polite" {
                @match &upload {
                    Some(Ok(r)) => (report(r)),
                    Some(Err(message)) => p.problem role="alert" { (message) },
                    None => {},
                }
            }
        }
        section aria-labelledby="list-title" {
            h2 id="list-title" { "Contacts" }
            form.filters method="get" action=(base) {
                label for="state" { "State" }
                select id="state" name="state" {
                    option value="" { "Any" }
                    @for s in ContactState::ALL {
                        option value=(s.as_str()) selected[filter == Some(s.as_str())] { (s.as_str().replace('_', " ")) }
                    }
                }
                button type="submit" { "Filter" }
            }
            @if items.is_empty() {
                div.empty {
                    @if filter.is_some() || q.after.is_some() { p { "No more contacts here." } }
                    @else { p { "No contacts yet." } p { "Upload a CSV above, or send them with " code { "POST /campaigns/{id}/contacts" } "." } }
                }
            } @else {
                table id="contacts" {
                    caption.sr-only { "Contacts, in the order they were enrolled" }
                    thead { tr {
                        th scope="col" { "Number" } th scope="col" { "State" } th scope="col" { "Attempts" }
                        th scope="col" { "Last outcome" } th scope="col" { "Why it is or is not dialled now" }
                    } }
                    tbody {
                        @for (k, w) in items.iter().zip(&why) {
                            tr {
                                td { (k.phone_number) }
                                td { (k.state.as_str().replace('_', " ")) }
                                td.num { (k.attempts) }
                                td { (k.last_outcome.map_or("—", |o| o.as_str())) }
                                td {
                                    (w.message)
                                    @if let Some(until) = &w.until { span.muted { " — until " (when(until)) } }
                                }
                            }
                        }
                    }
                }
                nav.pager aria-label="Contact pages" {
                    span.muted { (items.len()) " shown of " (total) }
                    @if q.after.is_some() { a href=(format!("{base}?state={}", filter.unwrap_or(""))) { "First page" } }
                    @if let Some(last) = last.filter(|_| items.len() as i64 == ROWS) { a href=(link(last)) { "Next" } }
                }
            }
        }
    };
    respond(
        status,
        page(
            Some(viewer),
            &format!("Contacts of {}", c.settings.name),
            Some(Url::Campaigns),
            body,
        ),
    )
}

pub async fn list(
    State(state): State<App>,
    viewer: Viewer,
    Path(id): Path<String>,
    Query(q): Query<ContactsQuery>,
) -> Response {
    match load(&state, &viewer, &id).await {
        Ok(c) => render(&state, &viewer, &c, &q, StatusCode::OK, None).await,
        Err(r) => r,
    }
}

/// The upload's answer: the contacts page with the report (the page's script swaps in its
/// `main`).
pub async fn upload(
    State(state): State<App>,
    viewer: Viewer,
    Path(id): Path<String>,
    HxRequest(htmx): HxRequest,
    req: Request,
) -> Response {
    let c = match load(&state, &viewer, &id).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let enrolled = enroll(&state, &viewer, &c, req).await;
    let (status, outcome) = match enrolled {
        Err(Refusal::Csrf) => return viewer.refused(),
        Err(Refusal::Api(AppError::Internal(e))) => return unavailable(&viewer, e),
        Err(Refusal::Api(e)) => (app_status(&e), Err(e.to_string())),
        Ok(r) => (StatusCode::OK, Ok(r)),
    };
    // htmx swaps in only a success; a refusal's page says why all the same.
    let status = if htmx && status.is_client_error() {
        StatusCode::OK
    } else {
        status
    };
    let q = ContactsQuery {
        state: None,
        after: None,
    };
    render(
        &state,
        &viewer,
        &c,
        &q,
        status,
        Some(outcome.as_ref().map_err(Clone::clone)),
    )
    .await
}

enum Refusal {
    Csrf,
    Api(AppError),
}

/// Reads the form: its CSRF token first, then the file, streamed into the enrollment.
async fn enroll(
    state: &App,
    viewer: &Viewer,
    c: &CampaignRecord,
    req: Request,
) -> Result<EnrollReport, Refusal> {
    use axum::extract::FromRequest;
    let mut form = Multipart::from_request(req, state).await.map_err(|e| {
        Refusal::Api(AppError::bad_request(format!(
            "The upload is not a form: {e}"
        )))
    })?;
    let unreadable = |e: axum::extract::multipart::MultipartError| {
        Refusal::Api(AppError::bad_request(format!(
            "The upload could not be read: {e}"
        )))
    };
    let mut token_ok = false;
    while let Some(field) = form.next_field().await.map_err(unreadable)? {
        match field.name() {
            Some("csrf") if !token_ok => {
                let token = field.text().await.map_err(unreadable)?;
                token_ok = constant_time_eq(token.as_bytes(), viewer.csrf.as_bytes());
            }
            Some("file") if token_ok => {
                return enroll_csv_upload(
                    state,
                    &viewer.auth(),
                    c.id,
                    None,
                    Box::pin(field),
                    INVALID_SHOWN,
                )
                .await
                .map_err(Refusal::Api);
            }
            // Nothing is read before the token has been checked.
            _ => return Err(Refusal::Csrf),
        }
    }
    Err(if token_ok {
        Refusal::Api(AppError::missing_field("file"))
    } else {
        Refusal::Csrf
    })
}
