//! The simulated carrier: a [`Dialer`] that places no real calls. Each call rings, then is
//! answered, goes to voicemail, is busy, unanswered, fails or hits a carrier error, drawn from a
//! configurable mix with configurable ring and talk times. Draws are seeded per number and
//! attempt, so a run is repeatable. It powers demos, dry runs of a campaign's settings, and the
//! `switchboard-bench campaign-sim` benchmark; `serve --carrier sim` selects it.
//!
//! It also watches what a carrier would see: calls live at once and the gap between dials, per
//! campaign, so pacing can be checked from the outside.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::call::EndReason;
use crate::clock::SharedClock;
use crate::contact::CallOutcome;
use crate::ids::CampaignId;
use crate::ports::{DialProgress, DialRequest, DialResult, Dialer};

/// Relative weights of each outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct OutcomeMix {
    weights: Vec<(CallOutcome, u32)>,
}

impl Default for OutcomeMix {
    fn default() -> Self {
        Self {
            weights: vec![
                (CallOutcome::Answered, 40),
                (CallOutcome::NoAnswer, 30),
                (CallOutcome::Busy, 8),
                (CallOutcome::Voicemail, 15),
                (CallOutcome::Failed, 5),
                (CallOutcome::InfraError, 2),
            ],
        }
    }
}

impl FromStr for OutcomeMix {
    type Err = String;

    /// `answered=40,no_answer=30,busy=8,voicemail=15,failed=5,infra_error=2`; outcomes left out
    /// weigh 0.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut weights = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, weight) = part
                .split_once('=')
                .ok_or_else(|| format!("expected outcome=weight, got {part:?}"))?;
            let outcome = CallOutcome::ALL
                .into_iter()
                .find(|o| o.as_str() == name.trim())
                .ok_or_else(|| {
                    format!(
                        "unknown outcome {name:?}; use answered, no_answer, busy, voicemail, failed or infra_error"
                    )
                })?;
            let weight: u32 = weight
                .trim()
                .parse()
                .map_err(|_| format!("weight of {name} must be a whole number"))?;
            if weights.iter().any(|(o, _)| *o == outcome) {
                return Err(format!("{name} is given twice"));
            }
            weights.push((outcome, weight));
        }
        if weights.iter().map(|(_, w)| u64::from(*w)).sum::<u64>() == 0 {
            return Err("the outcome mix needs at least one positive weight".into());
        }
        Ok(Self { weights })
    }
}

impl OutcomeMix {
    fn draw(&self, rng: &mut impl Rng) -> CallOutcome {
        let total: u64 = self.weights.iter().map(|(_, w)| u64::from(*w)).sum();
        let mut pick = rng.random_range(0..total.max(1));
        for (outcome, weight) in &self.weights {
            if pick < u64::from(*weight) {
                return *outcome;
            }
            pick -= u64::from(*weight);
        }
        CallOutcome::NoAnswer
    }
}

/// An inclusive range of seconds, written `5-30` (or `12` for a fixed value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SecondsRange {
    pub min: u32,
    pub max: u32,
}

impl FromStr for SecondsRange {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parse = |v: &str| {
            v.trim()
                .parse::<u32>()
                .map_err(|_| format!("{v:?} is not a whole number of seconds"))
        };
        let (min, max) = match s.split_once('-') {
            Some((a, b)) => (parse(a)?, parse(b)?),
            None => (parse(s)?, parse(s)?),
        };
        if min > max {
            return Err(format!("range {s:?} is backwards"));
        }
        Ok(Self { min, max })
    }
}

#[derive(Debug, Clone)]
pub struct SimConfig {
    pub mix: OutcomeMix,
    /// Ring time before an answer (or before giving up, for no_answer).
    pub ring_secs: SecondsRange,
    /// Connected time of answered and voicemail calls (capped by the agent's duration cap).
    pub talk_secs: SecondsRange,
    pub seed: u64,
    /// Appends one line per dial (`call_id contact_id attempt to_number dialled_at`).
    pub dial_log: Option<PathBuf>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            mix: OutcomeMix::default(),
            ring_secs: SecondsRange { min: 3, max: 25 },
            talk_secs: SecondsRange { min: 20, max: 180 },
            seed: 1,
            dial_log: None,
        }
    }
}

/// What the carrier saw of one campaign.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CampaignObservation {
    pub dials: u64,
    pub live: u64,
    pub peak_live: u64,
    /// Smallest gap between two dial starts, in seconds.
    pub min_gap_secs: Option<f64>,
    last_dial_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Default)]
pub struct Observations {
    pub campaigns: HashMap<CampaignId, CampaignObservation>,
    pub outcomes: HashMap<CallOutcome, u64>,
    pub dials: u64,
    pub live: u64,
    pub peak_live: u64,
}

pub struct SimCarrier {
    config: SimConfig,
    clock: SharedClock,
    seen: Mutex<Observations>,
    /// Dials per (number, attempt), so a double dial draws afresh.
    dial_counts: Mutex<HashMap<(String, i64), u32>>,
    log: Option<Mutex<std::fs::File>>,
}

