//! The settings a client writes on a campaign, as the store keeps them: who and what it calls
//! with, and the engine's own rules ([`CampaignRules`], read and written by name for the kinds
//! the settings table handles alike).

use switchboard_actors::campaign::{CampaignRules, RegulatoryBasis};
use switchboard_actors::ids::{AgentId, PhoneNumberId};
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
    /// What the engine acts on: attempts, retries, pacing, budget, stops and schedule.
    pub rules: CampaignRules,
}

impl CampaignSettings {
    /// A new campaign's settings: DESIGN.md's defaults (every optional setting unset).
    pub fn defaults(name: String) -> Self {
        Self {
            name,
            description: String::new(),
            agent_id: None,
            from_phone_number_id: None,
            regulatory_basis: None,
            calling_window: None,
            rules: CampaignRules::defaults(),
        }
    }
}
