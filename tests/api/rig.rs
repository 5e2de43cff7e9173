//! The engine on a real SQLite file under tokio's paused clock, with the simulated carrier
//! ([`VirtualRun`]), in a temporary directory.

use std::ops::{Deref, DerefMut};
use std::time::Duration;

use chrono::{DateTime, Utc};
use switchboard::simulation::VirtualRun;
use switchboard_actors::engine::EngineConfig;
use switchboard_actors::sim::SimConfig;

pub use switchboard::simulation::{all_day, hours, min_dial_gap, peak_concurrency};

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

impl Rig {
    /// Starts at `start` (virtual time); `mix` is the carrier's outcome mix.
    pub async fn new(
        start: &str,
        mix: &str,
        tune: impl FnOnce(&mut EngineConfig, &mut SimConfig),
    ) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let db_url = format!("sqlite://{}", dir.path().join("engine.db").display());
        let run = VirtualRun::new(&db_url, at(start), mix, tune)
            .await
            .expect("virtual run starts");
        Self { run, _dir: dir }
    }
}
