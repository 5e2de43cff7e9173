//! Billing: status, payment method, top-ups, auto top-up settings and the ledger.
//!
//! Money is integer US cents. Every balance change is a ledger row written with the balance, so
//! the ledger always adds up to the balance.

use axum::Json;
use axum::extract::State;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{JsonObject, ListResponse, Pagination, Q};
use super::openapi::{body_schema, patch_body, schema_json, with_bounds};
use super::state::AppState;
use crate::app::auth::Auth;
#[allow(unused_imports)]
use crate::app::billing::*;
use crate::store::LedgerEntry;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(status))
        .routes(routes!(payment_method))
        .routes(routes!(top_up))
        .routes(routes!(settings))
        .routes(routes!(ledger))
}

body_schema!(
    /// The body of `POST /billing/payment-method`.
    PaymentMethodBody = create_body(PaymentMethodInput, &["payment_token"])
);
body_schema!(
    /// The body of `POST /billing/top-up`.
    TopUpBody = create_body(TopUpInput, &["amount_cents"])
);
body_schema!(
    /// The body of `PATCH /billing/settings`: an auto top-up amount is 0 (none) or at least
    /// [`AUTO_TOP_UP_MIN_CENTS`].
    SettingsBody = json(with_bounds(
        schema_json(&patch_body(SettingsInput::schema(), SETTINGS_FIELDS)),
        serde_json::json!({"auto_topup_amount_cents": {"not": {
            "type": "integer",
            "exclusiveMinimum": 0,
            "exclusiveMaximum": AUTO_TOP_UP_MIN_CENTS,
        }}}),
    ))
);

/// Billing status
#[utoipa::path(get, path = "/billing", operation_id = "getBilling", tag = "billing", security(("bearer" = ["billing:read"])),
    responses((status = 200, body = BillingStatus)))]
async fn status(
    State(state): State<AppState>,
    auth: Auth,
) -> Result<Json<BillingStatus>, ApiError> {
    Ok(Json(account(&state, auth.workspace_id).await?.into()))
}

/// Set up the payment method
#[utoipa::path(post, path = "/billing/payment-method", operation_id = "setPaymentMethod", tag = "billing", security(("bearer" = ["billing:manage"])),
    request_body = PaymentMethodBody,
    responses((status = 200, body = BillingStatus), (status = 400), (status = 402, description = "The provider declined the method")))]
async fn payment_method(
    State(state): State<AppState>,
    auth: Auth,
    JsonObject(body): JsonObject,
) -> Result<Json<BillingStatus>, ApiError> {
    Ok(Json(
        crate::app::billing::payment_method(&state, &auth, body).await?,
    ))
}

/// Top up the balance
#[utoipa::path(post, path = "/billing/top-up", operation_id = "topUp", tag = "billing", security(("bearer" = ["billing:manage"])),
    request_body = TopUpBody,
    responses((status = 200, body = TopUpResult), (status = 400), (status = 402, description = "No payment method, or the charge was declined")))]
async fn top_up(
    State(state): State<AppState>,
    auth: Auth,
    JsonObject(body): JsonObject,
) -> Result<Json<TopUpResult>, ApiError> {
    Ok(Json(
        crate::app::billing::top_up(&state, &auth, body).await?,
    ))
}

/// Change auto top-up and billing settings
#[utoipa::path(patch, path = "/billing/settings", operation_id = "updateBillingSettings", tag = "billing", security(("bearer" = ["billing:manage"])),
    request_body = SettingsBody,
    responses((status = 200, body = BillingStatus), (status = 400), (status = 402, description = "Auto top-up needs a payment method")))]
async fn settings(
    State(state): State<AppState>,
    auth: Auth,
    JsonObject(body): JsonObject,
) -> Result<Json<BillingStatus>, ApiError> {
    Ok(Json(
        crate::app::billing::settings(&state, &auth, body).await?,
    ))
}

/// List ledger entries, newest first
#[utoipa::path(get, path = "/billing/ledger", operation_id = "listLedgerEntries", tag = "billing", security(("bearer" = ["billing:read"])),
    params(Pagination), responses((status = 200, body = ListResponse<LedgerEntry>), (status = 400)))]
async fn ledger(
    State(state): State<AppState>,
    auth: Auth,
    Q(pagination): Q<Pagination>,
) -> Result<Json<ListResponse<LedgerEntry>>, ApiError> {
    let page = pagination.page()?;
    let paged = state.store.ledger(auth.workspace_id, page).await?;
    Ok(Json(ListResponse::new(paged, page)))
}
