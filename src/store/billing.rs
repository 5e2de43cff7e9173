//! Balances and the ledger. Every balance change is a ledger row written in the same
//! transaction as the balance, in integer cents.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::Row;
use switchboard_actors::ids::WorkspaceId;
use utoipa::ToSchema;

use super::{now, ts, Store, StoreResult};

/// One balance change.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LedgerEntry {
    pub id: uuid::Uuid,
    /// Positive for credits, negative for charges.
    pub amount_cents: i64,
    pub balance_after_cents: i64,
    /// `topup`, `credit`, `number_purchase`, `call`, ...
    pub kind: String,
    pub description: String,
    pub reference: Option<String>,
    pub created_at: DateTime<Utc>,
}

impl Store {
    /// Adds `amount_cents` (negative to charge) to the balance and records it; `None` when the
    /// workspace does not exist.
    pub async fn apply_ledger_entry(
        &self,
        ws: WorkspaceId,
        amount_cents: i64,
        kind: &str,
        description: &str,
        reference: Option<&str>,
    ) -> StoreResult<Option<LedgerEntry>> {
        let mut tx = self.pool.begin().await?;
        let balance: Option<i64> = sqlx::query_scalar("UPDATE workspaces SET balance_cents = balance_cents + ?, updated_at = ? WHERE id = ? RETURNING balance_cents")
            .bind(amount_cents)
            .bind(ts(now()))
            .bind(ws.as_uuid())
            .fetch_optional(&mut *tx)
            .await?;
        let Some(balance_after_cents) = balance else { return Ok(None) };
        let entry = LedgerEntry {
            id: uuid::Uuid::now_v7(),
            amount_cents,
            balance_after_cents,
            kind: kind.to_owned(),
            description: description.to_owned(),
            reference: reference.map(str::to_owned),
            created_at: now(),
        };
        sqlx::query("INSERT INTO ledger_entries (id, workspace_id, amount_cents, balance_after_cents, kind, description, reference, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
            .bind(entry.id)
            .bind(ws.as_uuid())
            .bind(entry.amount_cents)
            .bind(entry.balance_after_cents)
            .bind(&entry.kind)
            .bind(&entry.description)
            .bind(&entry.reference)
            .bind(ts(entry.created_at))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Some(entry))
    }

    pub async fn ledger(&self, ws: WorkspaceId, page: super::Page) -> StoreResult<super::Paged<LedgerEntry>> {
        let total: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM ledger_entries WHERE workspace_id = ?").bind(ws.as_uuid()).fetch_one(&self.pool).await?;
        let rows = sqlx::query("SELECT id, amount_cents, balance_after_cents, kind, description, reference, created_at FROM ledger_entries WHERE workspace_id = ? ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?")
            .bind(ws.as_uuid())
            .bind(page.limit)
            .bind(page.offset)
            .fetch_all(&self.pool)
            .await?;
        let items = rows
            .into_iter()
            .map(|r| {
                Ok(LedgerEntry {
                    id: r.try_get("id")?,
                    amount_cents: r.try_get("amount_cents")?,
                    balance_after_cents: r.try_get("balance_after_cents")?,
                    kind: r.try_get("kind")?,
                    description: r.try_get("description")?,
                    reference: r.try_get("reference")?,
                    created_at: r.try_get("created_at")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()?;
        Ok(super::Paged { items, total })
    }
}
