//! The signed-in operator as every page sees them.

use std::collections::HashMap;

use switchboard_actors::ids::{ApiKeyId, WorkspaceId};

use crate::domain::auth::{Scopes, constant_time_eq};

/// The signed-in operator: the key's workspace and scopes, and the session's CSRF token.
#[derive(Debug, Clone)]
pub struct Viewer {
    pub workspace_id: WorkspaceId,
    pub key_id: ApiKeyId,
    pub scopes: Scopes,
    pub csrf: String,
}

impl Viewer {
    /// Whether a submitted form carries this session's CSRF token.
    pub fn checks(&self, form: &HashMap<String, String>) -> bool {
        form.get("csrf")
            .is_some_and(|t| constant_time_eq(t.as_bytes(), self.csrf.as_bytes()))
    }

    /// Whether a submitted form (its fields in order) carries this session's CSRF token.
    pub fn checks_pairs(&self, form: &[(String, String)]) -> bool {
        form.iter()
            .any(|(k, t)| k == "csrf" && constant_time_eq(t.as_bytes(), self.csrf.as_bytes()))
    }

    /// The API's view of this session's key, for the actions the page shares with the API.
    pub fn auth(&self) -> crate::app::auth::Auth {
        crate::app::auth::Auth {
            workspace_id: self.workspace_id,
            key_id: self.key_id,
            scopes: self.scopes.clone(),
        }
    }
}
