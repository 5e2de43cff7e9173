//! Carrier accounts: status, create, list, get, update, the test of an account's SIP trunk,
//! the numbers on an account, and taking a number off an account. The operator's emergency
//! switch (`--carrier-accounts-enabled false`) makes every route here answer `403
//! CARRIER_ACCOUNTS_NOT_ENABLED` with `enabled: false`; a key without the route's scope gets
//! 403 too.
//!
//! **Invariant:** a trunk's password is write-only: no answer here carries it.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use switchboard_sip::trunk::Trunk;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{JsonObject, ListResponse, Pagination, PathId, PathIds, Q};
use super::openapi::body_schema;
use super::state::AppState;
use crate::app::auth::Auth;
use crate::app::carrier_accounts::{self, TrunkTest, switch_on, trunk_invalid};
use crate::app::fields::{Patch, parse_fields};
use crate::domain::trunks::PasswordUpdate;
use crate::store::{CarrierAccount, CarrierAccountUpdate, PhoneNumberRecord, TrunkUpdate};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(status))
        .routes(routes!(list, create))
        .routes(routes!(get_one, update))
        .routes(routes!(test_trunk))
        .routes(routes!(numbers))
        .routes(routes!(remove_number))
}

const WRITABLE: &[&str] = &["name", "provider", "trunk"];

#[derive(Deserialize, ToSchema)]
pub struct CarrierAccountInput {
    /// 1-100 characters, not blank (trimmed).
    #[schema(
        min_length = 1,
        max_length = 100,
        pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*$"
    )]
    name: Option<String>,
    /// The carrier, e.g. `telnyx`: 1-64 characters, not blank (trimmed).
    #[schema(
        min_length = 1,
        max_length = 64,
        pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*$"
    )]
    provider: Option<String>,
    /// The SIP trunk the account's numbers call through; `null`: none. On an update the trunk
    /// is replaced whole, except that a trunk without a `password` key keeps the stored
    /// password (`"password": null` clears it); any change of the trunk makes the account
    /// `untested`.
    #[serde(default)]
    #[schema(value_type = Option<Trunk>)]
    trunk: Patch<Trunk>,
}

body_schema!(
    /// The body of `POST /carrier-accounts`.
    CarrierAccountCreate = create_body(CarrierAccountInput, &["name", "provider"])
);
body_schema!(
    /// The body of `PATCH /carrier-accounts/{id}`.
    CarrierAccountPatch = patch_body(CarrierAccountInput, WRITABLE)
);

/// A trunk rule broken, named from the body's top (`trunk.gateways[0].host`).
/// What the body's trunk does with the stored password (`Keep` without a trunk object).
fn sent_password(body: &Map<String, Value>) -> Result<PasswordUpdate, ApiError> {
    match body.get("trunk") {
        Some(Value::Object(trunk)) => {
            PasswordUpdate::sent(trunk).map_err(|e| trunk_invalid(e).into())
        }
        _ => Ok(PasswordUpdate::Keep),
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
        .ok_or_else(|| carrier_accounts::missing().into())
}

/// Register a carrier account, with its SIP trunk or without one (`untested`)
#[utoipa::path(post, path = "/carrier-accounts", operation_id = "createCarrierAccount", tag = "carrier_accounts", security(("bearer" = ["carrier_accounts:manage"])),
    request_body = CarrierAccountCreate, responses((status = 201, body = CarrierAccount), (status = 400), (status = 403)))]
async fn create(
    State(state): State<AppState>,
    auth: Auth,
    JsonObject(body): JsonObject,
) -> Result<(StatusCode, Json<CarrierAccount>), ApiError> {
    switch_on(&state)?;
    sent_password(&body)?;
    let input: CarrierAccountInput = parse_fields(body, WRITABLE)?;
    let name = input.name.ok_or_else(|| ApiError::missing_field("name"))?;
    let provider = input
        .provider
        .ok_or_else(|| ApiError::missing_field("provider"))?;
    let trunk = match input.trunk {
        Patch::Value(trunk) => Some(trunk),
        Patch::Absent | Patch::Null => None,
    };
    let account =
        carrier_accounts::create(&state.store, auth.workspace_id, &name, &provider, trunk).await?;
    Ok((StatusCode::CREATED, Json(account)))
}

