//! The campaign settings a client writes, each declared once in [`SETTINGS`]: its name, what it
//! holds and the rule its value obeys ([`SettingKind`]: the integer rules carry the spec's
//! ranges and defaults), when PATCH may change it ([`Changeable`]) and what the OpenAPI
//! document says of it. The writable fields, the integer rules and the boolean fields are read
//! from the table; so are the create and PATCH validation, the PATCH rule, the body schemas and a
//! new campaign's defaults. [`CampaignRules`] holds the settings the engine acts on, the
//! integers, flags and times reachable by name for the table. Also here: the lawful basis,
//! names, budgets and schedules.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::DispositionId;
use crate::money::Cents;

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

/// What a setting holds, and so how a client's value is read and checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingKind {
    /// The campaign's name ([`check_name`]).
    Name,
    /// Free text of at most [`DESCRIPTION_MAX`] characters; null clears it.
    Description,
    /// An agent of the workspace, or null.
    Agent,
    /// A phone number of the workspace, or null.
    PhoneNumber,
    /// A [`RegulatoryBasis`], or null.
    RegulatoryBasis,
    /// Dispositions of the workspace.
    Dispositions,
    /// A boolean, false by default.
    Flag,
    /// A bounded integer with its default.
    Int(IntRule),
    /// A positive number of cents ([`check_budget`]), or null for no cap.
    Budget,
    /// A calling window, or null for the workspace's.
    CallingWindow,
    /// An RFC 3339 time, or null ([`check_schedule`] orders `starts_at` and `ends_at`).
    Time,
}

/// When PATCH may change a setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Changeable {
    /// In any status but a terminal one (completed, stopped, archived); a running campaign
    /// takes the change at its next evaluation.
    UntilClosed,
}

impl Changeable {
    pub fn allows(self, status: super::CampaignStatus) -> bool {
        match self {
            Changeable::UntilClosed => status.is_editable(),
        }
    }
}

/// One setting a client writes on create and PATCH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    pub field: &'static str,
    pub kind: SettingKind,
    pub changeable: Changeable,
    /// What the create and PATCH bodies' schema says of it beyond its type, if anything.
    pub doc: Option<&'static str>,
}

const fn setting(field: &'static str, kind: SettingKind, doc: Option<&'static str>) -> Setting {
    Setting {
        field,
        kind,
        changeable: Changeable::UntilClosed,
        doc,
    }
}

const fn flag(field: &'static str) -> Setting {
    setting(field, SettingKind::Flag, None)
}

const fn int(rule: IntRule) -> Setting {
    setting(rule.field, SettingKind::Int(rule), None)
}

const SCHEDULE_DOC: Option<&str> = Some("RFC 3339 with offset; `starts_at` before `ends_at`.");

/// Every setting a client writes, in the spec's order.
pub const SETTINGS: [Setting; 23] = [
    setting("name", SettingKind::Name, Some("Trimmed; not blank.")),
    setting("description", SettingKind::Description, None),
    setting("agent_id", SettingKind::Agent, None),
    setting("from_phone_number_id", SettingKind::PhoneNumber, None),
    setting("regulatory_basis", SettingKind::RegulatoryBasis, None),
    setting(
        "stop_disposition_ids",
        SettingKind::Dispositions,
        Some("Dispositions of the workspace."),
    ),
    flag("stop_on_no_answer"),
    flag("stop_on_voicemail"),
    flag("stop_on_unclassified"),
    flag("randomize_retry_time"),
    flag("double_dial_enabled"),
    int(MAX_ATTEMPTS),
    int(MAX_INFRA_RETRIES),
    int(RETRY_NO_ANSWER_SECONDS),
    int(RETRY_COMPLETED_SECONDS),
    int(DOUBLE_DIAL_GAP_SECONDS),
    int(MAX_CALLS_PER_DAY),
    int(MIN_SECONDS_BETWEEN_CALLS),
    int(MAX_IN_FLIGHT),
    setting(
        "budget_cents",
        SettingKind::Budget,
        Some("Positive cents, or null for no cap."),
    ),
    setting("calling_window", SettingKind::CallingWindow, None),
    setting("starts_at", SettingKind::Time, SCHEDULE_DOC),
    setting("ends_at", SettingKind::Time, SCHEDULE_DOC),
];

