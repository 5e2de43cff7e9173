//! A call's end is written however long the database is away: a write that fails because the
//! database cannot be reached, its disk is full or it lost to another write (see
//! [`StoreError::may_pass`]) is tried again, backing off to one try every few seconds, for up
//! to [`KEPT_FOR`]. The call itself goes on meanwhile: its audio, transcript and outcome live
//! in its actor until the write lands.

use std::future::Future;
use std::time::Duration;

use crate::store::StoreError;

/// How long a call's end is kept and tried again before it is given up to the next start's
/// reconciliation (which ends the call as interrupted).
pub const KEPT_FOR: Duration = Duration::from_secs(15 * 60);

const FIRST_PAUSE: Duration = Duration::from_millis(250);
const LONGEST_PAUSE: Duration = Duration::from_secs(5);

/// Runs `write` until it succeeds, fails for another reason than an unreachable or full
/// database, or
/// [`KEPT_FOR`] has passed. `what` names the write in the log.
pub async fn until_reachable<T, Fut>(
    what: &'static str,
    mut write: impl FnMut() -> Fut,
) -> Result<T, StoreError>
where
    Fut: Future<Output = Result<T, StoreError>>,
{
    let started = tokio::time::Instant::now();
    let mut pause = FIRST_PAUSE;
    let mut tries = 1u32;
    loop {
        match write().await {
            Err(err) if err.may_pass() && started.elapsed() < KEPT_FOR => {
                if tries == 1 {
                    tracing::warn!(what, error = %err, "the database cannot take the write now; it is kept and tried again");
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(LONGEST_PAUSE);
                tries += 1;
            }
            Err(err) => {
                if err.may_pass() {
                    tracing::error!(what, error = %err, tries, "the database stayed unreachable or full; the write is given up to the next start");
                }
                return Err(err);
            }
            Ok(done) => {
                if tries > 1 {
                    tracing::info!(what, tries, "the database is back; the kept write landed");
                }
                return Ok(done);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn unreachable() -> StoreError {
        StoreError::Database(sqlx::Error::PoolTimedOut)
    }

    #[tokio::test(start_paused = true)]
    async fn an_unreachable_database_is_waited_for_and_other_errors_are_not() {
        let tries = AtomicU32::new(0);
        let landed = until_reachable("test", || async {
            match tries.fetch_add(1, Ordering::SeqCst) {
                0..=3 => Err(unreachable()),
                _ => Ok(7),
            }
        })
        .await;
        assert_eq!(landed.unwrap(), 7);
        assert_eq!(tries.load(Ordering::SeqCst), 5);

        let tries = AtomicU32::new(0);
        let refused: Result<(), _> = until_reachable("test", || async {
            tries.fetch_add(1, Ordering::SeqCst);
            Err(StoreError::Corrupt("x".into()))
        })
        .await;
        assert!(matches!(refused, Err(StoreError::Corrupt(_))));
        assert_eq!(tries.load(Ordering::SeqCst), 1);

        let started = tokio::time::Instant::now();
        let given_up: Result<(), _> =
            until_reachable("test", || async { Err(unreachable()) }).await;
        assert!(given_up.unwrap_err().is_unavailable());
        let waited = started.elapsed();
        assert!(
            waited >= KEPT_FOR && waited < KEPT_FOR + LONGEST_PAUSE * 2,
            "{waited:?}"
        );
    }
}
