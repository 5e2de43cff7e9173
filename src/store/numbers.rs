//! Phone numbers held by workspaces: registered (already owned) or purchased (pending until the
//! activation job clears them).

use chrono::{DateTime, Utc};
use serde::Serialize;
use switchboard_actors::campaign::NumberStatus;
use switchboard_actors::ids::{AgentId, PhoneNumberId, WorkspaceId};
use switchboard_actors::phone::PhoneNumber;
use utoipa::ToSchema;

use super::db::{Row, begin_write, query};
use super::{Page, Paged, Store, StoreError, StoreResult, classify, coded, corrupt, opt_id, ts};
use crate::domain::trunks::{TrunkStatus, sip_outbound_configured};

/// The carrier account a number is on (embedded).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CarrierAccountRef {
    pub id: uuid::Uuid,
    pub name: String,
    pub provider: String,
    /// The account's trunk status: `untested`, `active` or `failing`.
    pub status: TrunkStatus,
}

/// The spec's PhoneNumber object.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PhoneNumberRecord {
    #[schema(value_type = uuid::Uuid)]
    pub id: PhoneNumberId,
    /// E.164.
    pub number: String,
    pub friendly_name: String,
    pub provider: String,
    /// `active` or `pending_requirements`.
    #[schema(value_type = String)]
    pub status: NumberStatus,
    pub is_active: bool,
    #[schema(value_type = Option<uuid::Uuid>)]
    pub inbound_agent_id: Option<AgentId>,
    #[schema(value_type = Option<uuid::Uuid>)]
    pub outbound_agent_id: Option<AgentId>,
    pub sip_inbound_configured: bool,
    /// Whether the number can call out over SIP: its carrier account has a trunk whose last
    /// test reached a gateway, or (a number on no account) the operator set a default trunk.
    pub sip_outbound_configured: bool,
    /// ISO 3166 country of the number.
    pub country_code: String,
    /// Monthly price in currency units (e.g. 5.0 for 500 cents).
    pub monthly_cost: f64,
    pub created_at: DateTime<Utc>,
    pub carrier_account: Option<CarrierAccountRef>,
    pub ownership_verified_at: Option<DateTime<Utc>>,
}

pub(crate) const NUMBER_COLUMNS: &str = "n.id, n.number, n.friendly_name, n.provider, n.status, n.is_active, n.inbound_agent_id, n.outbound_agent_id, \
     n.sip_inbound_configured, n.country_code, n.monthly_cost_cents, n.created_at, n.ownership_verified_at, \
     ca.id AS ca_id, ca.name AS ca_name, ca.provider AS ca_provider, ca.status AS ca_status, ca.trunk IS NOT NULL AS ca_has_trunk";

pub(crate) const NUMBER_FROM: &str = "phone_numbers n LEFT JOIN carrier_accounts ca \
     ON ca.id = n.carrier_account_id AND ca.workspace_id = n.workspace_id";

impl Store {
    /// A number as the API shows it; `sip_outbound_configured` is computed here.
    pub(crate) fn number_row(&self, r: Row) -> StoreResult<PhoneNumberRecord> {
        let ca_id: Option<uuid::Uuid> = r.try_get("ca_id")?;
        let (carrier_account, route) = match ca_id {
            Some(id) => {
                let status = status_column(&r, "ca_status")?;
                let has_trunk: bool = r.try_get("ca_has_trunk")?;
                let account = CarrierAccountRef {
                    id,
                    name: r.try_get("ca_name")?,
                    provider: r.try_get("ca_provider")?,
                    status,
                };
                (Some(account), Some((has_trunk, status)))
            }
            None => (None, None),
        };
        number_record(
            r,
            carrier_account,
            sip_outbound_configured(route, self.default_trunk()),
        )
    }
}

fn number_record(
    r: Row,
    carrier_account: Option<CarrierAccountRef>,
    sip_outbound_configured: bool,
) -> StoreResult<PhoneNumberRecord> {
    let cents: i64 = r.try_get("monthly_cost_cents")?;
    Ok(PhoneNumberRecord {
        id: PhoneNumberId::from_uuid(r.try_get("id")?),
        number: r.try_get("number")?,
        friendly_name: r.try_get("friendly_name")?,
        provider: r.try_get("provider")?,
        status: coded(&r, "status", NumberStatus::parse)?,
        is_active: r.try_get("is_active")?,
        inbound_agent_id: opt_id(&r, "inbound_agent_id")?,
        outbound_agent_id: opt_id(&r, "outbound_agent_id")?,
        sip_inbound_configured: r.try_get("sip_inbound_configured")?,
        sip_outbound_configured,
        country_code: r.try_get("country_code")?,
        monthly_cost: cents as f64 / 100.0,
        created_at: r.try_get("created_at")?,
        carrier_account,
        ownership_verified_at: r.try_get("ownership_verified_at")?,
    })
}

