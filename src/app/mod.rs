//! The service's operations, called alike by the REST API, the dashboard and the operator CLI:
//! what each does and refuses is decided here, once; the doors only translate (HTTP and the
//! spec's codes, HTML forms, command-line flags).
//!
//! - [`state`]: [`state::App`], the service as every operation reaches it.
//! - [`auth`]: who an operation runs for.
//! - [`carrier_accounts`]: registering and changing carrier accounts.
//! - [`dispositions`]: creating, changing and deleting dispositions.
//! - [`webhooks`]: the workspace's webhook signing secret, read or rotated.
//! - [`error`]: [`error::AppError`], what an operation refuses or fails with.
//! - [`fields`]: rules every body obeys (only writable fields).
//! - [`keys`]: creating and revoking API keys.
//! - [`limits`]: the API's rate limit.
//! - [`flow_test`]: a flow agent tried on the text line.
//! - [`sip_endpoints`]: creating a SIP endpoint.
//! - [`tools`]: a webhook tool's test delivery.
//! - [`agents`]: saving an agent, its flow checked.
//! - [`calls`]: placing a call.
//! - [`campaigns`]: creating, changing, commanding campaigns and enrolling their contacts.

pub mod agents;
pub mod auth;
pub mod billing;
pub mod call_windows;
pub mod calls;
pub mod campaigns;
pub mod carrier_accounts;
pub mod dispositions;
pub mod dnc;
pub mod error;
pub mod fields;
pub mod flow_test;
pub mod integrations;
pub mod keys;
pub mod leads;
pub mod limits;
pub mod phone_numbers;
pub mod shared_links;
pub mod sip_endpoints;
pub mod state;
pub mod tools;
pub mod webhooks;
