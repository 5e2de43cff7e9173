//! The providers of flows' integration_call nodes: Google Calendar ([`calendar`]) and Gmail
//! ([`gmail`]).
//!
//! - [`client`]: OAuth access tokens from an integration's refresh token, and authorized
//!   requests through the outbound URL policy.
//! - [`actions`]: the action catalog (`domain::integrations`) as REST calls.
//! - [`oauth`]: connecting an account through the authorization-code flow with PKCE.

pub mod actions;
pub mod calendar;
pub mod client;
pub mod gmail;
pub mod oauth;

pub use client::{GoogleUrls, OAuthGrant};
pub use oauth::OAuthClient;
