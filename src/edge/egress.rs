//! The outbound URL policy: every request the service sends to a URL a workspace supplied goes
//! through [`Egress`], so a webhook can never be turned against the service's own network.
//!
//! - Only `http` and `https`, without credentials in the URL.
//! - Host names: `localhost` (and `*.localhost`), cloud metadata names and single-label names
//!   are refused; other names are resolved, and refused if **any** answer is not a global
//!   address (a mixed public/private answer is refused whole).
//! - Addresses, in any spelling the URL parser accepts (decimal, octal and hex IPv4, IPv6,
//!   IPv4-mapped, NAT64, 6to4, ...), must be global: loopback, private, CGNAT, link-local,
//!   unique-local, multicast, documentation, benchmarking and reserved ranges are refused, and
//!   addresses embedded in IPv6 forms are checked as the IPv4 address they carry.
//! - The request connects to the addresses that were checked (the client is pinned to them,
//!   so a second DNS answer cannot rebind it), through no proxy, and never follows a redirect.
//!
//! An operator may allow listed ranges (`--egress-allow`, empty by default), for webhooks on a
//! private network; the tests use it to reach servers on loopback.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::Url;
use switchboard_sip::acl::IpNet;

/// Why a URL may not be called.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EgressError {
    #[error("the URL is not valid: {0}")]
    Invalid(String),
    #[error("only http and https URLs are allowed")]
    Scheme,
    #[error("URLs with credentials are not allowed")]
    Credentials,
    #[error("the host {0} is not allowed")]
    Host(String),
    #[error("the address {0} is not a public address")]
    Address(IpAddr),
    #[error("the host {0} does not resolve")]
    Unresolved(String),
}

/// Resolves host names (the system resolver in service; a table in tests).
#[async_trait]
pub trait Resolve: Send + Sync + 'static {
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>>;
}

/// The system resolver.
pub struct SystemResolver;

#[async_trait]
impl Resolve for SystemResolver {
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        Ok(tokio::net::lookup_host((host, port)).await?.collect())
    }
}

/// A URL that passed the policy, with the addresses to connect to.
#[derive(Debug, Clone)]
pub struct CheckedUrl {
    pub url: Url,
    /// The host name, when the URL has one (not an address).
    pub domain: Option<String>,
    pub addrs: Vec<SocketAddr>,
}

/// The policy, with the operator's allowed ranges.
#[derive(Clone)]
pub struct Egress {
    allow: Arc<Vec<IpNet>>,
    resolver: Arc<dyn Resolve>,
}

/// Host names that reach cloud instance metadata, whatever they resolve to here.
const METADATA_HOSTS: [&str; 6] = [
    "metadata",
    "metadata.google.internal",
    "metadata.goog",
    "metadata.azure.com",
    "instance-data",
    "instance-data.ec2.internal",
];

impl Egress {
    pub fn new(allow: Vec<IpNet>, resolver: Arc<dyn Resolve>) -> Egress {
        Egress {
            allow: Arc::new(allow),
            resolver,
        }
    }

    /// The default policy with the system resolver.
    pub fn system(allow: Vec<IpNet>) -> Egress {
        Egress::new(allow, Arc::new(SystemResolver))
    }

    fn address_allowed(&self, ip: IpAddr) -> bool {
        let ip = switchboard_sip::acl::canonical(ip);
        is_global(ip) || self.allow.iter().any(|net| net.contains(ip))
    }

    /// Checks a URL's form and host without resolving it (what can be said at save time
    /// about a literal address).
    pub fn check_form(&self, raw: &str) -> Result<Url, EgressError> {
        let url = Url::parse(raw.trim()).map_err(|e| EgressError::Invalid(e.to_string()))?;
        if url.scheme() != "http" && url.scheme() != "https" {
            return Err(EgressError::Scheme);
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(EgressError::Credentials);
        }
        match url.host() {
            None => return Err(EgressError::Invalid("the URL has no host".into())),
            Some(url::Host::Ipv4(v4)) => {
                if !self.address_allowed(IpAddr::V4(v4)) {
                    return Err(EgressError::Address(IpAddr::V4(v4)));
                }
            }
            Some(url::Host::Ipv6(v6)) => {
                if !self.address_allowed(IpAddr::V6(v6)) {
                    return Err(EgressError::Address(IpAddr::V6(v6)));
                }
            }
            Some(url::Host::Domain(name)) => {
                let name = name.trim_end_matches('.').to_ascii_lowercase();
                if name == "localhost"
                    || name.ends_with(".localhost")
                    || METADATA_HOSTS.contains(&name.as_str())
                    || !name.contains('.')
                    || name.ends_with(".internal")
                    || name.ends_with(".local")
                {
                    return Err(EgressError::Host(name));
                }
            }
        }
        Ok(url)
    }

