//! RTP plumbing: the port range calls take their media sockets from, and the small jitter
//! buffer that puts a caller's packets back in order.

use std::collections::VecDeque;
use std::io;
use std::net::{IpAddr, SocketAddr};

use tokio::net::UdpSocket;

/// The UDP ports media sockets are bound in: even ports only (RTP's convention; the odd one
/// above is left for RTCP), each drawn at random among the free ones, so nobody can tell
/// which port the next call will listen on.
#[derive(Debug)]
pub struct RtpPorts {
    ip: IpAddr,
    low: u16,
    high: u16,
}

/// Random draws before [`RtpPorts::bind`] walks the range: with most of the range free, one
/// or two draws find a free port.
const DRAWS: usize = 16;

impl RtpPorts {
    /// `low..=high` on `ip`. A range with no even port is refused.
    pub fn new(ip: IpAddr, low: u16, high: u16) -> io::Result<RtpPorts> {
        let first_even = low + (low % 2);
        if low > high || first_even > high {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the RTP port range {low}-{high} holds no even port"),
            ));
        }
        Ok(RtpPorts {
            ip,
            low: first_even,
            high,
        })
    }

    /// How many media sockets the range can hold at once.
    pub fn capacity(&self) -> usize {
        usize::from((self.high - self.low) / 2 + 1)
    }

    /// Binds a media socket on an even port of the range drawn at random among the free ones:
    /// a port in use is drawn again (each draw is uniform, so the one that binds is uniform
    /// among the free ports), and when [`DRAWS`] draws all met ports in use, the range is
    /// walked from a random slot.
    pub async fn bind(&self) -> io::Result<UdpSocket> {
        let slots = self.capacity();
        let walk_from = rand::random_range(0..slots);
        let draws = (0..DRAWS.min(slots)).map(|_| rand::random_range(0..slots));
        let walk = (0..slots).map(|i| (walk_from + i) % slots);
        for slot in draws.chain(walk) {
            let port = self.low + (slot as u16) * 2;
            match UdpSocket::bind(SocketAddr::new(self.ip, port)).await {
                Ok(socket) => return Ok(socket),
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("every RTP port in {}-{} is in use", self.low, self.high),
        ))
    }
}

/// Whether sequence number `a` comes before `b`, across the 16-bit wrap.
pub fn seq_before(a: u16, b: u16) -> bool {
    a != b && b.wrapping_sub(a) < 0x8000
}

/// What the jitter buffer gives for one 20 ms slot.
#[derive(Debug, PartialEq, Eq)]
pub enum Slot {
    /// The packet due now.
    Packet(Vec<u8>),
    /// The packet due now never came (or came too late); play silence.
    Lost,
    /// Nothing to play: the stream has not started, or it paused (silence suppression).
    Idle,
}

/// Packets a playing [`JitterBuffer`] may hold beyond its depth before it skips ahead.
const SLACK: usize = 2;

/// A small reordering buffer. It holds back `depth` packets before playing, gives packets out
/// in sequence order, drops duplicates and packets that arrive after their slot has passed,
/// never holds more than `capacity` packets, and once playing skips back to its depth when it
/// holds more than [`SLACK`] packets past it.
#[derive(Debug)]
pub struct JitterBuffer {
    depth: usize,
    capacity: usize,
    packets: VecDeque<(u16, Vec<u8>)>,
    next: Option<u16>,
    playing: bool,
    /// Buffers of packets played, kept for the next ones (a call takes 50 a second).
    spare: Vec<Vec<u8>>,
    /// Packets dropped because their slot had passed, or because they repeated one held.
    pub discarded: u64,
}

impl JitterBuffer {
    pub fn new(depth: usize) -> JitterBuffer {
        let depth = depth.max(1);
        JitterBuffer {
            depth,
            capacity: depth * 4 + 4,
            packets: VecDeque::new(),
            next: None,
            playing: false,
            spare: Vec::new(),
            discarded: 0,
        }
    }

    /// [`JitterBuffer::push`] of a copy of `payload`, in a buffer given back earlier with
    /// [`JitterBuffer::recycle`] when there is one.
    pub fn push_copy(&mut self, seq: u16, payload: &[u8]) {
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(payload);
        self.push(seq, buf);
    }