/// Update a carrier account's name, provider or SIP trunk; a changed trunk is `untested` again
#[utoipa::path(patch, path = "/carrier-accounts/{id}", operation_id = "updateCarrierAccount", tag = "carrier_accounts", security(("bearer" = ["carrier_accounts:manage"])),
    params(("id" = uuid::Uuid, Path)), request_body = CarrierAccountPatch,
    responses((status = 200, body = CarrierAccount), (status = 400), (status = 403), (status = 404)))]
async fn update(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    JsonObject(body): JsonObject,
) -> Result<Json<CarrierAccount>, ApiError> {
    switch_on(&state)?;
    crate::app::fields::some_field(&body, WRITABLE)?;
    let password = sent_password(&body)?;
    let input: CarrierAccountInput = parse_fields(body, WRITABLE)?;
    let update = CarrierAccountUpdate {
        name: input.name.map(|n| carrier_accounts::name(&n)).transpose()?,
        provider: input
            .provider
            .map(|p| carrier_accounts::provider(&p))
            .transpose()?,
        trunk: match input.trunk {
            Patch::Absent => None,
            Patch::Null => Some(TrunkUpdate::Remove),
            Patch::Value(trunk) => Some(TrunkUpdate::Replace {
                trunk: Box::new(trunk),
                password,
            }),
        },
    };
    Ok(Json(
        carrier_accounts::update(&state.store, auth.workspace_id, id, update).await?,
    ))
}

/// Test a carrier account's SIP trunk: an OPTIONS to every gateway; the account becomes `active` when one answers, else `failing` with the reason
#[utoipa::path(post, path = "/carrier-accounts/{id}/test", operation_id = "testCarrierAccountTrunk", tag = "carrier_accounts", security(("bearer" = ["carrier_accounts:manage"])),
    params(("id" = uuid::Uuid, Path)),
    responses((status = 200, body = TrunkTest), (status = 403), (status = 404),
        (status = 409, description = "TRUNK_NOT_CONFIGURED: the account has no trunk; TRUNK_CHANGED: the trunk changed during the test"),
        (status = 503, description = "SIP_NOT_RUNNING: this service runs no SIP client to probe with")))]
async fn test_trunk(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<TrunkTest>, ApiError> {
    Ok(Json(
        crate::app::carrier_accounts::test_trunk(&state, &auth, id).await?,
    ))
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
        return Err(carrier_accounts::missing().into());
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
    Ok(Json(
        crate::app::carrier_accounts::remove_number(&state, &auth, account, number).await?,
    ))
}

/// The schema of a shown trunk, from `Trunk`'s: `password` replaced by `has_password`.
impl utoipa::PartialSchema for crate::domain::trunks::ShownTrunk {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use crate::http::openapi::{json_schema, schema_json};
        let mut schema =
            schema_json(&<switchboard_sip::trunk::Trunk as utoipa::PartialSchema>::schema());
        if let Some(properties) = schema
            .get_mut("properties")
            .and_then(serde_json::Value::as_object_mut)
        {
            properties.remove("password");
            properties.insert(
                "has_password".into(),
                serde_json::json!({"type": "boolean", "description": "Whether a password is stored (it is never shown)."}),
            );
        }
        if let Some(required) = schema
            .get_mut("required")
            .and_then(serde_json::Value::as_array_mut)
        {
            required.push("has_password".into());
        }
        if let Some(object) = schema.as_object_mut() {
            object.insert(
                "description".into(),
                "A SIP trunk as shown: every field but the password, and whether one is stored."
                    .into(),
            );
        }
        json_schema(schema)
    }
}

impl utoipa::ToSchema for crate::domain::trunks::ShownTrunk {
    fn name() -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed("TrunkView")
    }

    fn schemas(
        schemas: &mut Vec<(
            String,
            utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
        )>,
    ) {
        <switchboard_sip::trunk::Trunk as ToSchema>::schemas(schemas);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::trunks::{ACCOUNT_NAME_MAX, PROVIDER_MAX};
    use utoipa::PartialSchema;

    #[test]
    fn the_body_schema_bounds_are_the_label_rules_limits() {
        let body = super::super::openapi::schema_json(&CarrierAccountCreate::schema());
        assert_eq!(body["properties"]["name"]["maxLength"], ACCOUNT_NAME_MAX);
        assert_eq!(body["properties"]["provider"]["maxLength"], PROVIDER_MAX);
        assert_eq!(body["required"], json!(["name", "provider"]));
    }
}