    /// Checks a URL completely: its form, then every address its host resolves to.
    pub async fn check(&self, raw: &str) -> Result<CheckedUrl, EgressError> {
        let url = self.check_form(raw)?;
        let port = url.port_or_known_default().unwrap_or(80);
        match url.host() {
            Some(url::Host::Domain(name)) => {
                let name = name.trim_end_matches('.').to_string();
                let addrs = self
                    .resolver
                    .resolve(&name, port)
                    .await
                    .map_err(|_| EgressError::Unresolved(name.clone()))?;
                if addrs.is_empty() {
                    return Err(EgressError::Unresolved(name));
                }
                if let Some(bad) = addrs.iter().find(|a| !self.address_allowed(a.ip())) {
                    return Err(EgressError::Address(bad.ip()));
                }
                Ok(CheckedUrl {
                    url,
                    domain: Some(name),
                    addrs,
                })
            }
            Some(url::Host::Ipv4(v4)) => Ok(CheckedUrl {
                addrs: vec![SocketAddr::new(IpAddr::V4(v4), port)],
                url,
                domain: None,
            }),
            Some(url::Host::Ipv6(v6)) => Ok(CheckedUrl {
                addrs: vec![SocketAddr::new(IpAddr::V6(v6), port)],
                url,
                domain: None,
            }),
            None => Err(EgressError::Invalid("the URL has no host".into())),
        }
    }

    /// A client for one checked URL: connects only to its checked addresses, through no
    /// proxy, following no redirect.
    pub fn client(
        &self,
        checked: &CheckedUrl,
        timeout: Duration,
    ) -> reqwest::Result<reqwest::Client> {
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(timeout)
            .user_agent("Switchboard-Webhook/1");
        if let Some(domain) = &checked.domain {
            builder = builder.resolve_to_addrs(domain, &checked.addrs);
        }
        builder.build()
    }
}

fn v4_in(ip: Ipv4Addr, net: [u8; 4], prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    };
    (u32::from(ip) & mask) == (u32::from(Ipv4Addr::from(net)) & mask)
}

/// Whether an IPv4 address is globally routable.
pub fn is_global_v4(ip: Ipv4Addr) -> bool {
    const BLOCKED: [([u8; 4], u32); 17] = [
        ([0, 0, 0, 0], 8),       // "this network"
        ([10, 0, 0, 0], 8),      // private
        ([100, 64, 0, 0], 10),   // CGNAT
        ([127, 0, 0, 0], 8),     // loopback
        ([169, 254, 0, 0], 16),  // link-local (cloud metadata)
        ([172, 16, 0, 0], 12),   // private
        ([192, 0, 0, 0], 24),    // IETF protocol assignments
        ([192, 0, 2, 0], 24),    // TEST-NET-1
        ([192, 31, 196, 0], 24), // AS112
        ([192, 52, 193, 0], 24), // AMT
        ([192, 88, 99, 0], 24),  // 6to4 relay anycast
        ([192, 168, 0, 0], 16),  // private
        ([192, 175, 48, 0], 24), // direct delegation AS112
        ([198, 18, 0, 0], 15),   // benchmarking
        ([198, 51, 100, 0], 24), // TEST-NET-2
        ([203, 0, 113, 0], 24),  // TEST-NET-3
        ([224, 0, 0, 0], 3),     // multicast, reserved, broadcast (224/4 and 240/4)
    ];
    !BLOCKED.iter().any(|(net, p)| v4_in(ip, *net, *p))
}

/// Whether an address is globally routable; IPv6 forms that carry an IPv4 address are judged
/// by that address.
pub fn is_global(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_global_v4(v4),
        IpAddr::V6(v6) => is_global_v6(v6),
    }
}