    /// Takes back the buffer of a packet played, for a later [`JitterBuffer::push_copy`].
    pub fn recycle(&mut self, buf: Vec<u8>) {
        if self.spare.len() < self.capacity {
            self.spare.push(buf);
        }
    }

    pub fn push(&mut self, seq: u16, payload: Vec<u8>) {
        if let Some(next) = self.next
            && seq_before(seq, next)
        {
            // Its slot has passed, unless the sender restarted far away: treat a jump of more
            // than half the space as a new stream.
            if next.wrapping_sub(seq) < 1000 {
                self.discarded += 1;
                return;
            }
            self.packets.clear();
            self.next = None;
            self.playing = false;
        }
        let at = self.packets.iter().position(|(s, _)| !seq_before(*s, seq));
        match at {
            Some(i) if self.packets[i].0 == seq => {
                self.discarded += 1;
                return;
            }
            Some(i) => self.packets.insert(i, (seq, payload)),
            None => self.packets.push_back((seq, payload)),
        }
        while self.packets.len() > self.capacity {
            // Too far behind: skip ahead rather than grow the delay.
            if let Some((s, _)) = self.packets.pop_front() {
                self.next = Some(s.wrapping_add(1));
                self.discarded += 1;
            }
        }
    }

    /// The slot for the next 20 ms.
    pub fn pop(&mut self) -> Slot {
        if !self.playing {
            if self.packets.len() < self.depth {
                return Slot::Idle;
            }
            self.playing = true;
        }
        if self.packets.len() > self.depth + SLACK {
            // Behind: our frames ran late (a busy machine), or the sender's clock runs fast.
            // Catch up to the depth rather than carry the delay for the rest of the call.
            while self.packets.len() > self.depth {
                if let Some((s, _)) = self.packets.pop_front() {
                    self.next = Some(s.wrapping_add(1));
                    self.discarded += 1;
                }
            }
        }
        let Some(&(front, _)) = self.packets.front() else {
            // Drained: wait to refill to the depth before playing again.
            self.playing = false;
            return Slot::Idle;
        };
        let next = self.next.unwrap_or(front);
        self.next = Some(next.wrapping_add(1));
        if front == next {
            match self.packets.pop_front() {
                Some((_, payload)) => Slot::Packet(payload),
                None => Slot::Lost,
            }
        } else {
            Slot::Lost
        }
    }
}

/// Counts for RFC 3550's loss figure: packets expected from the sequence numbers seen, and
/// packets received.
#[derive(Debug, Default, Clone, Copy)]
pub struct LossCounter {
    base: Option<u16>,
    cycles: u32,
    max: u16,
    pub received: u64,
}

impl LossCounter {
    pub fn record(&mut self, seq: u16) {
        self.received += 1;
        match self.base {
            None => {
                self.base = Some(seq);
                self.max = seq;
            }
            Some(_) => {
                if seq_before(self.max, seq) {
                    if seq < self.max {
                        self.cycles += 1;
                    }
                    self.max = seq;
                }
            }
        }
    }

