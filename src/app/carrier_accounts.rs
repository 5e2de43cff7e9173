//! Carrier accounts: what registering and changing one do and refuse, for the REST API and the
//! operator's commands alike. The operator's emergency switch (`carrier_accounts_enabled`) is
//! the API's to check; the operator's own commands are not held by it.

use switchboard_actors::ids::WorkspaceId;
use switchboard_sip::trunk::{Trunk, TrunkError};

use crate::app::error::AppError;
use crate::domain::trunks::{ACCOUNT_NAME_MAX, PROVIDER_MAX, account_label};
use crate::store::{AccountUpdate, CarrierAccount, CarrierAccountUpdate, Store};

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
