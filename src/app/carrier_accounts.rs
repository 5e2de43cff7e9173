//! Carrier accounts: what registering and changing one do and refuse, for the REST API and the
//! operator's commands alike. The operator's emergency switch (`carrier_accounts_enabled`) is
//! the API's to check; the operator's own commands are not held by it.

use switchboard_actors::ids::WorkspaceId;
use switchboard_sip::trunk::{Trunk, TrunkError};

use crate::app::auth::Auth;
use crate::app::error::AppError;
use crate::app::state::App;
use crate::domain::trunks;
use crate::domain::trunks::{ACCOUNT_NAME_MAX, PROVIDER_MAX, account_label};
use crate::store::{AccountUpdate, CarrierAccount, CarrierAccountUpdate, Store};
use crate::store::{NumberRemoval, TrunkLookup};
use serde::Serialize;
use serde_json::{Value, json};
use switchboard_actors::ids::PhoneNumberId;
use switchboard_sip::trunk::GatewayProbe;
use utoipa::ToSchema;

/// A trunk that breaks a rule, named by its field (`trunk.gateways`, ...).
pub fn trunk_invalid(err: TrunkError) -> AppError {
    AppError::invalid_field(format!("trunk.{}", err.field), err.message)
}

/// A name or provider, trimmed, within its bounds.
pub fn label(field: &'static str, raw: &str, max: usize) -> Result<String, AppError> {
    account_label(raw, max).map_err(|rule| AppError::invalid_field(field, rule))
}

/// The account's name, as its rule reads it.
pub fn name(raw: &str) -> Result<String, AppError> {
    label("name", raw, ACCOUNT_NAME_MAX)
}

/// The account's provider, as its rule reads it.
pub fn provider(raw: &str) -> Result<String, AppError> {
    label("provider", raw, PROVIDER_MAX)
}

/// Registers an account, with its trunk (checked) or without one (`untested`).
pub async fn create(
    store: &Store,
    ws: WorkspaceId,
    name_raw: &str,
    provider_raw: &str,
    trunk: Option<Trunk>,
) -> Result<CarrierAccount, AppError> {
    let name = name(name_raw)?;
    let provider = provider(provider_raw)?;
    if let Some(trunk) = &trunk {
        trunk.validate().map_err(trunk_invalid)?;
    }
    let account = store
        .create_carrier_account(ws, &name, &provider, trunk.as_ref())
        .await?;
    tracing::info!(account = %account.id, trunk = trunk.is_some(), "carrier account created");
    Ok(account)
}

/// Changes what `update` names; a changed trunk is `untested` again.
pub async fn update(
    store: &Store,
    ws: WorkspaceId,
    id: uuid::Uuid,
    update: CarrierAccountUpdate,
) -> Result<CarrierAccount, AppError> {
    match store.update_carrier_account(ws, id, update).await? {
        AccountUpdate::Updated(account) => Ok(*account),
        AccountUpdate::NotFound => Err(missing()),
        AccountUpdate::Invalid(err) => Err(trunk_invalid(err)),
    }
}

/// The account is not the workspace's.
pub fn missing() -> AppError {
    AppError::CodedNotFound {
        code: "CARRIER_ACCOUNT_NOT_FOUND",
        message: "Carrier account not found".into(),
    }
}

pub async fn test_trunk(state: &App, auth: &Auth, id: uuid::Uuid) -> Result<TrunkTest, AppError> {
    switch_on(state)?;
    let tested = match state.store.carrier_trunk(auth.workspace_id, id).await? {
        TrunkLookup::NoAccount => return Err(missing()),
        TrunkLookup::NoTrunk => {
            return Err(AppError::CodedConflict {
                code: "TRUNK_NOT_CONFIGURED",
                message: "This carrier account has no SIP trunk to test; set one with PATCH /carrier-accounts/{id}".into(),
            });
        }
        TrunkLookup::Trunk(tested) => tested,
    };
    let prober = state.trunk_prober.as_ref().ok_or(AppError::SipNotRunning)?;
    let probes = prober.probe(&tested.trunk).await;
    let (status, reason) = trunks::assess(&probes);
    let account = state
        .store
        .record_trunk_test(auth.workspace_id, id, &tested, status, reason.as_deref())
        .await?
        .ok_or_else(|| AppError::CodedConflict {
            code: "TRUNK_CHANGED",
            message: "The trunk changed while it was being tested; test it again".into(),
        })?;
    tracing::info!(account = %id, status = status.as_str(), reason = reason.as_deref().unwrap_or(""), "carrier account trunk tested");
    Ok(TrunkTest { account, probes })
}

pub async fn remove_number(
    state: &App,
    auth: &Auth,
    account: uuid::Uuid,
    number: uuid::Uuid,
) -> Result<Value, AppError> {
    switch_on(state)?;
    match state
        .store
        .remove_number_from_account(auth.workspace_id, account, PhoneNumberId::from_uuid(number))
        .await?
    {
        NumberRemoval::Removed => Ok(json!({"success": true, "id": number})),
        NumberRemoval::AccountNotFound => Err(missing()),
        NumberRemoval::NumberNotFound => Err(AppError::CodedNotFound {
            code: "NUMBER_NOT_FOUND",
            message: "That number is not on this carrier account".into(),
        }),
    }
}

/// The answer to a trunk test.
#[derive(Debug, Serialize, ToSchema)]
pub struct TrunkTest {
    /// The account, with the status the test gave it.
    pub account: CarrierAccount,
    /// What each gateway answered to OPTIONS.
    pub probes: Vec<GatewayProbe>,
}

pub fn switch_on(state: &App) -> Result<(), AppError> {
    if state.config.carrier_accounts_enabled {
        Ok(())
    } else {
        Err(AppError::CarrierAccountsDisabled)
    }
}
