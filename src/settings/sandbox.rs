//! The sandbox settings: `sandbox`, `sandbox_network`, `sandbox_user`, `sandbox_disable` (`[sandbox]` in the
//! config file, `AGENT_SANDBOX*`, `--sandbox*`) and the task limits of `[limits]`
//! (`task_memory`, `task_pids`, `task_cpu_weight`, `task_file_size`).
//!
//! Like the turn limits, a value set here wins over the adapter's own (`[sandbox] mode`,
//! `network`, `[limits] task_*` in its TOML), which wins over the defaults.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{ServeArgs, SettingsError};
use crate::adapter::ByteSize;
use crate::runner::sandbox::{Mode, Network, Piece};

/// Default process limit of a task.
pub const DEFAULT_TASK_PIDS: u64 = 4096;

/// `[sandbox]` of the config file.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct SandboxSection {
    pub mode: Option<String>,
    pub network: Option<String>,
    pub user: Option<String>,
    pub disable: Option<Vec<String>>,
}

/// The sandbox settings as configured; `None`: the adapter's value, else the default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SandboxSettings {
    pub mode: Option<Mode>,
    pub network: Option<Network>,
    pub user: Option<String>,
    /// Pieces of the machine left unused (the weaker tiers run instead).
    pub disable: Vec<Piece>,
    /// bytes; `Some(0)`: no limit
    pub memory: Option<u64>,
    pub pids: Option<u64>,
    pub cpu_weight: Option<u64>,
    pub file_size: Option<u64>,
    /// What a task must not see: the database (or its folder), the push key, the config file,
    /// the card signing key.
    pub hide: Vec<PathBuf>,
}

pub fn parse_mode(s: &str) -> Result<Mode, SettingsError> {
    Mode::parse(s).ok_or_else(|| {
        SettingsError::Invalid(format!("sandbox '{s}' is not one of auto, required, off"))
    })
}

/// `cgroup,bwrap` (flag, environment) or `["cgroup", "bwrap"]` (file): the pieces not to use.
pub fn parse_disable<S: AsRef<str>>(items: &[S]) -> Result<Vec<Piece>, SettingsError> {
    let mut out = Vec::new();
    for item in items
        .iter()
        .map(|s| s.as_ref().trim())
        .filter(|s| !s.is_empty())
    {
        let p = Piece::parse(item).ok_or_else(|| {
            SettingsError::Invalid(format!(
                "sandbox_disable '{item}' is not one of cgroup, bwrap, landlock"
            ))
        })?;
        if !out.contains(&p) {
            out.push(p);
        }
    }
    Ok(out)
}

pub fn parse_network(s: &str) -> Result<Network, SettingsError> {
    Network::parse(s).ok_or_else(|| {
        SettingsError::Invalid(format!("sandbox network '{s}' is not one of open, none"))
    })
}

fn size(
    name: &str,
    flag: Option<&str>,
    file: Option<ByteSize>,
) -> Result<Option<u64>, SettingsError> {
    match flag {
        Some(s) => ByteSize::parse(s)
            .map(|b| Some(b.0))
            .map_err(|e| SettingsError::Invalid(format!("{name}: {e}"))),
        None => Ok(file.map(|b| b.0)),
    }
}

/// Merges flags/environment over `[sandbox]` and `[limits]`; `secrets` are the host's files.
pub fn resolve(
    args: &ServeArgs,
    section: &SandboxSection,
    limits: &super::security::LimitsSection,
    secrets: &[PathBuf],
    repo: &Path,
) -> Result<SandboxSettings, SettingsError> {
    let mode = args
        .sandbox
        .as_deref()
        .or(section.mode.as_deref())
        .map(parse_mode)
        .transpose()?;
    let network = args
        .sandbox_network
        .as_deref()
        .or(section.network.as_deref())
        .map(parse_network)
        .transpose()?;
    let cpu_weight = args.task_cpu_weight.or(limits.task_cpu_weight);
    if let Some(w) = cpu_weight.filter(|w| !(1..=10_000).contains(w)) {
        return Err(SettingsError::Invalid(format!(
            "task_cpu_weight {w} is not between 1 and 10000"
        )));
    }
    let disable = match (&args.sandbox_disable, &section.disable) {
        (Some(flag), _) => parse_disable(&flag.split(',').collect::<Vec<_>>())?,
        (None, Some(list)) => parse_disable(list)?,
        (None, None) => Vec::new(),
    };
    Ok(SandboxSettings {
        mode,
        network,
        disable,
        user: args
            .sandbox_user
            .clone()
            .or_else(|| section.user.clone())
            .filter(|u| !u.is_empty()),
        memory: size(
            "AGENT_TASK_MEMORY",
            args.task_memory.as_deref(),
            limits.task_memory,
        )?,
        pids: args.task_pids.or(limits.task_pids),
        cpu_weight,
        file_size: size(
            "AGENT_TASK_FILE_SIZE",
            args.task_file_size.as_deref(),
            limits.task_file_size,
        )?,
        hide: hidden(secrets, repo),
    })
}

