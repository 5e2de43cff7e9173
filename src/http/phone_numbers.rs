//! Phone numbers: search the available inventory, buy (Israeli numbers only, first month charged
//! to the balance, `pending_requirements` until the regulatory review passes), list, get,
//! assign agents and release.

use std::collections::HashSet;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use switchboard_actors::ids::{PhoneNumberId, WorkspaceId};
use switchboard_actors::money::Cents;
use switchboard_actors::phone::{PhoneNumber, parse_country};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{Data, JsonObject, ListResponse, Pagination, Patch, PathId, Q, parse_fields};
use super::openapi::body_schema;
use super::state::AppState;
use crate::app::agents::rules::workspace_agent;
use crate::app::auth::Auth;
use crate::app::error::AppError;
use crate::runtime::charges::ChargeError;
use crate::store::{PhoneNumberRecord, StoreError};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(search))
        .routes(routes!(list))
        .routes(routes!(purchase))
        .routes(routes!(get_one, configure, release))
}

pub const ISRAEL_ONLY: &str = "Only Israeli phone numbers are supported";

/// Israeli mobile ranges the inventory is drawn from (`05X`).
const MOBILE_PREFIXES: [&str; 5] = ["50", "52", "53", "54", "58"];
/// How many inventory candidates one search looks at.
const SEARCH_SCAN: u64 = 200_000;
const DEFAULT_SEARCH_LIMIT: i64 = 20;

/// Query of `GET /phone-numbers/search`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SearchQuery {
    /// ISO 3166 country code (default `IL`); only `IL` is offered.
    country: Option<String>,
    /// 1-12 digits the number must contain, in international (`97250...`) or national (`050...`) form.
    contains: Option<String>,
    /// Numbers to return, 1-100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    limit: Option<i64>,
}

/// A number that can be bought now.
#[derive(Debug, Serialize, ToSchema)]
pub struct AvailableNumber {
    /// E.164; send it to `POST /phone-numbers/purchase`.
    pub phone_number: String,
    /// National form, e.g. `050-123-4567`.
    pub friendly_name: String,
    pub country_code: String,
    /// Monthly price in currency units.
    pub monthly_price: f64,
    pub currency: String,
}

body_schema!(
    /// The body of `POST /phone-numbers/purchase`.
    PurchaseBody = create_body(PurchaseInput, &["phone_number"])
);
body_schema!(
    /// The body of `PATCH /phone-numbers/{id}`.
    ConfigureBody = patch_body(ConfigureInput, CONFIGURE_WRITABLE)
);

/// Body of `POST /phone-numbers/purchase`.
#[derive(Deserialize, ToSchema)]
pub struct PurchaseInput {
    /// E.164 (or Israeli national form); must be an Israeli number no one holds.
    phone_number: Option<String>,
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
    inbound_agent_id: Patch<uuid::Uuid>,
    /// Agent placing outbound calls from this number (an agent of the workspace), or null.
    #[serde(default)]
    #[schema(value_type = Option<uuid::Uuid>)]
    outbound_agent_id: Patch<uuid::Uuid>,
    /// Label, at most 100 characters.
    #[schema(nullable = false, max_length = 100)]
    friendly_name: Option<String>,
}

const PURCHASE_WRITABLE: &[&str] = &["phone_number"];
const CONFIGURE_WRITABLE: &[&str] = &["inbound_agent_id", "outbound_agent_id", "friendly_name"];

fn national_form(number: &PhoneNumber) -> String {
    phonenumber::parse(None, number.as_str())
        .map(|n| n.format().mode(phonenumber::Mode::National).to_string())
        .unwrap_or_else(|_| number.as_str().to_owned())
}

/// The `i`-th candidate of the inventory: spread over the mobile ranges in a fixed order.
fn candidate(i: u64) -> String {
    let prefix = MOBILE_PREFIXES[(i % MOBILE_PREFIXES.len() as u64) as usize];
    // 7919 is coprime with 10^7, so this walks every subscriber number once.
    let subscriber = ((i / MOBILE_PREFIXES.len() as u64) * 7_919 + 1_234_567) % 10_000_000;
    format!("+972{prefix}{subscriber:07}")
}

fn check_country(code: &str) -> Result<(), ApiError> {
    let country = parse_country(code)
        .map_err(|e| ApiError::bad_request(format!("Invalid query parameter `country`: {e}")))?;
    if format!("{country:?}") != "IL" {
        return Err(ApiError::bad_request(ISRAEL_ONLY));
    }
    Ok(())
}

