//! API keys and scopes.
//!
//! A key is `sb_` followed by 48 hex characters (192 random bits from the OS CSPRNG). Only its
//! SHA-256 hash is stored; a presented key is hashed and matched by an indexed lookup, and the
//! stored hash is then compared in constant time. Keys are shown once, at creation.
//!
//! **Invariant:** no key, and no hash of one, is ever logged or returned after creation.

use std::collections::BTreeSet;
use std::fmt;

use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

macro_rules! scopes {
    ($($variant:ident = $name:literal),+ $(,)?) => {
        /// A permission a key may hold (the spec's scope table).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum Scope {
            $(#[serde(rename = $name)] $variant,)+
        }

        impl Scope {
            pub const ALL: &'static [Scope] = &[$(Scope::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(Scope::$variant => $name,)+
                }
            }

            pub fn parse(s: &str) -> Option<Scope> {
                match s {
                    $($name => Some(Scope::$variant),)+
                    _ => None,
                }
            }
        }
    };
}

scopes!(
    AgentsCreate = "agents:create",
    AgentsRead = "agents:read",
    AgentsUpdate = "agents:update",
    ToolsCreate = "tools:create",
    ToolsRead = "tools:read",
    ToolsUpdate = "tools:update",
    PhoneNumbersSearch = "phone_numbers:search",
    PhoneNumbersPurchase = "phone_numbers:purchase",
    PhoneNumbersConfigure = "phone_numbers:configure",
    BillingRead = "billing:read",
    BillingManage = "billing:manage",
    CallsCreate = "calls:create",
    CallsRead = "calls:read",
    SharedLinksRead = "shared_links:read",
    SharedLinksManage = "shared_links:manage",
    FlowsRead = "flows:read",
    FlowsTest = "flows:test",
    IntegrationsRead = "integrations:read",
    IntegrationsManage = "integrations:manage",
    DoNotCallRead = "do_not_call:read",
    DoNotCallManage = "do_not_call:manage",
    DispositionsRead = "dispositions:read",
    DispositionsManage = "dispositions:manage",
    LeadsRead = "leads:read",
    LeadsManage = "leads:manage",
    LeadTagsRead = "lead_tags:read",
    LeadTagsManage = "lead_tags:manage",
    CampaignsManage = "campaigns:manage",
    CarrierAccountsManage = "carrier_accounts:manage",
    AffiliatesRead = "affiliates:read",
    SettingsManage = "settings:manage",
    WebhooksRead = "webhooks:read",
    WebhooksManage = "webhooks:manage",
);

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The scopes a key holds: every scope, or a listed set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scopes {
    All,
    Only(BTreeSet<Scope>),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    #[error("unknown scope `{0}`")]
    Unknown(String),
    #[error("no scopes given; use `all` or a comma-separated list")]
    Empty,
}

impl Scopes {
    /// Parses `all` or a comma-separated list of scope names.
    pub fn parse(s: &str) -> Result<Self, ScopeError> {
        if s.trim() == "all" {
            return Ok(Self::All);
        }
        let mut set = BTreeSet::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            set.insert(Scope::parse(part).ok_or_else(|| ScopeError::Unknown(part.to_owned()))?);
        }
        if set.is_empty() {
            return Err(ScopeError::Empty);
        }
        Ok(Self::Only(set))
    }

    pub fn allows(&self, scope: Scope) -> bool {
        match self {
            Self::All => true,
            Self::Only(set) => set.contains(&scope),
        }
    }

    /// Stored and displayed form: `all` or `a,b,c`.
    pub fn to_text(&self) -> String {
        match self {
            Self::All => "all".into(),
            Self::Only(set) => set.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(","),
        }
    }

    pub fn to_list(&self) -> Vec<String> {
        match self {
            Self::All => vec!["all".into()],
            Self::Only(set) => set.iter().map(|s| s.as_str().to_owned()).collect(),
        }
    }
}

/// A freshly generated key: the secret (shown once) and what is stored.
pub struct NewKey {
    pub secret: String,
    pub hash: [u8; 32],
    pub prefix: String,
}

const KEY_PREFIX: &str = "sb_";

/// Generates a key from a CSPRNG.
pub fn generate_key() -> NewKey {
    let mut bytes = [0u8; 24];
    // ThreadRng is a CSPRNG (ChaCha12) seeded and reseeded from the OS source.
    rand::rng().fill_bytes(&mut bytes);
    let secret = format!("{KEY_PREFIX}{}", hex::encode(bytes));
    NewKey {
        hash: hash_key(&secret),
        prefix: secret[..KEY_PREFIX.len() + 6].to_owned(),
        secret,
    }
}

pub fn hash_key(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// Whether a presented key could be one of ours (cheap shape check before any lookup).
pub fn looks_like_key(secret: &str) -> bool {
    secret.len() == KEY_PREFIX.len() + 48
        && secret.starts_with(KEY_PREFIX)
        && secret[KEY_PREFIX.len()..]
            .bytes()
            .all(|b| b.is_ascii_hexdigit())
}

/// Constant-time equality of two secrets or hashes.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_are_unique_well_formed_and_hash_stably() {
        let a = generate_key();
        let b = generate_key();
        assert_ne!(a.secret, b.secret);
        assert!(looks_like_key(&a.secret));
        assert_eq!(hash_key(&a.secret), a.hash);
        assert!(a.secret.starts_with(&a.prefix));
        assert!(!looks_like_key("sb_short"));
        assert!(!looks_like_key(&format!("xx_{}", "a".repeat(48))));
    }

    #[test]
    fn scopes_parse_all_and_lists() {
        assert_eq!(Scopes::parse("all").unwrap(), Scopes::All);
        let some = Scopes::parse("campaigns:manage, billing:read").unwrap();
        assert!(some.allows(Scope::CampaignsManage));
        assert!(!some.allows(Scope::BillingManage));
        assert_eq!(some.to_text(), "billing:read,campaigns:manage");
        assert_eq!(Scopes::parse(&some.to_text()).unwrap(), some);
        assert_eq!(
            Scopes::parse("calls:fly"),
            Err(ScopeError::Unknown("calls:fly".into()))
        );
        assert_eq!(Scopes::parse(" , "), Err(ScopeError::Empty));
    }

    #[test]
    fn every_scope_round_trips() {
        for scope in Scope::ALL {
            assert_eq!(Scope::parse(scope.as_str()), Some(*scope));
        }
    }

    #[test]
    fn constant_time_comparison_compares() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }
}
