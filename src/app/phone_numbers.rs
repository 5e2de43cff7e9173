//! Phone numbers: what purchasing, configuring and releasing one do and refuse (Israeli numbers only).

use crate::app::agents::rules::workspace_agent;
use crate::app::auth::Auth;
use crate::app::error::AppError;
use crate::app::fields::{Patch, parse_fields};
use crate::app::state::App;
use crate::runtime::charges::ChargeError;
use crate::store::{LedgerKind, PhoneNumberRecord, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use switchboard_actors::ids::{PhoneNumberId, WorkspaceId};
use switchboard_actors::money::Cents;
use switchboard_actors::phone::{PhoneNumber, parse_country};
use utoipa::ToSchema;

pub async fn purchase(
    state: &App,
    auth: &Auth,
    body: Map<String, Value>,
) -> Result<PurchaseResult, AppError> {
    let input: PurchaseInput = parse_fields(body, PURCHASE_WRITABLE)?;
    let raw = input
        .phone_number
        .ok_or_else(|| AppError::missing_field("phone_number"))?;
    let number = PhoneNumber::parse(&raw, israel()?)
        .map_err(|e| AppError::invalid_field("phone_number", e.to_string()))?;
    if number.country().as_deref() != Some("IL") {
        return Err(AppError::bad_request(ISRAEL_ONLY));
    }
    let ws = auth.workspace_id;
    let account = state
        .store
        .billing_account(ws)
        .await?
        .ok_or(AppError::not_found("Workspace"))?;
    if account.payment_method.is_none() {
        return Err(AppError::Billing {
            message: "A payment method is required to buy phone numbers; set one up first".into(),
        });
    }
    if state.store.number_is_held(number.as_str()).await? {
        return Err(held(&number));
    }
    let cents = state.config.number_monthly_cents;
    let description = format!("Phone number {number}: first month");
    crate::runtime::charges::charge(
        &state.store,
        state.payments.as_ref(),
        ws,
        Cents::new(cents),
        LedgerKind::NumberPurchase,
        &description,
    )
    .await
    .map_err(|err| match err {
        ChargeError::InsufficientBalance { .. } => AppError::Billing {
            message: err.to_string(),
        },
        ChargeError::NoWorkspace => AppError::not_found("Workspace"),
        ChargeError::Store(e) => e.into(),
    })?;
    let delay = chrono::Duration::from_std(state.config.number_activation_delay)
        .unwrap_or(chrono::Duration::MAX);
    let activate_after = state
        .store
        .now()
        .checked_add_signed(delay)
        .unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC);
    let bought = match state
        .store
        .purchase_number(ws, &number, &national_form(&number), cents, activate_after)
        .await
    {
        Ok(bought) => bought,
        Err(StoreError::Conflict { .. }) => {
            refund(state, ws, cents, &number).await?;
            return Err(held(&number));
        }
        Err(other) => {
            refund(state, ws, cents, &number).await?;
            return Err(other.into());
        }
    };
    Ok(PurchaseResult {
        success: true,
        id: bought.id,
        phone_number: bought.number,
        monthly_price: cents as f64 / 100.0,
        currency: "usd".into(),
        status: bought.status.as_str().into(),
        message: "Number purchased. It stays pending_requirements until the regulatory review completes, then becomes active.".into(),
    })
}

pub async fn configure(
    state: &App,
    auth: &Auth,
    id: uuid::Uuid,
    body: Map<String, Value>,
) -> Result<PhoneNumberRecord, AppError> {
    crate::app::fields::some_field(&body, CONFIGURE_WRITABLE)?;
    if body.get("friendly_name").is_some_and(|v| v.is_null()) {
        return Err(AppError::invalid_field("friendly_name", "must not be null"));
    }
    let input: ConfigureInput = parse_fields(body, CONFIGURE_WRITABLE)?;
    let ws = auth.workspace_id;
    let id = PhoneNumberId::from_uuid(id);
    if state.store.phone_number(ws, id).await?.is_none() {
        return Err(AppError::not_found("Phone number"));
    }
    if input
        .friendly_name
        .as_ref()
        .is_some_and(|name| name.chars().count() > 100)
    {
        return Err(AppError::invalid_field(
            "friendly_name",
            "must be at most 100 characters",
        ));
    }
    let inbound = workspace_agent(state, ws, "inbound_agent_id", input.inbound_agent_id).await?;
    let outbound = workspace_agent(state, ws, "outbound_agent_id", input.outbound_agent_id).await?;
    let friendly_name = input.friendly_name.as_deref().map(str::trim);
    let updated = state
        .store
        .configure_phone_number(ws, id, inbound, outbound, friendly_name)
        .await?;
    updated.ok_or(AppError::not_found("Phone number"))
}

