//! What outbound SIP calls need from the store: the trunk a call leaves through (its number's
//! carrier account), the call's own ring timeout, and the INVITE journal a restart reads.

use switchboard_actors::ids::{CallId, PhoneNumberId, WorkspaceId};
use switchboard_actors::ports::TrunkLimits;
use switchboard_sip::trunk::{Secret, Trunk};

use chrono::{DateTime, Utc};

use super::db::query;
use super::{Store, StoreResult, TRUNK_COLUMNS, TRUNK_JOIN, corrupt, ts};

/// Where an outbound call leaves.
#[derive(Debug, Clone)]
pub enum CallTrunk {
    /// The calling number's carrier account has this trunk.
    Account(Box<Trunk>),
    /// The calling number is on no carrier account: the operator's default trunk serves it.
    NoAccount,
    /// The number's account has no trunk: nothing serves it.
    None,
}

/// A call's trunk and ring timeout.
#[derive(Debug, Clone)]
pub struct CallRoute {
    pub workspace_id: WorkspaceId,
    /// The number dialled.
    pub to_number: String,
    pub trunk: CallTrunk,
    pub ring_timeout_secs: Option<i64>,
    /// The values for the agent's `{{variables}}`: the campaign contact's, then the call's own
    /// (which win).
    pub variables: serde_json::Map<String, serde_json::Value>,
    /// `metadata` of `POST /calls` (empty for campaign calls).
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

impl Store {
    /// The trunk caps of calls from `number` (see [`Store::trunk_of`]).
    pub async fn number_trunk(
        &self,
        ws: WorkspaceId,
        number: PhoneNumberId,
    ) -> StoreResult<Option<TrunkLimits>> {
        let row = query(format!(
            "SELECT {TRUNK_COLUMNS} FROM phone_numbers n {TRUNK_JOIN} WHERE n.id = ? AND n.workspace_id = ?"
        ))
        .bind(number.as_uuid())
        .bind(ws.as_uuid())
        .fetch_optional(&mut self.read_conn().await?)
        .await?;
        match row {
            Some(row) => self.trunk_of(&row),
            None => Ok(None),
        }
    }

    /// The trunk of an outbound call, through its calling number's carrier account; `None` if
    /// the call does not exist.
    pub async fn call_route(&self, call: CallId) -> StoreResult<Option<CallRoute>> {
        let row = query(
            "SELECT c.workspace_id, c.to_number, c.ring_timeout_secs, n.carrier_account_id, ca.trunk, ca.trunk_password, \
             c.variables, c.metadata, ct.variables AS contact_variables \
             FROM calls c \
             LEFT JOIN contacts ct ON ct.id = c.contact_id \
             LEFT JOIN phone_numbers n ON n.id = c.from_phone_number_id AND n.workspace_id = c.workspace_id \
             LEFT JOIN carrier_accounts ca ON ca.id = n.carrier_account_id AND ca.workspace_id = c.workspace_id \
             WHERE c.id = ?",
        )
        .bind(call.as_uuid())
        // The readers' pool: under a flood of inbound calls every writer's connection may be
        // waiting for the write lock, and an outbound call's INVITE should not wait behind them.
        .fetch_optional(&mut self.read_conn().await?)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let account: Option<uuid::Uuid> = row.try_get("carrier_account_id")?;
        let trunk_json: Option<String> = row.try_get("trunk")?;
        let password: Option<String> = row.try_get("trunk_password")?;
        let trunk = match (account, trunk_json) {
            (None, _) => CallTrunk::NoAccount,
            (Some(_), None) => CallTrunk::None,
            (Some(_), Some(json)) => {
                let mut trunk: Trunk = serde_json::from_str(&json)
                    .map_err(|e| corrupt("carrier_accounts.trunk", e))?;
                trunk.password = password.map(Secret::new);
                CallTrunk::Account(Box::new(trunk))
            }
        };
        let mut variables = serde_json::Map::new();
        for column in ["contact_variables", "variables"] {
            let json: Option<String> = row.try_get(column)?;
            if let Some(serde_json::Value::Object(values)) = json
                .map(|j| serde_json::from_str(&j))
                .transpose()
                .map_err(|e| corrupt(column, e))?
            {
                variables.extend(values);
            }
        }
        let metadata: Option<String> = row.try_get("metadata")?;
        let metadata = match metadata
            .map(|j| serde_json::from_str(&j))
            .transpose()
            .map_err(|e| corrupt("metadata", e))?
        {
            Some(serde_json::Value::Object(values)) => values,
            _ => serde_json::Map::new(),
        };
        Ok(Some(CallRoute {
            workspace_id: WorkspaceId::from_uuid(row.try_get("workspace_id")?),
            to_number: row.try_get("to_number")?,
            trunk,
            ring_timeout_secs: row.try_get("ring_timeout_secs")?,
            variables,
            metadata,
        }))
    }

    /// Records that a call of a previous process was answered at `at` (the carrier counts it
    /// connected), learned from its INVITE journal or a late answer; an answer already
    /// recorded stays.
    pub async fn record_learned_answer(&self, call: CallId, at: DateTime<Utc>) -> StoreResult<()> {
        query(
            "UPDATE calls SET answered_at = ?, updated_at = ? WHERE id = ? AND answered_at IS NULL",
        )
        .bind(ts(at))
        .bind(ts(self.now()))
        .bind(call.as_uuid())
        .execute(&mut self.conn().await?)
        .await?;
        Ok(())
    }
}
