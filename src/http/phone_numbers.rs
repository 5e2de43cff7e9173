//! Phone numbers: search the available inventory, buy (Israeli numbers only, first month charged
//! to the balance, `pending_requirements` until the regulatory review passes), list, get,
//! assign agents and release.

use std::collections::HashSet;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use switchboard_actors::ids::PhoneNumberId;
use switchboard_actors::phone::PhoneNumber;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{Data, JsonObject, ListResponse, Pagination, PathId, Q};
use super::openapi::body_schema;
use super::state::AppState;
use crate::app::auth::Auth;
use crate::app::phone_numbers::*;
use crate::store::PhoneNumberRecord;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(search))
        .routes(routes!(list))
        .routes(routes!(purchase))
        .routes(routes!(get_one, configure, release))
}

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

/// The `i`-th candidate of the inventory: spread over the mobile ranges in a fixed order.
fn candidate(i: u64) -> String {
    let prefix = MOBILE_PREFIXES[(i % MOBILE_PREFIXES.len() as u64) as usize];
    // 7919 is coprime with 10^7, so this walks every subscriber number once.
    let subscriber = ((i / MOBILE_PREFIXES.len() as u64) * 7_919 + 1_234_567) % 10_000_000;
    format!("+972{prefix}{subscriber:07}")
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
    Ok(Json(
        crate::app::phone_numbers::purchase(&state, &auth, body).await?,
    ))
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
    Ok(Json(
        crate::app::phone_numbers::configure(&state, &auth, id, body).await?,
    ))
}

/// Release a phone number (it leaves the workspace and can be bought again)
#[utoipa::path(delete, path = "/phone-numbers/{id}", operation_id = "releasePhoneNumber", tag = "phone-numbers", security(("bearer" = ["phone_numbers:configure"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, description = "{success: true, id}"), (status = 404)))]
async fn release(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<serde_json::Value>, ApiError> {
    Ok(Json(
        crate::app::phone_numbers::release(&state, &auth, id).await?,
    ))
}
