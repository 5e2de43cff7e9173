//! What the peer does with each call ([`Kind`]) and the shares it deals them out in
//! ([`Mix`]).

use std::collections::BTreeMap;

/// What the peer does with one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Answer,
    Machine,
    Busy,
    NoAnswer,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Answer, Kind::Machine, Kind::Busy, Kind::NoAnswer];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Answer => "answer",
            Kind::Machine => "machine",
            Kind::Busy => "busy",
            Kind::NoAnswer => "no_answer",
        }
    }

    /// The outcome the service should record for it (`amd`: answering-machine detection is
    /// on).
    pub fn expected_outcome(self, amd: bool) -> &'static str {
        match self {
            Kind::Machine if amd => "voicemail",
            Kind::Answer | Kind::Machine => "answered",
            Kind::Busy => "busy",
            Kind::NoAnswer => "no_answer",
        }
    }

    fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// Outcome shares, dealt out by smooth weighted round robin: every window of calls matches the
/// shares as closely as whole calls allow, so a short run gets the configured mix too.
#[derive(Debug, Clone)]
pub struct Mix {
    weights: Vec<(Kind, i64)>,
    current: Vec<i64>,
}

impl std::str::FromStr for Mix {
    type Err = String;
    fn from_str(s: &str) -> Result<Mix, String> {
        let mut weights = Vec::new();
        for part in s.split(',').filter(|p| !p.trim().is_empty()) {
            let (k, w) = part
                .split_once('=')
                .ok_or_else(|| format!("expected kind=weight, got {part:?}"))?;
            let kind = Kind::parse(k.trim())
                .ok_or_else(|| format!("{k:?}: one of answer, machine, busy, no_answer"))?;
            let w: i64 = w.trim().parse().map_err(|_| format!("bad weight {w:?}"))?;
            if w < 0 {
                return Err(format!("negative weight {w}"));
            }
            if w > 0 {
                weights.push((kind, w));
            }
        }
        if weights.is_empty() {
            return Err("no outcome has a positive weight".into());
        }
        Ok(Mix {
            current: vec![0; weights.len()],
            weights,
        })
    }
}

impl Mix {
    pub fn next(&mut self) -> Kind {
        let total: i64 = self.weights.iter().map(|(_, w)| w).sum();
        let mut best = 0;
        for (i, (_, w)) in self.weights.iter().enumerate() {
            self.current[i] += w;
            if self.current[i] > self.current[best] {
                best = i;
            }
        }
        self.current[best] -= total;
        self.weights[best].0
    }

    /// Each kind's share, 0-1.
    pub fn shares(&self) -> BTreeMap<&'static str, f64> {
        let total: i64 = self.weights.iter().map(|(_, w)| w).sum();
        self.weights
            .iter()
            .map(|(k, w)| (k.name(), *w as f64 / total as f64))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn the_mix_deals_the_shares_in_every_window() {
        let mut mix: Mix = "answer=70,busy=10,no_answer=10,machine=10".parse().unwrap();
        let mut counts: BTreeMap<Kind, u32> = BTreeMap::new();
        for _ in 0..10 {
            *counts.entry(mix.next()).or_default() += 1;
        }
        assert_eq!(counts[&Kind::Answer], 7);
        assert_eq!(counts[&Kind::Busy], 1);
        assert_eq!(counts[&Kind::NoAnswer], 1);
        assert_eq!(counts[&Kind::Machine], 1);
        assert!("answer=0".parse::<Mix>().is_err());
        assert!("human=1".parse::<Mix>().is_err());
    }
}
