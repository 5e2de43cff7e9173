//! Who may call a route: public, or a key with one scope; and what the gate answers a key
//! without it.

use axum::http::StatusCode;

use crate::domain::auth::Scope;

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Public,
    Scoped(Scope),
}

/// The statuses [`authorize`] can answer on a route, for the OpenAPI document.
pub fn refusals(access: Access) -> &'static [StatusCode] {
    match access {
        Access::Public => &[],
        // The spec answers 403 on carrier-account routes for a key without the scope.
        Access::Scoped(Scope::CarrierAccountsManage) => {
            &[StatusCode::UNAUTHORIZED, StatusCode::FORBIDDEN]
        }
        Access::Scoped(_) => &[StatusCode::UNAUTHORIZED],
    }
}

/// Used by tests and the discovery document.
pub fn scope_of(access: Access) -> Option<Scope> {
    match access {
        Access::Scoped(scope) => Some(scope),
        Access::Public => None,
    }
}
