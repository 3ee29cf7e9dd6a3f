//! `[push]`: push notifications on or off, delivery limits and the key that seals webhook
//! secrets. Each field is one setting: its flag, environment variable, config file key (the
//! `id`), default and help are declared here once; the `settings` module merges them with the
//! config file. The retry delays and the claim lease are constants of [`super`]: no one
//! needed to tune them.

use std::path::PathBuf;

use clap::builder::BoolishValueParser;
use clap::ArgAction;
use serde::{Deserialize, Serialize};

use crate::units::Dur;

/// `[push]` of the config file (and the `--push*` flags).
#[derive(Debug, Clone, PartialEq, clap::Args, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[command(next_help_heading = "Push notifications")]
pub struct DeliveryConfig {
    /// Push notifications (webhooks) on
    #[arg(id = "push.enabled", long = "push", env = "AGENT_HOST_PUSH", value_name = "BOOL", action = ArgAction::Set, value_parser = BoolishValueParser::new(), num_args = 0..=1, default_missing_value = "true", default_value_t = false)]
    pub enabled: bool,
    /// Allow webhooks to loopback, private and link-local addresses (local testing only)
    #[arg(id = "push.allow_private", long = "push-allow-private", env = "AGENT_HOST_PUSH_ALLOW_PRIVATE", value_name = "BOOL", action = ArgAction::Set, value_parser = BoolishValueParser::new(), num_args = 0..=1, default_missing_value = "true", default_value_t = false)]
    pub allow_private: bool,
    /// Attempts at one update before it is given up as a dead letter (at least 1)
    #[arg(
        id = "push.max_attempts",
        long = "push-max-attempts",
        env = "AGENT_HOST_PUSH_MAX_ATTEMPTS",
        value_name = "N",
        default_value_t = 8
    )]
    pub max_attempts: u32,
    /// Timeout of one webhook request
    #[arg(
        id = "push.timeout",
        long = "push-timeout",
        env = "AGENT_HOST_PUSH_TIMEOUT",
        value_name = "DURATION",
        default_value = "10s"
    )]
    pub timeout: Dur,
    /// Push configs one task may have (at least 1); one more is refused with -32602
    #[arg(
        id = "push.max_configs_per_task",
        long = "push-max-configs-per-task",
        env = "AGENT_HOST_PUSH_MAX_CONFIGS_PER_TASK",
        value_name = "N",
        default_value_t = 10
    )]
    pub max_configs_per_task: usize,
    /// Key sealing push secrets at rest, 64 hex digits (wins over key_file)
    #[arg(
        id = "push.key",
        long = "push-key",
        env = "AGENT_HOST_PUSH_KEY",
        value_name = "HEX",
        hide_env_values = true
    )]
    pub key: Option<String>,
    /// File holding that key, created with a random one when missing; unset: push.key next to the database
    #[arg(
        id = "push.key_file",
        long = "push-key-file",
        env = "AGENT_HOST_PUSH_KEY_FILE",
        value_name = "PATH"
    )]
    pub key_file: Option<PathBuf>,
}

/// Where the push sealing key comes from.
#[derive(Debug, Clone)]
pub enum PushKey {
    Hex(String),
    File(PathBuf),
}

/// Push notification settings, when on.
#[derive(Debug, Clone)]
pub struct PushConfig {
    pub delivery: super::PushSettings,
    /// The sealing key: 64 hex digits, or a file holding them (created when missing).
    pub key: PushKey,
}
