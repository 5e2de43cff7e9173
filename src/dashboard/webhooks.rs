//! Settings: the workspace's webhook signing secret. Masked on the page; revealed only by a
//! write (a form with the session's CSRF token, so no link or cached page shows it), and
//! rotated the same way: every delivery from then on, pending retries included, is signed with
//! the new one. Both take the `webhooks:manage` scope, as `GET /webhook-signing-secret` does.

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;

use super::layout::unavailable;
use super::layout::{denied, page, respond, when};
use super::session::{fields, form_body};
use super::urls::Url;
use super::viewer::Viewer;
use crate::app::state::App;
use crate::domain::auth::Scope;

/// What the page does with the secret.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shown {
    Masked,
    Revealed,
    Rotated,
}

async fn render(state: &App, viewer: &Viewer, shown: Shown) -> Response {
    if !viewer.scopes.allows(Scope::WebhooksManage) {
        return denied(viewer, Scope::WebhooksManage);
    }
    let rotate = shown == Shown::Rotated;
    let read =
        crate::app::webhooks::signing_secret(&state.store, viewer.workspace_id, rotate).await;
    let (secret, created_at) = match read {
        Ok(s) => s,
        Err(e) => return unavailable(viewer, e),
    };
    let text = secret.expose();
    let masked = format!(
        "{}{}{}",
        crate::domain::signing::SECRET_PREFIX,
        "•".repeat(12),
        &text[text.len().saturating_sub(4)..]
    );
    let body = html! {
        @if shown == Shown::Rotated {
            div.notice role="status" { "A new secret is in use: every delivery from now on is signed with it. Update your receivers." }
        }
        p { "Agent webhook deliveries carry " code { (crate::edge::webhooks::signed::SIGNATURE_HEADER) } ": the hex HMAC-SHA256 of "
            code { "{timestamp}.{body}" } " keyed with this secret, so a receiver can tell them from forgeries." }
        dl.facts {
            dt { "Signing secret" }
            dd { @if shown == Shown::Masked { code { (masked) } } @else { code.secret { (text) } } }
            dt { "Made" } dd { (when(&created_at)) }
        }
        div.actions {
            @if shown == Shown::Masked {
                form method="post" action=(Url::WebhooksReveal) {
                    input type="hidden" name="csrf" value=(viewer.csrf);
                    button type="submit" { "Reveal" }
                }
            }
            form method="post" action=(Url::WebhooksRotate) {
                input type="hidden" name="csrf" value=(viewer.csrf);
                button.danger type="submit" aria-describedby="rotate-hint" { "Rotate" }
            }
            span.hint id="rotate-hint" { "Rotating replaces the secret at once; deliveries signed with the old one stop verifying." }
        }
    };
    respond(
        StatusCode::OK,
        page(
            Some(viewer),
            "Webhook signing secret",
            Some(Url::Webhooks),
            body,
        ),
    )
}

pub async fn show(State(state): State<App>, viewer: Viewer) -> Response {
    render(&state, &viewer, Shown::Masked).await
}

pub async fn reveal(State(state): State<App>, viewer: Viewer, req: Request) -> Response {
    if !viewer.checks(&fields(&form_body(req).await)) {
        return viewer.refused();
    }
    render(&state, &viewer, Shown::Revealed).await
}

pub async fn rotate(State(state): State<App>, viewer: Viewer, req: Request) -> Response {
    if !viewer.checks(&fields(&form_body(req).await)) {
        return viewer.refused();
    }
    render(&state, &viewer, Shown::Rotated).await
}
