//! The campaign settings a client writes: the integer rules with the spec's ranges and
//! defaults, the boolean and writable fields, the lawful basis, names, budgets and schedules.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The lawful basis for calling, chosen by the customer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RegulatoryBasis {
    Consent,
    ExistingCustomer,
    NonMarketing,
    RegistryScreened,
}

impl RegulatoryBasis {
    pub const ALL: [RegulatoryBasis; 4] = [
        Self::Consent,
        Self::ExistingCustomer,
        Self::NonMarketing,
        Self::RegistryScreened,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Consent => "consent",
            Self::ExistingCustomer => "existing_customer",
            Self::NonMarketing => "non_marketing",
            Self::RegistryScreened => "registry_screened",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.as_str() == s)
    }
}

/// An integer setting and its allowed range (the spec's Limits table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntRule {
    pub field: &'static str,
    pub min: i64,
    pub max: i64,
    pub default: i64,
}

pub const MAX_ATTEMPTS: IntRule = IntRule {
    field: "max_attempts",
    min: 1,
    max: 999,
    default: 3,
};
pub const MAX_INFRA_RETRIES: IntRule = IntRule {
    field: "max_infra_retries",
    min: 0,
    max: 20,
    default: 3,
};
pub const RETRY_NO_ANSWER_SECONDS: IntRule = IntRule {
    field: "retry_no_answer_seconds",
    min: 30,
    max: 604_800,
    default: 3600,
};
pub const RETRY_COMPLETED_SECONDS: IntRule = IntRule {
    field: "retry_completed_seconds",
    min: 60,
    max: 604_800,
    default: 86_400,
};
pub const DOUBLE_DIAL_GAP_SECONDS: IntRule = IntRule {
    field: "double_dial_gap_seconds",
    min: 10,
    max: 3600,
    default: 30,
};
pub const MAX_CALLS_PER_DAY: IntRule = IntRule {
    field: "max_calls_per_day",
    min: 1,
    max: 100_000,
    default: 1000,
};
pub const MIN_SECONDS_BETWEEN_CALLS: IntRule = IntRule {
    field: "min_seconds_between_calls",
    min: 0,
    max: 86_400,
    default: 0,
};
pub const MAX_IN_FLIGHT: IntRule = IntRule {
    field: "max_in_flight",
    min: 1,
    max: 8,
    default: 1,
};

/// Every bounded integer setting.
pub const INT_RULES: [IntRule; 8] = [
    MAX_ATTEMPTS,
    MAX_INFRA_RETRIES,
    RETRY_NO_ANSWER_SECONDS,
    RETRY_COMPLETED_SECONDS,
    DOUBLE_DIAL_GAP_SECONDS,
    MAX_CALLS_PER_DAY,
    MIN_SECONDS_BETWEEN_CALLS,
    MAX_IN_FLIGHT,
];

/// The boolean settings (all default false).
pub const BOOL_FIELDS: [&str; 5] = [
    "stop_on_no_answer",
    "stop_on_voicemail",
    "stop_on_unclassified",
    "randomize_retry_time",
    "double_dial_enabled",
];

/// Fields a client may write on create and PATCH, in the spec's order.
pub const WRITABLE_FIELDS: [&str; 23] = [
    "name",
    "description",
    "agent_id",
    "from_phone_number_id",
    "regulatory_basis",
    "stop_disposition_ids",
    "stop_on_no_answer",
    "stop_on_voicemail",
    "stop_on_unclassified",
    "randomize_retry_time",
    "double_dial_enabled",
    "max_attempts",
    "max_infra_retries",
    "retry_no_answer_seconds",
    "retry_completed_seconds",
    "double_dial_gap_seconds",
    "max_calls_per_day",
    "min_seconds_between_calls",
    "max_in_flight",
    "budget_cents",
    "calling_window",
    "starts_at",
    "ends_at",
];

/// A campaign field rule was broken; the message names the field and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct RuleError {
    pub field: &'static str,
    pub message: String,
}

impl IntRule {
    pub fn check(&self, value: i64) -> Result<i64, RuleError> {
        if (self.min..=self.max).contains(&value) {
            Ok(value)
        } else {
            Err(RuleError {
                field: self.field,
                message: format!("must be an integer from {} to {}", self.min, self.max),
            })
        }
    }
}

/// budget_cents: a positive integer.
pub fn check_budget(value: i64) -> Result<i64, RuleError> {
    if value > 0 {
        Ok(value)
    } else {
        Err(RuleError {
            field: "budget_cents",
            message: "must be a positive integer or null".into(),
        })
    }
}

/// A campaign name: trimmed, non-empty, at most 200 characters.
/// The longest campaign name, in characters (after trimming).
pub const NAME_MAX: usize = 200;

pub fn check_name(name: &str) -> Result<String, RuleError> {
    let trimmed = name.trim();
    if trimmed.is_empty() {
        return Err(RuleError {
            field: "name",
            message: "must not be empty".into(),
        });
    }
    if trimmed.chars().count() > NAME_MAX {
        return Err(RuleError {
            field: "name",
            message: format!("must be at most {NAME_MAX} characters"),
        });
    }
    Ok(trimmed.to_owned())
}

/// `starts_at` must come before `ends_at` when both are set.
pub fn check_schedule(
    starts_at: Option<DateTime<Utc>>,
    ends_at: Option<DateTime<Utc>>,
) -> Result<(), RuleError> {
    match (starts_at, ends_at) {
        (Some(s), Some(e)) if s >= e => Err(RuleError {
            field: "ends_at",
            message: "must be later than starts_at".into(),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_rules_match_the_spec_limits() {
        assert!(MAX_ATTEMPTS.check(0).is_err());
        assert!(MAX_ATTEMPTS.check(999).is_ok());
        assert!(MAX_ATTEMPTS.check(1000).is_err());
        assert!(MAX_IN_FLIGHT.check(8).is_ok());
        assert!(MAX_IN_FLIGHT.check(9).is_err());
        assert!(RETRY_NO_ANSWER_SECONDS.check(29).is_err());
        assert!(RETRY_COMPLETED_SECONDS.check(59).is_err());
        assert!(MIN_SECONDS_BETWEEN_CALLS.check(0).is_ok());
        let err = MAX_CALLS_PER_DAY.check(100_001).unwrap_err();
        assert_eq!(
            err.to_string(),
            "max_calls_per_day: must be an integer from 1 to 100000"
        );
        for rule in INT_RULES {
            assert!(
                rule.check(rule.default).is_ok(),
                "{} default within range",
                rule.field
            );
        }
        assert!(check_budget(0).is_err());
        assert!(check_budget(1).is_ok());
    }

    #[test]
    fn names_are_trimmed_and_required() {
        assert_eq!(check_name("  Spring  ").unwrap(), "Spring");
        assert!(check_name("   ").is_err());
        assert!(check_name(&"x".repeat(201)).is_err());
    }
}
