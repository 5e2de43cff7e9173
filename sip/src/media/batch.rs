//! Reading the packets waiting on a socket several to a system call (`recvmmsg`), each with
//! the address it came from. Without it a frame's read takes two calls, the second only to
//! learn that nothing more is waiting.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::AsRawFd;

/// Packets read per call, and the room for each (larger packets are dropped as truncated:
/// an RTP packet of a voice call is far smaller).
const COUNT: usize = 8;
const ROOM: usize = 2048;

/// Buffers for one `recvmmsg`: reused for every read, by one thread.
pub(super) struct Batch {
    bufs: Box<[[u8; ROOM]; COUNT]>,
    names: Box<[libc::sockaddr_storage; COUNT]>,
    iovs: Box<[libc::iovec; COUNT]>,
    msgs: Box<[libc::mmsghdr; COUNT]>,
    /// Packets the last read returned.
    read: usize,
}

impl Batch {
    pub(super) fn new() -> Batch {
        // SAFETY: sockaddr_storage, iovec and mmsghdr are plain C structs (integers and raw
        // pointers) for which all zeroes is a valid value; the pointers are set before use.
        let (names, iovs, msgs) = unsafe {
            (
                Box::new(std::mem::zeroed()),
                Box::new(std::mem::zeroed()),
                Box::new(std::mem::zeroed()),
            )
        };
        Batch {
            bufs: Box::new([[0; ROOM]; COUNT]),
            names,
            iovs,
            msgs,
            read: 0,
        }
    }

    pub(super) fn capacity(&self) -> usize {
        COUNT
    }

    /// Reads the packets waiting on `socket` (at most [`Batch::capacity`]), without waiting;
    /// returns how many. An error (nothing waiting, or an ICMP report) reads none.
    pub(super) fn read(&mut self, socket: &UdpSocket) -> usize {
        for i in 0..COUNT {
            self.iovs[i] = libc::iovec {
                iov_base: self.bufs[i].as_mut_ptr().cast(),
                iov_len: ROOM,
            };
            let hdr = &mut self.msgs[i].msg_hdr;
            hdr.msg_name = (&raw mut self.names[i]).cast();
            hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            hdr.msg_iov = &raw mut self.iovs[i];
            hdr.msg_iovlen = 1;
            hdr.msg_control = std::ptr::null_mut();
            hdr.msg_controllen = 0;
            hdr.msg_flags = 0;
            self.msgs[i].msg_len = 0;
        }
        // SAFETY: `msgs` holds COUNT headers, each pointing to its own name (a whole
        // sockaddr_storage, as `msg_namelen` says) and its own iovec over a ROOM-byte buffer;
        // all of them are boxed in `self`, which the `&mut self` borrow keeps alive and
        // unmoved for the call. MSG_DONTWAIT means it never blocks, and a null timeout is
        // allowed. The kernel writes only within those buffers and the headers' lengths.
        let n = unsafe {
            libc::recvmmsg(
                socket.as_raw_fd(),
                self.msgs.as_mut_ptr(),
                COUNT as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        self.read = usize::try_from(n).unwrap_or(0).min(COUNT);
        self.read
    }

    /// The `i`th packet of the last read and its sender; none for a truncated packet or an
    /// address of another family.
    pub(super) fn packet(&self, i: usize) -> Option<(&[u8], SocketAddr)> {
        if i >= self.read {
            return None;
        }
        let msg = &self.msgs[i];
        if msg.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
            return None;
        }
        let from = address(&self.names[i])?;
        Some((&self.bufs[i][..(msg.msg_len as usize).min(ROOM)], from))
    }
}

/// The socket address the kernel wrote into `name`.
fn address(name: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match i32::from(name.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in, which it is large
            // enough and suitably aligned for (that is what sockaddr_storage is for).
            let v4 = unsafe { &*(std::ptr::from_ref(name).cast::<libc::sockaddr_in>()) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr)),
                u16::from_be(v4.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let v6 = unsafe { &*(std::ptr::from_ref(name).cast::<libc::sockaddr_in6>()) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(v6.sin6_addr.s6_addr),
                u16::from_be(v6.sin6_port),
                v6.sin6_flowinfo,
                v6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_waiting_packet_is_read_with_its_sender_in_batches() {
        let ours = UdpSocket::bind("127.0.0.1:0").unwrap();
        ours.set_nonblocking(true).unwrap();
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut batch = Batch::new();
        assert_eq!(batch.read(&ours), 0, "nothing waiting");
        for i in 0..11u8 {
            peer.send_to(&[i; 20], ours.local_addr().unwrap()).unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut seen = Vec::new();
        loop {
            let n = batch.read(&ours);
            for i in 0..n {
                let (packet, from) = batch.packet(i).unwrap();
                assert_eq!(from, peer.local_addr().unwrap());
                assert_eq!(packet.len(), 20);
                seen.push(packet[0]);
            }
            if n < batch.capacity() {
                break;
            }
        }
        assert_eq!(seen, (0..11).collect::<Vec<u8>>());
        assert!(batch.packet(7).is_none(), "past the last read");
    }

    #[test]
    fn ipv6_senders_are_read_too() {
        let Ok(ours) = UdpSocket::bind("[::1]:0") else {
            return; // no IPv6 loopback on this machine
        };
        ours.set_nonblocking(true).unwrap();
        let peer = UdpSocket::bind("[::1]:0").unwrap();
        peer.send_to(b"rtp", ours.local_addr().unwrap()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut batch = Batch::new();
        assert_eq!(batch.read(&ours), 1);
        let (packet, from) = batch.packet(0).unwrap();
        assert_eq!((packet, from), (&b"rtp"[..], peer.local_addr().unwrap()));
    }
}
