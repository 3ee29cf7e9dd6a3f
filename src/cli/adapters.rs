//! `agent-host adapters`: the known adapters, whether their programs are installed, and the
//! sandbox this machine gives a task.

use crate::app::{adapter_version, host_env, launch_for, registry, StartError};
use crate::engine::launch::LaunchError;
use crate::settings::{ServeArgs, Settings};

/// `agent-host adapters`: only the settings that decide which adapters exist and where
/// their programs are found.
#[derive(Debug, Clone, clap::Args, Default)]
pub struct AdaptersArgs {
    /// TOML config file (see config/agent-host.toml)
    #[arg(long, env = "AGENT_HOST_CONFIG", value_name = "PATH")]
    pub config: Option<std::path::PathBuf>,
    /// Directory of adapter TOML files that add to or override the built-in ones (same id wins)
    #[arg(long, env = "AGENT_HOST_ADAPTERS_DIR", value_name = "DIR")]
    pub adapters_dir: Option<std::path::PathBuf>,
    /// Program to use instead of each adapter's binary (<ID>_PATH still wins)
    #[arg(long, env = "AGENT_HOST_BINARY", value_name = "PROGRAM")]
    pub binary: Option<String>,
    /// Working directory of the agents (a relative program path is taken from there) [default: the current directory]
    #[arg(long, env = "AGENT_HOST_REPO_PATH", value_name = "DIR")]
    pub repo_path: Option<std::path::PathBuf>,
}

impl AdaptersArgs {
    /// The same settings as `serve` with these flags.
    pub fn serve_args(&self) -> Result<ServeArgs, clap::Error> {
        let mut flags: Vec<std::ffi::OsString> = Vec::new();
        let mut add = |name: &str, value: Option<std::ffi::OsString>| {
            if let Some(v) = value {
                flags.push(name.into());
                flags.push(v);
            }
        };
        add("--config", self.config.clone().map(Into::into));
        add("--adapters-dir", self.adapters_dir.clone().map(Into::into));
        add("--binary", self.binary.clone().map(Into::into));
        add("--repo-path", self.repo_path.clone().map(Into::into));
        ServeArgs::from_flags(flags)
    }
}

/// `agent-host adapters`: one line per adapter: whether its program is installed, its
/// version, and whether the tests cover that version.
pub async fn list_adapters(settings: &Settings) -> Result<String, StartError> {
    let registry = registry(settings)?;
    let env = host_env();
    let mut rows = vec![[
        "ADAPTER".to_string(),
        "WIRE".to_string(),
        "VERSION".to_string(),
        "TESTED".to_string(),
        "PROGRAM".to_string(),
    ]];
    for a in registry.all() {
        let row = match launch_for(settings, a.clone()) {
            Ok(launch) => {
                let p = launch.program.clone();
                let version = adapter_version(a, &launch).await;
                // The built-in agents (`demo`, `conformance`) are this very program, which
                // its own tests run.
                let this_build = std::env::current_exe()
                    .and_then(std::fs::canonicalize)
                    .is_ok_and(|me| std::fs::canonicalize(&p).is_ok_and(|q| q == me));
                let tested = match &version {
                    _ if this_build => "yes",
                    Some(v) if a.tested_versions.iter().any(|t| t == v) => "yes",
                    Some(_) if a.tested_versions.is_empty() => "-",
                    Some(_) => "no",
                    None => "?",
                };
                [
                    a.id.clone(),
                    a.wire.clone(),
                    version.unwrap_or_else(|| "unknown".into()),
                    tested.to_string(),
                    p.display().to_string(),
                ]
            }
            Err(e) => {
                // "not installed" only when the program was looked for and not found; a
                // configured path that cannot be run says why.
                let hint = match &e {
                    StartError::Launch(LaunchError::NotFound { .. }) if !a.install.is_empty() => {
                        format!("not installed ({})", a.install)
                    }
                    _ => e.to_string(),
                };
                [a.id.clone(), a.wire.clone(), "-".into(), "-".into(), hint]
            }
        };
        rows.push(row);
    }
    let widths: Vec<usize> = (0..4)
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        for (i, w) in widths.iter().enumerate() {
            out.push_str(&format!("{:<w$}  ", r[i], w = w));
        }
        out.push_str(&r[4]);
        out.push('\n');
    }
    crate::runner::sandbox::Capabilities::configure(&settings.sandbox.disable);
    let policy = crate::engine::launch::sandbox_policy(
        registry.get("jsonl")?,
        &settings.sandbox,
        &crate::engine::launch::child_env(registry.get("jsonl")?, &env, &settings.pass_env),
    )?;
    out.push_str(&sandbox_report(&policy));
    Ok(out)
}

/// The sandbox lines of `agent-host adapters`: the mode, the pieces in force, what is missing.
pub fn sandbox_report(policy: &crate::runner::SandboxPolicy) -> String {
    let caps = crate::runner::sandbox::Capabilities::get();
    let mut out = format!("\nsandbox: {}\n", policy.mode.as_str());
    for p in caps.pieces(policy) {
        out.push_str(&format!("  in force: {p}\n"));
    }
    for m in caps.missing(policy) {
        out.push_str(&format!("  missing:  {m}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings::resolve(&ServeArgs::defaults().unwrap()).unwrap()
    }

    #[tokio::test]
    async fn adapters_say_why_a_configured_program_cannot_run() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("agent");
        std::fs::write(&file, "#!/bin/sh\n").unwrap();
        for (path, reason) in [
            (file.clone(), "no execute permission"),
            (dir.path().to_path_buf(), "is a directory"),
            (dir.path().join("missing"), "does not exist"),
        ] {
            let mut s = settings();
            s.binary = Some(path.display().to_string());
            let out = list_adapters(&s).await.unwrap();
            let row = out
                .lines()
                .find(|l| l.starts_with("claude-code "))
                .unwrap_or_default();
            assert!(row.contains(reason), "{row}");
            assert!(!row.contains("not installed"), "{row}");
        }
    }
}
