//! Settings: the workspace's API keys. Creating one (a name, its scopes, an optional expiry)
//! shows its secret once; revoking one ends it at once, its dashboard sessions included.
//! Managing keys takes a key with every scope.

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{NaiveDate, TimeZone, Utc};
use maud::{Markup, html};
use switchboard_actors::ids::ApiKeyId;

use super::layout::{page as shell, problem, respond, when};
use super::session::{fields, form_body};
use super::urls::Url;
use super::viewer::Viewer;
use crate::app::state::App;
use crate::domain::auth::{Scope, Scopes};

fn may_manage(viewer: &Viewer) -> bool {
    matches!(viewer.scopes, Scopes::All)
}

fn forbidden(viewer: &Viewer) -> Response {
    problem(
        Some(viewer),
        StatusCode::FORBIDDEN,
        "Not allowed",
        "Managing API keys takes a key with every scope; the key you signed in with has fewer.",
    )
}

/// What the create form said, for showing it again with its errors.
#[derive(Default)]
struct Draft {
    name: String,
    scopes: Vec<String>,
    expires: String,
}

async fn render(
    state: &App,
    viewer: &Viewer,
    status: StatusCode,
    draft: &Draft,
    errors: &[(&str, String)],
    created: Option<&str>,
) -> Response {
    let keys = match state.store.list_keys(viewer.workspace_id).await {
        Ok(keys) => keys,
        Err(e) => {
            tracing::error!(error = %e, "keys could not be listed");
            return problem(
                Some(viewer),
                StatusCode::SERVICE_UNAVAILABLE,
                "Unavailable",
                "The keys cannot be read right now.",
            );
        }
    };
    let error = |field: &str| {
        errors
            .iter()
            .find(|(f, _)| *f == field)
            .map(|(_, m)| m.clone())
    };
    let now = state.store.now();
    let body: Markup = html! {
        @if let Some(secret) = created {
            div.notice role="status" {
                p { strong { "Your new key. Copy it now: it is not shown again." } }
                p { code.secret { (secret) } }
            }
        }
        section aria-labelledby="new-key" {
            h2 id="new-key" { "Create a key" }
            form.card method="post" action=(Url::Keys) {
                input type="hidden" name="csrf" value=(viewer.csrf);
                label for="name" { "Name" }
                input id="name" name="name" type="text" required maxlength="100" value=(draft.name)
                    aria-describedby=[error("name").map(|_| "name-error")];
                @if let Some(e) = error("name") { p.field-error id="name-error" { (e) } }
                fieldset aria-describedby=[error("scopes").map(|_| "scopes-error")] {
                    legend { "Scopes" }
                    label.check { input type="checkbox" name="scope" value="all" checked[draft.scopes.iter().any(|s| s == "all")]; " all (every scope)" }
                    @for scope in Scope::ALL {
                        label.check {
                            input type="checkbox" name="scope" value=(scope.as_str()) checked[draft.scopes.iter().any(|s| s == scope.as_str())];
                            " " (scope.as_str())
                        }
                    }
                    @if let Some(e) = error("scopes") { p.field-error id="scopes-error" { (e) } }
                }
                label for="expires" { "Expires (optional)" }
                input id="expires" name="expires" type="date" value=(draft.expires)
                    aria-describedby=[error("expires").map(|_| "expires-error")];
                @if let Some(e) = error("expires") { p.field-error id="expires-error" { (e) } }
                button type="submit" { "Create key" }
            }
        }
        section aria-labelledby="keys" {
            h2 id="keys" { "Keys" }
            table {
                thead { tr {
                    th scope="col" { "Name" } th scope="col" { "Key" } th scope="col" { "Scopes" }
                    th scope="col" { "Created" } th scope="col" { "State" } th scope="col" { span.sr-only { "Actions" } }
                } }
                tbody {
                    @for k in &keys {
                        @let live = k.revoked_at.is_none() && k.expires_at.is_none_or(|at| at > now);
                        tr {
                            td { (k.name) }
                            td { code { (k.prefix) "…" } }
                            td.scopes { (k.scopes.join(", ")) }
                            td { (when(&k.created_at)) }
                            td {
                                @if let Some(at) = k.revoked_at { "revoked " (when(&at)) }
                                @else if let Some(at) = k.expires_at.filter(|at| *at <= now) { "expired " (when(&at)) }
                                @else if let Some(at) = k.expires_at { "expires " (when(&at)) }
                                @else { "active" }
                            }
                            td {
                                @if live && k.id != viewer.key_id {
                                    form method="post" action=(Url::KeyRevoke { id: k.id }) {
                                        input type="hidden" name="csrf" value=(viewer.csrf);
                                        button.danger type="submit" aria-label=(format!("Revoke {}", k.name)) { "Revoke" }
                                    }
                                } @else if k.id == viewer.key_id {
                                    span.muted { "this session's key" }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    respond(
        status,
        shell(Some(viewer), "API keys", Some(Url::Keys), body),
    )
}

pub async fn page(State(state): State<App>, viewer: Viewer) -> Response {
    if !may_manage(&viewer) {
        return forbidden(&viewer);
    }
    render(
        &state,
        &viewer,
        StatusCode::OK,
        &Draft::default(),
        &[],
        None,
    )
    .await
}

pub async fn create(State(state): State<App>, viewer: Viewer, req: Request) -> Response {
    if !may_manage(&viewer) {
        return forbidden(&viewer);
    }
    let body = form_body(req).await;
    let form = fields(&body);
    if !viewer.checks(&form) {
        return viewer.refused();
    }
    let pairs: Vec<(String, String)> = url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    let draft = Draft {
        name: form
            .get("name")
            .map(|n| n.trim().to_string())
            .unwrap_or_default(),
        scopes: pairs
            .iter()
            .filter(|(k, _)| k == "scope")
            .map(|(_, v)| v.clone())
            .collect(),
        expires: form.get("expires").cloned().unwrap_or_default(),
    };
    let mut errors: Vec<(&str, String)> = Vec::new();
    if draft.name.is_empty() || crate::app::keys::check_name(&draft.name).is_err() {
        errors.push(("name", "Give the key a name of 1 to 100 characters.".into()));
    }
    let scopes = if draft.scopes.is_empty() {
        errors.push(("scopes", "Choose at least one scope.".into()));
        None
    } else if draft.scopes.iter().any(|s| s == "all") {
        Some(Scopes::All)
    } else {
        match Scopes::parse(&draft.scopes.join(",")) {
            Ok(s) => Some(s),
            Err(e) => {
                errors.push(("scopes", e.to_string()));
                None
            }
        }
    };
    let now = state.store.now();
    let expires = match draft.expires.trim() {
        "" => None,
        day => match NaiveDate::parse_from_str(day, "%Y-%m-%d")
            .ok()
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map(|d| Utc.from_utc_datetime(&d))
        {
            Some(at) if crate::app::keys::check_expiry(Some(at), now).is_ok() => Some(at),
            Some(_) => {
                errors.push(("expires", "Choose a day after today.".into()));
                None
            }
            None => {
                errors.push(("expires", "Write the day as YYYY-MM-DD.".into()));
                None
            }
        },
    };
    let Some(scopes) = scopes.filter(|_| errors.is_empty()) else {
        return render(
            &state,
            &viewer,
            StatusCode::BAD_REQUEST,
            &draft,
            &errors,
            None,
        )
        .await;
    };
    let key = crate::app::keys::NewKey {
        name: &draft.name,
        scopes: &scopes,
        expires_at: expires,
    };
    match crate::app::keys::create(&state.store, viewer.workspace_id, key).await {
        Ok((_, secret)) => {
            render(
                &state,
                &viewer,
                StatusCode::CREATED,
                &Draft::default(),
                &[],
                Some(&secret),
            )
            .await
        }
        Err(e) => {
            tracing::error!(error = %e, "a key could not be created");
            problem(
                Some(&viewer),
                StatusCode::SERVICE_UNAVAILABLE,
                "Unavailable",
                "The key could not be created right now.",
            )
        }
    }
}

pub async fn revoke(
    State(state): State<App>,
    viewer: Viewer,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    if !may_manage(&viewer) {
        return forbidden(&viewer);
    }
    if !viewer.checks(&fields(&form_body(req).await)) {
        return viewer.refused();
    }
    let not_found = || {
        problem(
            Some(&viewer),
            StatusCode::NOT_FOUND,
            "Not found",
            "There is no such key in this workspace.",
        )
    };
    let Ok(id) = uuid::Uuid::parse_str(&id).map(ApiKeyId::from_uuid) else {
        return not_found();
    };
    let keys = match state.store.list_keys(viewer.workspace_id).await {
        Ok(keys) => keys,
        Err(e) => {
            tracing::error!(error = %e, "keys could not be listed");
            return problem(
                Some(&viewer),
                StatusCode::SERVICE_UNAVAILABLE,
                "Unavailable",
                "The keys cannot be read right now.",
            );
        }
    };
    if !keys.iter().any(|k| k.id == id) {
        return not_found();
    }
    if id == viewer.key_id {
        return problem(
            Some(&viewer),
            StatusCode::CONFLICT,
            "Not revoked",
            "This is the key of your session: sign in with another key to revoke it.",
        );
    }
    if let Err(e) = crate::app::keys::revoke(&state.store, id).await {
        return super::layout::unavailable(&viewer, e);
    }
    Url::Keys.redirect().into_response()
}
