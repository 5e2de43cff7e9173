//! Billing: the payment-provider port. Balances and the ledger live in the store
//! (`Store::apply_ledger_entry`); every balance change is one ledger row in integer cents.

use switchboard_actors::ids::WorkspaceId;
use switchboard_actors::money::Cents;

/// A saved payment method, as the provider identifies it.
#[derive(Debug, Clone)]
pub struct PaymentMethod {
    /// The provider's reference for the method (never card data).
    pub id: String,
    /// What to show a person, e.g. `visa ending 4242`.
    pub label: String,
}

#[derive(Debug, thiserror::Error)]
pub enum PaymentError {
    /// The provider refused the method or the charge; the message is safe to show.
    #[error("{0}")]
    Declined(String),
    #[error("payment provider unavailable: {0}")]
    Unavailable(String),
}

/// Where money comes from. Switchboard ships [`LocalPaymentProvider`]; a card processor
/// implements the same two calls.
#[async_trait::async_trait]
pub trait PaymentProvider: Send + Sync {
    /// Saves a payment method from a provider token (e.g. a card token made in the browser).
    async fn setup(
        &self,
        workspace: WorkspaceId,
        token: &str,
    ) -> Result<PaymentMethod, PaymentError>;
    /// Charges a saved method; returns the provider's charge reference.
    async fn charge(
        &self,
        workspace: WorkspaceId,
        method: &PaymentMethod,
        amount: Cents,
    ) -> Result<String, PaymentError>;
}

/// Records payment methods and charges locally, for self-hosted installs that settle invoices
/// outside Switchboard. A token is any 1-200 printable characters; charges always succeed.
pub struct LocalPaymentProvider;

#[async_trait::async_trait]
impl PaymentProvider for LocalPaymentProvider {
    async fn setup(
        &self,
        _workspace: WorkspaceId,
        token: &str,
    ) -> Result<PaymentMethod, PaymentError> {
        let token = token.trim();
        if token.is_empty() || token.len() > 200 || !token.chars().all(|c| c.is_ascii_graphic()) {
            return Err(PaymentError::Declined(
                "payment token must be 1-200 printable characters".into(),
            ));
        }
        let tail: String = token
            .chars()
            .rev()
            .take(4)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        Ok(PaymentMethod {
            id: format!("local_pm_{}", uuid::Uuid::now_v7().simple()),
            label: format!("local method ending {tail}"),
        })
    }

    async fn charge(
        &self,
        _workspace: WorkspaceId,
        _method: &PaymentMethod,
        amount: Cents,
    ) -> Result<String, PaymentError> {
        if amount <= Cents::ZERO {
            return Err(PaymentError::Declined("amount must be positive".into()));
        }
        Ok(format!("local_ch_{}", uuid::Uuid::now_v7().simple()))
    }
}

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
    Store(#[from] crate::store::StoreError),
}

/// Debits `amount` (positive) from the balance as one ledger entry, refusing to go below
/// zero, then runs auto top-up if it is enabled and the balance fell below the threshold.
pub async fn charge(
    store: &crate::store::Store,
    payments: &dyn PaymentProvider,
    workspace: WorkspaceId,
    amount: Cents,
    kind: &str,
    description: &str,
) -> Result<crate::store::LedgerEntry, ChargeError> {
    let entry = store
        .debit_if_covered(workspace, amount.get(), kind, description)
        .await?;
    let entry = match entry {
        crate::store::Debit::Done(entry) => entry,
        crate::store::Debit::Insufficient { balance_cents } => {
            return Err(ChargeError::InsufficientBalance {
                balance_cents: Cents::new(balance_cents),
                amount_cents: amount,
            });
        }
        crate::store::Debit::NoWorkspace => return Err(ChargeError::NoWorkspace),
    };
    if let Err(err) = auto_topup(store, payments, workspace).await {
        tracing::warn!(%workspace, error = %err, "auto top-up failed");
    }
    Ok(entry)
}

/// Tops the balance up by the configured amount when auto top-up is on, a payment method is
/// saved and the balance is below the threshold. Returns the credit entry if one was made.
pub async fn auto_topup(
    store: &crate::store::Store,
    payments: &dyn PaymentProvider,
    workspace: WorkspaceId,
) -> anyhow::Result<Option<crate::store::LedgerEntry>> {
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
            "auto_topup",
            "automatic top-up",
            Some(&reference),
        )
        .await?;
    Ok(entry)
}
