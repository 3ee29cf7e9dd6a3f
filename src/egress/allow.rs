//! The allow-list of a task's egress ([`Rules`]) and the addresses no task reaches unless the
//! list names them exactly ([`special`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The ports a host entry without a port allows: HTTPS and HTTP.
const DEFAULT_PORTS: [u16; 2] = [443, 80];

/// Why a connection to an address is refused.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum AddrRefused {
    #[error("{kind} address {ip}")]
    Special { kind: &'static str, ip: IpAddr },
    #[error("not on the allow-list")]
    NotListed,
}

/// Why an allow-list or resolve entry cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RulesError {
    #[error("'{0}' is not a host name, *.domain, or address, with an optional :port")]
    Entry(String),
    #[error("'{0}' is not name=address (e.g. model.test=10.0.0.5)")]
    Resolve(String),
}

/// One entry of the allow-list.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    /// `api.example.com` or `api.example.com:8443`
    Name { host: String, port: Option<u16> },
    /// `*.example.com`: every name under `example.com` (not `example.com` itself)
    Suffix { suffix: String, port: Option<u16> },
    /// `203.0.113.7`, `127.0.0.1:4567`, `[::1]:4567`
    Addr { ip: IpAddr, port: Option<u16> },
}

impl Entry {
    fn parse(text: &str) -> Result<Entry, RulesError> {
        let bad = || RulesError::Entry(text.to_string());
        let t = text.trim();
        if let Ok(sa) = t.parse::<SocketAddr>() {
            return Ok(Entry::Addr {
                ip: canonical(sa.ip()),
                port: Some(sa.port()),
            });
        }
        let bare = t.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Ok(Entry::Addr {
                ip: canonical(ip),
                port: None,
            });
        }
        let (host, port) = match t.rsplit_once(':') {
            Some((h, p)) => (h, Some(p.parse::<u16>().map_err(|_| bad())?)),
            None => (t, None),
        };
        let host = normal_name(host);
        if let Some(suffix) = host.strip_prefix("*.") {
            if !is_name(suffix) {
                return Err(bad());
            }
            return Ok(Entry::Suffix {
                suffix: format!(".{suffix}"),
                port,
            });
        }
        if !is_name(&host) {
            return Err(bad());
        }
        Ok(Entry::Name { host, port })
    }

    fn port_ok(port: Option<u16>, asked: u16) -> bool {
        match port {
            Some(p) => p == asked,
            None => DEFAULT_PORTS.contains(&asked),
        }
    }

    fn names(&self, host: &str, port: u16) -> bool {
        match self {
            Entry::Name { host: h, port: p } => h == host && Entry::port_ok(*p, port),
            Entry::Suffix { suffix, port: p } => {
                host.ends_with(suffix.as_str()) && Entry::port_ok(*p, port)
            }
            Entry::Addr { .. } => false,
        }
    }
}

/// A host name as compared: lower case, without a final dot.
fn normal_name(host: &str) -> String {
    host.trim().trim_end_matches('.').to_ascii_lowercase()
}

/// Letters, digits, `-`, `_` and dots, no empty label.
fn is_name(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// An IPv4 address written as IPv6 (`::ffff:a.b.c.d`) is that IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

/// What a task reaches: the hosts its adapter needs and those the host's settings add, and
/// the names the host resolves itself (for tests and split-horizon setups).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    entries: Vec<Entry>,
    resolve: Vec<(String, IpAddr)>,
}

