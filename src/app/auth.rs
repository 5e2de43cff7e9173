//! Who an operation runs for.

use switchboard_actors::ids::{ApiKeyId, WorkspaceId};

use crate::domain::auth::Scopes;

/// The authenticated caller: the workspace every operation is scoped to, the key it signed in
/// with, and what that key may do.
#[derive(Debug, Clone)]
pub struct Auth {
    pub workspace_id: WorkspaceId,
    pub key_id: ApiKeyId,
    pub scopes: Scopes,
}