/// The setting named `field`.
pub fn setting_named(field: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.field == field)
}

/// Fields a client may write on create and PATCH, in the spec's order.
pub const WRITABLE_FIELDS: [&str; SETTINGS.len()] = {
    let mut out = [""; SETTINGS.len()];
    let mut i = 0;
    while i < SETTINGS.len() {
        out[i] = SETTINGS[i].field;
        i += 1;
    }
    out
};

/// Every bounded integer setting, in table order.
pub const INT_RULES: [IntRule; 8] = {
    let placeholder = IntRule {
        field: "",
        min: 0,
        max: 0,
        default: 0,
    };
    let mut out = [placeholder; 8];
    let (mut i, mut n) = (0, 0);
    while i < SETTINGS.len() {
        if let SettingKind::Int(rule) = SETTINGS[i].kind {
            out[n] = rule;
            n += 1;
        }
        i += 1;
    }
    assert!(n == out.len(), "INT_RULES holds every integer setting");
    out
};

/// The boolean settings (all default false), in table order.
pub const BOOL_FIELDS: [&str; 5] = fields_of(Uniform::Flag);

/// Every time setting, in table order.
pub const TIME_FIELDS: [&str; 2] = fields_of(Uniform::Time);

/// The kinds of setting the store reads and writes alike, one column each.
#[derive(Clone, Copy)]
enum Uniform {
    Flag,
    Time,
}

/// The fields of the table's settings of kind `of`, in table order; the build fails unless
/// there are exactly `N`.
const fn fields_of<const N: usize>(of: Uniform) -> [&'static str; N] {
    let mut out = [""; N];
    let (mut i, mut n) = (0, 0);
    while i < SETTINGS.len() {
        if matches!(
            (of, &SETTINGS[i].kind),
            (Uniform::Flag, SettingKind::Flag) | (Uniform::Time, SettingKind::Time)
        ) {
            assert!(n < N, "more settings of this kind than the list holds");
            out[n] = SETTINGS[i].field;
            n += 1;
        }
        i += 1;
    }
    assert!(n == N, "the list holds every setting of its kind");
    out
}

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

/// The longest campaign name, in characters (after trimming).
pub const NAME_MAX: usize = 200;

/// The longest campaign description, in characters.
pub const DESCRIPTION_MAX: usize = 2000;

/// A campaign name: trimmed, non-empty, at most [`NAME_MAX`] characters.
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

/// The per-contact and pacing rules of a campaign.
#[derive(Debug, Clone, PartialEq)]
pub struct CampaignRules {
    pub max_attempts: i64,
    pub max_infra_retries: i64,
    pub retry_no_answer_seconds: i64,
    pub retry_completed_seconds: i64,
    pub randomize_retry_time: bool,
    pub double_dial_enabled: bool,
    pub double_dial_gap_seconds: i64,
    pub max_calls_per_day: i64,
    pub min_seconds_between_calls: i64,
    pub max_in_flight: i64,
    pub budget_cents: Option<Cents>,
    pub stop_disposition_ids: Vec<DispositionId>,
    pub stop_on_no_answer: bool,
    pub stop_on_voicemail: bool,
    pub stop_on_unclassified: bool,
    pub starts_at: Option<DateTime<Utc>>,
    pub ends_at: Option<DateTime<Utc>>,
}

