//! What lead memory reads: the workspace's live lead with a number, and the last calls with
//! that number that have a summary.

use chrono::{DateTime, Utc};
use switchboard_actors::call::CallDirection;
use switchboard_actors::contact::CallOutcome;
use switchboard_actors::ids::{LeadId, WorkspaceId};

use super::db::query;
use super::{Lead, Store, StoreResult, coded, opt_coded};

/// An earlier call with a lead, as lead memory tells it.
#[derive(Debug, Clone, PartialEq)]
pub struct PastCall {
    pub direction: CallDirection,
    pub outcome: Option<CallOutcome>,
    /// The label of the call's disposition, if it has one.
    pub disposition: Option<String>,
    pub ended_at: DateTime<Utc>,
    pub summary: String,
}

impl Store {
    /// The lead of `ws` whose number is `number` (E.164, as leads store it), with its tags;
    /// `None` when there is none or it was deleted.
    pub async fn lead_by_number(&self, ws: WorkspaceId, number: &str) -> StoreResult<Option<Lead>> {
        let id: Option<uuid::Uuid> = query(
            "SELECT id FROM leads WHERE workspace_id = ? AND phone_number = ? AND deleted_at IS NULL",
        )
        .bind(ws.as_uuid())
        .bind(number)
        .scalar_optional(&mut self.conn().await?)
        .await?;
        match id {
            Some(id) => self.lead(ws, LeadId::from_uuid(id)).await,
            None => Ok(None),
        }
    }

    /// The last `limit` ended calls of `ws` with `number` that have a summary, newest first:
    /// the outbound calls that dialled it and, with `inbound`, the inbound calls whose caller
    /// gave it.
    pub async fn summarized_calls_with(
        &self,
        ws: WorkspaceId,
        number: &str,
        inbound: bool,
        limit: i64,
    ) -> StoreResult<Vec<PastCall>> {
        // The subquery reaches the calls through the number indexes; the workspace is checked
        // on both sides.
        let rows = query(
            "SELECT c.direction, c.outcome, c.ended_at, d.summary, ds.label AS disposition \
             FROM calls c \
             JOIN call_details d ON d.call_id = c.id AND d.workspace_id = c.workspace_id \
             LEFT JOIN dispositions ds ON ds.id = c.disposition_id AND ds.workspace_id = c.workspace_id \
             WHERE c.id IN ( \
                 SELECT id FROM calls WHERE workspace_id = ? AND to_number = ? AND direction = 'outbound' \
                 UNION ALL \
                 SELECT id FROM calls WHERE ? AND workspace_id = ? AND from_number = ? AND direction = 'inbound') \
             AND +c.workspace_id = ? AND c.status = 'ended' AND c.ended_at IS NOT NULL \
             AND d.summary IS NOT NULL AND trim(d.summary) != '' \
             ORDER BY c.ended_at DESC, c.id LIMIT ?",
        )
        .bind(ws.as_uuid())
        .bind(number)
        .bind(inbound)
        .bind(ws.as_uuid())
        .bind(number)
        .bind(ws.as_uuid())
        .bind(limit)
        .fetch_all(&mut self.conn().await?)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(PastCall {
                    direction: coded(r, "direction", CallDirection::parse)?,
                    outcome: opt_coded(r, "outcome", CallOutcome::parse)?,
                    disposition: r.try_get("disposition")?,
                    ended_at: r.try_get("ended_at")?,
                    summary: r.try_get("summary")?,
                })
            })
            .collect()
    }
}