/// The host's files hidden from tasks: each secret file; a database's folder as a whole
/// (WAL, SHM, other adapters' databases, the push key next to it) unless the working
/// directory is inside it, then the database files one by one.
fn hidden(secrets: &[PathBuf], repo: &Path) -> Vec<PathBuf> {
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let repo = abs(repo);
    let mut out: Vec<PathBuf> = Vec::new();
    for s in secrets.iter().map(|s| abs(s)) {
        let is_db = s.extension().is_some_and(|e| e == "db");
        match s.parent() {
            Some(dir) if is_db && !repo.starts_with(dir) && dir != Path::new("/") => {
                out.push(dir.to_path_buf())
            }
            _ => {
                if is_db {
                    for suffix in ["-wal", "-shm", "-journal"] {
                        let mut f = s.clone().into_os_string();
                        f.push(suffix);
                        out.push(f.into());
                    }
                }
                out.push(s);
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sandbox settings from flags alone (no config file, no adapter values).
    fn resolve_flags(args: &ServeArgs) -> Result<SandboxSettings, SettingsError> {
        resolve(
            args,
            &SandboxSection::default(),
            &Default::default(),
            &[],
            Path::new("/"),
        )
    }

    #[test]
    fn a_database_folder_is_hidden_whole_unless_the_work_is_inside_it() {
        let h = hidden(
            &[
                PathBuf::from("/data/ah/agent-host.db"),
                PathBuf::from("/etc/ah.toml"),
            ],
            Path::new("/src/repo"),
        );
        assert_eq!(
            h,
            [PathBuf::from("/data/ah"), PathBuf::from("/etc/ah.toml")]
        );
        let h = hidden(&[PathBuf::from("/w/tasks.db")], Path::new("/w"));
        assert!(h.contains(&PathBuf::from("/w/tasks.db")));
        assert!(h.contains(&PathBuf::from("/w/tasks.db-wal")));
        assert!(!h.contains(&PathBuf::from("/w")));
    }

    #[test]
    fn bad_values_are_named() {
        let args = ServeArgs {
            sandbox: Some("maybe".into()),
            ..ServeArgs::default()
        };
        let e = resolve_flags(&args).unwrap_err();
        assert!(e.to_string().contains("auto, required, off"), "{e}");
        let args = ServeArgs {
            task_memory: Some("lots".into()),
            ..ServeArgs::default()
        };
        let e = resolve_flags(&args).unwrap_err();
        assert!(e.to_string().contains("AGENT_TASK_MEMORY"), "{e}");
        let args = ServeArgs {
            sandbox: Some("off".into()),
            task_memory: Some("256M".into()),
            ..ServeArgs::default()
        };
        let s = resolve_flags(&args).unwrap();
        assert_eq!((s.mode, s.memory), (Some(Mode::Off), Some(256 << 20)));
        let args = ServeArgs {
            sandbox_disable: Some("cgroup, bubblewrap,cgroup".into()),
            ..ServeArgs::default()
        };
        let s = resolve_flags(&args).unwrap();
        assert_eq!(s.disable, [Piece::Cgroup, Piece::Bwrap]);
        let args = ServeArgs {
            sandbox_disable: Some("seccomp".into()),
            ..ServeArgs::default()
        };
        let e = resolve_flags(&args).unwrap_err();
        assert!(e.to_string().contains("cgroup, bwrap, landlock"), "{e}");
    }
}
