//! Old names of settings that keep working: environment variables (the coding-agent-a2a
//! names such as `AGENT_ADAPTER`, `PORT`, `AGENT_TIMEOUT_MS`, and this host's earlier
//! `AGENT_*` ones) and config file keys (`[agent] timeout_ms`, `[limits] task_memory`, ...).
//! Each is declared once here, by the id of the setting it stands for, with the conversion
//! of its value; the new flag, variable and key come from that setting's declaration.
//! Keys of tuning knobs that became constants are refused with what they became.

/// How an old value becomes a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conversion {
    /// The value as it is.
    Same,
    /// A whole number of milliseconds: `N` becomes `Nms`.
    Millis,
    /// A list separated by commas or colons becomes comma-separated.
    Colons,
}

/// An old environment variable: (old name, new setting id, conversion, a coding-agent-a2a
/// name). The a2a names are documented aliases: no warning when used.
pub const ENV_ALIASES: &[(&str, &str, Conversion, bool)] = &[
    ("PORT", "server.port", Conversion::Same, true),
    ("AGENT_ADAPTER", "agent.adapter", Conversion::Same, true),
    ("AGENT_BINARY", "agent.binary", Conversion::Same, true),
    ("AGENT_MODEL", "agent.model", Conversion::Same, true),
    ("AGENT_FORCE", "agent.force", Conversion::Same, true),
    ("AGENT_REPO_PATH", "agent.repo_path", Conversion::Same, true),
    (
        "AGENT_TIMEOUT_MS",
        "limits.timeout",
        Conversion::Millis,
        true,
    ),
    (
        "AGENT_IDLE_EXIT_MS",
        "limits.idle_timeout",
        Conversion::Millis,
        true,
    ),
    (
        "AGENT_MAX_RUNNING_TASKS",
        "limits.max_running_tasks",
        Conversion::Same,
        true,
    ),
    (
        "AGENT_CANCEL_GRACE_MS",
        "limits.cancel_grace",
        Conversion::Millis,
        false,
    ),
    (
        "AGENT_ROUTE_BY_METADATA",
        "agent.route_by_metadata",
        Conversion::Same,
        false,
    ),
    ("AGENT_ARGS", "agent.args", Conversion::Same, false),
    (
        "AGENT_APPROVAL_PATTERN",
        "agent.approval_pattern",
        Conversion::Same,
        false,
    ),
    (
        "AGENT_APPROVAL_RESPONSE",
        "agent.approval_response",
        Conversion::Same,
        false,
    ),
    (
        "AGENT_PROMPT_VIA",
        "agent.prompt_via",
        Conversion::Same,
        false,
    ),
    ("AGENT_PASS_ENV", "agent.pass_env", Conversion::Same, false),
    (
        "AGENT_INPUT_MODES",
        "agent.input_modes",
        Conversion::Same,
        false,
    ),
    (
        "AGENT_MAX_LINE_BYTES",
        "limits.max_line",
        Conversion::Same,
        false,
    ),
    (
        "AGENT_MAX_QUEUED_TASKS",
        "limits.max_queued_tasks",
        Conversion::Same,
        false,
    ),
    (
        "AGENT_ALLOWED_CWDS",
        "workspace.roots",
        Conversion::Colons,
        false,
    ),
    ("AGENT_PUSH", "push.enabled", Conversion::Same, false),
    (
        "AGENT_PUSH_ALLOW_PRIVATE",
        "push.allow_private",
        Conversion::Same,
        false,
    ),
    ("AGENT_PUSH_KEY", "push.key", Conversion::Same, false),
    ("AGENT_SANDBOX", "sandbox.mode", Conversion::Same, false),
    (
        "AGENT_SANDBOX_NETWORK",
        "sandbox.network",
        Conversion::Same,
        false,
    ),
    (
        "AGENT_SANDBOX_USER",
        "sandbox.user",
        Conversion::Same,
        false,
    ),
    (
        "AGENT_SANDBOX_DISABLE",
        "sandbox.disable",
        Conversion::Same,
        false,
    ),
    (
        "AGENT_TASK_MEMORY",
        "sandbox.memory",
        Conversion::Same,
        false,
    ),
    ("AGENT_TASK_PIDS", "sandbox.pids", Conversion::Same, false),
    (
        "AGENT_TASK_CPU_WEIGHT",
        "sandbox.cpu_weight",
        Conversion::Same,
        false,
    ),
    (
        "AGENT_TASK_FILE_SIZE",
        "sandbox.file_size",
        Conversion::Same,
        false,
    ),
    (
        "AGENT_HOST_BLOCKING_WAIT_MS",
        "server.blocking_wait",
        Conversion::Millis,
        false,
    ),
    (
        "AGENT_HOST_HEADER_TIMEOUT_MS",
        "server.header_timeout",
        Conversion::Millis,
        false,
    ),
    (
        "AGENT_HOST_HEARTBEAT_MS",
        "cluster.heartbeat",
        Conversion::Millis,
        false,
    ),
    (
        "AGENT_HOST_LEASE_MS",
        "cluster.lease",
        Conversion::Millis,
        false,
    ),
];

