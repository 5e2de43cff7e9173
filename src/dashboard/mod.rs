//! The operator dashboard at `/app`: server-rendered pages (maud templates compiled into the
//! binary), its own stylesheet and the vendored htmx, all embedded; nothing is fetched from
//! elsewhere at run time.
//!
//! - [`urls`]: the route table: every address as a typed [`urls::Url`], its axum pattern beside
//!   it; links, htmx requests, form actions, redirects and the router are made from it.
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
use axum::routing::{MethodRouter, get, post};

use crate::app::state::App;
pub use urls::BASE;
use urls::Route;

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
mod urls;
mod viewer;
mod webhooks;
mod workspace;

/// What every dashboard response says about how it may be used.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
    media-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The dashboard's routes, under [`BASE`]: each of the route table's patterns with its
/// handlers.
pub fn router() -> Router<App> {
    Route::ALL
        .iter()
        .fold(Router::new(), |router, route| {
            router.route(route.pattern(), handlers(*route))
        })
        .fallback(layout::not_found)
        .layer(middleware::from_fn(secure))
        // Pages, fragments and assets go gzip-compressed to a browser that takes it (the live
        // page's event stream is left as it is: compressing it would hold its events back).
        .layer(tower_http::compression::CompressionLayer::new())
}

/// What serves a route, by method.
fn handlers(route: Route) -> MethodRouter<App> {
    match route {
        Route::Home => get(pages::home),
        Route::SignIn => get(session::sign_in_page).post(session::sign_in),
        Route::SignOut => post(session::sign_out),
        Route::Campaigns => get(pages::campaigns).post(campaign::create),
        Route::Campaign => get(campaign::show),
        Route::CampaignSummary => get(campaign::summary),
        Route::CampaignChart => get(campaign::chart),
        Route::CampaignSettings => post(campaign::save),
        Route::CampaignContacts => get(contacts::list)
            .post(contacts::upload)
            // The upload's own limit (`max_csv_body_bytes`) applies as it streams in.
            .layer(DefaultBodyLimit::disable()),
        Route::CampaignCommand => post(campaign::command),
        Route::Calls => get(calls::calls),
        Route::Call => get(calls::call),
        Route::Agents => get(agents::list),
        Route::Agent => get(agents::show),
        Route::AgentSimulate => post(agents::simulate),
        Route::AgentCallerId => post(agents::caller_id),
        Route::Tools => get(workspace::tools),
        Route::ToolTest => post(workspace::test_tool),
        Route::SipEndpoints => get(workspace::endpoints).post(workspace::create_endpoint),
        Route::Numbers => get(workspace::numbers),
        Route::DoNotCall => get(workspace::do_not_call),
        Route::Dispositions => get(workspace::dispositions),
        Route::Leads => get(workspace::leads),
        Route::Billing => get(workspace::billing),
        Route::Live => get(live::page),
        Route::LiveEvents => get(live::events),
        Route::Keys => get(keys::page).post(keys::create),
        Route::KeyRevoke => post(keys::revoke),
        Route::Webhooks => get(webhooks::show),
        Route::WebhooksReveal => post(webhooks::reveal),
        Route::WebhooksRotate => post(webhooks::rotate),
        Route::Integrations => get(integrations::list),
        Route::IntegrationsConnect => post(integrations::start),
        Route::IntegrationsCallback => get(integrations::callback),
        Route::IntegrationsFinish => get(integrations::finish),
        Route::IntegrationDisconnect => post(integrations::disconnect),
        Route::Asset => get(assets::serve),
    }
}

async fn secure(req: Request, next: Next) -> Response {
    let assets = Route::Asset.pattern().trim_end_matches("{*path}");
    // Nested under BASE, the router sees its paths without it.
    let path = req.uri().path();
    let is_asset = path.strip_prefix(BASE).unwrap_or(path).starts_with(assets);
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

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::body::{Body, to_bytes};
    use axum::http::Request;
    use axum::routing::post;
    use axum_htmx::HxRequest;
    use tower::ServiceExt;

    /// What a handler reads of a request: whether htmx sent it.
    async fn read(headers: &[(&str, &str)]) -> String {
        let service = Router::new().route(
            "/",
            post(|HxRequest(htmx): HxRequest| async move { htmx.to_string() }),
        );
        let mut request = Request::post("/");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let answer = service
            .oneshot(request.body(Body::empty()).expect("a request"))
            .await
            .expect("an answer");
        let body = to_bytes(answer.into_body(), 16).await.expect("a body");
        String::from_utf8_lossy(&body).into_owned()
    }

    #[tokio::test]
    async fn a_request_is_htmx_s_when_it_carries_hx_request() {
        assert_eq!(read(&[("HX-Request", "true")]).await, "true");
        assert_eq!(read(&[("hx-request", "true")]).await, "true");
        // A form posted by the browser itself (no script, or a full page) carries none.
        assert_eq!(read(&[]).await, "false");
        assert_eq!(read(&[("HX-Boosted", "true")]).await, "false");
    }
}
