//! Webhook URLs must not reach into the host's own network (SSRF): http(s) only, and no
//! loopback, private, link-local (cloud metadata), multicast or reserved address, unless
//! `push.allow_private` is set. Checked when a config is stored and again at every delivery,
//! after DNS resolution, inside the HTTP client's resolver, so a name cannot be re-pointed
//! between the check and the connection.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use reqwest::Url;

/// True for an address a webhook may be sent to without `allow_private`.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    let blocked = ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local() // 169.254/16, cloud metadata among them
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_documentation()
        || a == 0 // "this network"
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240; // reserved
    !blocked
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    match embedded_v4(ip) {
        Embedded::V4(v4) => return is_public_v4(v4),
        Embedded::Teredo { server, client } => return is_public_v4(server) && is_public_v4(client),
        Embedded::Blocked => return false,
        Embedded::None => {}
    }
    let seg = ip.segments();
    let blocked = ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (seg[0] & 0xfe00) == 0xfc00 // unique local
        || (seg[0] & 0xffc0) == 0xfe80 // link-local
        || (seg[0] & 0xffc0) == 0xfec0 // site-local
        || (seg[0] == 0x2001 && seg[1] == 0x0db8) // documentation
        || (seg[0] == 0x0100 && seg[1..4] == [0, 0, 0]) // discard-only 100::/64
        || (seg[0] == 0x2001 && seg[1] == 0x0002 && seg[2] == 0) // benchmarking 2001:2::/48
        || (seg[0] == 0x2001 && (seg[1] & 0xffe0) == 0x0020) // ORCHIDv2 2001:20::/28
        || (seg[0] == 0x2001 && (seg[1] & 0xfff0) == 0x0010); // ORCHID 2001:10::/28
    !blocked
}

/// Why a webhook URL is refused.
#[derive(Debug, thiserror::Error)]
pub enum UrlError {
    #[error("url '{url}' is not a valid URL: {source}")]
    Invalid {
        url: String,
        #[source]
        source: url::ParseError,
    },
    #[error("url scheme '{0}' is not allowed: use http or https")]
    Scheme(String),
    #[error("url has no host")]
    NoHost,
    #[error("url must not carry credentials; use the authentication field")]
    Credentials,
    #[error(
        "url host '{host}' resolves to {ip}, a loopback, private, link-local or reserved address; \
         such callbacks are refused unless push.allow_private is set"
    )]
    NotPublic { host: String, ip: IpAddr },
    #[error("url host '{host}' cannot be resolved: {source}")]
    Resolve {
        host: String,
        #[source]
        source: std::io::Error,
    },
    #[error("url host '{host}' resolves to no address")]
    NoAddress { host: String },
}

/// What an IPv6 address says about an IPv4 one it carries.
#[derive(Debug, PartialEq)]
enum Embedded {
    /// Not a form that carries an IPv4 address.
    None,
    /// Reaches (or is translated to) this IPv4 address.
    V4(Ipv4Addr),
    /// Teredo (2001::/32): the relay server and the client (stored inverted).
    Teredo { server: Ipv4Addr, client: Ipv4Addr },
    /// A form refused whatever it carries.
    Blocked,
}

fn v4(hi: u16, lo: u16) -> Ipv4Addr {
    Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8)
}

/// Every IPv6 form that maps to an IPv4 address, so that a blocked IPv4 range cannot be
/// reached by writing it in IPv6: IPv4-mapped (`::ffff:a.b.c.d`), IPv4-translated
/// (`::ffff:0:a.b.c.d`, RFC 2765), 6to4 (`2002:AABB:CCDD::/48`), the NAT64 well-known
/// prefix (`64:ff9b::/96`) and Teredo (`2001:0::/32`, client address inverted).
/// IPv4-compatible (`::a.b.c.d`, deprecated) and the local-use NAT64 prefix
/// (`64:ff9b:1::/48`, RFC 8215: translated by a local gateway, so to anything) are refused
/// outright.
fn embedded_v4(ip: Ipv6Addr) -> Embedded {
    let s = ip.segments();
    match s {
        [0, 0, 0, 0, 0, 0xffff, hi, lo] => Embedded::V4(v4(hi, lo)),
        [0, 0, 0, 0, 0xffff, 0, hi, lo] => Embedded::V4(v4(hi, lo)),
        // `::` and `::1` are handled as themselves.
        [0, 0, 0, 0, 0, 0, 0, 0 | 1] => Embedded::None,
        [0, 0, 0, 0, 0, 0, _, _] => Embedded::Blocked,
        [0x2002, hi, lo, ..] => Embedded::V4(v4(hi, lo)),
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => Embedded::V4(v4(hi, lo)),
        [0x64, 0xff9b, 1, ..] => Embedded::Blocked,
        [0x2001, 0, shi, slo, _, _, chi, clo] => Embedded::Teredo {
            server: v4(shi, slo),
            client: v4(!chi, !clo),
        },
        _ => Embedded::None,
    }
}

