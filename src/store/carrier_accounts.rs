//! Carrier accounts: a workspace's own accounts at telephony carriers, the SIP trunk each may
//! carry (its password in a column of its own, never read back for display), the last test of
//! that trunk, and the numbers on the accounts.

use chrono::{DateTime, Utc};
use serde::Serialize;
use switchboard_actors::ids::{PhoneNumberId, WorkspaceId};
use switchboard_sip::trunk::{Secret, Trunk, TrunkError};
use utoipa::ToSchema;

use super::db::{Json, Row, begin_write, query};
use super::numbers::{NUMBER_COLUMNS, NUMBER_FROM, status_column};
use super::{Page, Paged, PhoneNumberRecord, Store, StoreResult, corrupt, ts};
use crate::domain::trunks::{PasswordUpdate, ShownTrunk, TrunkStatus};

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CarrierAccount {
    pub id: uuid::Uuid,
    pub name: String,
    pub provider: String,
    /// `untested` (new, or the trunk changed since its last test), `active` (the last test
    /// reached a gateway) or `failing` (it reached none).
    pub status: TrunkStatus,
    /// Why the account is `failing`: which gateway failed how.
    pub status_reason: Option<String>,
    /// When the trunk was last tested; `null` since it last changed.
    pub tested_at: Option<DateTime<Utc>>,
    /// The SIP trunk the account's numbers call through (never its password).
    pub trunk: Option<ShownTrunk>,
    /// Held numbers of the workspace on this account.
    pub number_count: i64,
    pub created_at: DateTime<Utc>,
    /// The last change of the account's name, provider or trunk.
    pub updated_at: DateTime<Utc>,
}

/// What removing a number from an account did.
#[derive(Debug, PartialEq, Eq)]
pub enum NumberRemoval {
    Removed,
    AccountNotFound,
    NumberNotFound,
}

/// A change to an account's trunk.
#[derive(Debug, Clone)]
pub enum TrunkUpdate {
    /// The account keeps no trunk.
    Remove,
    /// A new trunk (its `password` is ignored: `password` says what becomes of the stored one).
    Replace {
        trunk: Box<Trunk>,
        password: PasswordUpdate,
    },
}

/// A change to an account; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct CarrierAccountUpdate {
    pub name: Option<String>,
    pub provider: Option<String>,
    pub trunk: Option<TrunkUpdate>,
}

/// What an account update did.
#[derive(Debug)]
pub enum AccountUpdate {
    Updated(Box<CarrierAccount>),
    NotFound,
    /// The trunk, with the stored password applied, breaks a rule (e.g. a kept password on a
    /// trunk without a username).
    Invalid(TrunkError),
}

/// An account's trunk with its password, as the dialer and a test use it.
#[derive(Debug, Clone)]
pub struct StoredTrunk {
    pub trunk: Trunk,
    /// The stored JSON, which recording a test's result checks is still current.
    stored: String,
}

/// An account's trunk, looked up.
#[derive(Debug)]
pub enum TrunkLookup {
    NoAccount,
    NoTrunk,
    Trunk(Box<StoredTrunk>),
}

const COLUMNS: &str = "ca.id, ca.name, ca.provider, ca.status, ca.status_reason, ca.tested_at, ca.trunk, \
     ca.trunk_password IS NOT NULL AS has_password, ca.created_at, ca.updated_at, \
     (SELECT COUNT(*) FROM phone_numbers n WHERE n.carrier_account_id = ca.id AND n.released_at IS NULL) AS number_count";

/// A stored trunk (JSON without the password).
fn trunk_column(text: Option<String>) -> StoreResult<Option<Trunk>> {
    text.map(|t| serde_json::from_str(&t).map_err(|err| corrupt("carrier_accounts.trunk", err)))
        .transpose()
}

/// A trunk's stored form: everything but the password.
fn trunk_json(trunk: &Trunk) -> StoreResult<String> {
    serde_json::to_string(trunk).map_err(|err| corrupt("trunk", err))
}

fn password(trunk: &Trunk) -> Option<&str> {
    trunk.password.as_ref().map(Secret::expose)
}

