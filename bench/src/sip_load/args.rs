//! The `sip-load` command line: the target (or a server to spawn), the transport, the rate and
//! number of calls, their hold time, the codec and the audio.

use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(clap::Args, Clone)]
pub struct SipLoadArgs {
    /// The server's SIP address (host:port). Not needed with --spawn.
    #[arg(long)]
    pub(super) target: Option<SocketAddr>,
    /// The endpoint's slug (the user part of the URI). Not needed with --spawn.
    #[arg(long)]
    pub(super) slug: Option<String>,
    /// Start this switchboard binary as the server (temporary database, an agent and an
    /// endpoint) and measure it.
    #[arg(long)]
    pub(super) spawn: Option<PathBuf>,
    /// The server's process id, to sample its CPU and memory (set by --spawn).
    #[arg(long)]
    pub(super) server_pid: Option<u32>,
    /// `udp` or `tcp`.
    #[arg(long, default_value = "udp", value_parser = ["udp", "tcp"])]
    pub(super) transport: String,
    /// New calls per second.
    #[arg(long, default_value_t = 50.0)]
    pub(super) rate: f64,
    /// Calls to place in all.
    #[arg(long, default_value_t = 500)]
    pub(super) total: u64,
    /// Seconds each answered call is held, streaming audio.
    #[arg(long, default_value_t = 10.0)]
    pub(super) hold: f64,
    /// `pcmu`, `pcma` or `g722`.
    #[arg(long, default_value = "pcmu")]
    pub(super) codec: String,
    /// A mono 16-bit WAV to stream (looped); a 440 Hz tone when omitted.
    #[arg(long)]
    pub(super) wav: Option<PathBuf>,
    /// The address to place calls from.
    #[arg(long, default_value = "127.0.0.1")]
    pub(super) local_ip: std::net::IpAddr,
    /// Seconds to wait for a final answer to an INVITE.
    #[arg(long, default_value_t = 10.0)]
    pub(super) timeout: f64,
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write an HTML report with charts here.
    #[arg(long)]
    pub(super) html: Option<PathBuf>,
}
