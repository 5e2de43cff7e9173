//! Switchboard's SIP layer. It knows nothing of campaigns, SQL or HTTP: the service hands it
//! settings and answers its questions (which endpoint a slug names, who may call it) through
//! plain types.

pub mod acl;
pub mod admission;
pub mod amd;
pub mod call;
pub mod dtmf;
mod gate;
mod headers;
pub mod journal;
pub mod media;
pub mod outbound;
mod retention;
pub mod rtp;
pub mod sdp;
pub mod server;
pub mod settings;
pub mod transfer;
pub mod trunk;
pub mod vad;

/// The codec implementations (PCMU, PCMA, G.722), for peers such as the load generator.
pub use audio_codec;
