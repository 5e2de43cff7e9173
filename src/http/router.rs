//! The REST API assembled: every resource's routes merged into one documented router, the gate
//! in front of them, and request metrics around everything.

use std::time::Instant;

use axum::Router;
use axum::extract::{MatchedPath, Request};
use axum::middleware::{self, Next};
use axum::response::Response;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ComponentsBuilder, InfoBuilder, OpenApiBuilder};
use utoipa_axum::router::OpenApiRouter;

use super::state::AppState;
use super::table::RouteTable;
use super::{
    affiliates, agents, billing, call_windows, calls, campaigns, carrier_accounts, dispositions,
    dnc, flow_test, gate, integrations, leads, phone_numbers, recordings, routes, shared_links,
    sip_endpoints, tools, webhooks,
};
use crate::app::state::App;

/// Every documented route, merged.
pub fn api() -> OpenApiRouter<AppState> {
    let doc = OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("Switchboard")
                .version("1.0.0")
                .description(Some("Voice-Agent Calling Service API: agents, numbers, calls, campaigns and more. Send `Authorization: Bearer <key>`.")),
        )
        .components(Some(
            ComponentsBuilder::new()
                .security_scheme("bearer", SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()))
                .build(),
        ))
        .build();
    OpenApiRouter::with_openapi(doc)
        .merge(routes::router())
        .merge(agents::router())
        .merge(phone_numbers::router())
        .merge(dispositions::router())
        .merge(dnc::router())
        .merge(billing::router())
        .merge(call_windows::router())
        .merge(campaigns::router())
        .merge(calls::router())
        .merge(sip_endpoints::router())
        .merge(recordings::router())
        .merge(tools::router())
        .merge(leads::router())
        .merge(shared_links::router())
        .merge(carrier_accounts::router())
        .merge(affiliates::router())
        .merge(integrations::router())
        .merge(flow_test::router())
        .merge(webhooks::router())
}

/// The complete service router: the API behind its gate, and `pages` (the dashboard's,
/// nested at `pages_at`) beside it, outside the gate: they sign in with a session cookie, not a
/// bearer key.
pub fn router(state: AppState, pages_at: &str, pages: Router) -> Router {
    let (router, _) = api().split_for_parts();
    router
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), gate::gate))
        .with_state(state)
        .nest(pages_at, pages)
        .layer(middleware::from_fn(record_metrics))
}

async fn record_metrics(req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().to_string();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".into());
    let response = next.run(req).await;
    let status = response.status().as_u16().to_string();
    metrics::counter!("switchboard_http_requests_total", "method" => method.clone(), "route" => route.clone(), "status" => status).increment(1);
    metrics::histogram!("switchboard_http_request_seconds", "method" => method, "route" => route)
        .record(started.elapsed().as_secs_f64());
    response
}

impl AppState {
    /// The REST door over `app`, its route table read from `openapi` (the document of
    /// [`api`]).
    pub fn new(app: App, openapi: serde_json::Value) -> anyhow::Result<Self> {
        Ok(Self {
            app,
            routes: std::sync::Arc::new(RouteTable::from_openapi(openapi)?),
            metrics: super::prometheus::handle()?,
        })
    }
}