impl SimCarrier {
    pub fn new(config: SimConfig, clock: SharedClock) -> std::io::Result<Self> {
        let log = match &config.dial_log {
            Some(path) => Some(Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)?,
            )),
            None => None,
        };
        Ok(Self {
            config,
            clock,
            seen: Mutex::new(Observations::default()),
            dial_counts: Mutex::new(HashMap::new()),
            log,
        })
    }

    pub fn observations(&self) -> Observations {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn rng_for(&self, request: &DialRequest) -> StdRng {
        let nth = {
            let mut counts = match self.dial_counts.lock() {
                Ok(c) => c,
                Err(poisoned) => poisoned.into_inner(),
            };
            let n = counts
                .entry((request.to_number.clone(), request.attempt))
                .or_default();
            *n += 1;
            *n
        };
        // DefaultHasher::new() uses fixed keys: the same inputs give the same stream.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (self.config.seed, &request.to_number, request.attempt, nth).hash(&mut h);
        StdRng::seed_from_u64(h.finish())
    }

    fn observe_start(&self, request: &DialRequest, at: DateTime<Utc>) {
        let mut seen = match self.seen.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        seen.dials += 1;
        seen.live += 1;
        seen.peak_live = seen.peak_live.max(seen.live);
        if let Some(campaign) = request.campaign_id {
            let c = seen.campaigns.entry(campaign).or_default();
            c.dials += 1;
            c.live += 1;
            c.peak_live = c.peak_live.max(c.live);
            if let Some(last) = c.last_dial_at {
                let gap = (at - last).num_microseconds().unwrap_or(i64::MAX) as f64 / 1e6;
                c.min_gap_secs = Some(c.min_gap_secs.map_or(gap, |g: f64| g.min(gap)));
            }
            c.last_dial_at = Some(at);
        }
        if let Some(log) = &self.log
            && let Ok(mut file) = log.lock()
        {
            let contact = request
                .contact_id
                .map_or_else(|| "-".to_owned(), |c| c.to_string());
            // One write per line: appends of a whole line are not interleaved.
            let line = format!(
                "{} {} {} {} {}\n",
                request.call_id,
                contact,
                request.attempt,
                request.to_number,
                at.to_rfc3339()
            );
            let _ = file.write_all(line.as_bytes());
        }
    }

    fn observe_end(&self, request: &DialRequest, outcome: CallOutcome) {
        let mut seen = match self.seen.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        seen.live = seen.live.saturating_sub(1);
        *seen.outcomes.entry(outcome).or_default() += 1;
        if let Some(campaign) = request.campaign_id
            && let Some(c) = seen.campaigns.get_mut(&campaign)
        {
            c.live = c.live.saturating_sub(1);
        }
    }
}

fn draw_secs(range: SecondsRange, rng: &mut impl Rng) -> u32 {
    rng.random_range(range.min..=range.max)
}

#[async_trait::async_trait]
impl Dialer for SimCarrier {
    async fn dial(&self, request: DialRequest, mut progress: DialProgress) -> DialResult {
        let mut rng = self.rng_for(&request);
        let outcome = self.config.mix.draw(&mut rng);
        let ring = match outcome {
            CallOutcome::Failed | CallOutcome::InfraError => rng.random_range(0..=2),
            CallOutcome::Busy => rng.random_range(1..=5),
            _ => draw_secs(self.config.ring_secs, &mut rng),
        };
        let talk = match outcome {
            CallOutcome::Answered => draw_secs(self.config.talk_secs, &mut rng),
            CallOutcome::Voicemail => draw_secs(self.config.talk_secs, &mut rng) / 4 + 10,
            _ => 0,
        };
        let talk = i64::from(talk).min(request.max_duration_secs.max(0));
        self.observe_start(&request, self.clock.now());
        tokio::time::sleep(Duration::from_secs(u64::from(ring))).await;
        if talk > 0 {
            progress.answered();
            tokio::time::sleep(Duration::from_secs(talk as u64)).await;
        }
        self.observe_end(&request, outcome);
        let end_reason = match outcome {
            CallOutcome::Answered | CallOutcome::Voicemail => {
                if talk >= request.max_duration_secs {
                    EndReason::MaxDuration
                } else {
                    EndReason::Hangup
                }
            }
            CallOutcome::NoAnswer => EndReason::NoAnswer,
            CallOutcome::Busy => EndReason::Busy,
            CallOutcome::Failed => EndReason::Rejected,
            CallOutcome::InfraError => EndReason::CarrierError,
        };
        DialResult {
            outcome,
            ring_secs: i64::from(ring),
            talk_secs: talk,
            end_reason,
            disposition_label: None,
            network: Default::default(),
            conversation: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_parse_and_reject_nonsense() {
        let mix: OutcomeMix = "answered=1,busy=3".parse().unwrap();
        assert_eq!(mix.weights.len(), 2);
        assert!("answered".parse::<OutcomeMix>().is_err());
        assert!("ringing=3".parse::<OutcomeMix>().is_err());
        assert!("answered=0".parse::<OutcomeMix>().is_err());
        assert!("answered=1,answered=2".parse::<OutcomeMix>().is_err());
        let mut rng = StdRng::seed_from_u64(1);
        let only: OutcomeMix = "busy=5".parse().unwrap();
        assert!((0..100).all(|_| only.draw(&mut rng) == CallOutcome::Busy));
    }

    #[test]
    fn ranges_parse() {
        assert_eq!(
            "5-30".parse::<SecondsRange>().unwrap(),
            SecondsRange { min: 5, max: 30 }
        );
        assert_eq!(
            "7".parse::<SecondsRange>().unwrap(),
            SecondsRange { min: 7, max: 7 }
        );
        assert!("30-5".parse::<SecondsRange>().is_err());
        assert!("x".parse::<SecondsRange>().is_err());
    }
}
