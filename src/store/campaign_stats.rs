//! A campaign's progress: its contacts by state and last outcome, and its calls by outcome,
//! read from the counts the triggers keep (see `counts`), for one campaign or a page of them.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use switchboard_actors::contact::ContactState;
use switchboard_actors::ids::{CampaignId, WorkspaceId};
use utoipa::ToSchema;

use super::counts::contact_counts;
use super::db::{Query, query};
use super::{Store, StoreResult};

/// Contacts per state and attempts, for `stats`.
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub struct CampaignStats {
    /// Enrolled contacts (every state).
    pub total_contacts: i64,
    /// Contacts per state; every state is present.
    pub contacts: BTreeMap<String, i64>,
    /// Attempts made over all contacts.
    pub attempts: i64,
    /// Contacts per outcome of their latest attempt.
    pub last_outcomes: BTreeMap<String, i64>,
    /// Calls per outcome, over every attempt (double dials and infra retries included).
    pub call_outcomes: BTreeMap<String, i64>,
}

impl CampaignStats {
    /// No contacts yet, every state listed.
    fn every_state() -> Self {
        let mut stats = Self::default();
        for state in ContactState::ALL {
            stats.contacts.insert(state.as_str().to_owned(), 0);
        }
        stats
    }

    /// Adds `count` contacts in `state` whose last outcome is `outcome` ('' for none), with
    /// their `attempts`.
    fn count(&mut self, state: String, outcome: String, count: i64, attempts: i64) {
        self.total_contacts += count;
        self.attempts += attempts;
        *self.contacts.entry(state).or_insert(0) += count;
        if !outcome.is_empty() {
            *self.last_outcomes.entry(outcome).or_insert(0) += count;
        }
    }
}

impl Store {
    /// Contact and call counts of a campaign of `ws` (all zero for another workspace's).
    pub async fn campaign_stats(
        &self,
        ws: WorkspaceId,
        id: CampaignId,
    ) -> StoreResult<CampaignStats> {
        let mut stats = CampaignStats::every_state();
        // From the counts the contacts' triggers keep (see `counts`), not the contacts.
        let rows: Vec<(String, String, i64, i64)> = query(concat!(
            "SELECT state, last_outcome, CAST(SUM(contacts) AS BIGINT), CAST(SUM(attempts) AS BIGINT) FROM ",
            contact_counts!(),
            " GROUP BY state, last_outcome HAVING SUM(contacts) > 0"
        ))
        .bind(id.as_uuid())
        .bind(ws.as_uuid())
        .fetch_all_as(&mut self.read_conn().await?)
        .await?;
        for (state, outcome, count, attempts) in rows {
            stats.count(state, outcome, count, attempts);
        }
        stats.call_outcomes = self.campaign_outcomes(ws, id).await?.into_iter().collect();
        Ok(stats)
    }

    /// The contacts of each of `ids` (campaigns of `ws`) by state and last outcome, and their
    /// attempts, in one read, for a list of campaigns; `call_outcomes` are left empty.
    pub async fn campaigns_progress(
        &self,
        ws: WorkspaceId,
        ids: &[CampaignId],
    ) -> StoreResult<HashMap<CampaignId, CampaignStats>> {
        let mut all: HashMap<CampaignId, CampaignStats> = ids
            .iter()
            .map(|id| (*id, CampaignStats::every_state()))
            .collect();
        if ids.is_empty() {
            return Ok(all);
        }
        let mut q = query(
            "SELECT campaign_id, state, last_outcome, CAST(SUM(contacts) AS BIGINT), CAST(SUM(attempts) AS BIGINT) FROM (",
        );
        for (i, counts) in ["campaign_contact_counts", "contact_count_log"]
            .iter()
            .enumerate()
        {
            if i > 0 {
                q.push(" UNION ALL ");
            }
            q.push(format!(
                "SELECT campaign_id, state, last_outcome, contacts, attempts FROM {counts} WHERE "
            ));
            of_campaigns(&mut q, ws, ids);
        }
        q.push(") AS n GROUP BY campaign_id, state, last_outcome HAVING SUM(contacts) > 0");
        let rows: Vec<(uuid::Uuid, String, String, i64, i64)> =
            q.fetch_all_as(&mut self.read_conn().await?).await?;
        for (id, state, outcome, count, attempts) in rows {
            if let Some(stats) = all.get_mut(&CampaignId::from_uuid(id)) {
                stats.count(state, outcome, count, attempts);
            }
        }
        Ok(all)
    }

    /// Each of `ids`' full stats, as [`Store::campaign_stats`] reads one campaign's, in two
    /// reads for the whole list.
    pub async fn campaigns_stats(
        &self,
        ws: WorkspaceId,
        ids: &[CampaignId],
    ) -> StoreResult<HashMap<CampaignId, CampaignStats>> {
        let mut all = self.campaigns_progress(ws, ids).await?;
        if ids.is_empty() {
            return Ok(all);
        }
        // As `campaign_outcomes`: the ten-character (daily) buckets and the log since.
        let mut q = query(
            "SELECT campaign_id, kind, CAST(SUM(calls) AS BIGINT) FROM (\
             SELECT campaign_id, kind, calls FROM campaign_call_buckets WHERE width = 10 AND ",
        );
        of_campaigns(&mut q, ws, ids);
        q.push(" UNION ALL SELECT campaign_id, kind, calls FROM call_count_log WHERE ");
        of_campaigns(&mut q, ws, ids);
        q.push(
            ") AS b WHERE kind NOT IN ('admitted', 'unknown') \
             GROUP BY campaign_id, kind HAVING SUM(calls) != 0",
        );
        let rows: Vec<(uuid::Uuid, String, i64)> =
            q.fetch_all_as(&mut self.read_conn().await?).await?;
        for (id, kind, calls) in rows {
            if let Some(stats) = all.get_mut(&CampaignId::from_uuid(id)) {
                stats.call_outcomes.insert(kind, calls);
            }
        }
        Ok(all)
    }
}

/// Appends `campaign_id IN (...)`: those of `ids` that are campaigns of `ws`.
fn of_campaigns(q: &mut Query<'_>, ws: WorkspaceId, ids: &[CampaignId]) {
    q.push("campaign_id IN (SELECT id FROM campaigns WHERE workspace_id = ");
    q.push_bind(ws.as_uuid());
    q.push(" AND id IN (");
    let mut each = q.separated(", ");
    for id in ids {
        each.push_bind(id.as_uuid());
    }
    q.push("))");
}
