//! Typed identifiers. Every resource id is a UUID (v7 when Switchboard mints it, so ids sort by
//! creation time); a newtype per resource keeps a campaign id from being passed as an agent id.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

macro_rules! id_type {
    ($($(#[$doc:meta])* $name:ident),+ $(,)?) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Uuid);

        impl $name {
            /// A fresh, time-ordered id.
            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }
            pub const fn from_uuid(id: Uuid) -> Self {
                Self(id)
            }
            pub const fn as_uuid(&self) -> Uuid {
                self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl From<Uuid> for $name {
            fn from(id: Uuid) -> Self {
                Self(id)
            }
        }

        impl From<$name> for Uuid {
            fn from(id: $name) -> Uuid {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s).map(Self)
            }
        }
    )+};
}

id_type!(
    /// A customer workspace (the spec's company).
    WorkspaceId,
    /// An API key.
    ApiKeyId,
    /// A voice agent.
    AgentId,
    /// A phone number owned by a workspace.
    PhoneNumberId,
    /// A call disposition label.
    DispositionId,
    /// A do-not-call entry.
    DncEntryId,
    /// A campaign.
    CampaignId,
    /// A contact enrolled in a campaign.
    ContactId,
    /// A call.
    CallId,
    /// A lead.
    LeadId,
    /// A tag on leads.
    LeadTagId,
    /// A shared link to an agent's public page.
    SharedLinkId,
    /// A connected third-party account (calendar, email) flows dispatch to.
    IntegrationId,
    /// A SIP endpoint: a `sip:<slug>@host` address that routes inbound calls to an agent.
    SipEndpointId,
    /// A tool agents call during calls (a webhook or a function).
    ToolId,
    /// One logged delivery of a webhook tool.
    DeliveryId,
    /// One event for an agent's webhook (`call.started`, ...): the envelope's `id`, and the id
    /// of its delivery.
    EventId,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_strings_and_json() {
        let id = CampaignId::new();
        let parsed: CampaignId = id.to_string().parse().unwrap();
        assert_eq!(parsed, id);
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, format!("\"{id}\""));
        assert!("not-a-uuid".parse::<CampaignId>().is_err());
    }

    #[test]
    fn new_ids_sort_by_creation() {
        let a = AgentId::new();
        let b = AgentId::new();
        assert!(a < b);
    }
}