/// A getter and a mutable getter by name over fields of one type; `None` for another name.
macro_rules! by_name {
    ($(#[$doc:meta])* $get:ident, $get_mut:ident, $ty:ty, [$($field:ident),+ $(,)?]) => {
        $(#[$doc])*
        pub fn $get(&self, field: &str) -> Option<$ty> {
            match field {
                $(stringify!($field) => Some(self.$field),)+
                _ => None,
            }
        }

        $(#[$doc])*
        pub fn $get_mut(&mut self, field: &str) -> Option<&mut $ty> {
            match field {
                $(stringify!($field) => Some(&mut self.$field),)+
                _ => None,
            }
        }
    };
}

impl CampaignRules {
    /// A new campaign's rules: DESIGN.md's defaults (the integers' from their rules, every flag
    /// false, no budget, no stop disposition, no schedule).
    pub fn defaults() -> Self {
        let mut rules = Self {
            max_attempts: 0,
            max_infra_retries: 0,
            retry_no_answer_seconds: 0,
            retry_completed_seconds: 0,
            randomize_retry_time: false,
            double_dial_enabled: false,
            double_dial_gap_seconds: 0,
            max_calls_per_day: 0,
            min_seconds_between_calls: 0,
            max_in_flight: 0,
            budget_cents: None,
            stop_disposition_ids: Vec::new(),
            stop_on_no_answer: false,
            stop_on_voicemail: false,
            stop_on_unclassified: false,
            starts_at: None,
            ends_at: None,
        };
        for rule in INT_RULES {
            if let Some(slot) = rules.int_mut(rule.field) {
                *slot = rule.default;
            }
        }
        rules
    }

    by_name!(
        /// An integer setting (a `SettingKind::Int` of the table).
        int,
        int_mut,
        i64,
        [
            max_attempts,
            max_infra_retries,
            retry_no_answer_seconds,
            retry_completed_seconds,
            double_dial_gap_seconds,
            max_calls_per_day,
            min_seconds_between_calls,
            max_in_flight,
        ]
    );

    by_name!(
        /// A boolean setting (a `SettingKind::Flag` of the table).
        flag,
        flag_mut,
        bool,
        [
            stop_on_no_answer,
            stop_on_voicemail,
            stop_on_unclassified,
            randomize_retry_time,
            double_dial_enabled,
        ]
    );

    by_name!(
        /// A time setting (a `SettingKind::Time` of the table).
        time,
        time_mut,
        Option<DateTime<Utc>>,
        [starts_at, ends_at]
    );
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
    fn every_setting_is_declared_once_and_the_lists_are_read_from_the_table() {
        let mut names: Vec<&str> = SETTINGS.iter().map(|s| s.field).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SETTINGS.len(), "a setting is declared twice");
        assert_eq!(WRITABLE_FIELDS.len(), SETTINGS.len());
        for (field, setting) in WRITABLE_FIELDS.iter().zip(SETTINGS.iter()) {
            assert_eq!(*field, setting.field);
            assert_eq!(setting_named(field), Some(setting));
        }
        for rule in INT_RULES {
            assert_eq!(
                setting_named(rule.field).map(|s| s.kind),
                Some(SettingKind::Int(rule))
            );
        }
        for field in BOOL_FIELDS {
            assert_eq!(
                setting_named(field).map(|s| s.kind),
                Some(SettingKind::Flag)
            );
        }
        for field in TIME_FIELDS {
            assert_eq!(
                setting_named(field).map(|s| s.kind),
                Some(SettingKind::Time)
            );
        }
        assert_eq!(setting_named("status"), None);
    }

    #[test]
    fn settings_change_until_the_campaign_is_closed() {
        use super::super::CampaignStatus as S;
        for setting in SETTINGS {
            assert!(setting.changeable.allows(S::Draft));
            assert!(setting.changeable.allows(S::Running), "{}", setting.field);
            assert!(setting.changeable.allows(S::PausedBudget));
            for closed in [S::Completed, S::Stopped, S::Archived] {
                assert!(!setting.changeable.allows(closed), "{}", setting.field);
            }
        }
    }

    #[test]
    fn names_are_trimmed_and_required() {
        assert_eq!(check_name("  Spring  ").unwrap(), "Spring");
        assert!(check_name("   ").is_err());
        assert!(check_name(&"x".repeat(201)).is_err());
    }

    #[test]
    fn every_setting_of_the_table_is_reachable_by_name() {
        let mut rules = CampaignRules::defaults();
        for rule in INT_RULES {
            assert_eq!(rules.int(rule.field), Some(rule.default), "{}", rule.field);
            assert!(rules.int_mut(rule.field).is_some());
        }
        for field in BOOL_FIELDS {
            assert_eq!(rules.flag(field), Some(false), "{field}");
            assert!(rules.flag_mut(field).is_some());
        }
        for field in TIME_FIELDS {
            assert_eq!(rules.time(field), Some(None), "{field}");
            assert!(rules.time_mut(field).is_some());
        }
        assert_eq!(rules.int("stop_on_voicemail"), None);
        assert_eq!(rules.flag("max_attempts"), None);
    }
}
