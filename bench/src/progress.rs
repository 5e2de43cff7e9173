//! The progress bar the benchmarks draw on standard error while they run.

use std::io::Write;
use std::time::{Duration, Instant};

/// A bar of work done out of a total, with a note and the time since it started.
pub struct Progress {
    started: Instant,
    last: Instant,
}

impl Progress {
    pub fn new() -> Self {
        let now = Instant::now();
        Self {
            started: now,
            last: now - Duration::from_secs(10),
        }
    }

    /// Redraws at most twice a second.
    pub fn show(&mut self, done: i64, total: i64, note: &str) {
        if self.last.elapsed() < Duration::from_millis(500) && done < total {
            return;
        }
        self.last = Instant::now();
        let width = 30usize;
        let frac = if total > 0 {
            done as f64 / total as f64
        } else {
            1.0
        };
        let filled = ((frac * width as f64) as usize).min(width);
        eprint!(
            "\r[{}{}] {:5.1}% {done}/{total} {note} ({:.0?})   ",
            "#".repeat(filled),
            ".".repeat(width - filled),
            frac * 100.0,
            self.started.elapsed()
        );
        let _ = std::io::stderr().flush();
    }
}
