//! Carrier accounts: a workspace's own accounts at telephony carriers, and the numbers on them.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::Row;
use sqlx::sqlite::SqliteRow;
use switchboard_actors::ids::{PhoneNumberId, WorkspaceId};
use utoipa::ToSchema;

use super::numbers::{NUMBER_COLUMNS, NUMBER_FROM, number_row};
use super::{Page, Paged, PhoneNumberRecord, Store, StoreResult, sql, ts};

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CarrierAccount {
    pub id: uuid::Uuid,
    pub name: String,
    pub provider: String,
    /// `untested`, `active` or `failing`.
    pub status: String,
    /// Held numbers of the workspace on this account.
    pub number_count: i64,
    pub created_at: DateTime<Utc>,
}

/// What removing a number from an account did.
#[derive(Debug, PartialEq, Eq)]
pub enum NumberRemoval {
    Removed,
    AccountNotFound,
    NumberNotFound,
}

const COLUMNS: &str = "ca.id, ca.name, ca.provider, ca.status, ca.created_at, \
     (SELECT COUNT(*) FROM phone_numbers n WHERE n.carrier_account_id = ca.id AND n.released_at IS NULL) AS number_count";

fn account_row(r: &SqliteRow) -> StoreResult<CarrierAccount> {
    Ok(CarrierAccount {
        id: r.try_get("id")?,
        name: r.try_get("name")?,
        provider: r.try_get("provider")?,
        status: r.try_get("status")?,
        number_count: r.try_get("number_count")?,
        created_at: r.try_get("created_at")?,
    })
}

impl Store {
    /// Registers an account (operator command).
    pub async fn create_carrier_account(
        &self,
        ws: WorkspaceId,
        name: &str,
        provider: &str,
    ) -> StoreResult<CarrierAccount> {
        let id = uuid::Uuid::now_v7();
        sqlx::query(
            "INSERT INTO carrier_accounts (id, workspace_id, name, provider, status, created_at) VALUES (?, ?, ?, ?, 'untested', ?)",
        )
        .bind(id)
        .bind(ws.as_uuid())
        .bind(name)
        .bind(provider)
        .bind(ts(self.now()))
        .execute(&mut *self.conn().await?)
        .await?;
        self.carrier_account(ws, id)
            .await?
            .ok_or_else(|| super::corrupt("carrier_accounts", "vanished after insert"))
    }

    pub async fn carrier_account(
        &self,
        ws: WorkspaceId,
        id: uuid::Uuid,
    ) -> StoreResult<Option<CarrierAccount>> {
        let row = sqlx::query(sql(format!(
            "SELECT {COLUMNS} FROM carrier_accounts ca WHERE ca.workspace_id = ? AND ca.id = ?"
        )))
        .bind(ws.as_uuid())
        .bind(id)
        .fetch_optional(&mut *self.conn().await?)
        .await?;
        row.as_ref().map(account_row).transpose()
    }

    pub async fn list_carrier_accounts(
        &self,
        ws: WorkspaceId,
        page: Page,
    ) -> StoreResult<Paged<CarrierAccount>> {
        let mut conn = self.conn().await?;
        let total: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM carrier_accounts WHERE workspace_id = ?")
                .bind(ws.as_uuid())
                .fetch_one(&mut *conn)
                .await?;
        let rows = sqlx::query(sql(format!(
            "SELECT {COLUMNS} FROM carrier_accounts ca WHERE ca.workspace_id = ? ORDER BY ca.created_at, ca.id LIMIT ? OFFSET ?"
        )))
        .bind(ws.as_uuid())
        .bind(page.limit)
        .bind(page.offset)
        .fetch_all(&mut *conn)
        .await?;
        let items = rows.iter().map(account_row).collect::<StoreResult<_>>()?;
        Ok(Paged { items, total })
    }

    /// How many accounts the workspace has, and how many held numbers are on them.
    pub async fn carrier_totals(&self, ws: WorkspaceId) -> StoreResult<(i64, i64)> {
        let row: (i64, i64) = sqlx::query_as(
            "SELECT (SELECT COUNT(*) FROM carrier_accounts WHERE workspace_id = ?), \
             (SELECT COUNT(*) FROM phone_numbers WHERE workspace_id = ? AND carrier_account_id IS NOT NULL AND released_at IS NULL)",
        )
        .bind(ws.as_uuid())
        .bind(ws.as_uuid())
        .fetch_one(&mut *self.conn().await?)
        .await?;
        Ok(row)
    }

    /// The workspace's held numbers on an account.
    pub async fn account_numbers(
        &self,
        ws: WorkspaceId,
        account: uuid::Uuid,
        page: Page,
    ) -> StoreResult<Paged<PhoneNumberRecord>> {
        let mut conn = self.conn().await?;
        let total: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM phone_numbers WHERE workspace_id = ? AND carrier_account_id = ? AND released_at IS NULL",
        )
        .bind(ws.as_uuid())
        .bind(account)
        .fetch_one(&mut *conn)
        .await?;
        let rows = sqlx::query(sql(format!(
            "SELECT {NUMBER_COLUMNS} FROM {NUMBER_FROM} WHERE n.workspace_id = ? AND n.carrier_account_id = ? \
             AND n.released_at IS NULL ORDER BY n.created_at, n.id LIMIT ? OFFSET ?"
        )))
        .bind(ws.as_uuid())
        .bind(account)
        .bind(page.limit)
        .bind(page.offset)
        .fetch_all(&mut *conn)
        .await?;
        let items = rows.into_iter().map(number_row).collect::<Result<_, _>>()?;
        Ok(Paged { items, total })
    }

    /// Puts a held number on an account (operator command); `false` if either is not the
    /// workspace's.
    pub async fn assign_number_to_account(
        &self,
        ws: WorkspaceId,
        account: uuid::Uuid,
        number: PhoneNumberId,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE phone_numbers SET carrier_account_id = ?, updated_at = ? WHERE workspace_id = ? AND id = ? \
             AND released_at IS NULL AND EXISTS (SELECT 1 FROM carrier_accounts WHERE workspace_id = ? AND id = ?)",
        )
        .bind(account)
        .bind(ts(self.now()))
        .bind(ws.as_uuid())
        .bind(number.as_uuid())
        .bind(ws.as_uuid())
        .bind(account)
        .execute(&mut *self.conn().await?)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Takes a number off an account: it leaves the account and is deactivated, so agents stop
    /// calling from it. The number itself stays the workspace's (nothing is released at the
    /// carrier).
    pub async fn remove_number_from_account(
        &self,
        ws: WorkspaceId,
        account: uuid::Uuid,
        number: PhoneNumberId,
    ) -> StoreResult<NumberRemoval> {
        if self.carrier_account(ws, account).await?.is_none() {
            return Ok(NumberRemoval::AccountNotFound);
        }
        let done = sqlx::query(
            "UPDATE phone_numbers SET carrier_account_id = NULL, is_active = 0, updated_at = ? \
             WHERE workspace_id = ? AND id = ? AND carrier_account_id = ? AND released_at IS NULL",
        )
        .bind(ts(self.now()))
        .bind(ws.as_uuid())
        .bind(number.as_uuid())
        .bind(account)
        .execute(&mut *self.conn().await?)
        .await?;
        Ok(if done.rows_affected() > 0 {
            NumberRemoval::Removed
        } else {
            NumberRemoval::NumberNotFound
        })
    }
}
