//! Money: whole cents of the workspace's currency, as a type, so an amount is never mistaken
//! for a count or a duration where it is computed.
//!
//! **Invariant:** amounts are integer cents; a per-second charge rounds up to the next cent.

use std::fmt;
use std::iter::Sum;
use std::ops::{Add, AddAssign, Neg, Sub, SubAssign};

use serde::{Deserialize, Serialize};

/// An amount in cents (negative for a debit).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Cents(i64);

impl Cents {
    pub const ZERO: Self = Self(0);

    pub const fn new(cents: i64) -> Self {
        Self(cents)
    }

    /// The amount as a plain integer (for storage and the API).
    pub const fn get(self) -> i64 {
        self.0
    }

    /// `secs` seconds at `self` per minute, billed per second and rounded up to a cent; a
    /// negative duration or rate counts as zero.
    pub fn per_minute_for(self, secs: i64) -> Self {
        let product = i128::from(secs.max(0)) * i128::from(self.0.max(0));
        Self(i64::try_from((product + 59) / 60).unwrap_or(i64::MAX))
    }

    /// `n` times the amount, saturating.
    pub fn times(self, n: i64) -> Self {
        Self(self.0.saturating_mul(n))
    }

    /// The amount, or zero when it is negative.
    pub fn at_least_zero(self) -> Self {
        Self(self.0.max(0))
    }
}

impl Add for Cents {
    type Output = Self;
    fn add(self, other: Self) -> Self {
        Self(self.0.saturating_add(other.0))
    }
}

impl Sub for Cents {
    type Output = Self;
    fn sub(self, other: Self) -> Self {
        Self(self.0.saturating_sub(other.0))
    }
}

impl AddAssign for Cents {
    fn add_assign(&mut self, other: Self) {
        *self = *self + other;
    }
}

impl SubAssign for Cents {
    fn sub_assign(&mut self, other: Self) {
        *self = *self - other;
    }
}

impl Neg for Cents {
    type Output = Self;
    fn neg(self) -> Self {
        Self(self.0.saturating_neg())
    }
}

impl Sum for Cents {
    fn sum<I: Iterator<Item = Self>>(iter: I) -> Self {
        iter.fold(Self::ZERO, Add::add)
    }
}

/// The bare number of cents, as messages write it ("a 500 cent budget").
impl fmt::Display for Cents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_per_minute_rate_is_billed_per_second_rounded_up() {
        let rate = Cents::new(10);
        assert_eq!(rate.per_minute_for(0), Cents::ZERO);
        assert_eq!(rate.per_minute_for(1), Cents::new(1));
        assert_eq!(rate.per_minute_for(60), Cents::new(10));
        assert_eq!(rate.per_minute_for(61), Cents::new(11));
        assert_eq!(rate.per_minute_for(1800), Cents::new(300));
        assert_eq!(rate.per_minute_for(-5), Cents::ZERO);
        assert_eq!(Cents::new(-3).per_minute_for(60), Cents::ZERO);
        assert_eq!(
            Cents::new(i64::MAX).per_minute_for(i64::MAX),
            Cents::new(i64::MAX)
        );
    }

    #[test]
    fn amounts_add_up_without_wrapping() {
        let total: Cents = [1, 2, 3].into_iter().map(Cents::new).sum();
        assert_eq!(total, Cents::new(6));
        assert_eq!(Cents::new(i64::MAX) + Cents::new(1), Cents::new(i64::MAX));
        assert_eq!((Cents::new(5) - Cents::new(8)).at_least_zero(), Cents::ZERO);
        assert_eq!(Cents::new(7).times(3), Cents::new(21));
        assert_eq!(-Cents::new(7), Cents::new(-7));
        assert_eq!(Cents::new(250).to_string(), "250");
    }
}
