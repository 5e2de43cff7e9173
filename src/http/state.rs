//! What every handler can reach: the service's [`App`], and what only the REST door keeps (its
//! route table and the metrics it exports).

use std::ops::Deref;
use std::sync::Arc;

use axum::extract::FromRef;
use metrics_exporter_prometheus::PrometheusHandle;

use super::table::RouteTable;
use crate::app::state::App;

#[derive(Clone)]
pub struct AppState {
    /// The service's operations reach everything through it.
    pub app: App,
    /// Scopes and discovery, derived from the assembled router's OpenAPI document.
    pub routes: Arc<RouteTable>,
    pub metrics: PrometheusHandle,
}

impl FromRef<AppState> for App {
    fn from_ref(state: &AppState) -> App {
        state.app.clone()
    }
}

impl Deref for AppState {
    type Target = App;

    fn deref(&self) -> &App {
        &self.app
    }
}
