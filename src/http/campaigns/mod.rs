//! Campaigns: create (always `draft`), list (archived hidden), get, PATCH, the transitions
//! (launch, resume, pause, stop, DELETE = archive), audit events, and contact enrollment.
//!
//! Every campaign route needs `campaigns:manage`. An archived campaign answers 404 everywhere.
//!
//! - [`campaign`]: create, list and get;
//! - [`patch`]: PATCH and its field rules;
//! - [`commands`]: launch, resume, pause, stop, archive (DELETE) and the audit events;
//! - [`contacts`]: enrollment (JSON or CSV), the contact list and one contact with why it is or
//!   is not being dialled now;
//!
//! What each operation does and refuses is `app::campaigns`; these handlers translate.

pub mod campaign;
pub mod commands;
pub mod contacts;
pub mod patch;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::http::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(campaign::list, campaign::create))
        .routes(routes!(campaign::get_one))
        .merge(patch::router())
        .merge(commands::router())
        .merge(contacts::router())
}