pub async fn release(
    state: &App,
    auth: &Auth,
    id: uuid::Uuid,
) -> Result<serde_json::Value, AppError> {
    let removed = state
        .store
        .release_phone_number(auth.workspace_id, PhoneNumberId::from_uuid(id))
        .await?;
    crate::app::fields::deleted(removed, id, "Phone number")
}

pub const ISRAEL_ONLY: &str = "Only Israeli phone numbers are supported";

/// Body of `POST /phone-numbers/purchase`.
#[derive(Deserialize, ToSchema)]
pub struct PurchaseInput {
    /// E.164 (or Israeli national form); must be an Israeli number no one holds.
    pub phone_number: Option<String>,
}

/// The result of a purchase.
#[derive(Debug, Serialize, ToSchema)]
pub struct PurchaseResult {
    pub success: bool,
    /// Id of the new PhoneNumber.
    #[schema(value_type = uuid::Uuid)]
    pub id: PhoneNumberId,
    /// E.164.
    #[serde(rename = "phoneNumber")]
    pub phone_number: String,
    /// First month's price, charged now, in currency units.
    #[serde(rename = "monthlyPrice")]
    pub monthly_price: f64,
    pub currency: String,
    /// Always `pending_requirements`; the number becomes `active` after the regulatory review.
    pub status: String,
    pub message: String,
}

/// Writable fields of a held number.
#[derive(Deserialize, ToSchema)]
pub struct ConfigureInput {
    /// Agent answering inbound calls (an agent of the workspace), or null for none.
    #[serde(default)]
    #[schema(value_type = Option<uuid::Uuid>)]
    pub inbound_agent_id: Patch<uuid::Uuid>,
    /// Agent placing outbound calls from this number (an agent of the workspace), or null.
    #[serde(default)]
    #[schema(value_type = Option<uuid::Uuid>)]
    pub outbound_agent_id: Patch<uuid::Uuid>,
    /// Label, at most 100 characters.
    #[schema(nullable = false, max_length = 100)]
    pub friendly_name: Option<String>,
}

pub const PURCHASE_WRITABLE: &[&str] = &["phone_number"];

pub const CONFIGURE_WRITABLE: &[&str] = &["inbound_agent_id", "outbound_agent_id", "friendly_name"];

pub fn check_country(code: &str) -> Result<(), AppError> {
    let country = parse_country(code)
        .map_err(|e| AppError::bad_request(format!("Invalid query parameter `country`: {e}")))?;
    if format!("{country:?}") != "IL" {
        return Err(AppError::bad_request(ISRAEL_ONLY));
    }
    Ok(())
}

pub fn israel() -> Result<phonenumber::country::Id, AppError> {
    parse_country("IL").map_err(|e| AppError::Internal(e.into()))
}

pub fn held(number: &PhoneNumber) -> AppError {
    AppError::Conflict {
        message: format!("{number} is not available: it is already held"),
    }
}

/// Gives back a first-month charge whose purchase did not go through.
pub async fn refund(
    state: &App,
    ws: WorkspaceId,
    cents: i64,
    number: &PhoneNumber,
) -> Result<(), AppError> {
    let description = format!("Phone number {number}: purchase not completed, refunded");
    state
        .store
        .apply_ledger_entry(
            ws,
            cents,
            LedgerKind::NumberPurchaseRefund,
            &description,
            None,
        )
        .await?;
    Ok(())
}

pub fn national_form(number: &PhoneNumber) -> String {
    phonenumber::parse(None, number.as_str())
        .map(|n| n.format().mode(phonenumber::Mode::National).to_string())
        .unwrap_or_else(|_| number.as_str().to_owned())
}
