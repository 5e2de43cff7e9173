//! Billing: status, payment method, top-ups, auto top-up settings and the ledger.
//!
//! Money is integer US cents. Every balance change is a ledger row written with the balance, so
//! the ledger always adds up to the balance.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{JsonObject, ListResponse, Pagination, Q, parse_fields};
use super::openapi::{body_schema, patch_body, schema_json, with_bounds};
use super::state::AppState;
use crate::app::auth::Auth;
use crate::app::error::AppError;
use crate::domain::payments::PaymentError;
use crate::store::{BillingAccount, BillingSettingsUpdate, LedgerEntry};
use switchboard_actors::ids::WorkspaceId;
use switchboard_actors::money::Cents;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(status))
        .routes(routes!(payment_method))
        .routes(routes!(top_up))
        .routes(routes!(settings))
        .routes(routes!(ledger))
}

const PAYMENT_METHOD_FIELDS: &[&str] = &["payment_token", "billing_email"];
const TOP_UP_FIELDS: &[&str] = &["amount_cents"];
const SETTINGS_FIELDS: &[&str] = &[
    "auto_topup_enabled",
    "auto_topup_amount_cents",
    "low_balance_threshold_cents",
    "billing_email",
];

const TOP_UP_MIN_CENTS: i64 = 100;
const TOP_UP_MAX_CENTS: i64 = 1_000_000;
const AUTO_TOP_UP_MIN_CENTS: i64 = 500;
const AUTO_TOP_UP_MAX_CENTS: i64 = 1_000_000;
const THRESHOLD_MAX_CENTS: i64 = 1_000_000;

/// The workspace's balance and billing settings.
#[derive(Debug, Serialize, ToSchema)]
pub struct BillingStatus {
    pub has_payment_method: bool,
    pub billing_email: String,
    pub balance_cents: i64,
    /// The balance in dollars.
    pub balance: f64,
    /// Lowercase ISO 4217 code, `usd`.
    pub currency: String,
    pub is_suspended: bool,
    pub auto_topup_enabled: bool,
    pub auto_topup_amount_cents: i64,
    pub low_balance_threshold_cents: i64,
}

impl From<BillingAccount> for BillingStatus {
    fn from(a: BillingAccount) -> Self {
        Self {
            has_payment_method: a.payment_method.is_some(),
            billing_email: a.billing_email,
            balance_cents: a.balance_cents,
            balance: a.balance_cents as f64 / 100.0,
            currency: a.currency.to_ascii_lowercase(),
            is_suspended: a.is_suspended,
            auto_topup_enabled: a.auto_topup_enabled,
            auto_topup_amount_cents: a.auto_topup_amount_cents,
            low_balance_threshold_cents: a.low_balance_threshold_cents,
        }
    }
}

/// An email address (at most 254 characters, a dot in the domain), or empty.
const EMAIL_PATTERN: &str =
    r"^$|^[^@\s\x00-\x1f\x7f]+@[^@\s.\x00-\x1f\x7f]+(\.[^@\s.\x00-\x1f\x7f]+)+$";

fn email_or_empty() -> utoipa::openapi::schema::Object {
    super::openapi::nullable_pattern(EMAIL_PATTERN, Some(254))
}

#[derive(Deserialize, ToSchema)]
pub struct PaymentMethodInput {
    /// A token from the payment provider (never card data).
    #[schema(nullable = false, min_length = 1, pattern = r"\S")]
    payment_token: Option<String>,
    /// Where receipts go; empty to clear.
    #[schema(schema_with = email_or_empty)]
    billing_email: Option<String>,
}

#[derive(Deserialize, ToSchema)]
pub struct TopUpInput {
    /// Whole cents, 100-1000000.
    #[schema(minimum = 100, maximum = 1000000)]
    amount_cents: Option<i64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TopUpResult {
    pub success: bool,
    pub amount_cents: i64,
    /// The balance after the top-up.
    pub balance_cents: i64,
    pub ledger_entry_id: uuid::Uuid,
}

#[derive(Deserialize, ToSchema)]
pub struct SettingsInput {
    /// Top up automatically when the balance falls below the threshold (needs a payment method).
    auto_topup_enabled: Option<bool>,
    /// 0, or 500-1000000.
    #[schema(minimum = 0, maximum = 1000000)]
    auto_topup_amount_cents: Option<i64>,
    /// 0-1000000.
    #[schema(minimum = 0, maximum = 1000000)]
    low_balance_threshold_cents: Option<i64>,
    /// A valid email address, or empty to clear.
    #[schema(schema_with = email_or_empty)]
    billing_email: Option<String>,
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

fn check_email(email: &str) -> Result<String, ApiError> {
    let email = email.trim();
    if email.is_empty() {
        return Ok(String::new());
    }
    let valid = email.len() <= 254
        && !email.chars().any(|c| c.is_whitespace() || c.is_control())
        && email.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty()
                && !domain.contains('@')
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
                && !domain.contains("..")
        });
    if !valid {
        return Err(ApiError::invalid_field(
            "billing_email",
            "must be an email address like billing@example.com, or empty",
        ));
    }
    Ok(email.to_owned())
}

fn check_range(field: &str, value: i64, min: i64, max: i64) -> Result<i64, ApiError> {
    if !(min..=max).contains(&value) {
        return Err(ApiError::invalid_field(
            field,
            format!("must be an integer from {min} to {max}"),
        ));
    }
    Ok(value)
}

