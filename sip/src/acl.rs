//! Source filtering: which addresses may send calls to an endpoint. An entry is one address
//! (`192.0.2.7`, `2001:db8::1`) or a CIDR block (`192.0.2.0/24`, `2001:db8::/32`).

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// An address block: `addr/prefix`, with the host bits of `addr` cleared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

/// Why an entry is not an address or block.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IpNetError {
    #[error("`{0}` is not an IP address or CIDR block")]
    Malformed(String),
    #[error("`{0}` has a prefix length longer than its address ({1} bits)")]
    PrefixTooLong(String, u8),
    #[error("`{0}` has address bits set beyond its prefix; the block is `{1}`")]
    HostBits(String, IpNet),
}

fn bits(addr: IpAddr) -> u8 {
    match addr {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

fn as_u128(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// The top `prefix` bits of a `width`-bit number.
fn mask(width: u8, prefix: u8) -> u128 {
    if prefix == 0 {
        return 0;
    }
    let all = if width == 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    };
    all & !((1u128 << (width - prefix)) - 1)
}

/// `addr` with everything below `prefix` cleared.
fn network(addr: IpAddr, prefix: u8) -> IpAddr {
    let m = mask(bits(addr), prefix);
    match addr {
        IpAddr::V4(_) => IpAddr::from(((as_u128(addr) & m) as u32).to_be_bytes()),
        IpAddr::V6(_) => IpAddr::from((as_u128(addr) & m).to_be_bytes()),
    }
}

/// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) as the IPv4 address it carries.
pub fn canonical(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

impl IpNet {
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// Whether `ip` is inside the block. An IPv4 peer seen on an IPv6 socket
    /// (`::ffff:a.b.c.d`) matches IPv4 blocks.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        if bits(ip) != bits(self.addr) {
            return false;
        }
        let m = mask(bits(ip), self.prefix);
        as_u128(ip) & m == as_u128(self.addr)
    }
}

impl FromStr for IpNet {
    type Err = IpNetError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let text = s.trim();
        let malformed = || IpNetError::Malformed(s.to_owned());
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => {
                // Digits only: no sign, no spaces, no leading `+`.
                if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(malformed());
                }
                let addr = IpAddr::from_str(addr).map_err(|_| malformed())?;
                let prefix: u8 = prefix.parse().map_err(|_| malformed())?;
                (addr, Some(prefix))
            }
            None => (IpAddr::from_str(text).map_err(|_| malformed())?, None),
        };
        let addr = canonical(addr);
        let width = bits(addr);
        let prefix = prefix.unwrap_or(width);
        if prefix > width {
            return Err(IpNetError::PrefixTooLong(s.to_owned(), width));
        }
        let net = IpNet {
            addr: network(addr, prefix),
            prefix,
        };
        if net.addr != addr {
            return Err(IpNetError::HostBits(s.to_owned(), net));
        }
        Ok(net)
    }
}

impl fmt::Display for IpNet {
    /// A single address prints bare; a block prints as `addr/prefix`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.prefix == bits(self.addr) {
            write!(f, "{}", self.addr)
        } else {
            write!(f, "{}/{}", self.addr, self.prefix)
        }
    }
}

/// Who may call an endpoint: anyone, or sources inside one of the listed blocks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceFilter(Option<Vec<IpNet>>);

impl SourceFilter {
    /// Any source.
    pub fn any() -> Self {
        Self(None)
    }

    pub fn only(nets: Vec<IpNet>) -> Self {
        Self(Some(nets))
    }

    pub fn allows(&self, ip: IpAddr) -> bool {
        match &self.0 {
            None => true,
            Some(nets) => nets.iter().any(|n| n.contains(ip)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn addresses_and_blocks_parse_and_print_canonically() {
        assert_eq!(net("192.0.2.7").to_string(), "192.0.2.7");
        assert_eq!(net("192.0.2.7/32").to_string(), "192.0.2.7");
        assert_eq!(net(" 10.0.0.0/8 ").to_string(), "10.0.0.0/8");
        assert_eq!(net("2001:DB8::/32").to_string(), "2001:db8::/32");
        assert_eq!(net("0.0.0.0/0").to_string(), "0.0.0.0/0");
        assert_eq!(net("::/0").to_string(), "::/0");
        // A mapped IPv4 address is the IPv4 address.
        assert_eq!(net("::ffff:192.0.2.7").to_string(), "192.0.2.7");
    }

    #[test]
    fn nonsense_is_refused_with_the_reason() {
        for bad in [
            "",
            "example.com",
            "10.0.0.0/",
            "10.0.0.0/-1",
            "10.0.0.0/+8",
            "10.0.0.0/ 8",
            "10.0.0/8",
            "300.0.0.1",
            "10.0.0.0/8/8",
            "1.2.3.4:5060",
        ] {
            assert!(
                matches!(bad.parse::<IpNet>(), Err(IpNetError::Malformed(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            "10.0.0.0/33".parse::<IpNet>(),
            Err(IpNetError::PrefixTooLong(_, 32))
        ));
        assert!(matches!(
            "2001:db8::/129".parse::<IpNet>(),
            Err(IpNetError::PrefixTooLong(_, 128))
        ));
        let Err(IpNetError::HostBits(_, block)) = "10.1.2.3/8".parse::<IpNet>() else {
            panic!("host bits accepted");
        };
        assert_eq!(block.to_string(), "10.0.0.0/8");
    }

    #[test]
    fn blocks_contain_their_addresses_only() {
        let b = net("192.0.2.0/24");
        assert!(b.contains(ip("192.0.2.0")));
        assert!(b.contains(ip("192.0.2.255")));
        assert!(b.contains(ip("::ffff:192.0.2.9")));
        assert!(!b.contains(ip("192.0.3.0")));
        assert!(!b.contains(ip("2001:db8::1")));
        let v6 = net("2001:db8:1::/48");
        assert!(v6.contains(ip("2001:db8:1:ffff::1")));
        assert!(!v6.contains(ip("2001:db8:2::1")));
        assert!(net("0.0.0.0/0").contains(ip("203.0.113.1")));
        assert!(!net("0.0.0.0/0").contains(ip("::1")));
        assert!(net("198.51.100.17").contains(ip("198.51.100.17")));
        assert!(!net("198.51.100.17").contains(ip("198.51.100.18")));
        assert!(net("0.0.0.0/1").contains(ip("127.0.0.1")));
        assert!(!net("0.0.0.0/1").contains(ip("128.0.0.1")));
    }

    #[test]
    fn filters_allow_anyone_or_the_listed_sources() {
        assert!(SourceFilter::any().allows(ip("203.0.113.1")));
        let only = SourceFilter::only(vec![net("192.0.2.0/24"), net("2001:db8::1")]);
        assert!(only.allows(ip("192.0.2.10")));
        assert!(only.allows(ip("2001:db8::1")));
        assert!(!only.allows(ip("2001:db8::2")));
        assert!(!only.allows(ip("127.0.0.1")));
        assert!(!SourceFilter::only(vec![]).allows(ip("127.0.0.1")));
    }
}
