//! The keypad's state: the caller's keys gathered into an entry as the director's [`Gather`]
//! says (a count, a terminator, a timeout after the last key), an entry held until the words
//! a key cut are reported, and whether digits the agent sent are still going out (what the
//! call does with them is [`super::keys`]).

use switchboard_sip::dtmf::Digit;
use tokio::time::Instant;

use super::EndReason;
use super::director::{Gather, MAX_ENTRY_DIGITS};

/// The caller's entry under way.
#[derive(Debug, Default)]
pub(super) struct Keypad {
    digits: String,
    /// When its first key came, in ms from the answer.
    started_ms: u64,
    /// When its last key came.
    last: Option<Instant>,
    last_ms: u64,
    /// An entry completed while the agent's words it cut were still to be reported: it
    /// goes to the director once they are.
    pub held: Option<Entry>,
    /// Digits the agent sent are still going out.
    pub sending: bool,
    /// The call ends, why, once they are out.
    pub end_when_sent: Option<EndReason>,
}

/// A completed entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    pub digits: String,
    pub start_ms: u64,
    pub end_ms: u64,
}

impl Keypad {
    /// A key came: the entry, when the key completes it.
    pub fn press(
        &mut self,
        digit: Digit,
        gather: &Gather,
        now: Instant,
        now_ms: u64,
    ) -> Option<Entry> {
        if self.last.is_none() {
            self.started_ms = now_ms;
        }
        self.last = Some(now);
        self.last_ms = now_ms;
        if Some(digit) == gather.terminator {
            return self.take();
        }
        self.digits.push(digit.as_char());
        let max = gather
            .max_digits
            .unwrap_or(MAX_ENTRY_DIGITS)
            .min(MAX_ENTRY_DIGITS);
        if self.digits.len() >= max {
            return self.take();
        }
        None
    }

    /// Whether no entry is under way or held.
    pub fn idle(&self) -> bool {
        self.last.is_none() && self.held.is_none()
    }

    /// When the entry under way times out, if one is.
    pub fn due(&self, gather: &Gather) -> Option<Instant> {
        self.last.map(|at| at + gather.timeout)
    }

    /// The entry as it is (timed out or terminated); none when it holds no digit.
    pub fn take(&mut self) -> Option<Entry> {
        self.last = None;
        let digits = std::mem::take(&mut self.digits);
        (!digits.is_empty()).then_some(Entry {
            digits,
            start_ms: self.started_ms,
            end_ms: self.last_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn key(c: char) -> Digit {
        Digit::from_char(c).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn an_entry_ends_at_its_count_its_terminator_or_its_timeout() {
        let now = Instant::now();
        let mut keypad = Keypad::default();
        let four = Gather {
            max_digits: Some(4),
            ..Gather::default()
        };
        for (i, c) in "123".chars().enumerate() {
            assert_eq!(keypad.press(key(c), &four, now, i as u64 * 100), None);
        }
        let entry = keypad.press(key('4'), &four, now, 300).unwrap();
        assert_eq!(
            (entry.digits.as_str(), entry.start_ms, entry.end_ms),
            ("1234", 0, 300)
        );
        assert_eq!(keypad.due(&four), None);
        // `#` ends it and is not kept; `#` alone is no entry.
        keypad.press(key('9'), &Gather::default(), now, 1000);
        let entry = keypad.press(key('#'), &Gather::default(), now, 1100);
        assert_eq!(entry.unwrap().digits, "9");
        assert_eq!(keypad.press(key('#'), &Gather::default(), now, 1200), None);
        // Without a count or a terminator, the timeout after the last key ends it.
        let open = Gather {
            max_digits: None,
            terminator: None,
            timeout: Duration::from_secs(2),
        };
        keypad.press(key('*'), &open, now, 2000);
        assert_eq!(keypad.press(key('#'), &open, now, 2100), None);
        assert_eq!(keypad.due(&open), Some(now + Duration::from_secs(2)));
        assert_eq!(keypad.take().unwrap().digits, "*#");
    }

    #[tokio::test(start_paused = true)]
    async fn an_entry_is_never_longer_than_the_most_a_node_may_ask() {
        let mut keypad = Keypad::default();
        let open = Gather {
            max_digits: None,
            terminator: None,
            timeout: Duration::from_secs(2),
        };
        let mut entry = None;
        for n in 0..MAX_ENTRY_DIGITS {
            entry = keypad.press(key('5'), &open, Instant::now(), n as u64);
        }
        assert_eq!(entry.unwrap().digits.len(), MAX_ENTRY_DIGITS);
    }
}
