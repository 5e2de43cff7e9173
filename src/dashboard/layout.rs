//! The page shell and the pieces pages share.

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};

use super::assets::Asset;
use super::urls::Url;
use super::viewer::Viewer;
use crate::domain::auth::Scope;

/// The main navigation: page, label.
const NAV: [(Url, &str); 4] = [
    (Url::Campaigns, "Campaigns"),
    (Url::Calls, "Calls"),
    (Url::Live, "Live calls"),
    (Url::Agents, "Agents"),
];

/// The workspace's other pages and its settings.
const MORE: [(Url, &str); 10] = [
    (Url::Tools, "Tools"),
    (Url::SipEndpoints, "SIP endpoints"),
    (Url::Numbers, "Numbers"),
    (Url::DoNotCall, "Do not call"),
    (Url::Dispositions, "Dispositions"),
    (Url::Leads, "Leads"),
    (Url::Billing, "Billing"),
    (Url::Integrations, "Integrations"),
    (Url::Webhooks, "Webhooks"),
    (Url::Keys, "API keys"),
];

fn links(items: &[(Url, &str)], current: Option<Url>) -> Markup {
    html! {
        ul {
            @for (href, label) in items {
                li {
                    @if Some(*href) == current {
                        a href=(href) aria-current="page" { (label) }
                    } @else {
                        a href=(href) { (label) }
                    }
                }
            }
        }
    }
}

/// A whole page: `title`, the navigation for a signed-in `viewer` (the `current` page marked),
/// and `body`.
pub fn page(viewer: Option<&Viewer>, title: &str, current: Option<Url>, body: Markup) -> Markup {
    page_with(viewer, title, current, &[], &[], body)
}

/// A whole page that also loads the `styles` and `scripts`.
pub fn page_with(
    viewer: Option<&Viewer>,
    title: &str,
    current: Option<Url>,
    styles: &[Asset],
    scripts: &[Asset],
    body: Markup,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="htmx-config" content=r#"{"includeIndicatorStyles":false,"allowEval":false,"allowScriptTags":false}"#;
                title { (title) " · Switchboard" }
                @for style in styles { link rel="stylesheet" href=(Url::asset(*style)); }
                link rel="stylesheet" href=(Url::asset(Asset::AppCss));
                @for script in scripts { script src=(Url::asset(*script)) defer {} }
                script src=(Url::asset(Asset::Htmx)) defer {}
                script src=(Url::asset(Asset::AppJs)) defer {}
            }
            body {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    span.brand { "Switchboard" }
                    @if let Some(viewer) = viewer {
                        nav aria-label="Main" { (links(&NAV, current)) }
                        form.sign-out method="post" action=(Url::SignOut) {
                            input type="hidden" name="csrf" value=(viewer.csrf);
                            button type="submit" { "Sign out" }
                        }
                    }
                }
                @if viewer.is_some() {
                    nav.more aria-label="Workspace and settings" { (links(&MORE, current)) }
                }
                main id="main" tabindex="-1" {
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// A page as a response with `status`.
pub fn respond(status: StatusCode, markup: Markup) -> Response {
    (status, Html(markup.into_string())).into_response()
}

/// A page that says what went wrong, in words.
pub fn problem(
    viewer: Option<&Viewer>,
    status: StatusCode,
    title: &str,
    message: &str,
) -> Response {
    respond(
        status,
        page(
            viewer,
            title,
            None,
            html! { p.problem role="alert" { (message) } },
        ),
    )
}

/// The page a key without `scope` gets.
pub fn denied(viewer: &Viewer, scope: Scope) -> Response {
    problem(
        Some(viewer),
        StatusCode::FORBIDDEN,
        "Not allowed",
        &format!("The API key you signed in with does not have the {scope} scope this page needs."),
    )
}

/// An empty list: what it would hold, and what to do next.
pub fn empty(what: &str, next: Markup) -> Markup {
    html! {
        div.empty {
            p { "No " (what) " yet." }
            p { (next) }
        }
    }
}

/// A UTC time as the page shows it.
pub fn when(at: &chrono::DateTime<chrono::Utc>) -> Markup {
    html! { time datetime=(at.to_rfc3339()) { (at.format("%Y-%m-%d %H:%M UTC")) } }
}

/// Cents as dollars.
pub fn money(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let cents = cents.unsigned_abs();
    format!("{sign}${}.{:02}", cents / 100, cents % 100)
}

impl Viewer {
    /// The answer to a write without the right token.
    pub fn refused(&self) -> Response {
        problem(
            Some(self),
            StatusCode::FORBIDDEN,
            "Form expired",
            "This form was not sent from this session's page. Reload the page and try again.",
        )
    }
}

/// An unknown address under the dashboard's.
pub async fn not_found(viewer: Option<Viewer>) -> Response {
    problem(
        viewer.as_ref(),
        StatusCode::NOT_FOUND,
        "Not found",
        "There is nothing here. It may belong to another workspace, or it was removed.",
    )
}

pub fn unavailable(viewer: &Viewer, error: impl std::fmt::Display) -> Response {
    tracing::error!(%error, "a dashboard page could not be read");
    problem(
        Some(viewer),
        StatusCode::SERVICE_UNAVAILABLE,
        "Unavailable",
        "The service cannot read this right now. Try again shortly.",
    )
}