impl Rules {
    /// The rules of `allow` entries (the adapter's `[network] allow` and the host's
    /// `[sandbox] allow_hosts`) and `resolve` entries (`name=address`).
    pub fn new<'a>(
        allow: impl IntoIterator<Item = &'a str>,
        resolve: impl IntoIterator<Item = &'a str>,
    ) -> Result<Rules, RulesError> {
        let entries = allow
            .into_iter()
            .filter(|e| !e.trim().is_empty())
            .map(Entry::parse)
            .collect::<Result<Vec<_>, _>>()?;
        let resolve = resolve
            .into_iter()
            .filter(|e| !e.trim().is_empty())
            .map(|e| {
                let (name, addr) = e
                    .split_once('=')
                    .ok_or_else(|| RulesError::Resolve(e.to_string()))?;
                let ip: IpAddr = addr
                    .trim()
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse()
                    .map_err(|_| RulesError::Resolve(e.to_string()))?;
                let name = normal_name(name);
                if !is_name(&name) {
                    return Err(RulesError::Resolve(e.to_string()));
                }
                Ok((name, canonical(ip)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Rules { entries, resolve })
    }

    /// No entry at all: nothing is reachable.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The address the settings give `host`, if any.
    pub fn resolved(&self, host: &str) -> Option<IpAddr> {
        let host = normal_name(host);
        self.resolve
            .iter()
            .find(|(n, _)| *n == host)
            .map(|(_, ip)| *ip)
    }

    /// Whether the list names `host` (a name, not an address) at `port`.
    pub fn allows_name(&self, host: &str, port: u16) -> bool {
        let host = normal_name(host);
        self.entries.iter().any(|e| e.names(&host, port))
    }

    /// Whether the list names exactly this address and port.
    fn names_exactly(&self, ip: IpAddr, port: u16) -> bool {
        let ip = canonical(ip);
        self.entries
            .iter()
            .any(|e| matches!(e, Entry::Addr { ip: i, port: Some(p) } if *i == ip && *p == port))
    }

    /// Whether a connection to `ip:port` may be made: a special address ([`special`]) only
    /// when the list names it with its port; any other address when the name it came from
    /// was allowed (`by_name`) or the list names the address.
    pub fn check_addr(&self, ip: IpAddr, port: u16, by_name: bool) -> Result<(), AddrRefused> {
        let ip = canonical(ip);
        if let Some(kind) = special(ip) {
            return if self.names_exactly(ip, port) {
                Ok(())
            } else {
                Err(AddrRefused::Special { kind, ip })
            };
        }
        let listed = self.entries.iter().any(
            |e| matches!(e, Entry::Addr { ip: i, port: p } if *i == ip && Entry::port_ok(*p, port)),
        );
        if by_name || listed {
            Ok(())
        } else {
            Err(AddrRefused::NotListed)
        }
    }

    /// The loopback addresses the list names with a port: the relay inside the sandbox
    /// listens on each too, for programs that never use a proxy for loopback.
    pub fn loopback_forwards(&self) -> Vec<SocketAddr> {
        self.entries
            .iter()
            .filter_map(|e| match e {
                Entry::Addr { ip, port: Some(p) } if ip.is_loopback() => {
                    Some(SocketAddr::new(*ip, *p))
                }
                _ => None,
            })
            .collect()
    }

    /// The entries, as written in the settings (for logs and reports).
    pub fn describe(&self) -> Vec<String> {
        let port = |p: &Option<u16>| p.map(|p| format!(":{p}")).unwrap_or_default();
        self.entries
            .iter()
            .map(|e| match e {
                Entry::Name { host, port: p } => format!("{host}{}", port(p)),
                Entry::Suffix { suffix, port: p } => format!("*{suffix}{}", port(p)),
                Entry::Addr { ip, port: Some(p) } => SocketAddr::new(*ip, *p).to_string(),
                Entry::Addr { ip, port: None } => ip.to_string(),
            })
            .collect()
    }
}

/// What kind of address no task reaches by default, or `None` for a public one: loopback,
/// private, link-local (the cloud metadata address among them), shared (CGNAT), multicast,
/// unspecified, broadcast, reserved; for IPv6 also unique-local, and IPv4 addresses inside
/// IPv6 ones (mapped, compatible, NAT64, 6to4) by their IPv4 address.
pub fn special(ip: IpAddr) -> Option<&'static str> {
    match canonical(ip) {
        IpAddr::V4(v4) => special_v4(v4),
        IpAddr::V6(v6) => special_v6(v6),
    }
}

fn special_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    let kind = if ip == Ipv4Addr::new(169, 254, 169, 254) {
        "cloud metadata"
    } else if ip.is_loopback() {
        "loopback"
    } else if ip.is_unspecified() || o[0] == 0 {
        "unspecified"
    } else if ip.is_private() {
        "private"
    } else if ip.is_link_local() {
        "link-local"
    } else if o[0] == 100 && (o[1] & 0xc0) == 64 {
        "shared (CGNAT)"
    } else if ip.is_multicast() {
        "multicast"
    } else if ip.is_broadcast() || o[0] >= 240 {
        "reserved"
    } else if (o[0] == 192 && o[1] == 0 && o[2] == 0) || (o[0] == 198 && (o[1] & 0xfe) == 18) {
        "special-purpose"
    } else {
        return None;
    };
    Some(kind)
}

