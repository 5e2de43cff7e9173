//! A dial's media: the socket bound before the INVITE, the session started on the peer's
//! first SDP (early media or the answer) and moved by a later one, and our offer.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use crate::call::event_sink;
use crate::media::{self, MediaConfig, MediaHandle, VadSettings};
use crate::sdp::Codec;
use crate::sdp::{self, MediaDescription};

/// The codecs we offer, in our order of preference (carriers' G.711 first).
const OFFER: [(u8, Codec); 3] = [(0, Codec::Pcmu), (8, Codec::Pcma), (9, Codec::G722)];

/// The media of a dial: the socket until the media starts, then the running session.
pub(super) struct Media {
    pub(super) socket: Option<tokio::net::UdpSocket>,
    pub(super) local: SocketAddr,
    pub(super) session_id: u64,
    pub(super) running: Option<(MediaHandle, sdp::Stream)>,
    pub(super) recording: Option<PathBuf>,
    pub(super) vad: VadSettings,
    pub(super) jitter_depth: usize,
    pub(super) counters: Arc<media::MediaCounters>,
}

impl Media {
    /// Starts the media on the peer's SDP (early or final); a later SDP moves it.
    pub(super) async fn start(
        &mut self,
        body: &[u8],
        events: &crate::call::EventTx,
    ) -> Result<(), String> {
        let desc = MediaDescription::parse(body).map_err(|e| format!("the peer's SDP: {e}"))?;
        let (pt, codec) = desc
            .codecs
            .iter()
            .copied()
            .find(|(_, c)| OFFER.iter().any(|(_, o)| o == c))
            .ok_or("the peer's SDP has none of our codecs")?;
        if let Some((handle, running)) = &self.running {
            if running.codec != codec {
                return Err("the peer changed codec between early media and the answer".into());
            }
            // The session ignores the address it already has.
            if desc.addr.port() != 0 {
                handle.control().retarget(desc.addr);
            }
            return Ok(());
        }
        let socket = self.socket.take().ok_or("the media socket is gone")?;
        let handle = media::start(
            socket,
            MediaConfig {
                codec,
                payload_type: pt,
                telephone_event: desc.telephone_event,
                remote: desc.addr,
                recording: self.recording.clone(),
                vad: self.vad,
                jitter_depth: self.jitter_depth,
                counters: self.counters.clone(),
            },
            event_sink(events),
        )
        .await
        .map_err(|e| e.to_string())?;
        let stream = sdp::Stream {
            addr: self.local,
            payload_type: pt,
            codec,
            events: desc.telephone_event,
        };
        self.running = Some((handle, stream));
        Ok(())
    }

    pub(super) fn offer(&self) -> Vec<u8> {
        sdp::describe(
            self.local,
            &OFFER,
            Some(sdp::TELEPHONE_EVENT),
            self.session_id,
            1,
        )
        .into_bytes()
    }

    /// Stops media that started on early media of a call that then failed.
    pub(super) async fn stop(&mut self) -> bool {
        match self.running.take() {
            Some((handle, ..)) => {
                let _ = handle.finish().await;
                self.recording.is_some()
            }
            None => false,
        }
    }
}
