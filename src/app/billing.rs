//! Billing: what saving a payment method, topping up and changing the auto top-up settings do\nand refuse. Every balance change is one ledger row in integer cents.

use crate::app::auth::Auth;
use crate::app::error::AppError;
use crate::app::fields::parse_fields;
use crate::app::state::App;
use crate::domain::payments::PaymentError;
use crate::store::{BillingAccount, BillingSettingsUpdate, LedgerKind};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use switchboard_actors::ids::WorkspaceId;
use switchboard_actors::money::Cents;
use utoipa::ToSchema;

pub async fn payment_method(
    state: &App,
    auth: &Auth,
    body: Map<String, Value>,
) -> Result<BillingStatus, AppError> {
    let input: PaymentMethodInput = parse_fields(body, PAYMENT_METHOD_FIELDS)?;
    let token = input
        .payment_token
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty());
    let token = token.ok_or_else(|| AppError::missing_field("payment_token"))?;
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
    Ok(account(state, auth.workspace_id).await?.into())
}

pub async fn top_up(
    state: &App,
    auth: &Auth,
    body: Map<String, Value>,
) -> Result<TopUpResult, AppError> {
    let input: TopUpInput = parse_fields(body, TOP_UP_FIELDS)?;
    let amount = input
        .amount_cents
        .ok_or_else(|| AppError::missing_field("amount_cents"))?;
    let amount = check_range("amount_cents", amount, TOP_UP_MIN_CENTS, TOP_UP_MAX_CENTS)?;
    let Some(method) = account(state, auth.workspace_id).await?.payment_method else {
        return Err(AppError::Billing {
            message: "No payment method on file; add one with POST /billing/payment-method".into(),
        });
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
            LedgerKind::Topup,
            "top-up",
            Some(&reference),
        )
        .await?
        .ok_or(AppError::not_found("Workspace"))?;
    state.engine.funds_changed(auth.workspace_id);
    Ok(TopUpResult {
        success: true,
        amount_cents: amount,
        balance_cents: entry.balance_after_cents,
        ledger_entry_id: entry.id,
    })
}

pub async fn settings(
    state: &App,
    auth: &Auth,
    body: Map<String, Value>,
) -> Result<BillingStatus, AppError> {
    crate::app::fields::some_field(&body, SETTINGS_FIELDS)?;
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
        AppError::invalid_field(
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

    let current = account(state, auth.workspace_id).await?;
    let enabled = input
        .auto_topup_enabled
        .unwrap_or(current.auto_topup_enabled);
    if input.auto_topup_enabled == Some(true) && current.payment_method.is_none() {
        return Err(AppError::Billing {
            message:
                "Auto top-up needs a payment method; add one with POST /billing/payment-method"
                    .into(),
        });
    }
    if enabled && amount.unwrap_or(current.auto_topup_amount_cents) == 0 {
        return Err(AppError::invalid_field(
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
        return Err(AppError::not_found("Workspace"));
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
    Ok(account(state, auth.workspace_id).await?.into())
}

pub const PAYMENT_METHOD_FIELDS: &[&str] = &["payment_token", "billing_email"];

pub const TOP_UP_FIELDS: &[&str] = &["amount_cents"];

pub const SETTINGS_FIELDS: &[&str] = &[
    "auto_topup_enabled",
    "auto_topup_amount_cents",
    "low_balance_threshold_cents",
    "billing_email",
];

pub const TOP_UP_MIN_CENTS: i64 = 100;

pub const TOP_UP_MAX_CENTS: i64 = 1_000_000;

pub const AUTO_TOP_UP_MIN_CENTS: i64 = 500;

pub const AUTO_TOP_UP_MAX_CENTS: i64 = 1_000_000;

pub const THRESHOLD_MAX_CENTS: i64 = 1_000_000;

/// An email address (at most 254 characters, a dot in the domain), or empty.
pub const EMAIL_PATTERN: &str =
    r"^$|^[^@\s\x00-\x1f\x7f]+@[^@\s.\x00-\x1f\x7f]+(\.[^@\s.\x00-\x1f\x7f]+)+$";

pub fn email_or_empty() -> utoipa::openapi::schema::Object {
    crate::domain::schema::nullable_pattern(EMAIL_PATTERN, Some(254))
}

#[derive(Deserialize, ToSchema)]
pub struct PaymentMethodInput {
    /// A token from the payment provider (never card data).
    #[schema(nullable = false, min_length = 1, pattern = r"\S")]
    pub payment_token: Option<String>,
    /// Where receipts go; empty to clear.
    #[schema(schema_with = email_or_empty)]
    pub billing_email: Option<String>,
}

#[derive(Deserialize, ToSchema)]
pub struct TopUpInput {
    /// Whole cents, 100-1000000.
    #[schema(minimum = 100, maximum = 1000000)]
    pub amount_cents: Option<i64>,
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
    pub auto_topup_enabled: Option<bool>,
    /// 0, or 500-1000000.
    #[schema(minimum = 0, maximum = 1000000)]
    pub auto_topup_amount_cents: Option<i64>,
    /// 0-1000000.
    #[schema(minimum = 0, maximum = 1000000)]
    pub low_balance_threshold_cents: Option<i64>,
    /// A valid email address, or empty to clear.
    #[schema(schema_with = email_or_empty)]
    pub billing_email: Option<String>,
}

pub fn check_email(email: &str) -> Result<String, AppError> {
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
        return Err(AppError::invalid_field(
            "billing_email",
            "must be an email address like billing@example.com, or empty",
        ));
    }
    Ok(email.to_owned())
}

pub fn check_range(field: &str, value: i64, min: i64, max: i64) -> Result<i64, AppError> {
    if !(min..=max).contains(&value) {
        return Err(AppError::invalid_field(
            field,
            format!("must be an integer from {min} to {max}"),
        ));
    }
    Ok(value)
}

pub fn payment_error(err: PaymentError) -> AppError {
    match err {
        PaymentError::Declined(message) => AppError::Billing {
            message: format!("Payment declined: {message}"),
        },
        PaymentError::Unavailable(_) => AppError::Internal(err.into()),
    }
}

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

pub async fn account(state: &App, ws: WorkspaceId) -> Result<BillingAccount, AppError> {
    state
        .store
        .billing_account(ws)
        .await?
        .ok_or(AppError::not_found("Workspace"))
}
