//! `[sandbox]`: the sandbox of each task and the limits of its processes. Each field is one
//! setting: its flag, environment variable, config file key (the `id`), default and help are
//! declared here once; the `settings` module merges them with the config file. A value set
//! here wins over the adapter's own (`[sandbox] mode`, `network`, `[limits] task_*` in its
//! TOML), which wins over the defaults.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{Mode, Network, Piece, StateMode};
use crate::units::ByteSize;

/// `[sandbox]` of the config file (and the `--sandbox*`, `--task-*` flags).
#[derive(Debug, Clone, PartialEq, clap::Args, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[command(next_help_heading = "Sandbox")]
pub struct SandboxConfig {
    /// Sandbox per task: auto (what the machine offers: bubblewrap, Landlock, cgroups), required (refuse to start when a piece is missing), off (the host's user and view); unset: the adapter's, else auto
    #[arg(
        id = "sandbox.mode",
        long = "sandbox",
        env = "AGENT_HOST_SANDBOX",
        value_name = "auto|required|off"
    )]
    pub mode: Option<String>,
    /// The task's network: proxy (its own namespace; out only through the host's proxy, to the adapter's [network] allow and allow_hosts), none (loopback only), open (the host's network); unset: the adapter's, else proxy (open where bubblewrap is missing)
    #[arg(
        id = "sandbox.network",
        long = "sandbox-network",
        env = "AGENT_HOST_SANDBOX_NETWORK",
        value_name = "proxy|open|none"
    )]
    pub network: Option<String>,
    /// Where each CLI keeps its state (the adapter's [sandbox] write folders: sessions, logins, settings): context (a folder of its own per context, under the host's data folder, shown at the CLI's paths; needs bubblewrap) or shared (the host user's folders, shared by every task); unset: context
    #[arg(
        id = "sandbox.state",
        long = "sandbox-state",
        env = "AGENT_HOST_SANDBOX_STATE",
        value_name = "context|shared"
    )]
    pub state: Option<String>,
    /// Run each task as this user (the host must run as root); unset: the host's user
    #[arg(
        id = "sandbox.user",
        long = "sandbox-user",
        env = "AGENT_HOST_SANDBOX_USER",
        value_name = "NAME"
    )]
    pub user: Option<String>,
    /// Pieces of the machine left unused: cgroup, bwrap, landlock, netns (the weaker tiers run instead; without cgroup and bwrap the host as subreaper sweeps each task's processes; without netns bubblewrap makes the proxy mode's network namespace and a relay runs in it)
    #[arg(
        id = "sandbox.disable",
        long = "sandbox-disable",
        env = "AGENT_HOST_SANDBOX_DISABLE",
        value_name = "PIECES",
        value_delimiter = ','
    )]
    pub disable: Vec<String>,
    /// Memory of one task (e.g. 4G; 0 = no limit); unset: the adapter's, else the machine's memory (MemTotal) divided by max_running_tasks, so that as many tasks as may run fit
    #[arg(
        id = "sandbox.memory",
        long = "task-memory",
        env = "AGENT_HOST_TASK_MEMORY",
        value_name = "SIZE"
    )]
    pub memory: Option<ByteSize>,
    /// Processes and threads of one task (0 = no limit); unset: the adapter's, else 4096
    #[arg(
        id = "sandbox.pids",
        long = "task-pids",
        env = "AGENT_HOST_TASK_PIDS",
        value_name = "N"
    )]
    pub pids: Option<u64>,
    /// CPU weight of one task, 1..10000 (100 = like any other process); unset: the adapter's, else 100
    #[arg(
        id = "sandbox.cpu_weight",
        long = "task-cpu-weight",
        env = "AGENT_HOST_TASK_CPU_WEIGHT",
        value_name = "N"
    )]
    pub cpu_weight: Option<u64>,
    /// Largest file one task may write (e.g. 1G; 0 = no limit); unset: the adapter's, else no limit
    #[arg(
        id = "sandbox.file_size",
        long = "task-file-size",
        env = "AGENT_HOST_TASK_FILE_SIZE",
        value_name = "SIZE"
    )]
    pub file_size: Option<ByteSize>,
    /// Hosts every task may reach in the proxy network mode, besides its adapter's [network] allow: api.example.com, api.example.com:8443, *.example.com, or an address with its port (a loopback or private address only so, e.g. 127.0.0.1:8080)
    #[arg(
        id = "sandbox.allow_hosts",
        long = "sandbox-allow-hosts",
        env = "AGENT_HOST_SANDBOX_ALLOW_HOSTS",
        value_name = "HOSTS",
        value_delimiter = ','
    )]
    #[serde(default)]
    pub allow_hosts: Vec<String>,
    /// Names the egress proxy resolves to the given address instead of asking DNS (name=address; for tests and split-horizon setups); the address is checked like any other
    #[arg(
        id = "sandbox.resolve",
        long = "sandbox-resolve",
        env = "AGENT_HOST_SANDBOX_RESOLVE",
        value_name = "NAME=ADDR",
        value_delimiter = ','
    )]
    #[serde(default)]
    pub resolve: Vec<String>,
}

/// Default process limit of a task.
pub const DEFAULT_TASK_PIDS: u64 = 4096;

/// The sandbox settings as configured; `None`: the adapter's value, else the default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SandboxSettings {
    pub mode: Option<Mode>,
    pub network: Option<Network>,
    pub user: Option<String>,
    /// Where each CLI keeps its state.
    pub state: StateMode,
    /// Pieces of the machine left unused (the weaker tiers run instead).
    pub disable: Vec<Piece>,
    /// bytes; `Some(0)`: no limit
    pub memory: Option<u64>,
    /// How many tasks may run at once (`[limits] max_running_tasks`; 0 counts as 1): the
    /// default memory of a task is the machine's divided by it.
    pub running_tasks: usize,
    pub pids: Option<u64>,
    pub cpu_weight: Option<u64>,
    pub file_size: Option<u64>,
    /// What a task must not see: the database (or its folder), the push key, the config file,
    /// the card signing key.
    pub hide: Vec<PathBuf>,
    /// Hosts every task may reach in the proxy mode (checked entries).
    pub allow_hosts: Vec<String>,
    /// Names the egress proxy resolves itself (`name=address`).
    pub resolve: Vec<String>,
}
