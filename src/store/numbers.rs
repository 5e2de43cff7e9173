//! Phone numbers held by workspaces: registered (already owned) or purchased (pending until the
//! activation job clears them).

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::Row;
use sqlx::sqlite::SqliteRow;
use switchboard_actors::ids::{AgentId, PhoneNumberId, WorkspaceId};
use switchboard_actors::phone::PhoneNumber;
use utoipa::ToSchema;

use super::{Store, StoreResult, classify, now, sql, ts};

/// The carrier account a number is on (embedded).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CarrierAccountRef {
    pub id: uuid::Uuid,
    pub name: String,
    pub provider: String,
    pub status: String,
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
    pub status: String,
    pub is_active: bool,
    #[schema(value_type = Option<uuid::Uuid>)]
    pub inbound_agent_id: Option<AgentId>,
    #[schema(value_type = Option<uuid::Uuid>)]
    pub outbound_agent_id: Option<AgentId>,
    pub sip_inbound_configured: bool,
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
     n.sip_inbound_configured, n.sip_outbound_configured, n.country_code, n.monthly_cost_cents, n.created_at, n.ownership_verified_at, \
     ca.id AS ca_id, ca.name AS ca_name, ca.provider AS ca_provider, ca.status AS ca_status";

pub(crate) const NUMBER_FROM: &str =
    "phone_numbers n LEFT JOIN carrier_accounts ca ON ca.id = n.carrier_account_id";

pub(crate) fn number_row(r: SqliteRow) -> Result<PhoneNumberRecord, sqlx::Error> {
    let ca_id: Option<uuid::Uuid> = r.try_get("ca_id")?;
    let carrier_account = match ca_id {
        Some(id) => Some(CarrierAccountRef {
            id,
            name: r.try_get("ca_name")?,
            provider: r.try_get("ca_provider")?,
            status: r.try_get("ca_status")?,
        }),
        None => None,
    };
    let cents: i64 = r.try_get("monthly_cost_cents")?;
    Ok(PhoneNumberRecord {
        id: PhoneNumberId::from_uuid(r.try_get("id")?),
        number: r.try_get("number")?,
        friendly_name: r.try_get("friendly_name")?,
        provider: r.try_get("provider")?,
        status: r.try_get("status")?,
        is_active: r.try_get("is_active")?,
        inbound_agent_id: r
            .try_get::<Option<uuid::Uuid>, _>("inbound_agent_id")?
            .map(AgentId::from_uuid),
        outbound_agent_id: r
            .try_get::<Option<uuid::Uuid>, _>("outbound_agent_id")?
            .map(AgentId::from_uuid),
        sip_inbound_configured: r.try_get("sip_inbound_configured")?,
        sip_outbound_configured: r.try_get("sip_outbound_configured")?,
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
        let row = sqlx::query(sql(format!("SELECT {NUMBER_COLUMNS} FROM {NUMBER_FROM} WHERE n.workspace_id = ? AND n.id = ? AND n.released_at IS NULL")))
            .bind(ws.as_uuid())
            .bind(id.as_uuid())
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(number_row).transpose()?)
    }

    /// Registers a number the workspace already owns (operator command).
    pub async fn add_owned_number(
        &self,
        ws: WorkspaceId,
        number: &PhoneNumber,
        status: &str,
    ) -> StoreResult<PhoneNumberRecord> {
        let id = PhoneNumberId::new();
        let at = now();
        let active = status == "active";
        sqlx::query(
            "INSERT INTO phone_numbers (id, workspace_id, number, provider, status, is_active, country_code, monthly_cost_cents, ownership_verified_at, created_at, updated_at) \
             VALUES (?, ?, ?, 'byo', ?, ?, ?, 0, ?, ?, ?)",
        )
        .bind(id.as_uuid())
        .bind(ws.as_uuid())
        .bind(number.as_str())
        .bind(status)
        .bind(active)
        .bind(number.country().unwrap_or_default())
        .bind(ts(at))
        .bind(ts(at))
        .bind(ts(at))
        .execute(&self.pool)
        .await
        .map_err(classify)?;
        Ok(self.phone_number(ws, id).await?.expect("row just inserted"))
    }

    /// Activates purchased numbers whose review period ended; returns how many.
    pub async fn activate_due_numbers(&self, at: DateTime<Utc>) -> StoreResult<u64> {
        let done = sqlx::query(
            "UPDATE phone_numbers SET status = 'active', is_active = 1, ownership_verified_at = ?, updated_at = ? \
             WHERE status = 'pending_requirements' AND released_at IS NULL AND activate_after <= ?",
        )
        .bind(ts(at))
        .bind(ts(at))
        .bind(ts(at))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }
}
