//! Balances and the ledger. Every balance change is a ledger row written in the same
//! transaction as the balance, in integer cents.

use chrono::{DateTime, Utc};
use serde::Serialize;
use switchboard_actors::ids::WorkspaceId;
use utoipa::ToSchema;

use super::db::{Exec, begin_write, query};
use super::{Store, StoreResult, coded, ts};

/// One balance change.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LedgerEntry {
    pub id: uuid::Uuid,
    /// Positive for credits, negative for charges.
    pub amount_cents: i64,
    pub balance_after_cents: i64,
    /// `topup`, `credit`, `number_purchase`, `call`, ...
    #[schema(value_type = String)]
    pub kind: LedgerKind,
    pub description: String,
    pub reference: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// What a balance change was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LedgerKind {
    /// Paid in through the payment provider.
    Topup,
    /// Paid in automatically when the balance fell under the workspace's threshold.
    AutoTopup,
    /// Credited by the operator (or a simulation's workspace).
    Credit,
    /// Corrected by the service (a simulation's settlement).
    Adjustment,
    /// A phone number bought.
    NumberPurchase,
    /// A number purchase given back.
    NumberPurchaseRefund,
    /// A call's charge.
    Call,
}

impl LedgerKind {
    pub const ALL: [LedgerKind; 7] = [
        LedgerKind::Topup,
        LedgerKind::AutoTopup,
        LedgerKind::Credit,
        LedgerKind::Adjustment,
        LedgerKind::NumberPurchase,
        LedgerKind::NumberPurchaseRefund,
        LedgerKind::Call,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            LedgerKind::Topup => "topup",
            LedgerKind::AutoTopup => "auto_topup",
            LedgerKind::Credit => "credit",
            LedgerKind::Adjustment => "adjustment",
            LedgerKind::NumberPurchase => "number_purchase",
            LedgerKind::NumberPurchaseRefund => "number_purchase_refund",
            LedgerKind::Call => "call",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// A workspace's billing settings and balance.
#[derive(Debug, Clone)]
pub struct BillingAccount {
    pub balance_cents: i64,
    pub currency: String,
    pub billing_email: String,
    pub payment_method: Option<crate::domain::payments::PaymentMethod>,
    pub is_suspended: bool,
    pub auto_topup_enabled: bool,
    pub auto_topup_amount_cents: i64,
    pub low_balance_threshold_cents: i64,
}

/// The result of [`Store::debit_if_covered`].
#[derive(Debug)]
pub enum Debit {
    Done(LedgerEntry),
    Insufficient { balance_cents: i64 },
    NoWorkspace,
}

impl Store {
    pub async fn billing_account(&self, ws: WorkspaceId) -> StoreResult<Option<BillingAccount>> {
        let row = query(
            "SELECT balance_cents, currency, billing_email, payment_method_id, payment_method_label, is_suspended, auto_topup_enabled, \
             auto_topup_amount_cents, low_balance_threshold_cents FROM workspaces WHERE id = ?",
        )
        .bind(ws.as_uuid())
        .fetch_optional(&mut self.conn().await?)
        .await?;
        let Some(r) = row else { return Ok(None) };
        let method_id: Option<String> = r.try_get("payment_method_id")?;
        let method_label: Option<String> = r.try_get("payment_method_label")?;
        Ok(Some(BillingAccount {
            balance_cents: r.try_get("balance_cents")?,
            currency: r.try_get("currency")?,
            billing_email: r.try_get("billing_email")?,
            payment_method: method_id.map(|id| crate::domain::payments::PaymentMethod {
                id,
                label: method_label.unwrap_or_default(),
            }),
            is_suspended: r.try_get("is_suspended")?,
            auto_topup_enabled: r.try_get("auto_topup_enabled")?,
            auto_topup_amount_cents: r.try_get("auto_topup_amount_cents")?,
            low_balance_threshold_cents: r.try_get("low_balance_threshold_cents")?,
        }))
    }

    /// Debits `amount_cents` only if the balance covers it, atomically.
    pub async fn debit_if_covered(
        &self,
        ws: WorkspaceId,
        amount_cents: i64,
        kind: LedgerKind,
        description: &str,
    ) -> StoreResult<Debit> {
        let mut conn = self.conn().await?;
        let mut tx = begin_write(&mut conn).await?;
        let balance: Option<i64> = query("SELECT balance_cents FROM workspaces WHERE id = ?")
            .bind(ws.as_uuid())
            .scalar_optional(&mut tx)
            .await?;
        let Some(balance_cents) = balance else {
            return Ok(Debit::NoWorkspace);
        };
        if balance_cents < amount_cents {
            return Ok(Debit::Insufficient { balance_cents });
        }
        let entry = ledger_entry_in(
            &mut tx,
            ws,
            -amount_cents,
            kind,
            description,
            None,
            self.now(),
        )
        .await?;
        tx.commit().await?;
        drop(conn);
        Ok(Debit::Done(entry))
    }

    /// Adds `amount_cents` (negative to charge) to the balance and records it; `None` when the
    /// workspace does not exist.
    pub async fn apply_ledger_entry(
        &self,
        ws: WorkspaceId,
        amount_cents: i64,
        kind: LedgerKind,
        description: &str,
        reference: Option<&str>,
    ) -> StoreResult<Option<LedgerEntry>> {
        let mut conn = self.conn().await?;
        let mut tx = begin_write(&mut conn).await?;
        let exists: Option<i64> = query("SELECT 1 FROM workspaces WHERE id = ?")
            .bind(ws.as_uuid())
            .scalar_optional(&mut tx)
            .await?;
        if exists.is_none() {
            return Ok(None);
        }
        let entry = ledger_entry_in(
            &mut tx,
            ws,
            amount_cents,
            kind,
            description,
            reference,
            self.now(),
        )
        .await?;
        tx.commit().await?;
        drop(conn);
        Ok(Some(entry))
    }

    pub async fn ledger(
        &self,
        ws: WorkspaceId,
        page: super::Page,
    ) -> StoreResult<super::Paged<LedgerEntry>> {
        let total: i64 = query("SELECT COUNT(*) FROM ledger_entries WHERE workspace_id = ?")
            .bind(ws.as_uuid())
            .scalar(&mut self.conn().await?)
            .await?;
        let rows = query("SELECT id, amount_cents, balance_after_cents, kind, description, reference, created_at FROM ledger_entries WHERE workspace_id = ? ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?")
            .bind(ws.as_uuid())
            .bind(page.limit)
            .bind(page.offset)
            .fetch_all(&mut self.conn().await?)
            .await?;
        let items = rows
            .into_iter()
            .map(|r| {
                Ok(LedgerEntry {
                    id: r.try_get("id")?,
                    amount_cents: r.try_get("amount_cents")?,
                    balance_after_cents: r.try_get("balance_after_cents")?,
                    kind: coded(&r, "kind", LedgerKind::parse)?,
                    description: r.try_get("description")?,
                    reference: r.try_get("reference")?,
                    created_at: r.try_get("created_at")?,
                })
            })
            .collect::<StoreResult<_>>()?;
        Ok(super::Paged { items, total })
    }
}

/// Changes the balance and writes its ledger row inside `tx`.
pub(crate) async fn ledger_entry_in(
    tx: &mut (impl Exec + ?Sized),
    ws: WorkspaceId,
    amount_cents: i64,
    kind: LedgerKind,
    description: &str,
    reference: Option<&str>,
    created_at: DateTime<Utc>,
) -> StoreResult<LedgerEntry> {
    // One round trip: the balance change, then its ledger row carrying the new balance.
    let id = uuid::Uuid::now_v7();
    let at = ts(created_at);
    let balance_after_cents: i64 = query(
        "UPDATE workspaces SET balance_cents = balance_cents + ?, updated_at = ? WHERE id = ?; \
         INSERT INTO ledger_entries (id, workspace_id, amount_cents, balance_after_cents, kind, description, reference, created_at) \
         SELECT ?, id, ?, balance_cents, ?, ?, ?, ? FROM workspaces WHERE id = ? AND changes() = 1 \
         RETURNING balance_after_cents",
    )
    .bind(amount_cents)
    .bind(at)
    .bind(ws.as_uuid())
    .bind(id)
    .bind(amount_cents)
    .bind(kind.as_str())
    .bind(description.to_owned())
    .bind(reference.map(str::to_owned))
    .bind(at)
    .bind(ws.as_uuid())
    .scalar(&mut *tx)
    .await?;
    let entry = LedgerEntry {
        id,
        amount_cents,
        balance_after_cents,
        kind,
        description: description.to_owned(),
        reference: reference.map(str::to_owned),
        created_at,
    };
    Ok(entry)
}

/// A change to a workspace's billing settings; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct BillingSettingsUpdate<'a> {
    pub auto_topup_enabled: Option<bool>,
    pub auto_topup_amount_cents: Option<i64>,
    pub low_balance_threshold_cents: Option<i64>,
    pub billing_email: Option<&'a str>,
}

impl Store {
    /// Saves (or, with `None`, forgets) the workspace's payment method.
    pub async fn set_payment_method(
        &self,
        ws: WorkspaceId,
        method: Option<&crate::domain::payments::PaymentMethod>,
    ) -> StoreResult<()> {
        query("UPDATE workspaces SET payment_method_id = ?, payment_method_label = ?, updated_at = ? WHERE id = ?")
            .bind(method.map(|m| m.id.as_str()))
            .bind(method.map(|m| m.label.as_str()))
            .bind(ts(self.now()))
            .bind(ws.as_uuid())
            .execute(&mut self.conn().await?)
            .await?;
        Ok(())
    }

    /// Changes billing settings; `false` when the workspace does not exist.
    pub async fn update_billing_settings(
        &self,
        ws: WorkspaceId,
        update: &BillingSettingsUpdate<'_>,
    ) -> StoreResult<bool> {
        let done = query(
            "UPDATE workspaces SET auto_topup_enabled = COALESCE(?, auto_topup_enabled), \
             auto_topup_amount_cents = COALESCE(?, auto_topup_amount_cents), \
             low_balance_threshold_cents = COALESCE(?, low_balance_threshold_cents), \
             billing_email = COALESCE(?, billing_email), updated_at = ? WHERE id = ?",
        )
        .bind(update.auto_topup_enabled)
        .bind(update.auto_topup_amount_cents)
        .bind(update.low_balance_threshold_cents)
        .bind(update.billing_email)
        .bind(ts(self.now()))
        .bind(ws.as_uuid())
        .execute(&mut self.conn().await?)
        .await?;
        Ok(done.rows_affected() > 0)
    }
}