impl Store {
    /// A held (not released) number of the workspace.
    pub async fn phone_number(
        &self,
        ws: WorkspaceId,
        id: PhoneNumberId,
    ) -> StoreResult<Option<PhoneNumberRecord>> {
        let row = query(format!("SELECT {NUMBER_COLUMNS} FROM {NUMBER_FROM} WHERE n.workspace_id = ? AND n.id = ? AND n.released_at IS NULL"))
            .bind(ws.as_uuid())
            .bind(id.as_uuid())
            .fetch_optional(&mut self.read_conn().await?)
            .await?;
        row.map(|r| self.number_row(r)).transpose()
    }

    /// Registers a number the workspace already owns (operator command).
    pub async fn add_owned_number(
        &self,
        ws: WorkspaceId,
        number: &PhoneNumber,
        status: NumberStatus,
    ) -> StoreResult<PhoneNumberRecord> {
        let id = PhoneNumberId::new();
        let at = self.now();
        let active = status == NumberStatus::Active;
        let mut conn = self.conn().await?;
        let mut tx = begin_write(&mut conn).await?;
        query(
            "INSERT INTO phone_numbers (id, workspace_id, number, provider, status, is_active, country_code, monthly_cost_cents, ownership_verified_at, created_at, updated_at) \
             VALUES (?, ?, ?, 'byo', ?, ?, ?, 0, ?, ?, ?)",
        )
        .bind(id.as_uuid())
        .bind(ws.as_uuid())
        .bind(number.as_str())
        .bind(status.as_str())
        .bind(active)
        .bind(number.country().unwrap_or_default())
        .bind(ts(at))
        .bind(ts(at))
        .bind(ts(at))
        .execute(&mut tx)
        .await
        .map_err(classify)?;
        // Read back inside the transaction (with its account's columns): a delete right after
        // the commit cannot take the answer away.
        let row = query(format!(
            "SELECT {NUMBER_COLUMNS} FROM {NUMBER_FROM} WHERE n.workspace_id = ? AND n.id = ?"
        ))
        .bind(ws.as_uuid())
        .bind(id.as_uuid())
        .fetch_one(&mut tx)
        .await?;
        let created = self.number_row(row)?;
        tx.commit().await?;
        Ok(created)
    }

    /// Activates purchased numbers whose review period ended; returns how many.
    pub async fn activate_due_numbers(&self, at: DateTime<Utc>) -> StoreResult<u64> {
        let done = query(
            "UPDATE phone_numbers SET status = 'active', is_active = TRUE, ownership_verified_at = ?, updated_at = ? \
             WHERE status = 'pending_requirements' AND released_at IS NULL AND activate_after <= ?",
        )
        .bind(ts(at))
        .bind(ts(at))
        .bind(ts(at))
        .execute(&mut self.conn().await?)
        .await?;
        Ok(done.rows_affected())
    }

    /// Held (not released) numbers of the workspace, oldest first.
    pub async fn list_phone_numbers(
        &self,
        ws: WorkspaceId,
        page: Page,
    ) -> StoreResult<Paged<PhoneNumberRecord>> {
        let total: i64 = query(
            "SELECT COUNT(*) FROM phone_numbers WHERE workspace_id = ? AND released_at IS NULL",
        )
        .bind(ws.as_uuid())
        .scalar(&mut self.conn().await?)
        .await?;
        let rows = query(format!(
            "SELECT {NUMBER_COLUMNS} FROM {NUMBER_FROM} WHERE n.workspace_id = ? AND n.released_at IS NULL ORDER BY n.created_at, n.id LIMIT ? OFFSET ?"
        ))
        .bind(ws.as_uuid())
        .bind(page.limit)
        .bind(page.offset)
        .fetch_all(&mut self.conn().await?)
        .await?;
        let items = rows
            .into_iter()
            .map(|r| self.number_row(r))
            .collect::<Result<_, _>>()?;
        Ok(Paged { items, total })
    }