fn payment_error(err: PaymentError) -> AppError {
    match err {
        PaymentError::Declined(message) => AppError::Billing {
            message: format!("Payment declined: {message}"),
        },
        PaymentError::Unavailable(_) => AppError::Internal(err.into()),
    }
}

async fn account(state: &AppState, ws: WorkspaceId) -> Result<BillingAccount, ApiError> {
    state
        .store
        .billing_account(ws)
        .await?
        .ok_or(ApiError::not_found("Workspace"))
}

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
    let input: PaymentMethodInput = parse_fields(body, PAYMENT_METHOD_FIELDS)?;
    let token = input
        .payment_token
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty());
    let token = token.ok_or_else(|| ApiError::missing_field("payment_token"))?;
    let email = input
        .billing_email
        .as_deref()
        .map(check_email)
        .transpose()?;
    let method = state
        .payments
        .setup(auth.workspace_id, token)
        .await
        .map_err(payment_error)?;
    state
        .store
        .set_payment_method(auth.workspace_id, Some(&method))
        .await?;
    if let Some(email) = email.as_deref() {
        let change = BillingSettingsUpdate {
            billing_email: Some(email),
            ..Default::default()
        };
        state
            .store
            .update_billing_settings(auth.workspace_id, &change)
            .await?;
    }
    Ok(Json(account(&state, auth.workspace_id).await?.into()))
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
    let input: TopUpInput = parse_fields(body, TOP_UP_FIELDS)?;
    let amount = input
        .amount_cents
        .ok_or_else(|| ApiError::missing_field("amount_cents"))?;
    let amount = check_range("amount_cents", amount, TOP_UP_MIN_CENTS, TOP_UP_MAX_CENTS)?;
    let Some(method) = account(&state, auth.workspace_id).await?.payment_method else {
        return Err(AppError::Billing {
            message: "No payment method on file; add one with POST /billing/payment-method".into(),
        }
        .into());
    };
    let reference = state
        .payments
        .charge(auth.workspace_id, &method, Cents::new(amount))
        .await
        .map_err(payment_error)?;
    let entry = state
        .store
        .apply_ledger_entry(
            auth.workspace_id,
            amount,
            "topup",
            "top-up",
            Some(&reference),
        )
        .await?
        .ok_or(ApiError::not_found("Workspace"))?;
    state.engine.funds_changed(auth.workspace_id);
    Ok(Json(TopUpResult {
        success: true,
        amount_cents: amount,
        balance_cents: entry.balance_after_cents,
        ledger_entry_id: entry.id,
    }))
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
    if body.is_empty() {
        return Err(ApiError::bad_request(format!(
            "No writable field given. Writable fields: {}",
            SETTINGS_FIELDS.join(", ")
        )));
    }
    let input: SettingsInput = parse_fields(body, SETTINGS_FIELDS)?;
    let amount = input
        .auto_topup_amount_cents
        .map(|a| {
            if a == 0 {
                Ok(0)
            } else {
                check_range(
                    "auto_topup_amount_cents",
                    a,
                    AUTO_TOP_UP_MIN_CENTS,
                    AUTO_TOP_UP_MAX_CENTS,
                )
            }
        })
        .transpose();
    let amount = amount.map_err(|_| {
        ApiError::invalid_field(
            "auto_topup_amount_cents",
            format!(
                "must be 0 or an integer from {AUTO_TOP_UP_MIN_CENTS} to {AUTO_TOP_UP_MAX_CENTS}"
            ),
        )
    })?;
    let threshold = input
        .low_balance_threshold_cents
        .map(|t| check_range("low_balance_threshold_cents", t, 0, THRESHOLD_MAX_CENTS))
        .transpose()?;
    let email = input
        .billing_email
        .as_deref()
        .map(check_email)
        .transpose()?;

    let current = account(&state, auth.workspace_id).await?;
    let enabled = input
        .auto_topup_enabled
        .unwrap_or(current.auto_topup_enabled);
    if input.auto_topup_enabled == Some(true) && current.payment_method.is_none() {
        return Err(AppError::Billing {
            message:
                "Auto top-up needs a payment method; add one with POST /billing/payment-method"
                    .into(),
        }
        .into());
    }
    if enabled && amount.unwrap_or(current.auto_topup_amount_cents) == 0 {
        return Err(ApiError::invalid_field(
            "auto_topup_amount_cents",
            format!(
                "auto top-up needs an amount from {AUTO_TOP_UP_MIN_CENTS} to {AUTO_TOP_UP_MAX_CENTS}"
            ),
        ));
    }
    let change = BillingSettingsUpdate {
        auto_topup_enabled: input.auto_topup_enabled,
        auto_topup_amount_cents: amount,
        low_balance_threshold_cents: threshold,
        billing_email: email.as_deref(),
    };
    if !state
        .store
        .update_billing_settings(auth.workspace_id, &change)
        .await?
    {
        return Err(ApiError::not_found("Workspace"));
    }
    // The new settings may already call for a top-up (balance below the new threshold).
    if let Err(err) = crate::runtime::charges::auto_topup(
        &state.store,
        state.payments.as_ref(),
        auth.workspace_id,
    )
    .await
    {
        tracing::warn!(workspace = %auth.workspace_id, error = %err, "auto top-up after a settings change failed");
    }
    Ok(Json(account(&state, auth.workspace_id).await?.into()))
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
