//! The affiliate program: enrollment, referrals, referred revenue, and the figures a partner
//! sees. Every amount is integer cents; a commission or override on one revenue entry is
//! `amount * bps / 10000`, rounded down per entry, so sums over rows equal the summary.

use chrono::{DateTime, Utc};
use serde::Serialize;
use switchboard_actors::ids::WorkspaceId;
use utoipa::ToSchema;

use super::db::query;
use super::{Store, StoreResult, ts};

/// A partner's summary.
#[derive(Debug, Clone, Serialize, ToSchema, Default, PartialEq)]
pub struct AffiliateSummary {
    /// Whether the workspace is enrolled as a partner.
    pub enrolled: bool,
    pub commission_bps: i64,
    pub override_bps: i64,
    /// Customers this partner referred.
    pub referred_customers: i64,
    /// Partners enrolled beneath this one.
    pub sub_affiliates: i64,
    /// Commission on revenue of customers this partner referred.
    pub direct_earned_cents: i64,
    /// The part of it past the hold window.
    pub direct_payable_cents: i64,
    /// Override on revenue of customers the sub-affiliates referred.
    pub override_earned_cents: i64,
    pub override_payable_cents: i64,
    /// Revenue younger than this many days is earned but not yet payable.
    pub hold_days: i64,
}

/// One sub-affiliate, as its parent sees it.
#[derive(Debug, Clone, Serialize, ToSchema, PartialEq)]
pub struct SubAffiliateRow {
    #[schema(value_type = uuid::Uuid)]
    pub company_id: WorkspaceId,
    pub name: String,
    pub enrolled_at: DateTime<Utc>,
    /// Customers the sub-affiliate referred.
    pub referred_customers: i64,
    /// Override earned on revenue of the sub-affiliate's referrals.
    pub my_override_cents: i64,
    /// The part of it past the hold window.
    pub my_override_payable_cents: i64,
    /// Commission earned on the sub-affiliate's own spend (when this partner referred it).
    pub my_direct_cents: i64,
}

/// Override earned by `parent` on revenue of customers referred by `sub`, at or before `until`.
/// Binds: parent override_bps source, sub, until.
const OVERRIDE_SQL: &str = "SELECT CAST(COALESCE(SUM(r.amount_cents * p.override_bps / 10000), 0) AS BIGINT) \
     FROM affiliate_revenue r \
     JOIN affiliate_referrals f ON f.customer_workspace_id = r.customer_workspace_id \
     JOIN affiliates s ON s.workspace_id = f.referrer_workspace_id \
     JOIN affiliates p ON p.workspace_id = s.parent_workspace_id \
     WHERE p.workspace_id = ? AND s.workspace_id = ? AND r.occurred_at >= f.referred_at \
     AND r.occurred_at >= s.enrolled_at AND r.occurred_at <= ?";

impl Store {
    /// Enrolls a workspace as a partner (again: updates its rates and parent).
    pub async fn enroll_affiliate(
        &self,
        ws: WorkspaceId,
        parent: Option<WorkspaceId>,
        commission_bps: i64,
        override_bps: i64,
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        query(
            "INSERT INTO affiliates (workspace_id, parent_workspace_id, commission_bps, override_bps, enrolled_at) \
             VALUES (?, ?, ?, ?, ?) ON CONFLICT (workspace_id) DO UPDATE SET \
             parent_workspace_id = excluded.parent_workspace_id, commission_bps = excluded.commission_bps, \
             override_bps = excluded.override_bps",
        )
        .bind(ws.as_uuid())
        .bind(parent.map(|p| p.as_uuid()))
        .bind(commission_bps)
        .bind(override_bps)
        .bind(ts(at))
        .execute(&mut self.conn().await?)
        .await?;
        Ok(())
    }

    /// Whether a workspace is an enrolled partner.
    pub async fn is_affiliate(&self, ws: WorkspaceId) -> StoreResult<bool> {
        let found: Option<i64> = query("SELECT 1 FROM affiliates WHERE workspace_id = ?")
            .bind(ws.as_uuid())
            .scalar_optional(&mut self.conn().await?)
            .await?;
        Ok(found.is_some())
    }

