//! The service's own values beneath the store: every layer may use them, and they import
//! nothing of the service.
//!
//! - [`auth`]: API keys (generated, hashed, compared in constant time) and scopes.
//! - [`secrets`]: secrets kept in the store, sealed under the service's key.
//! - [`signing`]: HMAC-SHA256 signatures: recording links and webhook deliveries.
//! - [`trunks`]: SIP trunks on carrier accounts as the service manages them: their status, the
//!   port that probes them, how they are shown and read from a flag.
//! - [`integrations`]: the integration catalog: providers, their actions and arguments, the
//!   OAuth scopes and labels, and the schema of a provider's name.
//! - [`payments`]: payment methods and the payment-provider port.
//! - [`schema`]: JSON Schema pieces typed values carry into the OpenAPI document.

pub mod auth;
pub mod integrations;
pub mod payments;
pub mod schema;
pub mod secrets;
pub mod signing;
pub mod trunks;
