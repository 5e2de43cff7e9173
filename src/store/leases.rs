//! Campaign leases: a campaign's actor runs on the node that holds its lease.
//!
//! **Invariant:** a lease is a row (owner, epoch, expiry) taken by one upsert only when it has
//! expired or is already the taker's; the epoch goes up at every change of owner and at every
//! take of an expired lease, so a write
//! fenced by [`FENCE_SQL`] with a lease that has passed to another node changes nothing, even
//! while its old owner still believes it holds it (paused, cut off, its clock wrong).

use std::time::Duration;

use chrono::{DateTime, Utc};
use switchboard_actors::ids::CampaignId;

use super::db::{Row, query};
use super::{Store, StoreResult, ts};

/// How long a lease is held without a renewal.
pub const LEASE_HELD: Duration = Duration::from_secs(15);

/// How often a holder renews its leases: three tries before one expires.
pub const LEASE_RENEWAL: Duration = Duration::from_secs(5);

/// Guards a write on a lease still being held as taken: binds the campaign, the owner and the
/// epoch.
pub(crate) const FENCE_SQL: &str =
    "EXISTS (SELECT 1 FROM campaign_leases WHERE campaign_id = ? AND owner = ? AND epoch = ?)";

/// A campaign's lease as its holder took it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub campaign: CampaignId,
    pub owner: String,
    pub epoch: i64,
    pub expires_at: DateTime<Utc>,
}

fn lease_row(r: &Row) -> StoreResult<Lease> {
    Ok(Lease {
        campaign: CampaignId::from_uuid(r.try_get("campaign_id")?),
        owner: r.try_get("owner")?,
        epoch: r.try_get("epoch")?,
        expires_at: r.try_get("expires_at")?,
    })
}

const LEASE_COLUMNS: &str = "campaign_id, owner, epoch, expires_at";

impl Store {
    fn lease_expiry(&self) -> DateTime<Utc> {
        self.now() + chrono::Duration::from_std(LEASE_HELD).unwrap_or(chrono::Duration::MAX)
    }

    /// Takes (or renews) the lease of `campaign` for node `me`: `None` while another node
    /// holds it unexpired. A new owner raises the epoch, and so does taking an expired lease
    /// back (whoever held it under the old epoch may still be writing).
    pub async fn take_lease(&self, campaign: CampaignId, me: &str) -> StoreResult<Option<Lease>> {
        let now = ts(self.now());
        let row = query(format!(
            "INSERT INTO campaign_leases (campaign_id, owner, epoch, expires_at, taken_at) VALUES (?, ?, 1, ?, ?) \
             ON CONFLICT (campaign_id) DO UPDATE SET \
               epoch = CASE WHEN campaign_leases.owner = excluded.owner AND campaign_leases.expires_at >= ? \
                 THEN campaign_leases.epoch ELSE campaign_leases.epoch + 1 END, \
               taken_at = CASE WHEN campaign_leases.owner = excluded.owner AND campaign_leases.expires_at >= ? \
                 THEN campaign_leases.taken_at ELSE excluded.taken_at END, \
               owner = excluded.owner, expires_at = excluded.expires_at \
             WHERE campaign_leases.owner = excluded.owner OR campaign_leases.expires_at < ? \
             RETURNING {LEASE_COLUMNS}"
        ))
        .bind(campaign.as_uuid())
        .bind(me)
        .bind(ts(self.lease_expiry()))
        .bind(now)
        .bind(now)
        .bind(now)
        .bind(now)
        .fetch_optional(&mut self.conn().await?)
        .await?;
        row.as_ref().map(lease_row).transpose()
    }

    /// Renews `lease` for another [`LEASE_HELD`]: `None` once it has passed to another node
    /// (its holder must stop at once).
    pub async fn renew_lease(&self, lease: &Lease) -> StoreResult<Option<Lease>> {
        let row = query(format!(
            "UPDATE campaign_leases SET expires_at = ? WHERE campaign_id = ? AND owner = ? AND epoch = ? \
             RETURNING {LEASE_COLUMNS}"
        ))
        .bind(ts(self.lease_expiry()))
        .bind(lease.campaign.as_uuid())
        .bind(lease.owner.as_str())
        .bind(lease.epoch)
        .fetch_optional(&mut self.conn().await?)
        .await?;
        row.as_ref().map(lease_row).transpose()
    }

    /// Gives `lease` up at once (a draining node), so that another node takes it without
    /// waiting for it to expire; `false` if it had already passed on.
    pub async fn release_lease(&self, lease: &Lease) -> StoreResult<bool> {
        let done = query(
            "UPDATE campaign_leases SET expires_at = ? WHERE campaign_id = ? AND owner = ? AND epoch = ?",
        )
        .bind(ts(DateTime::<Utc>::UNIX_EPOCH))
        .bind(lease.campaign.as_uuid())
        .bind(lease.owner.as_str())
        .bind(lease.epoch)
        .execute(&mut self.conn().await?)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Whether `lease` is still held as taken (the check [`FENCE_SQL`] makes inside a write).
    pub async fn lease_holds(&self, lease: &Lease) -> StoreResult<bool> {
        let held: Option<i64> = query(format!("SELECT 1 WHERE {FENCE_SQL}"))
            .bind(lease.campaign.as_uuid())
            .bind(lease.owner.as_str())
            .bind(lease.epoch)
            .scalar_optional(&mut self.conn().await?)
            .await?;
        Ok(held.is_some())
    }

    /// Every unexpired lease, by campaign.
    pub async fn leases(&self) -> StoreResult<Vec<Lease>> {
        let rows = query(format!(
            "SELECT {LEASE_COLUMNS} FROM campaign_leases WHERE expires_at >= ? ORDER BY owner, campaign_id"
        ))
        .bind(ts(self.now()))
        .fetch_all(&mut self.read_conn().await?)
        .await?;
        rows.iter().map(lease_row).collect()
    }
}
