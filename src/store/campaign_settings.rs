//! The settings a client writes on a campaign, as the store keeps them: one field each, read and
//! written by name for the kinds the settings table (`campaign::SETTINGS`) handles alike (the
//! integers, the flags, the times), so the create and PATCH rules, a new campaign's defaults and
//! the columns written come from the table.

use chrono::{DateTime, Utc};
use switchboard_actors::campaign::{self, RegulatoryBasis};
use switchboard_actors::ids::{AgentId, DispositionId, PhoneNumberId};
use switchboard_actors::window::CallingWindow;

/// The settings a client writes (create and PATCH), with the campaign's current values.
#[derive(Debug, Clone, PartialEq)]
pub struct CampaignSettings {
    pub name: String,
    pub description: String,
    pub agent_id: Option<AgentId>,
    pub from_phone_number_id: Option<PhoneNumberId>,
    pub regulatory_basis: Option<RegulatoryBasis>,
    pub calling_window: Option<CallingWindow>,
    pub stop_disposition_ids: Vec<DispositionId>,
    pub stop_on_no_answer: bool,
    pub stop_on_voicemail: bool,
    pub stop_on_unclassified: bool,
    pub randomize_retry_time: bool,
    pub double_dial_enabled: bool,
    pub max_attempts: i64,
    pub max_infra_retries: i64,
    pub retry_no_answer_seconds: i64,
    pub retry_completed_seconds: i64,
    pub double_dial_gap_seconds: i64,
    pub max_calls_per_day: i64,
    pub min_seconds_between_calls: i64,
    pub max_in_flight: i64,
    pub budget_cents: Option<i64>,
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

impl CampaignSettings {
    /// A new campaign's settings: DESIGN.md's defaults (the integer settings' from their rules,
    /// every flag false, every optional setting unset).
    pub fn defaults(name: String) -> Self {
        let mut settings = Self {
            name,
            description: String::new(),
            agent_id: None,
            from_phone_number_id: None,
            regulatory_basis: None,
            calling_window: None,
            stop_disposition_ids: Vec::new(),
            stop_on_no_answer: false,
            stop_on_voicemail: false,
            stop_on_unclassified: false,
            randomize_retry_time: false,
            double_dial_enabled: false,
            max_attempts: 0,
            max_infra_retries: 0,
            retry_no_answer_seconds: 0,
            retry_completed_seconds: 0,
            double_dial_gap_seconds: 0,
            max_calls_per_day: 0,
            min_seconds_between_calls: 0,
            max_in_flight: 0,
            budget_cents: None,
            starts_at: None,
            ends_at: None,
        };
        for rule in campaign::INT_RULES {
            if let Some(slot) = settings.int_mut(rule.field) {
                *slot = rule.default;
            }
        }
        settings
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
