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
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    let seg = ip.segments();
    // NAT64 (64:ff9b::/96) carries an IPv4 address.
    if seg[0] == 0x64 && seg[1] == 0xff9b && seg[2..6] == [0, 0, 0, 0] {
        let v4 = Ipv4Addr::new(
            (seg[6] >> 8) as u8,
            seg[6] as u8,
            (seg[7] >> 8) as u8,
            seg[7] as u8,
        );
        return is_public_v4(v4);
    }
    let blocked = ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (seg[0] & 0xfe00) == 0xfc00 // unique local
        || (seg[0] & 0xffc0) == 0xfe80 // link-local
        || (seg[0] & 0xffc0) == 0xfec0 // site-local
        || (seg[0] == 0x2001 && seg[1] == 0x0db8) // documentation
        || seg[0..6] == [0, 0, 0, 0, 0, 0]; // IPv4-compatible (deprecated)
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
