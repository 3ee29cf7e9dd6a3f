//! The settings of a host sharing its PostgreSQL store with others (docs/several-hosts.md):
//! `[cluster] host_id`, `advertise_url`, `heartbeat_ms`, `lease_ms` in the config file,
//! `AGENT_HOST_ID` / `AGENT_HOST_ADVERTISE_URL` / `AGENT_HOST_HEARTBEAT_MS` /
//! `AGENT_HOST_LEASE_MS`, and the flags of the same names. Only a PostgreSQL store uses them.

use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;

use super::{ServeArgs, SettingsError};

/// `[cluster]` of the config file.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ClusterSection {
    pub host_id: Option<String>,
    pub advertise_url: Option<String>,
    pub heartbeat_ms: Option<u64>,
    pub lease_ms: Option<u64>,
}

/// How this host takes part (with a PostgreSQL store).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    /// None: `<machine>:<bound port>` ([`ClusterSettings::host_id_for`]).
    pub host_id: Option<String>,
    /// None: `http://<bound address>` ([`ClusterSettings::address_for`]).
    pub advertise_url: Option<String>,
    /// How often the lease is renewed and dead hosts are looked for.
    pub heartbeat: Duration,
    /// How long a lease lasts without renewal.
    pub lease: Duration,
}

pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(2);
pub const DEFAULT_LEASE: Duration = Duration::from_secs(10);

impl Default for ClusterSettings {
    fn default() -> Self {
        ClusterSettings {
            host_id: None,
            advertise_url: None,
            heartbeat: DEFAULT_HEARTBEAT,
            lease: DEFAULT_LEASE,
        }
    }
}

/// This machine's name ("localhost" when it has none that is UTF-8).
pub fn machine_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

impl ClusterSettings {
    /// The host id: the configured one, else `<machine>:<port>` of the bound address (so a
    /// host restarted on the same machine and port is the same host).
    pub fn host_id_for(&self, bound: SocketAddr) -> String {
        self.host_id
            .clone()
            .unwrap_or_else(|| format!("{}:{}", machine_name(), bound.port()))
    }

    /// Where other hosts reach this one: the configured URL, else `http://<bound address>`
    /// with the machine's name for an unspecified address (0.0.0.0, ::).
    pub fn address_for(&self, bound: SocketAddr) -> String {
        if let Some(u) = &self.advertise_url {
            return u.trim_end_matches('/').to_string();
        }
        if bound.ip().is_unspecified() {
            format!("http://{}:{}", machine_name(), bound.port())
        } else {
            format!("http://{bound}")
        }
    }
}

/// Merges flags/environment over `[cluster]`, checked: a host id of printable characters
/// without spaces, an http(s) URL, a heartbeat of at least 100 ms and a lease of at least
/// two heartbeats.
pub fn resolve(
    args: &ServeArgs,
    section: &ClusterSection,
) -> Result<ClusterSettings, SettingsError> {
    let host_id = args.host_id.clone().or_else(|| section.host_id.clone());
    if let Some(id) = &host_id {
        if id.is_empty()
            || id.len() > 200
            || id.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(SettingsError::Invalid(format!(
                "host_id '{id}' must be 1 to 200 characters without spaces"
            )));
        }
    }
    let advertise_url = args
        .advertise_url
        .clone()
        .or_else(|| section.advertise_url.clone());
    if let Some(u) = &advertise_url {
        let ok = url::Url::parse(u)
            .map(|p| matches!(p.scheme(), "http" | "https") && p.host().is_some())
            .unwrap_or(false);
        if !ok {
            return Err(SettingsError::Invalid(format!(
                "advertise_url '{u}' is not an http:// or https:// URL"
            )));
        }
    }
    let heartbeat = args
        .heartbeat_ms
        .or(section.heartbeat_ms)
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_HEARTBEAT);
    let lease = args
        .lease_ms
        .or(section.lease_ms)
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_LEASE);
    if heartbeat < Duration::from_millis(100) {
        return Err(SettingsError::Invalid(
            "heartbeat_ms must be at least 100".into(),
        ));
    }
    if lease < heartbeat * 2 {
        return Err(SettingsError::Invalid(format!(
            "lease_ms ({}) must be at least twice heartbeat_ms ({}): a host must be able to miss a heartbeat without losing its tasks",
            lease.as_millis(),
            heartbeat.as_millis()
        )));
    }
    Ok(ClusterSettings {
        host_id,
        advertise_url,
        heartbeat,
        lease,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_flags_and_checks() {
        let s = resolve(&ServeArgs::default(), &ClusterSection::default()).unwrap();
        assert_eq!(s, ClusterSettings::default());
        let bound: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        assert_eq!(s.host_id_for(bound), format!("{}:4000", machine_name()));
        assert_eq!(s.address_for(bound), "http://127.0.0.1:4000");
        let any: SocketAddr = "0.0.0.0:4000".parse().unwrap();
        assert_eq!(
            s.address_for(any),
            format!("http://{}:4000", machine_name())
        );
        let section = ClusterSection {
            host_id: Some("file".into()),
            advertise_url: Some("https://a.example/".into()),
            heartbeat_ms: Some(500),
            lease_ms: Some(3000),
        };
        let args = ServeArgs {
            host_id: Some("flag".into()),
            ..ServeArgs::default()
        };
        let s = resolve(&args, &section).unwrap();
        assert_eq!(s.host_id_for(bound), "flag");
        assert_eq!(s.address_for(bound), "https://a.example");
        assert_eq!(
            (s.heartbeat, s.lease),
            (Duration::from_millis(500), Duration::from_secs(3))
        );
        for bad in [
            ServeArgs {
                host_id: Some("a b".into()),
                ..ServeArgs::default()
            },
            ServeArgs {
                advertise_url: Some("ftp://x".into()),
                ..ServeArgs::default()
            },
            ServeArgs {
                heartbeat_ms: Some(50),
                ..ServeArgs::default()
            },
            ServeArgs {
                lease_ms: Some(3000),
                ..ServeArgs::default()
            },
        ] {
            assert!(
                resolve(&bad, &ClusterSection::default()).is_err(),
                "{bad:?}"
            );
        }
    }
}