fn account_row(r: &Row) -> StoreResult<CarrierAccount> {
    let trunk = trunk_column(r.try_get("trunk")?)?;
    let has_password: bool = r.try_get("has_password")?;
    Ok(CarrierAccount {
        id: r.try_get("id")?,
        name: r.try_get("name")?,
        provider: r.try_get("provider")?,
        status: status_column(r, "status")?,
        status_reason: r.try_get("status_reason")?,
        tested_at: r.try_get("tested_at")?,
        trunk: trunk.map(|t| ShownTrunk::new(t, has_password)),
        number_count: r.try_get("number_count")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

impl Store {
    /// Registers an account, `untested`, with a trunk the caller validated (or none).
    pub async fn create_carrier_account(
        &self,
        ws: WorkspaceId,
        name: &str,
        provider: &str,
        trunk: Option<&Trunk>,
    ) -> StoreResult<CarrierAccount> {
        let id = uuid::Uuid::now_v7();
        let at = ts(self.now());
        query(
            "INSERT INTO carrier_accounts (id, workspace_id, name, provider, status, trunk, trunk_password, created_at, updated_at) \
             VALUES (?, ?, ?, ?, 'untested', ?, ?, ?, ?)",
        )
        .bind(id)
        .bind(ws.as_uuid())
        .bind(name)
        .bind(provider)
        .bind(trunk.map(trunk_json).transpose()?.map(Json))
        .bind(trunk.and_then(password))
        .bind(at)
        .bind(at)
        .execute(&mut self.conn().await?)
        .await?;
        self.carrier_account(ws, id)
            .await?
            .ok_or_else(|| corrupt("carrier_accounts", "vanished after insert"))
    }

    /// Changes an account's name, provider or trunk in one transaction. A trunk update applies
    /// its password update to the stored password and is validated whole; a trunk that differs
    /// from the stored one (password included) makes the account `untested` again.
    pub async fn update_carrier_account(
        &self,
        ws: WorkspaceId,
        id: uuid::Uuid,
        update: CarrierAccountUpdate,
    ) -> StoreResult<AccountUpdate> {
        let mut conn = self.conn().await?;
        let mut tx = begin_write(&mut conn).await?;
        let row: Option<(Option<String>, Option<String>)> = query(
            "SELECT trunk, trunk_password FROM carrier_accounts WHERE workspace_id = ? AND id = ?",
        )
        .bind(ws.as_uuid())
        .bind(id)
        .fetch_optional_as(&mut tx)
        .await?;
        let Some((stored, stored_password)) = row else {
            return Ok(AccountUpdate::NotFound);
        };
        let mut old = trunk_column(stored)?;
        if let Some(t) = &mut old {
            t.password = stored_password.map(Secret::new);
        }
        let new = match update.trunk {
            None => old.clone(),
            Some(TrunkUpdate::Remove) => None,
            Some(TrunkUpdate::Replace { trunk, password }) => {
                let old_password = old.as_ref().and_then(|t| t.password.clone());
                let trunk = Trunk {
                    password: password.apply(old_password),
                    ..*trunk
                };
                if let Err(err) = trunk.validate() {
                    return Ok(AccountUpdate::Invalid(err));
                }
                Some(trunk)
            }
        };
        let changed = new != old;
        // An unchanged trunk keeps its stored form, which a test running now will check.
        query(
            "UPDATE carrier_accounts SET name = COALESCE(?, name), provider = COALESCE(?, provider), \
               trunk = CASE WHEN ? THEN ? ELSE trunk END, \
               trunk_password = CASE WHEN ? THEN ? ELSE trunk_password END, \
               status = CASE WHEN ? THEN 'untested' ELSE status END, \
               status_reason = CASE WHEN ? THEN NULL ELSE status_reason END, \
               tested_at = CASE WHEN ? THEN NULL ELSE tested_at END, \
               updated_at = ? \
             WHERE workspace_id = ? AND id = ?",
        )
        .bind(update.name)
        .bind(update.provider)
        .bind(changed)
        .bind(new.as_ref().map(trunk_json).transpose()?.map(Json))
        .bind(changed)
        .bind(new.as_ref().and_then(password))
        .bind(changed)
        .bind(changed)
        .bind(changed)
        .bind(ts(self.now()))
        .bind(ws.as_uuid())
        .bind(id)
        .execute(&mut tx)
        .await?;
        tx.commit().await?;
        drop(conn);
        match self.carrier_account(ws, id).await? {
            Some(account) => Ok(AccountUpdate::Updated(Box::new(account))),
            None => Ok(AccountUpdate::NotFound),
        }
    }

    /// An account's trunk with its password (for the dialer and a test; never for display).
    pub async fn carrier_trunk(&self, ws: WorkspaceId, id: uuid::Uuid) -> StoreResult<TrunkLookup> {
        let row: Option<(Option<String>, Option<String>)> = query(
            "SELECT trunk, trunk_password FROM carrier_accounts WHERE workspace_id = ? AND id = ?",
        )
        .bind(ws.as_uuid())
        .bind(id)
        .fetch_optional_as(&mut self.conn().await?)
        .await?;
        Ok(match row {
            None => TrunkLookup::NoAccount,
            Some((None, _)) => TrunkLookup::NoTrunk,
            Some((Some(stored), password)) => {
                let mut trunk = trunk_column(Some(stored.clone()))?
                    .ok_or_else(|| corrupt("carrier_accounts.trunk", "unreadable"))?;
                trunk.password = password.map(Secret::new);
                TrunkLookup::Trunk(Box::new(StoredTrunk { trunk, stored }))
            }
        })
    }

    /// Records a test of `tested`: the account's status, reason and test time. `None` when the
    /// account is gone or its trunk changed during the test (the result is then not recorded:
    /// it speaks of another trunk).
    pub async fn record_trunk_test(
        &self,
        ws: WorkspaceId,
        id: uuid::Uuid,
        tested: &StoredTrunk,
        status: TrunkStatus,
        reason: Option<&str>,
    ) -> StoreResult<Option<CarrierAccount>> {
        let done = query(
            "UPDATE carrier_accounts SET status = ?, status_reason = ?, tested_at = ? \
             WHERE workspace_id = ? AND id = ? AND trunk = ? AND trunk_password IS NOT DISTINCT FROM ?",
        )
        .bind(status.as_str())
        .bind(reason)
        .bind(ts(self.now()))
        .bind(ws.as_uuid())
        .bind(id)
        .bind(Json(tested.stored.clone()))
        .bind(password(&tested.trunk))
        .execute(&mut self.conn().await?)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(None);
        }
        self.carrier_account(ws, id).await
    }

    pub async fn carrier_account(
        &self,
        ws: WorkspaceId,
        id: uuid::Uuid,
    ) -> StoreResult<Option<CarrierAccount>> {
        let row = query(format!(
            "SELECT {COLUMNS} FROM carrier_accounts ca WHERE ca.workspace_id = ? AND ca.id = ?"
        ))
        .bind(ws.as_uuid())
        .bind(id)
        .fetch_optional(&mut self.conn().await?)
        .await?;
        row.as_ref().map(account_row).transpose()
    }

    pub async fn list_carrier_accounts(
        &self,
        ws: WorkspaceId,
        page: Page,
    ) -> StoreResult<Paged<CarrierAccount>> {
        let mut conn = self.conn().await?;
        let total: i64 = query("SELECT COUNT(*) FROM carrier_accounts WHERE workspace_id = ?")
            .bind(ws.as_uuid())
            .scalar(&mut conn)
            .await?;
        let rows = query(format!(
            "SELECT {COLUMNS} FROM carrier_accounts ca WHERE ca.workspace_id = ? ORDER BY ca.created_at, ca.id LIMIT ? OFFSET ?"
        ))
        .bind(ws.as_uuid())
        .bind(page.limit)
        .bind(page.offset)
        .fetch_all(&mut conn)
        .await?;
        let items = rows.iter().map(account_row).collect::<StoreResult<_>>()?;
        Ok(Paged { items, total })
    }

    /// How many accounts the workspace has, and how many held numbers are on them.
    pub async fn carrier_totals(&self, ws: WorkspaceId) -> StoreResult<(i64, i64)> {
        let row: (i64, i64) = query(
            "SELECT (SELECT COUNT(*) FROM carrier_accounts WHERE workspace_id = ?), \
             (SELECT COUNT(*) FROM phone_numbers WHERE workspace_id = ? AND carrier_account_id IS NOT NULL AND released_at IS NULL)",
        )
        .bind(ws.as_uuid())
        .bind(ws.as_uuid())
        .fetch_one_as(&mut self.conn().await?)
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
        let total: i64 = query(
            "SELECT COUNT(*) FROM phone_numbers WHERE workspace_id = ? AND carrier_account_id = ? AND released_at IS NULL",
        )
        .bind(ws.as_uuid())
        .bind(account)
        .scalar(&mut conn)
        .await?;
        let rows = query(format!(
            "SELECT {NUMBER_COLUMNS} FROM {NUMBER_FROM} WHERE n.workspace_id = ? AND n.carrier_account_id = ? \
             AND n.released_at IS NULL ORDER BY n.created_at, n.id LIMIT ? OFFSET ?"
        ))
        .bind(ws.as_uuid())
        .bind(account)
        .bind(page.limit)
        .bind(page.offset)
        .fetch_all(&mut conn)
        .await?;
        let items = rows
            .into_iter()
            .map(|r| self.number_row(r))
            .collect::<Result<_, _>>()?;
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
        let done = query(
            "UPDATE phone_numbers SET carrier_account_id = ?, updated_at = ? WHERE workspace_id = ? AND id = ? \
             AND released_at IS NULL AND EXISTS (SELECT 1 FROM carrier_accounts WHERE workspace_id = ? AND id = ?)",
        )
        .bind(account)
        .bind(ts(self.now()))
        .bind(ws.as_uuid())
        .bind(number.as_uuid())
        .bind(ws.as_uuid())
        .bind(account)
        .execute(&mut self.conn().await?)
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
        let done = query(
            "UPDATE phone_numbers SET carrier_account_id = NULL, is_active = FALSE, updated_at = ? \
             WHERE workspace_id = ? AND id = ? AND carrier_account_id = ? AND released_at IS NULL",
        )
        .bind(ts(self.now()))
        .bind(ws.as_uuid())
        .bind(number.as_uuid())
        .bind(account)
        .execute(&mut self.conn().await?)
        .await?;
        Ok(if done.rows_affected() > 0 {
            NumberRemoval::Removed
        } else {
            NumberRemoval::NumberNotFound
        })
    }
}