fn special_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    let v4_at =
        |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    if ip.is_loopback() {
        return Some("loopback");
    }
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    // ::a.b.c.d (IPv4-compatible, deprecated) reaches the IPv4 address it carries; so do
    // 64:ff9b::a.b.c.d (NAT64) and 2002:AABB:CCDD:: (6to4).
    if s[..6] == [0; 6] {
        return special_v4(v4_at(s[6], s[7])).or(Some("IPv4-compatible"));
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return special_v4(v4_at(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        return special_v4(v4_at(s[1], s[2]));
    }
    let kind = match s[0] {
        x if x & 0xfe00 == 0xfc00 => "unique-local",
        x if x & 0xffc0 == 0xfe80 => "link-local",
        x if x & 0xffc0 == 0xfec0 => "site-local",
        x if x & 0xff00 == 0xff00 => "multicast",
        _ => return None,
    };
    Some(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn special_addresses_of_both_families() {
        for (a, kind) in [
            ("127.0.0.1", "loopback"),
            ("127.8.9.10", "loopback"),
            ("10.1.2.3", "private"),
            ("172.16.0.1", "private"),
            ("192.168.1.1", "private"),
            ("169.254.169.254", "cloud metadata"),
            ("169.254.1.1", "link-local"),
            ("100.64.0.1", "shared (CGNAT)"),
            ("100.127.255.255", "shared (CGNAT)"),
            ("224.0.0.1", "multicast"),
            ("0.0.0.0", "unspecified"),
            ("255.255.255.255", "reserved"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:169.254.169.254", "cloud metadata"),
            ("::10.0.0.1", "private"),
            ("64:ff9b::a9fe:a9fe", "cloud metadata"),
            ("2002:7f00:1::", "loopback"),
            ("fd00:ec2::254", "unique-local"),
            ("fc00::1", "unique-local"),
            ("fe80::1", "link-local"),
            ("ff02::1", "multicast"),
        ] {
            assert_eq!(special(ip(a)), Some(kind), "{a}");
        }
        for a in [
            "1.1.1.1",
            "100.128.0.1",
            "172.32.0.1",
            "2606:4700::1111",
            "64:ff9b::101:101",
        ] {
            assert_eq!(special(ip(a)), None, "{a}");
        }
    }

    #[test]
    fn names_ports_and_wildcards() {
        let r = Rules::new(
            [
                "api.anthropic.com",
                "*.googleapis.com",
                "model.test:8443",
                "API.Example.COM.",
            ],
            [],
        )
        .unwrap();
        assert!(r.allows_name("api.anthropic.com", 443));
        assert!(r.allows_name("API.ANTHROPIC.COM.", 80));
        assert!(!r.allows_name("api.anthropic.com", 22));
        assert!(!r.allows_name("evil-api.anthropic.com", 443));
        assert!(!r.allows_name("anthropic.com", 443));
        assert!(r.allows_name("generativelanguage.googleapis.com", 443));
        assert!(!r.allows_name("googleapis.com", 443));
        assert!(!r.allows_name("googleapis.com.evil.net", 443));
        assert!(r.allows_name("model.test", 8443));
        assert!(!r.allows_name("model.test", 443));
        assert!(r.allows_name("api.example.com", 443));
        assert!(r.loopback_forwards().is_empty());
    }

    #[test]
    fn special_addresses_need_their_exact_address_and_port() {
        let r = Rules::new(
            [
                "model.test",
                "127.0.0.1:4567",
                "10.231.0.2:8080",
                "203.0.113.9",
            ],
            ["model.test=10.231.0.2"],
        )
        .unwrap();
        // A listed name that resolves to a private address: refused but for the listed port.
        assert!(r.check_addr(ip("10.231.0.2"), 443, true).is_err());
        assert!(r.check_addr(ip("10.231.0.2"), 8080, true).is_ok());
        assert!(r.check_addr(ip("127.0.0.1"), 4567, false).is_ok());
        assert!(r.check_addr(ip("::ffff:127.0.0.1"), 4567, false).is_ok());
        assert!(r.check_addr(ip("127.0.0.1"), 5432, true).is_err());
        assert!(r.check_addr(ip("127.0.0.2"), 4567, false).is_err());
        assert!(r.check_addr(ip("169.254.169.254"), 80, true).is_err());
        // Public addresses: by an allowed name, or listed.
        assert!(r.check_addr(ip("1.1.1.1"), 443, true).is_ok());
        assert!(r.check_addr(ip("1.1.1.1"), 443, false).is_err());
        assert!(r.check_addr(ip("203.0.113.9"), 443, false).is_ok());
        assert_eq!(r.resolved("MODEL.test."), Some(ip("10.231.0.2")));
        assert_eq!(
            r.loopback_forwards(),
            vec!["127.0.0.1:4567".parse().unwrap()]
        );
        assert_eq!(
            r.describe(),
            [
                "model.test",
                "127.0.0.1:4567",
                "10.231.0.2:8080",
                "203.0.113.9"
            ]
        );
    }

    #[test]
    fn bad_entries_are_refused() {
        for bad in [
            "",
            "a b",
            "x:notaport",
            "*.",
            "http://x.com",
            "a..b",
            "*.*.x",
        ] {
            if bad.is_empty() {
                assert!(Rules::new([bad], []).unwrap().is_empty());
                continue;
            }
            assert!(Rules::new([bad], []).is_err(), "{bad}");
        }
        assert!(Rules::new([], ["x.test"]).is_err());
        assert!(Rules::new([], ["x.test=notanip"]).is_err());
    }
}
