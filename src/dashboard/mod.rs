//! The operator dashboard at `/app`: server-rendered pages (maud templates compiled into the
//! binary), its own stylesheet and the vendored htmx, all embedded; nothing is fetched from
//! elsewhere at run time.
//!
//! - [`session`]: signing in with an API key (exchanged for an HttpOnly, SameSite=Strict
//!   session cookie; the key never reaches the page), signing out, and the CSRF token every
//!   write carries.
//! - [`viewer`]: the signed-in operator every page is for.
//! - [`layout`]: the page shell and the shared pieces (tables, empty states, errors).
//! - [`pages`]: the campaigns list, the landing page and the pages' shared parts.
//! - [`calls`]: calls by status, direction, campaign, agent and day, and one call.
//! - [`campaign`]: one campaign (progress, commands, settings, audit events), with
//!   [`campaign_form`] (the settings form as a PATCH body) and [`chart`] (admissions and
//!   outcomes over time).
//! - [`contacts`]: a campaign's contacts, why each is or is not dialled, and the CSV upload.
//! - [`agents`]: agents, the caller-ID opt-in, a flow's graph ([`flow_graph`]) and the flow
//!   simulator.
//! - [`workspace`]: tools (send test), SIP endpoints (the slug shown once), numbers,
//!   do-not-call, dispositions, leads, billing.
//! - [`live`]: the calls under way, updated through server-sent events.
//! - [`integrations`]: connected accounts, and connecting Google through its consent page
//!   (OAuth authorization code with PKCE and a state bound to the session).
//! - [`webhooks`]: the webhook signing secret (masked; revealed and rotated by a write).
//! - [`keys`]: the settings page of API keys (create with scopes and expiry, shown once; list;
//!   revoke).
//!
//! Every response carries a Content-Security-Policy without inline script or style, denies
//! framing, and is not cached (assets excepted). Each page checks the scope its API
//! counterpart needs and reads only the signed-in workspace's data: another workspace's id is
//! a 404 page.

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderValue, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};

use crate::app::state::App;

mod agents;
mod assets;
mod calls;
mod campaign;
mod campaign_form;
mod chart;
mod contacts;
mod flow_graph;
mod integrations;
mod keys;
mod layout;
mod live;
mod pages;
mod session;
mod viewer;
mod webhooks;
mod workspace;

/// What every dashboard response says about how it may be used.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
    media-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The dashboard's routes, under `/app`.
pub fn router() -> Router<App> {
    Router::new()
        .route("/", get(pages::home))
        .route(
            "/sign-in",
            get(session::sign_in_page).post(session::sign_in),
        )
        .route("/sign-out", post(session::sign_out))
        .route("/campaigns", get(pages::campaigns).post(campaign::create))
        .route("/campaigns/{id}", get(campaign::show))
        .route("/campaigns/{id}/summary", get(campaign::summary))
        .route("/campaigns/{id}/chart", get(campaign::chart))
        .route("/campaigns/{id}/settings", post(campaign::save))
        .route(
            "/campaigns/{id}/contacts",
            get(contacts::list)
                .post(contacts::upload)
                // The upload's own limit (`max_csv_body_bytes`) applies as it streams in.
                .layer(DefaultBodyLimit::disable()),
        )
        .route("/campaigns/{id}/{command}", post(campaign::command))
        .route("/calls", get(calls::calls))
        .route("/calls/{id}", get(calls::call))
        .route("/agents", get(agents::list))
        .route("/agents/{id}", get(agents::show))
        .route("/agents/{id}/simulate", post(agents::simulate))
        .route("/agents/{id}/caller-id", post(agents::caller_id))
        .route("/tools", get(workspace::tools))
        .route("/tools/{id}/test", post(workspace::test_tool))
        .route(
            "/sip-endpoints",
            get(workspace::endpoints).post(workspace::create_endpoint),
        )
        .route("/numbers", get(workspace::numbers))
        .route("/do-not-call", get(workspace::do_not_call))
        .route("/dispositions", get(workspace::dispositions))
        .route("/leads", get(workspace::leads))
        .route("/billing", get(workspace::billing))
        .route("/live", get(live::page))
        .route("/live/events", get(live::events))
        .route("/settings/keys", get(keys::page).post(keys::create))
        .route("/settings/webhooks", get(webhooks::show))
        .route("/settings/webhooks/reveal", post(webhooks::reveal))
        .route("/settings/webhooks/rotate", post(webhooks::rotate))
        .route("/settings/integrations", get(integrations::list))
        .route("/settings/integrations/connect", post(integrations::start))
        .route(
            "/settings/integrations/callback",
            get(integrations::callback),
        )
        .route("/settings/integrations/finish", get(integrations::finish))
        .route(
            "/settings/integrations/{id}/disconnect",
            post(integrations::disconnect),
        )
        .route("/settings/keys/{id}/revoke", post(keys::revoke))
        .route("/assets/{*path}", get(assets::serve))
        .fallback(layout::not_found)
        .layer(middleware::from_fn(secure))
        // Pages, fragments and assets go gzip-compressed to a browser that takes it (the live
        // page's event stream is left as it is: compressing it would hold its events back).
        .layer(tower_http::compression::CompressionLayer::new())
}

async fn secure(req: Request, next: Next) -> Response {
    let is_asset = req.uri().path().starts_with("/app/assets/");
    let mut response = next.run(req).await;
    let headers = response.headers_mut();
    // A page may widen the policy for itself (the integrations page's forms lead to the
    // provider's consent page); every other response gets this one.
    if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        );
    }
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    if !is_asset {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}