fn israel() -> Result<phonenumber::country::Id, ApiError> {
    parse_country("IL").map_err(|e| AppError::Internal(e.into()).into())
}

/// Search numbers available to buy
#[utoipa::path(get, path = "/phone-numbers/search", operation_id = "searchPhoneNumbers", tag = "phone-numbers", security(("bearer" = ["phone_numbers:search"])),
    params(SearchQuery), responses((status = 200, body = Data<Vec<AvailableNumber>>), (status = 400)))]
async fn search(
    State(state): State<AppState>,
    _auth: Auth,
    Q(query): Q<SearchQuery>,
) -> Result<Json<Data<Vec<AvailableNumber>>>, ApiError> {
    check_country(query.country.as_deref().unwrap_or("IL"))?;
    let limit = query.limit.unwrap_or(DEFAULT_SEARCH_LIMIT);
    if !(1..=100).contains(&limit) {
        return Err(ApiError::bad_request(
            "Invalid query parameter `limit`: must be from 1 to 100",
        ));
    }
    let contains = query.contains.unwrap_or_default();
    if contains.len() > 12 || !contains.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ApiError::bad_request(
            "Invalid query parameter `contains`: must be 1-12 digits",
        ));
    }
    let held = state.store.held_numbers_with_prefix("+972").await?;
    let il = israel()?;
    let price = state.config.number_monthly_cents as f64 / 100.0;
    let mut found = Vec::new();
    let mut seen = HashSet::new();
    for i in 0..SEARCH_SCAN {
        if found.len() as i64 >= limit {
            break;
        }
        let e164 = candidate(i);
        let national = format!("0{}", &e164[4..]);
        if !contains.is_empty() && !e164[1..].contains(&contains) && !national.contains(&contains) {
            continue;
        }
        if held.contains(&e164) || !seen.insert(e164.clone()) {
            continue;
        }
        let Ok(number) = PhoneNumber::parse(&e164, il) else {
            continue;
        };
        found.push(AvailableNumber {
            friendly_name: national_form(&number),
            phone_number: number.as_str().to_owned(),
            country_code: "IL".into(),
            monthly_price: price,
            currency: "usd".into(),
        });
    }
    Ok(Json(Data { data: found }))
}

/// List the workspace's phone numbers
#[utoipa::path(get, path = "/phone-numbers", operation_id = "listPhoneNumbers", tag = "phone-numbers", security(("bearer" = ["phone_numbers:search"])),
    params(Pagination), responses((status = 200, body = ListResponse<PhoneNumberRecord>), (status = 400)))]
async fn list(
    State(state): State<AppState>,
    auth: Auth,
    Q(pagination): Q<Pagination>,
) -> Result<Json<ListResponse<PhoneNumberRecord>>, ApiError> {
    let page = pagination.page()?;
    let numbers = state
        .store
        .list_phone_numbers(auth.workspace_id, page)
        .await?;
    Ok(Json(ListResponse::new(numbers, page)))
}

/// Get a phone number
#[utoipa::path(get, path = "/phone-numbers/{id}", operation_id = "getPhoneNumber", tag = "phone-numbers", security(("bearer" = ["phone_numbers:search"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = PhoneNumberRecord), (status = 404)))]
async fn get_one(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<PhoneNumberRecord>, ApiError> {
    let found = state
        .store
        .phone_number(auth.workspace_id, PhoneNumberId::from_uuid(id))
        .await?;
    found.map(Json).ok_or(ApiError::not_found("Phone number"))
}

/// Buy a phone number (Israeli numbers only; needs a payment method; charges the first month)
#[utoipa::path(post, path = "/phone-numbers/purchase", operation_id = "purchasePhoneNumber", tag = "phone-numbers", security(("bearer" = ["phone_numbers:purchase"])),
    request_body = PurchaseBody,
    responses((status = 200, body = PurchaseResult), (status = 400), (status = 402, description = "BILLING_ERROR: no payment method or insufficient balance"), (status = 409)))]
