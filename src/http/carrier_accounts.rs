//! Carrier accounts: status, list, get, the numbers on an account, and taking a number off an
//! account. The operator's emergency switch (`--carrier-accounts-enabled false`) makes every
//! route here answer `403 CARRIER_ACCOUNTS_NOT_ENABLED` with `enabled: false`; a key without
//! the route's scope gets 403 too.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};
use switchboard_actors::ids::PhoneNumberId;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::error::ApiError;
use super::extract::{ListResponse, Pagination, PathId, PathIds, Q};
use super::gate::Auth;
use crate::store::{CarrierAccount, NumberRemoval, PhoneNumberRecord};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(status))
        .routes(routes!(list))
        .routes(routes!(get_one))
        .routes(routes!(numbers))
        .routes(routes!(remove_number))
}

fn switch_on(state: &AppState) -> Result<(), ApiError> {
    if state.config.carrier_accounts_enabled {
        Ok(())
    } else {
        Err(ApiError::CarrierAccountsDisabled)
    }
}

/// Whether carrier accounts are enabled, and the workspace's accounts and numbers on them
#[utoipa::path(get, path = "/carrier-accounts/status", operation_id = "getCarrierAccountsStatus", tag = "carrier_accounts", security(("bearer" = ["carrier_accounts:manage"])),
    responses((status = 200, description = "{enabled, accounts, numbers}"), (status = 403)))]
async fn status(State(state): State<AppState>, auth: Auth) -> Result<Json<Value>, ApiError> {
    switch_on(&state)?;
    let (accounts, numbers) = state.store.carrier_totals(auth.workspace_id).await?;
    Ok(Json(json!({
        "enabled": true,
        "accounts": accounts,
        "numbers": numbers,
    })))
}

/// List the workspace's carrier accounts
#[utoipa::path(get, path = "/carrier-accounts", operation_id = "listCarrierAccounts", tag = "carrier_accounts", security(("bearer" = ["carrier_accounts:manage"])),
    params(Pagination), responses((status = 200, body = ListResponse<CarrierAccount>), (status = 403)))]
async fn list(
    State(state): State<AppState>,
    auth: Auth,
    Q(p): Q<Pagination>,
) -> Result<Json<ListResponse<CarrierAccount>>, ApiError> {
    switch_on(&state)?;
    let page = p.page()?;
    Ok(Json(ListResponse::new(
        state
            .store
            .list_carrier_accounts(auth.workspace_id, page)
            .await?,
        page,
    )))
}

fn account_missing() -> ApiError {
    ApiError::CodedNotFound {
        code: "CARRIER_ACCOUNT_NOT_FOUND",
        message: "Carrier account not found".into(),
    }
}

/// Get a carrier account
#[utoipa::path(get, path = "/carrier-accounts/{id}", operation_id = "getCarrierAccount", tag = "carrier_accounts", security(("bearer" = ["carrier_accounts:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = CarrierAccount), (status = 403), (status = 404)))]
async fn get_one(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<CarrierAccount>, ApiError> {
    switch_on(&state)?;
    state
        .store
        .carrier_account(auth.workspace_id, id)
        .await?
        .map(Json)
        .ok_or_else(account_missing)
}

/// The workspace's numbers on a carrier account
#[utoipa::path(get, path = "/carrier-accounts/{id}/numbers", operation_id = "listCarrierAccountNumbers", tag = "carrier_accounts", security(("bearer" = ["carrier_accounts:manage"])),
    params(("id" = uuid::Uuid, Path), Pagination),
    responses((status = 200, body = ListResponse<PhoneNumberRecord>), (status = 403), (status = 404)))]
async fn numbers(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    Q(p): Q<Pagination>,
) -> Result<Json<ListResponse<PhoneNumberRecord>>, ApiError> {
    switch_on(&state)?;
    let page = p.page()?;
    if state
        .store
        .carrier_account(auth.workspace_id, id)
        .await?
        .is_none()
    {
        return Err(account_missing());
    }
    Ok(Json(ListResponse::new(
        state
            .store
            .account_numbers(auth.workspace_id, id, page)
            .await?,
        page,
    )))
}

/// Take a number off a carrier account: agents stop calling from it; nothing is released at the carrier
#[utoipa::path(delete, path = "/carrier-accounts/{id}/numbers/{phone_number_id}", operation_id = "removeCarrierAccountNumber", tag = "carrier_accounts",
    security(("bearer" = ["carrier_accounts:manage"])),
    params(("id" = uuid::Uuid, Path), ("phone_number_id" = uuid::Uuid, Path)),
    responses((status = 200, description = "{success: true, id}"), (status = 403),
        (status = 404, description = "CARRIER_ACCOUNT_NOT_FOUND or NUMBER_NOT_FOUND")))]
async fn remove_number(
    State(state): State<AppState>,
    auth: Auth,
    PathIds(account, number): PathIds,
) -> Result<Json<Value>, ApiError> {
    switch_on(&state)?;
    match state
        .store
        .remove_number_from_account(auth.workspace_id, account, PhoneNumberId::from_uuid(number))
        .await?
    {
        NumberRemoval::Removed => Ok(Json(json!({"success": true, "id": number}))),
        NumberRemoval::AccountNotFound => Err(account_missing()),
        NumberRemoval::NumberNotFound => Err(ApiError::CodedNotFound {
            code: "NUMBER_NOT_FOUND",
            message: "That number is not on this carrier account".into(),
        }),
    }
}
