//! Debits of a workspace's balance (calls, purchases) and the auto top-up they may set off.

use switchboard_actors::ids::WorkspaceId;
use switchboard_actors::money::Cents;

use crate::domain::payments::PaymentProvider;
use crate::store::{Debit, LedgerEntry, LedgerKind, Store, StoreError};

/// Why a charge to a workspace failed.
#[derive(Debug, thiserror::Error)]
pub enum ChargeError {
    #[error(
        "Insufficient balance: {balance_cents} cents available, {amount_cents} needed; top up first"
    )]
    InsufficientBalance {
        balance_cents: Cents,
        amount_cents: Cents,
    },
    #[error("No such workspace")]
    NoWorkspace,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Debits `amount` (positive) from the balance as one ledger entry, refusing to go below
/// zero, then runs auto top-up if it is enabled and the balance fell below the threshold.
pub async fn charge(
    store: &Store,
    payments: &dyn PaymentProvider,
    workspace: WorkspaceId,
    amount: Cents,
    kind: LedgerKind,
    description: &str,
) -> Result<LedgerEntry, ChargeError> {
    let entry = store
        .debit_if_covered(workspace, amount.get(), kind, description)
        .await?;
    let entry = match entry {
        Debit::Done(entry) => entry,
        Debit::Insufficient { balance_cents } => {
            return Err(ChargeError::InsufficientBalance {
                balance_cents: Cents::new(balance_cents),
                amount_cents: amount,
            });
        }
        Debit::NoWorkspace => return Err(ChargeError::NoWorkspace),
    };
    if let Err(err) = auto_topup(store, payments, workspace).await {
        tracing::warn!(%workspace, error = %err, "auto top-up failed");
    }
    Ok(entry)
}

/// Tops the balance up by the configured amount when auto top-up is on, a payment method is
/// saved and the balance is below the threshold. Returns the credit entry if one was made.
pub async fn auto_topup(
    store: &Store,
    payments: &dyn PaymentProvider,
    workspace: WorkspaceId,
) -> anyhow::Result<Option<LedgerEntry>> {
    let Some(account) = store.billing_account(workspace).await? else {
        return Ok(None);
    };
    let Some(method) = account.payment_method.clone() else {
        return Ok(None);
    };
    let amount = Cents::new(account.auto_topup_amount_cents);
    if !account.auto_topup_enabled
        || amount <= Cents::ZERO
        || Cents::new(account.balance_cents) >= Cents::new(account.low_balance_threshold_cents)
    {
        return Ok(None);
    }
    let reference = payments.charge(workspace, &method, amount).await?;
    let entry = store
        .apply_ledger_entry(
            workspace,
            amount.get(),
            LedgerKind::AutoTopup,
            "automatic top-up",
            Some(&reference),
        )
        .await?;
    Ok(entry)
}
