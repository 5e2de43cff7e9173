//! The engine on a real SQLite file under tokio's paused clock, with the simulated carrier
//! ([`VirtualRun`]), in a temporary directory.

use std::ops::{Deref, DerefMut};
use std::time::Duration;

use chrono::{DateTime, Utc};
use switchboard::runtime::simulation::{DialerWrap, VirtualRun};
use switchboard_actors::engine::EngineConfig;
use switchboard_actors::sim::SimConfig;

pub use switchboard::runtime::simulation::{all_day, hours, min_dial_gap, peak_concurrency};

pub const DAY: Duration = Duration::from_secs(86_400);

pub fn at(s: &str) -> DateTime<Utc> {
    s.parse().expect("timestamp")
}

pub struct Rig {
    run: VirtualRun,
    _dir: tempfile::TempDir,
}

impl Deref for Rig {
    type Target = VirtualRun;
    fn deref(&self) -> &VirtualRun {
        &self.run
    }
}

impl DerefMut for Rig {
    fn deref_mut(&mut self) -> &mut VirtualRun {
        &mut self.run
    }
}

/// A temporary directory and the URL of a fresh database (a SQLite file in it, or the suite's
/// PostgreSQL).
async fn temp_db() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let db_url = crate::database::fresh_database(dir.path(), "engine.db").await;
    (dir, db_url)
}

impl Rig {
    /// Starts at `start` (virtual time); `mix` is the carrier's outcome mix.
    pub async fn new(
        start: &str,
        mix: &str,
        tune: impl FnOnce(&mut EngineConfig, &mut SimConfig),
    ) -> Self {
        let (dir, db_url) = temp_db().await;
        let run = VirtualRun::new(&db_url, at(start), mix, tune)
            .await
            .expect("virtual run starts");
        Self { run, _dir: dir }
    }

    /// As [`Rig::new`], with the engine dialling through what `dialer` makes of the simulated
    /// carrier.
    pub async fn with_dialer(
        start: &str,
        mix: &str,
        tune: impl FnOnce(&mut EngineConfig, &mut SimConfig),
        dialer: DialerWrap,
    ) -> Self {
        let (dir, db_url) = temp_db().await;
        let run = VirtualRun::with_dialer(&db_url, at(start), mix, tune, dialer)
            .await
            .expect("virtual run starts");
        Self { run, _dir: dir }
    }
}
