//! Clients of the outside world. They know nothing of the store, the runtime or the doors:
//! what they need is handed to them.
//!
//! - [`egress`]: the outbound URL policy every request to a workspace-supplied URL obeys.
//! - [`vendors`]: the OpenAI-compatible chat model and transcription clients.
//! - [`speech`]: text to speech (espeak-ng, OpenAI-compatible, tones, a cache).
//! - [`local_speech`]: the local speech server `serve --speech local` starts.
//! - [`google`]: Google Calendar and Gmail for flows' integrations, and the OAuth handshake.
//! - [`webhooks`]: webhook tools (configuration rules, the payload contract, one delivery) and
//!   the one signed POST of agent webhooks.
//! - [`tls`]: the process's TLS crypto provider.

pub mod egress;
pub mod google;
pub mod local_speech;
pub mod speech;
pub mod tls;
pub mod vendors;
pub mod webhooks;
