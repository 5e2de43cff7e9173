//! RTP as the bench's user agents send and read it: one outgoing stream written into one buffer,
//! and the payload of a received packet.

use switchboard_sip::sdp::Codec;

/// One outgoing RTP stream, written into one buffer.
pub struct RtpOut {
    buf: [u8; 12 + 640],
    payload_type: u8,
    ssrc: u32,
    seq: u16,
    ts: u32,
    pub sent: u64,
}

impl RtpOut {
    pub fn new(payload_type: u8) -> RtpOut {
        RtpOut {
            buf: [0; 12 + 640],
            payload_type,
            ssrc: rand::random(),
            seq: rand::random(),
            ts: rand::random(),
            sent: 0,
        }
    }

    /// The next packet (counted as sent).
    pub fn packet(&mut self, payload: &[u8]) -> &[u8] {
        let payload = &payload[..payload.len().min(640)];
        let len = 12 + payload.len();
        self.buf[0] = 0x80;
        self.buf[1] = self.payload_type | if self.sent == 0 { 0x80 } else { 0 };
        self.buf[2..4].copy_from_slice(&self.seq.to_be_bytes());
        self.buf[4..8].copy_from_slice(&self.ts.to_be_bytes());
        self.buf[8..12].copy_from_slice(&self.ssrc.to_be_bytes());
        self.buf[12..len].copy_from_slice(payload);
        self.seq = self.seq.wrapping_add(1);
        self.ts = self.ts.wrapping_add(Codec::TIMESTAMP_STEP);
        self.sent += 1;
        &self.buf[..len]
    }
}

/// The payload of an RTP packet (past CSRCs and a header extension); none if it is not RTP.
pub fn rtp_payload(packet: &[u8]) -> Option<&[u8]> {
    if packet.len() < 12 || packet[0] >> 6 != 2 {
        return None;
    }
    let mut at = 12 + 4 * usize::from(packet[0] & 0x0f);
    if packet[0] & 0x10 != 0 {
        let words = packet.get(at + 2..at + 4)?;
        at += 4 + 4 * usize::from(u16::from_be_bytes([words[0], words[1]]));
    }
    packet.get(at..)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtp_payloads_and_packets() {
        let mut out = RtpOut::new(8);
        let first = out.packet(&[1, 2, 3]).to_vec();
        assert_eq!(first[1], 0x88);
        assert_eq!(rtp_payload(&first), Some(&[1u8, 2, 3][..]));
        let second = out.packet(&[4]).to_vec();
        assert_eq!(second[1], 8);
        assert_eq!(
            u16::from_be_bytes([second[2], second[3]]),
            u16::from_be_bytes([first[2], first[3]]).wrapping_add(1)
        );
        let mut with_csrc = first.clone();
        with_csrc[0] = 0x81;
        with_csrc.splice(12..12, [0u8; 4]);
        assert_eq!(rtp_payload(&with_csrc), Some(&[1u8, 2, 3][..]));
        assert_eq!(rtp_payload(&[0u8; 12]), None);
        assert_eq!(out.sent, 2);
    }
}
