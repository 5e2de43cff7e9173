//! RTP as the bench's user agents send and read it: one outgoing stream written into one buffer,
//! the payload of a received packet, and a socket that says when each packet arrived.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use switchboard_sip::sdp::Codec;

/// A non-blocking UDP socket whose packets carry the kernel's time of arrival
/// (`SO_TIMESTAMPNS`), so a packet read late is still timed when it came.
pub struct StampedSocket {
    socket: UdpSocket,
}

impl StampedSocket {
    pub fn new(socket: UdpSocket) -> io::Result<StampedSocket> {
        socket.set_nonblocking(true)?;
        let on: libc::c_int = 1;
        // SAFETY: the descriptor is the open socket `socket` owns for this whole call; `optval`
        // points to `on`, a live c_int, and `optlen` is exactly its size, so the kernel reads
        // only that int.
        let done = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                (&raw const on).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if done != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(StampedSocket { socket })
    }

    pub fn port(&self) -> u16 {
        self.socket.local_addr().map_or(0, |a| a.port())
    }

    pub fn send_to(&self, packet: &[u8], to: SocketAddr) -> io::Result<usize> {
        self.socket.send_to(packet, to)
    }

    /// The next packet waiting, if any (`WouldBlock` otherwise): its length in `buf` and when
    /// it arrived (now, if the kernel gave no time).
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<(usize, Instant)> {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // Room for the time stamp's control message, aligned as a cmsghdr must be.
        let mut control = [0u64; 8];
        // SAFETY: msghdr is a plain C struct for which all zeroes is a valid (empty) value.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: `msg` points to one iovec over `buf` (valid for writes of its length) and to
        // `control` (64 bytes, valid for writes of `msg_controllen`); all of them outlive the
        // call, and MSG_DONTWAIT means it never blocks.
        let n = unsafe { libc::recvmsg(self.socket.as_raw_fd(), &raw mut msg, libc::MSG_DONTWAIT) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut stamp = None;
        // SAFETY: `msg` is the header recvmsg just filled: its control pointer and length
        // describe the messages the kernel wrote into `control`, and CMSG_FIRSTHDR/NXTHDR stay
        // within them (returning null past the last).
        let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(&raw const msg) };
        while !cmsg.is_null() {
            // SAFETY: `cmsg` is non-null and points to a complete header inside `control`.
            let header = unsafe { &*cmsg };
            if header.cmsg_level == libc::SOL_SOCKET && header.cmsg_type == libc::SCM_TIMESTAMPNS {
                // SAFETY: an SCM_TIMESTAMPNS message carries one timespec as its data; it may
                // be unaligned for timespec, hence read_unaligned.
                let ts: libc::timespec =
                    unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast()) };
                stamp = Some(UNIX_EPOCH + Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32));
            }
            // SAFETY: as for CMSG_FIRSTHDR; `cmsg` is a header of this message.
            cmsg = unsafe { libc::CMSG_NXTHDR(&raw const msg, cmsg) };
        }
        let now = Instant::now();
        let ago = stamp.and_then(|t| SystemTime::now().duration_since(t).ok());
        Ok((
            n as usize,
            ago.and_then(|d| now.checked_sub(d)).unwrap_or(now),
        ))
    }
}

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