fn is_global_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    let embedded =
        |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    // IPv4-mapped ::ffff:a.b.c.d and IPv4-compatible ::a.b.c.d (deprecated): never sent as such.
    if s[..5] == [0, 0, 0, 0, 0] && (s[5] == 0xffff || s[5] == 0) {
        return false;
    }
    // NAT64 well-known prefix 64:ff9b::/96: the IPv4 address it translates to.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return is_global_v4(embedded(s[6], s[7]));
    }
    // Local-use NAT64 64:ff9b:1::/48.
    if s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1 {
        return false;
    }
    // 6to4 2002::/16: the IPv4 address in bits 16-48.
    if s[0] == 0x2002 {
        return is_global_v4(embedded(s[1], s[2]));
    }
    // Teredo 2001::/32 embeds addresses we cannot vouch for.
    if s[0] == 0x2001 && s[1] == 0 {
        return false;
    }
    // Prefixes over the first 64 bits: (first four segments, prefix length).
    let blocked: [([u16; 4], u32); 9] = [
        ([0, 0, 0, 0], 16),           // ::/16 (unspecified, loopback, other reserved)
        ([0x0100, 0, 0, 0], 16),      // 100::/64 discard (and the rest of 100::/16, unassigned)
        ([0x2001, 0x0db8, 0, 0], 32), // documentation
        ([0x2001, 0x0010, 0, 0], 28), // ORCHID
        ([0x2001, 0x0020, 0, 0], 28), // ORCHIDv2
        ([0x2001, 0x0002, 0, 0], 48), // benchmarking
        ([0xfc00, 0, 0, 0], 7),       // unique-local
        ([0xfe80, 0, 0, 0], 9),       // link-local fe80::/10 and site-local fec0::/10
        ([0xff00, 0, 0, 0], 8),       // multicast
    ];
    let top = |x: [u16; 4]| {
        x.iter()
            .fold(0u64, |acc, seg| (acc << 16) | u64::from(*seg))
    };
    let addr = top([s[0], s[1], s[2], s[3]]);
    !blocked.iter().any(|(net, p)| {
        let mask = u64::MAX << (64 - p);
        addr & mask == top(*net) & mask
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// A resolver answering from a table.
    struct Table(HashMap<&'static str, Vec<&'static str>>);

    #[async_trait]
    impl Resolve for Table {
        async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
            let ips = self
                .0
                .get(host)
                .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "nxdomain"))?;
            Ok(ips
                .iter()
                .map(|ip| SocketAddr::new(ip.parse().unwrap(), port))
                .collect())
        }
    }

    fn policy(allow: &[&str]) -> Egress {
        let table = Table(HashMap::from([
            ("public.example.com", vec!["93.184.216.34"]),
            (
                "public6.example.com",
                vec!["2606:2800:220:1:248:1893:25c8:1946"],
            ),
            ("loopback.example.com", vec!["127.0.0.1"]),
            ("private.example.com", vec!["10.1.2.3"]),
            ("mixed.example.com", vec!["93.184.216.34", "192.168.1.10"]),
            ("metadata.example.com", vec!["169.254.169.254"]),
            ("ula.example.com", vec!["fd00::1"]),
            ("mapped.example.com", vec!["::ffff:127.0.0.1"]),
            ("cgnat.example.com", vec!["100.64.0.1"]),
            ("zero.example.com", vec!["0.0.0.0"]),
            ("empty.example.com", vec![]),
        ]));
        Egress::new(
            allow.iter().map(|a| a.parse().unwrap()).collect(),
            Arc::new(table),
        )
    }

    /// Every way of naming a place the service must not reach. Each is refused.
    const ATTACKS: [&str; 62] = [
        // Loopback, spelled every way the URL parser accepts.
        "http://127.0.0.1/hook",
        "http://127.1/",
        "http://127.0.1/",
        "http://2130706433/",
        "http://0x7f000001/",
        "http://0x7f.0x0.0x0.0x1/",
        "http://0177.0.0.1/",
        "http://017700000001/",
        "http://127.000.000.001/",
        "http://[::1]/",
        "http://[0:0:0:0:0:0:0:1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::ffff:7f00:1]/",
        "http://[::127.0.0.1]/",
        "http://[64:ff9b::127.0.0.1]/",
        "http://[64:ff9b::7f00:1]/",
        "http://[2002:7f00:1::]/",
        "http://localhost/",
        "http://LOCALHOST:8080/",
        "http://api.localhost/",
        "http://localhost./",
        // This host, unspecified.
        "http://0.0.0.0/",
        "http://0/",
        "http://[::]/",
        // Private, CGNAT, link-local and metadata.
        "http://10.0.0.1/",
        "http://172.16.5.4/",
        "http://172.31.255.255/",
        "http://192.168.0.1/",
        "http://100.64.0.1/",
        "http://100.127.255.254/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://metadata/",
        "http://instance-data/",
        "http://[::ffff:169.254.169.254]/",
        "http://[64:ff9b::a9fe:a9fe]/",
        "http://[2002:a9fe:a9fe::]/",
        "http://[2002:c0a8:0101::]/",
        // Unique-local, link-local, site-local, multicast, broadcast, reserved.
        "http://[fc00::1]/",
        "http://[fe80::1]/",
        "http://[fec0::1]/",
        "http://[ff02::1]/",
        "http://224.0.0.1/",
        "http://239.255.255.250/",
        "http://255.255.255.255/",
        "http://240.0.0.1/",
        // Documentation, benchmarking, Teredo, discard.
        "http://192.0.2.1/",
        "http://198.51.100.7/",
        "http://203.0.113.9/",
        "http://198.18.0.1/",
        "http://[2001:db8::1]/",
        "http://[2001::1]/",
        "http://[100::1]/",
        // Names resolving to private addresses, and mixed answers.
        "http://loopback.example.com/",
        "http://private.example.com/",
        "http://mixed.example.com/",
        "http://metadata.example.com/",
        "http://ula.example.com/",
        "http://mapped.example.com/",
        "http://cgnat.example.com/",
        "http://zero.example.com/",
    ];

    #[tokio::test]
    async fn every_attack_url_is_refused() {
        let egress = policy(&[]);
        for url in ATTACKS {
            let result = egress.check(url).await;
            // Refused for what it points at, not because the parser gave up on it.
            assert!(
                matches!(result, Err(EgressError::Address(_) | EgressError::Host(_))),
                "{url}: {result:?}"
            );
        }
    }

    #[tokio::test]
    async fn other_schemes_credentials_and_unresolvable_names_are_refused() {
        let egress = policy(&[]);
        for url in [
            "ftp://public.example.com/",
            "file:///etc/passwd",
            "gopher://public.example.com/",
            "javascript:alert(1)",
            "http://user:pass@public.example.com/",
            "http://nowhere.example.com/",
            "http://empty.example.com/",
            "not a url",
            "http://",
        ] {
            assert!(egress.check(url).await.is_err(), "{url}");
        }
    }

    #[tokio::test]
    async fn public_hosts_pass_and_are_pinned_to_their_checked_addresses() {
        let egress = policy(&[]);
        let ok = egress
            .check("https://public.example.com/hook?x=1")
            .await
            .unwrap();
        assert_eq!(ok.domain.as_deref(), Some("public.example.com"));
        assert_eq!(ok.addrs, vec!["93.184.216.34:443".parse().unwrap()]);
        assert!(
            egress
                .check("http://public6.example.com:8080/")
                .await
                .is_ok()
        );
        assert!(egress.check("http://93.184.216.34/").await.is_ok());
        assert!(egress.check("http://[2606:4700::1111]/").await.is_ok());
        assert!(
            egress.check("http://[64:ff9b::5db8:d822]/").await.is_ok(),
            "NAT64 of a public address"
        );
    }

    #[tokio::test]
    async fn the_operator_may_allow_listed_ranges_only() {
        let egress = policy(&["127.0.0.0/8"]);
        assert!(egress.check("http://127.0.0.1:9000/hook").await.is_ok());
        assert!(egress.check("http://loopback.example.com/").await.is_ok());
        assert!(egress.check("http://10.0.0.1/").await.is_err());
        assert!(
            egress.check("http://localhost/").await.is_err(),
            "names stay refused"
        );
    }
}
