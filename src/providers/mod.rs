//! The providers of flows' integration_call nodes: Google Calendar ([`calendar`]) and Gmail
//! ([`gmail`]).
//!
//! - [`google`]: OAuth access tokens from an integration's refresh token, and authorized
//!   requests through the outbound URL policy.
//! - [`actions`]: the action catalog as REST calls.
//! - [`oauth`]: connecting an account through the authorization-code flow with PKCE.
//! - [`runner`]: the call actor's `Integrations` port: the store's checks (foreign,
//!   disconnected), the hard failures the spec routes on, and the call's events.

pub mod actions;
pub mod calendar;
pub mod gmail;
pub mod google;
pub mod oauth;
pub mod runner;

pub use google::{GoogleUrls, OAuthGrant};
pub use oauth::OAuthClient;
pub use runner::{Providers, connect};
