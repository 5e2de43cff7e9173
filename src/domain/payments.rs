//! Payment methods and the payment-provider port. Balances and the ledger live in the store
//! (`Store::apply_ledger_entry`); every balance change is one ledger row in integer cents; the
//! debits are `runtime::charges`.

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