/// An old config file key: (old `section.key`, new setting id, conversion).
pub const KEY_ALIASES: &[(&str, &str, Conversion)] = &[
    ("server.store", "store.location", Conversion::Same),
    (
        "server.body_limit_bytes",
        "server.body_limit",
        Conversion::Same,
    ),
    (
        "server.blocking_wait_ms",
        "server.blocking_wait",
        Conversion::Millis,
    ),
    (
        "server.header_timeout_ms",
        "server.header_timeout",
        Conversion::Millis,
    ),
    ("agent.timeout_ms", "limits.timeout", Conversion::Millis),
    (
        "agent.idle_timeout_ms",
        "limits.idle_timeout",
        Conversion::Millis,
    ),
    (
        "agent.cancel_grace_ms",
        "limits.cancel_grace",
        Conversion::Millis,
    ),
    ("agent.max_line_bytes", "limits.max_line", Conversion::Same),
    (
        "limits.max_output_bytes",
        "limits.max_output",
        Conversion::Same,
    ),
    (
        "limits.rate_limit_per_minute",
        "server.rate_limit",
        Conversion::Same,
    ),
    (
        "limits.auth_failures_per_minute",
        "server.auth_failures_per_minute",
        Conversion::Same,
    ),
    ("limits.task_memory", "sandbox.memory", Conversion::Same),
    ("limits.task_pids", "sandbox.pids", Conversion::Same),
    (
        "limits.task_cpu_weight",
        "sandbox.cpu_weight",
        Conversion::Same,
    ),
    (
        "limits.task_file_size",
        "sandbox.file_size",
        Conversion::Same,
    ),
    ("push.timeout_ms", "push.timeout", Conversion::Millis),
    (
        "cluster.heartbeat_ms",
        "cluster.heartbeat",
        Conversion::Millis,
    ),
    ("cluster.lease_ms", "cluster.lease", Conversion::Millis),
];

/// Config file keys of tuning knobs that became constants: (old `section.key`, what it
/// became, the old value equal to the constant). At that value (as the old example config
/// set it) the key is ignored with a notice; at another value it is an error saying so.
pub const REMOVED_KEYS: &[(&str, &str, i64)] = &[
    (
        "server.sse_keepalive_ms",
        "a constant: idle event streams get a keep-alive comment every 15s",
        15_000,
    ),
    (
        "push.retry_base_ms",
        "a constant: the first retry comes after 1s, doubling up to 5m",
        1000,
    ),
    (
        "push.retry_max_ms",
        "a constant: retries are at most 5m apart",
        300_000,
    ),
    (
        "push.claim_lease_ms",
        "a constant: a delivery claim lasts 30s, or three push.timeout if longer",
        30_000,
    ),
    (
        "limits.max_subscribers_per_task",
        "a constant: 64 streams may follow one task",
        64,
    ),
];

/// Flags that were renamed without a variable or key alias to derive them from: (old flag,
/// new setting id, what its value is now).
pub const OLD_FLAGS: &[(&str, &str, &str)] = &[(
    "--allowed-cwds",
    "workspace.roots",
    "directories separated by commas",
)];

/// What to say of an old flag given on the command line: its new flag, and what its value
/// is now. clap alone would suggest the nearest current flag, which may be another setting
/// (`--allowed-cwds` → `--allowed-hosts`). The `--NAME-ms` flags of the settings now in
/// durations are derived from the aliases. None for a flag that was never renamed.
pub fn old_flag(flag: &str) -> Option<String> {
    let cmd = super::args::command();
    let long_of = |id: &str| {
        cmd.get_arguments()
            .find(|a| a.get_id().as_str() == id)
            .and_then(|a| a.get_long())
            .map(|l| format!("--{l}"))
    };
    if let Some((old, id, value)) = OLD_FLAGS.iter().find(|(old, ..)| *old == flag) {
        let new = long_of(id)?;
        return Some(format!("{old} is an old flag: use {new} ({value})"));
    }
    let millis = ENV_ALIASES
        .iter()
        .filter(|(_, _, c, _)| *c == Conversion::Millis)
        .map(|(_, id, ..)| *id)
        .chain(
            KEY_ALIASES
                .iter()
                .filter(|(_, _, c)| *c == Conversion::Millis)
                .map(|(_, id, _)| *id),
        );
    for id in millis {
        let Some(new) = long_of(id) else { continue };
        if flag == format!("{new}-ms") {
            return Some(format!(
                "{flag} is an old flag: use {new} with a unit (2000ms, 2s, 5m)"
            ));
        }
    }
    None
}

/// An old variable's value as the new setting reads it.
pub fn convert_text(conversion: Conversion, value: &str) -> String {
    let v = value.trim();
    match conversion {
        Conversion::Same => value.to_string(),
        Conversion::Millis if !v.is_empty() && v.chars().all(|c| c.is_ascii_digit()) => {
            format!("{v}ms")
        }
        Conversion::Millis => value.to_string(),
        Conversion::Colons => v
            .split([',', ':'])
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(","),
    }
}