    /// Whether any workspace holds `number` (E.164) now.
    pub async fn number_is_held(&self, number: &str) -> StoreResult<bool> {
        let found: Option<i64> =
            query("SELECT 1 FROM phone_numbers WHERE number = ? AND released_at IS NULL")
                .bind(number)
                .scalar_optional(&mut self.conn().await?)
                .await?;
        Ok(found.is_some())
    }

    /// Every held number (E.164) starting with `prefix`, by anyone.
    pub async fn held_numbers_with_prefix(
        &self,
        prefix: &str,
    ) -> StoreResult<std::collections::HashSet<String>> {
        let rows: Vec<String> = query("SELECT number FROM phone_numbers WHERE released_at IS NULL AND substr(number, 1, length(?)) = ?")
            .bind(prefix)
            .bind(prefix)
            .scalars(&mut self.conn().await?)
            .await?;
        Ok(rows.into_iter().collect())
    }

    /// Records a purchased number: `pending_requirements`, inactive, provider `switchboard`,
    /// activated by the job once `activate_after` has passed. A number already held is a conflict.
    pub async fn purchase_number(
        &self,
        ws: WorkspaceId,
        number: &PhoneNumber,
        friendly_name: &str,
        monthly_cost_cents: i64,
        activate_after: DateTime<Utc>,
    ) -> StoreResult<PhoneNumberRecord> {
        let id = PhoneNumberId::new();
        let at = ts(self.now());
        query(
            "INSERT INTO phone_numbers (id, workspace_id, number, friendly_name, provider, status, is_active, country_code, monthly_cost_cents, activate_after, created_at, updated_at) \
             VALUES (?, ?, ?, ?, 'switchboard', 'pending_requirements', FALSE, ?, ?, ?, ?, ?)",
        )
        .bind(id.as_uuid())
        .bind(ws.as_uuid())
        .bind(number.as_str())
        .bind(friendly_name)
        .bind(number.country().unwrap_or_default())
        .bind(monthly_cost_cents)
        .bind(ts(activate_after))
        .bind(at)
        .bind(at)
        .execute(&mut self.conn().await?)
        .await
        .map_err(classify)?;
        self.phone_number(ws, id)
            .await?
            .ok_or_else(|| StoreError::Corrupt("phone number vanished after insert".into()))
    }

    /// Changes the agents and friendly name of a held number; `None` leaves a field as is,
    /// `Some(None)` clears an agent. `Ok(None)` when the number is not held by the workspace.
    pub async fn configure_phone_number(
        &self,
        ws: WorkspaceId,
        id: PhoneNumberId,
        inbound_agent_id: Option<Option<AgentId>>,
        outbound_agent_id: Option<Option<AgentId>>,
        friendly_name: Option<&str>,
    ) -> StoreResult<Option<PhoneNumberRecord>> {
        let done = query(
            "UPDATE phone_numbers SET \
               inbound_agent_id = CASE WHEN ? THEN ? ELSE inbound_agent_id END, \
               outbound_agent_id = CASE WHEN ? THEN ? ELSE outbound_agent_id END, \
               friendly_name = COALESCE(?, friendly_name), updated_at = ? \
             WHERE workspace_id = ? AND id = ? AND released_at IS NULL",
        )
        .bind(inbound_agent_id.is_some())
        .bind(inbound_agent_id.flatten().map(|a| a.as_uuid()))
        .bind(outbound_agent_id.is_some())
        .bind(outbound_agent_id.flatten().map(|a| a.as_uuid()))
        .bind(friendly_name)
        .bind(ts(self.now()))
        .bind(ws.as_uuid())
        .bind(id.as_uuid())
        .execute(&mut self.conn().await?)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(None);
        }
        self.phone_number(ws, id).await
    }

    /// Releases a held number: it leaves the workspace's list and can be bought again. Returns
    /// whether the workspace held it.
    pub async fn release_phone_number(
        &self,
        ws: WorkspaceId,
        id: PhoneNumberId,
    ) -> StoreResult<bool> {
        self.retire_row("phone_numbers", "released_at", ws, id.as_uuid())
            .await
    }
}

/// A stored status.
pub(crate) fn status_column(r: &Row, column: &str) -> StoreResult<TrunkStatus> {
    let status: String = r.try_get(column)?;
    TrunkStatus::parse(&status).ok_or_else(|| corrupt("carrier_accounts.status", status))
}
