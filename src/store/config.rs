//! The store's settings: `[store]` (where tasks are kept) and `[cluster]` (this host's part
//! when several share a PostgreSQL store; docs/several-hosts.md). Each field is one setting:
//! its flag, environment variable, config file key (the `id`), default and help are declared
//! here once; the `settings` module merges them with the config file.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::units::Dur;

/// `[store]`: where tasks are kept.
#[derive(Debug, Clone, PartialEq, clap::Args, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[command(next_help_heading = "Store")]
pub struct StoreConfig {
    /// Where tasks are kept: sqlite (the default database in the data directory), sqlite:PATH, memory (gone when the host stops), or postgres://USER@HOST:PORT/DB (a PostgreSQL database several hosts can share)
    #[arg(
        id = "store.location",
        long = "store",
        env = "AGENT_HOST_STORE",
        value_name = "sqlite[:PATH]|memory|postgres://...",
        default_value = "sqlite"
    )]
    pub location: String,
}

/// `[cluster]`: only with a PostgreSQL store shared by several hosts.
#[derive(Debug, Clone, PartialEq, clap::Args, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[command(next_help_heading = "Several hosts")]
pub struct ClusterConfig {
    /// This host's id, kept across restarts so a restarted host picks up its own tasks; unset: MACHINE:PORT
    #[arg(
        id = "cluster.host_id",
        long = "host-id",
        env = "AGENT_HOST_ID",
        value_name = "ID"
    )]
    pub host_id: Option<String>,
    /// The URL other hosts reach this one at, to pass it commands for its tasks (its host is also accepted as Host); unset: http://BOUND-ADDRESS
    #[arg(
        id = "cluster.advertise_url",
        long = "advertise-url",
        env = "AGENT_HOST_ADVERTISE_URL",
        value_name = "URL"
    )]
    pub advertise_url: Option<String>,
    /// How often this host renews its lease and looks for hosts whose lease expired (at least 100ms)
    #[arg(
        id = "cluster.heartbeat",
        long = "heartbeat",
        env = "AGENT_HOST_HEARTBEAT",
        value_name = "DURATION",
        default_value = "2s"
    )]
    pub heartbeat: Dur,
    /// How long a lease lasts without renewal (at least two heartbeats); after it another host takes this one's tasks over
    #[arg(
        id = "cluster.lease",
        long = "lease",
        env = "AGENT_HOST_LEASE",
        value_name = "DURATION",
        default_value = "10s"
    )]
    pub lease: Dur,
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