/// An old config file value as the new key reads it.
pub fn convert_value(conversion: Conversion, value: toml::Value) -> toml::Value {
    match (conversion, value) {
        (Conversion::Millis, toml::Value::Integer(n)) => toml::Value::String(format!("{n}ms")),
        (_, v) => v,
    }
}

/// A legacy name seen in the environment, for the start-up log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvAlias {
    pub old: &'static str,
    pub new: String,
    /// A coding-agent-a2a name (documented, no warning).
    pub a2a: bool,
}

/// The new variable of each alias: read from the setting's declaration.
fn new_env_name(id: &str) -> Option<String> {
    super::args::command()
        .get_arguments()
        .find(|a| a.get_id().as_str() == id)
        .and_then(|a| a.get_env())
        .map(|e| e.to_string_lossy().into_owned())
}

/// The aliases to apply to `env` (name, value pairs): for each old variable set whose new
/// one is not, the new variable and its converted value. An alias never overrides the new
/// name.
pub fn env_assignments(env: &[(String, String)]) -> Vec<(EnvAlias, String)> {
    let get = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    let mut out = Vec::new();
    for (old, id, conversion, a2a) in ENV_ALIASES {
        let (Some(value), Some(new)) = (get(old), new_env_name(id)) else {
            continue;
        };
        if get(&new).is_some() {
            continue;
        }
        let value = convert_text(*conversion, value);
        out.push((
            EnvAlias {
                old,
                new,
                a2a: *a2a,
            },
            value,
        ));
    }
    out
}

/// Sets the new variables of the old ones found in this process's environment; call it
/// before the command line is parsed (clap reads the variables) and while the process has
/// one thread. The aliases used, for the start-up log.
pub fn apply_env_aliases() -> Vec<EnvAlias> {
    let env: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let applied: Vec<EnvAlias> = env_assignments(&env)
        .into_iter()
        .map(|(alias, value)| {
            std::env::set_var(&alias.new, value);
            alias
        })
        .collect();
    super::args::remember_env_aliases(applied.iter().map(|a| (a.old, a.new.clone())).collect());
    applied
}

/// One line per alias used: the a2a names as information, the others as a warning to move.
pub fn describe(aliases: &[EnvAlias]) -> Vec<(bool, String)> {
    aliases
        .iter()
        .map(|a| {
            let text = if a.a2a {
                format!("{} is read as {} (a coding-agent-a2a name)", a.old, a.new)
            } else {
                format!(
                    "{} is an old name: it is read as {}; use that",
                    a.old, a.new
                )
            };
            (!a.a2a, text)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_flags_name_their_new_flag() {
        let said = old_flag("--allowed-cwds").unwrap_or_default();
        assert!(said.contains("--workspace-roots"), "{said}");
        assert!(!said.contains("--allowed-hosts"), "{said}");
        let said = old_flag("--heartbeat-ms").unwrap_or_default();
        assert!(said.contains("use --heartbeat with a unit"), "{said}");
        assert!(old_flag("--blocking-wait-ms").is_some());
        assert_eq!(old_flag("--no-such-flag"), None);
    }

    #[test]
    fn old_variables_become_new_ones_without_overriding_them() {
        let env = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let got = env_assignments(&env(&[
            ("AGENT_TIMEOUT_MS", "5000"),
            ("PORT", "9000"),
            ("AGENT_ALLOWED_CWDS", "/a:/b"),
            ("AGENT_MODEL", "m"),
            ("AGENT_HOST_MODEL", "wins"),
        ]));
        let pairs: Vec<(&str, &str)> = got
            .iter()
            .map(|(a, v)| (a.new.as_str(), v.as_str()))
            .collect();
        assert!(
            pairs.contains(&("AGENT_HOST_TIMEOUT", "5000ms")),
            "{pairs:?}"
        );
        assert!(pairs.contains(&("AGENT_HOST_PORT", "9000")), "{pairs:?}");
        assert!(
            pairs.contains(&("AGENT_HOST_WORKSPACE_ROOTS", "/a,/b")),
            "{pairs:?}"
        );
        assert!(
            !pairs.iter().any(|(k, _)| *k == "AGENT_HOST_MODEL"),
            "{pairs:?}"
        );
    }

    #[test]
    fn every_alias_names_a_setting_and_no_old_name_is_a_new_one() {
        let cmd = super::super::args::command();
        let ids: Vec<String> = cmd
            .get_arguments()
            .map(|a| a.get_id().to_string())
            .collect();
        for (old, id, _, _) in ENV_ALIASES {
            assert!(ids.iter().any(|i| i == id), "{old} -> {id}");
            assert!(new_env_name(id).is_some_and(|n| n != *old), "{old}");
        }
        for (old, id, _) in KEY_ALIASES {
            assert!(ids.iter().any(|i| i == id), "{old} -> {id}");
            assert!(!ids.iter().any(|i| i == old), "{old} is still a key");
        }
        for (old, _, _) in REMOVED_KEYS {
            assert!(!ids.iter().any(|i| i == old), "{old} is still a key");
        }
    }
}
