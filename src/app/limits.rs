//! The API's rate limit: a fixed one-minute window per key, or per source address for requests
//! without a valid key (the gate's, and the dashboard's sign-in). On PostgreSQL, which several
//! nodes may share, a key's windows are counted in the database (one upsert per request), so
//! the limit holds across every node; source addresses are counted by each node.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use switchboard_actors::ids::ApiKeyId;

use crate::store::{Engine, Store, StoreError};

/// Who a request is charged to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Bucket {
    Key(ApiKeyId),
    Source(IpAddr),
}

/// A fixed one-minute window per bucket, on the clock the caller reads (the store's, so the
/// windows follow the service's notion of time).
pub struct RateLimiter {
    limit: u32,
    windows: Mutex<HashMap<Bucket, (u64, u32)>>,
}

pub struct Charge {
    pub limit: u32,
    pub remaining: u32,
    pub reset: u64,
    pub allowed: bool,
}

impl RateLimiter {
    pub fn new(limit: u32) -> Self {
        Self {
            limit,
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `bucket` has nothing left in the window of `now`: what its next request would
    /// be told, without charging it.
    pub fn spent(&self, bucket: Bucket, now: DateTime<Utc>) -> Option<Charge> {
        let window = u64::try_from(now.timestamp()).unwrap_or(0) / 60;
        let windows = self
            .windows
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let (w, n) = windows.get(&bucket)?;
        (*w == window && *n >= self.limit).then_some(Charge {
            limit: self.limit,
            remaining: 0,
            reset: (window + 1) * 60,
            allowed: false,
        })
    }

    /// Charges one request from `source` at `now` (the dashboard's sign-in); whether it may
    /// go on.
    pub fn allow_source(&self, source: IpAddr, now: DateTime<Utc>) -> bool {
        self.charge(Bucket::Source(source), now).allowed
    }

    /// Charges one request to `bucket` at `now`.
    pub fn charge(&self, bucket: Bucket, now: DateTime<Utc>) -> Charge {
        let window = u64::try_from(now.timestamp()).unwrap_or(0) / 60;
        let mut windows = self
            .windows
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if windows.len() > 100_000 {
            windows.retain(|_, (w, _)| *w == window);
        }
        let entry = windows.entry(bucket).or_insert((window, 0));
        if entry.0 != window {
            *entry = (window, 0);
        }
        let allowed = entry.1 < self.limit;
        if allowed {
            entry.1 += 1;
        }
        Charge {
            limit: self.limit,
            remaining: self.limit - entry.1,
            reset: (window + 1) * 60,
            allowed,
        }
    }

    /// Charges one request to `bucket` at `now`, as [`RateLimiter::charge`] does, but a key's
    /// request on PostgreSQL in `store`, for every node at once.
    pub async fn charge_shared(
        &self,
        store: &Store,
        bucket: Bucket,
        now: DateTime<Utc>,
    ) -> Result<Charge, StoreError> {
        let key = match (&bucket, store.engine()) {
            (Bucket::Key(key), Engine::Postgres) => *key,
            _ => return Ok(self.charge(bucket, now)),
        };
        let window = now.timestamp().max(0) / 60;
        let refused = Charge {
            limit: self.limit,
            remaining: 0,
            reset: (window as u64 + 1) * 60,
            allowed: false,
        };
        if self.limit == 0 {
            return Ok(refused);
        }
        Ok(
            match store
                .charge_key_window(key, window, i64::from(self.limit))
                .await?
            {
                Some(counted) => Charge {
                    remaining: self
                        .limit
                        .saturating_sub(u32::try_from(counted).unwrap_or(u32::MAX)),
                    allowed: true,
                    ..refused
                },
                None => refused,
            },
        )
    }
}