    /// Records that `referrer` referred `customer` (a customer has one referrer: the first).
    pub async fn record_referral(
        &self,
        referrer: WorkspaceId,
        customer: WorkspaceId,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let done = query(
            "INSERT INTO affiliate_referrals (customer_workspace_id, referrer_workspace_id, referred_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
        )
        .bind(customer.as_uuid())
        .bind(referrer.as_uuid())
        .bind(ts(at))
        .execute(&mut self.conn().await?)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Records revenue from a customer.
    pub async fn record_revenue(
        &self,
        customer: WorkspaceId,
        amount_cents: i64,
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        query(
            "INSERT INTO affiliate_revenue (id, customer_workspace_id, amount_cents, occurred_at) VALUES (?, ?, ?, ?)",
        )
        .bind(uuid::Uuid::now_v7())
        .bind(customer.as_uuid())
        .bind(amount_cents)
        .bind(ts(at))
        .execute(&mut self.conn().await?)
        .await?;
        Ok(())
    }

    /// Commission `ws` earned on revenue of the customers it referred (only `customer`'s when
    /// given), at or before `until`.
    async fn direct_cents(
        &self,
        ws: WorkspaceId,
        customer: Option<WorkspaceId>,
        until: DateTime<Utc>,
    ) -> StoreResult<i64> {
        let cents: i64 = query(
            "SELECT CAST(COALESCE(SUM(r.amount_cents * a.commission_bps / 10000), 0) AS BIGINT) FROM affiliate_revenue r \
             JOIN affiliate_referrals f ON f.customer_workspace_id = r.customer_workspace_id \
             JOIN affiliates a ON a.workspace_id = f.referrer_workspace_id \
             WHERE a.workspace_id = ? AND (? IS NULL OR r.customer_workspace_id = ?) \
             AND r.occurred_at >= f.referred_at AND r.occurred_at <= ?",
        )
        .bind(ws.as_uuid())
        .bind(customer.map(|c| c.as_uuid()))
        .bind(customer.map(|c| c.as_uuid()))
        .bind(ts(until))
        .scalar(&mut self.conn().await?)
        .await?;
        Ok(cents)
    }

    async fn override_cents(
        &self,
        ws: WorkspaceId,
        sub: WorkspaceId,
        until: DateTime<Utc>,
    ) -> StoreResult<i64> {
        let cents: i64 = query(OVERRIDE_SQL)
            .bind(ws.as_uuid())
            .bind(sub.as_uuid())
            .bind(ts(until))
            .scalar(&mut self.conn().await?)
            .await?;
        Ok(cents)
    }

    async fn referred_count(&self, ws: WorkspaceId) -> StoreResult<i64> {
        let n: i64 =
            query("SELECT COUNT(*) FROM affiliate_referrals WHERE referrer_workspace_id = ?")
                .bind(ws.as_uuid())
                .scalar(&mut self.conn().await?)
                .await?;
        Ok(n)
    }

    /// A partner's sub-affiliates, oldest enrollment first; zero rows are kept.
    pub async fn sub_affiliates(
        &self,
        ws: WorkspaceId,
        now: DateTime<Utc>,
        hold: chrono::Duration,
    ) -> StoreResult<Vec<SubAffiliateRow>> {
        let subs = query(
            "SELECT a.workspace_id, w.name, a.enrolled_at FROM affiliates a JOIN workspaces w ON w.id = a.workspace_id \
             WHERE a.parent_workspace_id = ? ORDER BY a.enrolled_at, a.workspace_id",
        )
        .bind(ws.as_uuid())
        .fetch_all(&mut self.conn().await?)
        .await?;
        let mut rows = Vec::with_capacity(subs.len());
        for s in subs {
            let sub = WorkspaceId::from_uuid(s.try_get("workspace_id")?);
            rows.push(SubAffiliateRow {
                company_id: sub,
                name: s.try_get("name")?,
                enrolled_at: s.try_get("enrolled_at")?,
                referred_customers: self.referred_count(sub).await?,
                my_override_cents: self.override_cents(ws, sub, now).await?,
                my_override_payable_cents: self.override_cents(ws, sub, now - hold).await?,
                my_direct_cents: self.direct_cents(ws, Some(sub), now).await?,
            });
        }
        Ok(rows)
    }

    /// A workspace's partner summary (zeros when it is not enrolled).
    pub async fn affiliate_summary(
        &self,
        ws: WorkspaceId,
        now: DateTime<Utc>,
        hold: chrono::Duration,
    ) -> StoreResult<AffiliateSummary> {
        let row =
            query("SELECT commission_bps, override_bps FROM affiliates WHERE workspace_id = ?")
                .bind(ws.as_uuid())
                .fetch_optional(&mut self.conn().await?)
                .await?;
        let hold_days = hold.num_days();
        let Some(row) = row else {
            return Ok(AffiliateSummary {
                hold_days,
                ..Default::default()
            });
        };
        let subs = self.sub_affiliates(ws, now, hold).await?;
        Ok(AffiliateSummary {
            enrolled: true,
            commission_bps: row.try_get("commission_bps")?,
            override_bps: row.try_get("override_bps")?,
            referred_customers: self.referred_count(ws).await?,
            sub_affiliates: subs.len() as i64,
            direct_earned_cents: self.direct_cents(ws, None, now).await?,
            direct_payable_cents: self.direct_cents(ws, None, now - hold).await?,
            override_earned_cents: subs.iter().map(|s| s.my_override_cents).sum(),
            override_payable_cents: subs.iter().map(|s| s.my_override_payable_cents).sum(),
            hold_days,
        })
    }
}