async fn purchase(
    State(state): State<AppState>,
    auth: Auth,
    JsonObject(body): JsonObject,
) -> Result<Json<PurchaseResult>, ApiError> {
    let input: PurchaseInput = parse_fields(body, PURCHASE_WRITABLE)?;
    let raw = input
        .phone_number
        .ok_or_else(|| ApiError::missing_field("phone_number"))?;
    let number = PhoneNumber::parse(&raw, israel()?)
        .map_err(|e| ApiError::invalid_field("phone_number", e.to_string()))?;
    if number.country().as_deref() != Some("IL") {
        return Err(ApiError::bad_request(ISRAEL_ONLY));
    }
    let ws = auth.workspace_id;
    let account = state
        .store
        .billing_account(ws)
        .await?
        .ok_or(ApiError::not_found("Workspace"))?;
    if account.payment_method.is_none() {
        return Err(AppError::Billing {
            message: "A payment method is required to buy phone numbers; set one up first".into(),
        }
        .into());
    }
    if state.store.number_is_held(number.as_str()).await? {
        return Err(held(&number).into());
    }
    let cents = state.config.number_monthly_cents;
    let description = format!("Phone number {number}: first month");
    crate::runtime::charges::charge(
        &state.store,
        state.payments.as_ref(),
        ws,
        Cents::new(cents),
        "number_purchase",
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
            refund(&state, ws, cents, &number).await?;
            return Err(held(&number).into());
        }
        Err(other) => {
            refund(&state, ws, cents, &number).await?;
            return Err(other.into());
        }
    };
    Ok(Json(PurchaseResult {
        success: true,
        id: bought.id,
        phone_number: bought.number,
        monthly_price: cents as f64 / 100.0,
        currency: "usd".into(),
        status: bought.status,
        message: "Number purchased. It stays pending_requirements until the regulatory review completes, then becomes active.".into(),
    }))
}

fn held(number: &PhoneNumber) -> AppError {
    AppError::Conflict {
        message: format!("{number} is not available: it is already held"),
    }
}

/// Gives back a first-month charge whose purchase did not go through.
async fn refund(
    state: &AppState,
    ws: WorkspaceId,
    cents: i64,
    number: &PhoneNumber,
) -> Result<(), ApiError> {
    let description = format!("Phone number {number}: purchase not completed, refunded");
    state
        .store
        .apply_ledger_entry(ws, cents, "number_purchase_refund", &description, None)
        .await?;
    Ok(())
}

/// Assign agents to a phone number or rename it
#[utoipa::path(patch, path = "/phone-numbers/{id}", operation_id = "configurePhoneNumber", tag = "phone-numbers", security(("bearer" = ["phone_numbers:configure"])),
    params(("id" = uuid::Uuid, Path)), request_body = ConfigureBody,
    responses((status = 200, body = PhoneNumberRecord), (status = 400), (status = 404)))]
async fn configure(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    JsonObject(body): JsonObject,
) -> Result<Json<PhoneNumberRecord>, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_request(format!(
            "No writable field given. Writable fields: {}",
            CONFIGURE_WRITABLE.join(", ")
        )));
    }
    if body.get("friendly_name").is_some_and(|v| v.is_null()) {
        return Err(ApiError::invalid_field("friendly_name", "must not be null"));
    }
    let input: ConfigureInput = parse_fields(body, CONFIGURE_WRITABLE)?;
    let ws = auth.workspace_id;
    let id = PhoneNumberId::from_uuid(id);
    if state.store.phone_number(ws, id).await?.is_none() {
        return Err(ApiError::not_found("Phone number"));
    }
    if input
        .friendly_name
        .as_ref()
        .is_some_and(|name| name.chars().count() > 100)
    {
        return Err(ApiError::invalid_field(
            "friendly_name",
            "must be at most 100 characters",
        ));
    }
    let inbound = workspace_agent(&state, ws, "inbound_agent_id", input.inbound_agent_id).await?;
    let outbound =
        workspace_agent(&state, ws, "outbound_agent_id", input.outbound_agent_id).await?;
    let friendly_name = input.friendly_name.as_deref().map(str::trim);
    let updated = state
        .store
        .configure_phone_number(ws, id, inbound, outbound, friendly_name)
        .await?;
    updated.map(Json).ok_or(ApiError::not_found("Phone number"))
}

/// Release a phone number (it leaves the workspace and can be bought again)
#[utoipa::path(delete, path = "/phone-numbers/{id}", operation_id = "releasePhoneNumber", tag = "phone-numbers", security(("bearer" = ["phone_numbers:configure"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, description = "{success: true, id}"), (status = 404)))]
async fn release(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<serde_json::Value>, ApiError> {
    let removed = state
        .store
        .release_phone_number(auth.workspace_id, PhoneNumberId::from_uuid(id))
        .await?;
    super::extract::deleted(removed, id, "Phone number")
}