    /// Packets that never arrived (never negative: duplicates do not make up for losses).
    pub fn lost(&self) -> u64 {
        let Some(base) = self.base else { return 0 };
        let extended = u64::from(self.cycles) * 65_536 + u64::from(self.max);
        let expected = extended + 1 - u64::from(base);
        expected.saturating_sub(self.received)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(n: u8) -> Vec<u8> {
        vec![n]
    }

    #[test]
    fn packets_come_out_in_order_after_the_depth_fills() {
        let mut jb = JitterBuffer::new(2);
        jb.push(11, p(11));
        assert_eq!(jb.pop(), Slot::Idle);
        jb.push(10, p(10));
        assert_eq!(jb.pop(), Slot::Packet(p(10)));
        jb.push(13, p(13));
        assert_eq!(jb.pop(), Slot::Packet(p(11)));
        assert_eq!(jb.pop(), Slot::Lost); // 12 is missing
        jb.push(12, p(12)); // too late now
        assert_eq!(jb.discarded, 1);
        assert_eq!(jb.pop(), Slot::Packet(p(13)));
        assert_eq!(jb.pop(), Slot::Idle);
    }

    #[test]
    fn duplicates_and_the_wrap_are_handled() {
        let mut jb = JitterBuffer::new(1);
        jb.push(65535, p(1));
        jb.push(65535, p(1));
        jb.push(0, p(2));
        assert_eq!(jb.discarded, 1);
        assert_eq!(jb.pop(), Slot::Packet(p(1)));
        assert_eq!(jb.pop(), Slot::Packet(p(2)));
    }

    #[test]
    fn buffers_given_back_are_used_again() {
        let mut jb = JitterBuffer::new(1);
        jb.push_copy(1, &[1, 2, 3]);
        let Slot::Packet(first) = jb.pop() else {
            panic!("a packet")
        };
        assert_eq!(first, [1, 2, 3]);
        let at = first.as_ptr();
        jb.recycle(first);
        jb.push_copy(2, &[4, 5]);
        let Slot::Packet(second) = jb.pop() else {
            panic!("a packet")
        };
        assert_eq!(second, [4, 5]);
        assert_eq!(second.as_ptr(), at, "the same buffer");
    }

    #[test]
    fn a_buffer_that_falls_behind_catches_up_to_its_depth() {
        let mut jb = JitterBuffer::new(2);
        jb.push(0, p(0));
        jb.push(1, p(1));
        assert_eq!(jb.pop(), Slot::Packet(p(0)));
        // Frames ran late: five packets came in the time of one frame.
        for s in 2..7u16 {
            jb.push(s, p(s as u8));
        }
        // Six held, more than the depth and its slack: the oldest go, two are kept.
        assert_eq!(jb.pop(), Slot::Packet(p(5)));
        assert_eq!(jb.discarded, 4);
        assert_eq!(jb.pop(), Slot::Packet(p(6)));
        // A little behind (within the slack) is only reordering room: nothing more goes.
        for s in 7..11u16 {
            jb.push(s, p(s as u8));
        }
        assert_eq!(jb.pop(), Slot::Packet(p(7)));
        assert_eq!(jb.discarded, 4);
    }

    #[test]
    fn a_flood_does_not_grow_the_buffer() {
        let mut jb = JitterBuffer::new(2);
        for s in 0..100u16 {
            jb.push(s, p(0));
        }
        assert!(jb.packets.len() <= jb.capacity);
    }

    #[test]
    fn loss_counts_across_the_wrap() {
        let mut c = LossCounter::default();
        for s in [65533u16, 65534, 0, 1, 3] {
            c.record(s);
        }
        // expected 65533..=65535, 0..=3: 7; received 5.
        assert_eq!(c.lost(), 2);
    }

    #[tokio::test]
    async fn ports_are_even_and_reused_only_when_free() {
        let ports = RtpPorts::new("127.0.0.1".parse().unwrap(), 41001, 41004).unwrap();
        assert_eq!(ports.capacity(), 2);
        let a = ports.bind().await.unwrap();
        let b = ports.bind().await.unwrap();
        assert_eq!(a.local_addr().unwrap().port() % 2, 0);
        assert_ne!(a.local_addr().unwrap(), b.local_addr().unwrap());
        assert!(ports.bind().await.is_err());
        drop(a);
        assert!(ports.bind().await.is_ok());
        assert!(RtpPorts::new("127.0.0.1".parse().unwrap(), 41001, 41001).is_err());
    }

    #[tokio::test]
    async fn ports_are_drawn_at_random() {
        let ports = RtpPorts::new("127.0.0.1".parse().unwrap(), 42000, 42398).unwrap();
        let mut seen = Vec::new();
        for _ in 0..20 {
            let socket = ports.bind().await.unwrap();
            seen.push(socket.local_addr().unwrap().port());
        }
        // Each socket is dropped at once, so a round-robin or lowest-free scheme would give
        // a run of neighbours or one port twenty times; 20 draws among 200 ports rarely meet
        // even twice.
        let steps_of_two = seen.windows(2).filter(|w| w[1] == w[0] + 2).count();
        assert!(steps_of_two < 3, "{seen:?}");
        seen.sort_unstable();
        seen.dedup();
        assert!(seen.len() > 12, "{seen:?}");
    }
}