/// Checks a webhook URL: its form, and (unless `allow_private`) every address its host
/// resolves to. The error says what is wrong.
pub async fn check_url(raw: &str, allow_private: bool) -> Result<Url, UrlError> {
    let url = Url::parse(raw).map_err(|source| UrlError::Invalid {
        url: raw.to_string(),
        source,
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(UrlError::Scheme(url.scheme().to_string()));
    }
    let host = url
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or(UrlError::NoHost)?
        .to_string();
    if !url.username().is_empty() || url.password().is_some() {
        return Err(UrlError::Credentials);
    }
    if allow_private {
        return Ok(url);
    }
    let port = url.port_or_known_default().unwrap_or(80);
    let addrs = resolve(&host, port).await?;
    if let Some(bad) = addrs.iter().find(|a| !is_public(a.ip())) {
        return Err(UrlError::NotPublic { host, ip: bad.ip() });
    }
    Ok(url)
}

async fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>, UrlError> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((bare, port))
        .await
        .map_err(|source| UrlError::Resolve {
            host: host.to_string(),
            source,
        })?
        .collect();
    if addrs.is_empty() {
        return Err(UrlError::NoAddress {
            host: host.to_string(),
        });
    }
    Ok(addrs)
}

/// The HTTP client's resolver: resolves and drops every address that is not public (all of
/// them allowed with `allow_private`).
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    pub allow_private: bool,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow = self.allow_private;
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs = resolve(&host, 0)
                .await
                .map_err(|e| -> Box<dyn std::error::Error + Send + Sync> { e.into() })?;
            let kept: Vec<SocketAddr> = addrs
                .into_iter()
                .filter(|a| allow || is_public(a.ip()))
                .collect();
            if kept.is_empty() {
                return Err(format!("{host} resolves only to non-public addresses").into());
            }
            Ok(Box::new(kept.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// A resolver for the webhook client.
pub fn resolver(allow_private: bool) -> Arc<GuardedResolver> {
    Arc::new(GuardedResolver { allow_private })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_classes() {
        for bad in [
            "127.0.0.1",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fc00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::7f00:1",
            "2001:db8::1",
        ] {
            assert!(!is_public(bad.parse().unwrap()), "{bad}");
        }
        // Every IPv6 form of a blocked IPv4 address is blocked; the same forms of a
        // public one are allowed (IPv4-compatible and local NAT64 are refused whatever).
        for (v4s, public) in [
            ("127.0.0.1", false),
            ("10.1.2.3", false),
            ("169.254.169.254", false),
            ("192.168.0.1", false),
            ("8.8.8.8", true),
        ] {
            let a: Ipv4Addr = v4s.parse().unwrap();
            let [hi, lo] = [
                u16::from_be_bytes([a.octets()[0], a.octets()[1]]),
                u16::from_be_bytes([a.octets()[2], a.octets()[3]]),
            ];
            let forms = [
                format!("::ffff:{v4s}"),
                format!("::ffff:0:{v4s}"),
                format!("2002:{hi:x}:{lo:x}::1"),
                format!("64:ff9b::{v4s}"),
                // Teredo: as the relay server, and as the (inverted) client address.
                format!("2001:0:{hi:x}:{lo:x}:0:0:f7f7:f7f7"),
                format!("2001:0:808:808:0:0:{:x}:{:x}", !hi, !lo),
            ];
            for f in &forms {
                let ip: Ipv6Addr = f.parse().unwrap();
                assert_eq!(is_public(IpAddr::V6(ip)), public, "{f} ({v4s})");
            }
            assert!(!is_public(format!("::{v4s}").parse().unwrap()), "::{v4s}");
            assert!(!is_public(format!("64:ff9b:1::{v4s}").parse().unwrap()));
        }
        // The forms the issue found accepted.
        for f in ["::ffff:0:7f00:1", "2002:7f00:1::1"] {
            assert!(!is_public(f.parse().unwrap()), "{f}");
        }
        for good in [
            "8.8.8.8",
            "1.1.1.1",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(is_public(good.parse().unwrap()), "{good}");
        }
    }

    #[tokio::test]
    async fn probes_are_refused_without_allow_private() {
        for url in [
            "http://127.0.0.1:9/hook",
            "http://10.0.0.1/hook",
            "http://169.254.169.254/latest/meta-data",
            "http://[::1]:9/hook",
            "http://localhost:9/hook",
            "file:///etc/passwd",
            "gopher://example.com/",
            "http://user:pw@example.com/",
            "not a url",
        ] {
            let err = check_url(url, false).await.unwrap_err().to_string();
            assert!(err.contains("url"), "{url}: {err}");
        }
        assert!(check_url("http://127.0.0.1:9/hook", true).await.is_ok());
        assert!(check_url("ftp://127.0.0.1/", true).await.is_err());
        assert!(check_url("http://8.8.8.8/hook", false).await.is_ok());
    }
}
