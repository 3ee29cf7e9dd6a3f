//! How a turn's process is started: the program (found once at start), its arguments for a
//! first or a follow-up turn, its environment (clean, plus an allow-list and the adapter's
//! own variables) and its limits.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::adapter::{AdapterSpec, Io, PromptVia, StdinPolicy};
use crate::runner::sandbox::config::{SandboxSettings, DEFAULT_TASK_PIDS};
use crate::runner::sandbox::{Mode, Network, RunAs, SandboxPolicy, TaskLimits};
use crate::runner::{IoMode, SpawnSpec, StdinMode};

/// Host variables every CLI gets (when set): what a program needs to run at all.
pub const BASE_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "TERM",
    "TMPDIR",
    "TZ",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_RUNTIME_DIR",
];

/// An adapter `binary` naming the running agent-host executable itself (the demo agent is
/// `agent-host fake-agent`).
pub const SELF_BINARY: &str = "{self}";

/// Why the adapter's program cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("adapter '{adapter}' names no program; set {hint}")]
    NoProgram { adapter: String, hint: String },
    #[error("'{path}' (adapter '{adapter}') is not an executable file: {reason}")]
    NotExecutable {
        adapter: String,
        path: String,
        /// Why: missing, not a regular file, or without an execute bit.
        reason: String,
    },
    #[error("'{program}' (adapter '{adapter}') was not found next to agent-host or on PATH; {install}set {env_var} to its path")]
    NotFound {
        adapter: String,
        program: String,
        env_var: String,
        /// "install it with ...; or " when the adapter says how.
        install: String,
    },
    #[error("adapter '{adapter}': {message}")]
    Sandbox { adapter: String, message: String },
}

/// Everything needed to start the adapter's program for any turn.
#[derive(Debug, Clone)]
pub struct Launch {
    pub adapter: AdapterSpec,
    pub program: PathBuf,
    /// Extra arguments from the configuration (`AGENT_ARGS`), before the adapter's own.
    pub extra_args: Vec<String>,
    pub prompt_via: PromptVia,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    pub model: Option<String>,
    pub force: bool,
    pub max_line_bytes: usize,
    pub timeout: Duration,
    pub idle_timeout: Duration,
    pub cancel_grace: Duration,
    /// How each turn's process is contained ([`sandbox_policy`]); `None`: not at all.
    pub sandbox: Option<SandboxPolicy>,
}

/// Session arguments for one turn.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionArgs {
    /// First turn; the host chose this session id (adapter has `session_args`).
    New(String),
    /// Follow-up turn resuming this CLI session.
    Resume(String),
    /// Nothing to pass.
    None,
}

impl Launch {
    /// The process to spawn for one turn, in the adapter's working directory (a long
    /// prompt's file, if any, is that of a task `task`).
    pub fn spawn_spec(&self, prompt: &str, session: &SessionArgs) -> SpawnSpec {
        self.spawn_spec_in(prompt, "", session, &self.cwd, "task")
    }

    /// The process to spawn for one turn of task `task_id`, working in `cwd`; `message_id`
    /// is the `messageId` of the message that started it. When the prompt goes in a file
    /// ([`PromptRoute::File`]), the caller writes it first, at
    /// [`input::prompt_file`](crate::engine::input::prompt_file)`(cwd, task_id)`.
    pub fn spawn_spec_in(
        &self,
        prompt: &str,
        message_id: &str,
        session: &SessionArgs,
        cwd: &Path,
        task_id: &str,
    ) -> SpawnSpec {
        let a = &self.adapter;
        let session_id = match session {
            SessionArgs::New(s) | SessionArgs::Resume(s) => s.as_str(),
            SessionArgs::None => "",
        };
        let cwd_text = cwd.to_string_lossy();
        // `{prompt}` is only meaningful in `prompt_args`, `{prompt_file}` in
        // `prompt_file_args`.
        let values = [
            ("model", self.model.as_deref().unwrap_or("")),
            ("session_id", session_id),
            ("cwd", cwd_text.as_ref()),
            ("message_id", message_id),
        ];
        let subst = |arg: &String| fill(arg, &values);
        let mut args: Vec<String> = self.extra_args.clone();
        args.extend(a.args.iter().map(subst));
        if self.model.is_some() {
            args.extend(a.model_args.iter().map(subst));
        }
        match session {
            SessionArgs::New(_) => args.extend(a.session_args.iter().map(subst)),
            SessionArgs::Resume(_) => args.extend(a.resume_args.iter().map(subst)),
            SessionArgs::None => {}
        }
        if self.force {
            args.extend(a.force_args.iter().map(subst));
        }
        let route = self.prompt_route(prompt);
        let prompt_file = crate::engine::input::prompt_file(cwd, task_id);
        self.prompt_arguments(route, prompt, &prompt_file, &values, &mut args);
        let stdin = match route {
            // A program that reads its prompt from stdin reads to EOF, so stdin is closed
            // after the prompt; answers to approvals need the prompt as an argument.
            PromptRoute::Stdin => StdinMode::Write {
                initial: prompt.as_bytes().to_vec(),
                keep_open: false,
            },
            PromptRoute::Protocol => StdinMode::Write {
                initial: Vec::new(),
                keep_open: true,
            },
            PromptRoute::Arg | PromptRoute::File | PromptRoute::Refused => {
                if a.stdin == StdinPolicy::Keep {
                    StdinMode::Write {
                        initial: Vec::new(),
                        keep_open: true,
                    }
                } else {
                    StdinMode::Null
                }
            }
        };
        SpawnSpec {
            program: self.program.clone(),
            args,
            cwd: cwd.to_path_buf(),
            env: self.env.clone(),
            io: match a.io {
                Io::Pipes => IoMode::Pipes,
                Io::Pty => IoMode::Pty,
            },
            stdin,
            max_line_bytes: self.max_line_bytes,
            sandbox: self.sandbox.clone(),
        }
    }

    /// True when the adapter lets the host choose the session id of a new context.
    pub fn host_chooses_session(&self) -> bool {
        !self.adapter.session_args.is_empty()
    }

    /// True when follow-up turns can resume the CLI's session (by arguments or through its
    /// protocol).
    pub fn can_resume(&self) -> bool {
        !self.adapter.resume_args.is_empty() || self.adapter.protocol_resume
    }
}

/// The sandbox of the adapter's tasks: the host's settings over the adapter's `[sandbox]`
/// and `[limits]` over the defaults; the adapter's state folders (expanded with the CLI's
/// environment `env`) writable; the host's files and the attachments of every task hidden
/// (each turn shows its own again, [`reveal_attachments`]). With `sandbox_user` on a root host
/// (and the sandbox not off), the user is looked up and the state folders are the user's
/// (under its home; those the host creates are given to it); the caller puts the user's
/// HOME, USER and LOGNAME in the program's environment ([`RunAs::environment`]).
pub fn sandbox_policy(
    adapter: &AdapterSpec,
    settings: &SandboxSettings,
    env: &[(String, String)],
) -> Result<SandboxPolicy, LaunchError> {
    let bad = |message: String| LaunchError::Sandbox {
        adapter: adapter.id.clone(),
        message,
    };
    let mode = match (settings.mode, &adapter.sandbox.mode) {
        (Some(m), _) => m,
        (None, Some(m)) => Mode::parse(m).ok_or_else(|| {
            bad(format!(
                "[sandbox] mode '{m}' is not one of auto, required, off"
            ))
        })?,
        (None, None) => Mode::Auto,
    };
    let network = match (settings.network, &adapter.sandbox.network) {
        (Some(n), _) => n,
        (None, Some(n)) => Network::parse(n).ok_or_else(|| {
            bad(format!(
                "[sandbox] network '{n}' is not one of proxy, open, none"
            ))
        })?,
        (None, None) => Network::Proxy,
    };
    let network = crate::runner::sandbox::net::effective(
        network,
        crate::runner::sandbox::Capabilities::get().bwrap.is_some(),
    );
    let run_as = match &settings.user {
        Some(name) if mode != Mode::Off && nix::unistd::geteuid().is_root() => {
            Some(RunAs::lookup(name).ok_or_else(|| {
                bad(format!(
                    "sandbox_user '{name}' is not a user of this machine"
                ))
            })?)
        }
        _ => None,
    };
    let mut env = env.to_vec();
    if let Some(u) = &run_as {
        u.environment(&mut env);
    }
    let home = env
        .iter()
        .find(|(k, _)| k == "HOME")
        .map(|(_, v)| v.as_str());
    let expand = |list: &[String]| -> Vec<String> {
        list.iter()
            .filter_map(|w| crate::adapter::sandbox::expand_path(w, &env, home))
            .filter(|p| p.starts_with('/'))
            .collect()
    };
    let expanded = expand(&adapter.sandbox.write);
    let write = expanded
        .iter()
        .map(|p| {
            prepare_state_path(p, run_as.as_ref());
            PathBuf::from(p.trim_end_matches('/'))
        })
        .collect();
    let per_context = settings.state == crate::runner::sandbox::StateMode::Context
        && mode != Mode::Off
        && crate::runner::sandbox::Capabilities::get().bwrap.is_some()
        && !expanded.is_empty();
    let state = per_context.then(|| {
        std::sync::Arc::new(crate::runner::sandbox::StateLayout::new(
            &expanded,
            home.map(Path::new),
            &expand(&adapter.doctor.credentials_files),
            &expand(&adapter.sandbox.config),
        ))
    });
    let l = &adapter.limits;
    let nonzero = |v: Option<u64>| v.filter(|n| *n > 0);
    let limits = TaskLimits {
        memory: nonzero(
            settings
                .memory
                .or(l.task_memory.map(|b| b.0))
                .or_else(|| crate::runner::sandbox::default_task_memory(settings.running_tasks)),
        ),
        pids: nonzero(settings.pids.or(l.task_pids).or(Some(DEFAULT_TASK_PIDS))),
        cpu_weight: nonzero(settings.cpu_weight.or(l.task_cpu_weight)),
        file_size: nonzero(settings.file_size.or(l.task_file_size.map(|b| b.0))),
    };
    let egress = egress_rules(adapter, settings, network)?;
    let sockets = adapter
        .sandbox
        .sockets
        .iter()
        .filter_map(|w| crate::adapter::sandbox::expand_path(w, &env, home))
        .filter(|p| p.starts_with('/'))
        .map(PathBuf::from)
        .collect();
    Ok(SandboxPolicy {
        mode,
        write,
        hide: settings.hide.clone(),
        reveal: Vec::new(),
        network,
        user: settings.user.clone(),
        run_as,
        limits,
        workspace: None,
        egress,
        sockets,
        state,
        binds: Vec::new(),
    })
}

/// The allow-list of the `proxy` mode: the adapter's `[network] allow` and the host's
/// `allow_hosts`, with the host's `resolve` entries.
fn egress_rules(
    adapter: &AdapterSpec,
    settings: &SandboxSettings,
    network: Network,
) -> Result<Option<crate::runner::sandbox::net::Egress>, LaunchError> {
    if network != Network::Proxy {
        return Ok(None);
    }
    let allow = adapter
        .network
        .allow
        .iter()
        .chain(settings.allow_hosts.iter())
        .map(String::as_str);
    let rules = crate::egress::Rules::new(allow, settings.resolve.iter().map(String::as_str))
        .map_err(|e| LaunchError::Sandbox {
            adapter: adapter.id.clone(),
            message: format!("[network] allow: {e}"),
        })?;
    Ok(Some(crate::runner::sandbox::net::Egress {
        rules: std::sync::Arc::new(rules),
        mount: None,
    }))
}

/// Creates a missing state folder (`~/.codex/`, ending in `/`) or file (`~/.claude.json`,
/// as `{}` for JSON, else empty), so that the sandbox can make it writable: everything else
/// of the home folder is read-only there, so the CLI could not create it itself. For a
/// sandbox user, what is created is given to it, and nothing is created where its home
/// folder does not exist (`nobody`'s `/nonexistent`).
fn prepare_state_path(p: &str, user: Option<&RunAs>) {
    let path = Path::new(p.trim_end_matches('/'));
    if path.exists() {
        return;
    }
    if let Some(u) = user {
        if !u.home.is_dir() {
            tracing::warn!(user = %u.name, home = %u.home.display(), path = %path.display(),
                "the sandbox user's home folder does not exist: its state folder is not created");
            return;
        }
    }
    // The folders that do not exist yet, outermost first: those are created here.
    let mut created: Vec<&Path> = path
        .ancestors()
        .skip(1)
        .take_while(|a| !a.exists())
        .collect();
    created.reverse();
    created.push(path);
    let made = if p.ends_with('/') {
        std::fs::create_dir_all(path)
    } else {
        let body = if p.ends_with(".json") { "{}" } else { "" };
        path.parent()
            .map(std::fs::create_dir_all)
            .unwrap_or(Ok(()))
            .and_then(|_| std::fs::write(path, body))
    };
    let given = match (made, user) {
        (Ok(()), Some(u)) => created.iter().try_for_each(|c| u.give(c)),
        (made, _) => made,
    };
    if let Err(e) = given {
        tracing::warn!(path = %path.display(), error = %e, "cannot create the agent's state folder");
    }
}

/// Hides every task's attachments but `task_id`'s own: those saved in the turn's working
/// directory, in each folder above it, and in every other working directory tasks were given
/// (`work_dirs`: one in a subfolder of this one, or anywhere else). The sandbox hides only
/// those that exist.
pub fn reveal_attachments(spec: &mut SpawnSpec, task_id: &str, work_dirs: &[PathBuf]) {
    let own = crate::engine::input::attachments_dir(&spec.cwd, task_id);
    let (Some(p), Some(all)) = (spec.sandbox.as_mut(), own.parent()) else {
        return;
    };
    let folder_of = |dir: &Path| {
        crate::engine::input::attachments_dir(dir, task_id)
            .parent()
            .map(Path::to_path_buf)
    };
    let mut hide = vec![all.to_path_buf()];
    let others = spec.cwd.ancestors().skip(1).map(Path::to_path_buf);
    for dir in others.chain(work_dirs.iter().cloned()) {
        if let Some(f) = folder_of(&dir).filter(|f| !hide.contains(f)) {
            hide.push(f);
        }
    }
    p.hide.extend(hide);
    p.reveal.push(own.clone());
}

/// Shows the task its context's workspace and no other: the checkout writable, the folder
/// of all workspaces hidden. The source repository stays read-only, as all of the system
/// (the workspace borrows its objects through `objects/info/alternates`, reading them).
pub fn mount_workspace(
    spec: &mut SpawnSpec,
    all: &crate::workspace::Workspaces,
    ws: &crate::workspace::Workspace,
) {
    if let Some(p) = spec.sandbox.as_mut() {
        p.write.push(ws.checkout());
        p.workspace = Some(crate::runner::sandbox::WorkspaceMount {
            root: all.root().to_path_buf(),
            checkout: ws.checkout(),
            borrowed: ws.borrowed_objects(),
            source: Some(ws.source.clone()),
        });
    }
}

/// `template` with each `{name}` of `values` replaced, in one pass: text that comes from a
/// value (a prompt, a client's message id) is never taken for a placeholder. Unknown
/// placeholders stay as they are.
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let hit = after.find('}').and_then(|close| {
            let name = &after[..close];
            values
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v, close))
        });
        match hit {
            Some((value, close)) => {
                out.push_str(value);
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The environment of a CLI: the base allow-list and the adapter's `env.pass` taken from
/// `host_env`, then the adapter's `env.set`. Nothing else of the host's environment (its
/// tokens, keys) reaches the CLI.
pub fn child_env(
    adapter: &AdapterSpec,
    host_env: &[(String, String)],
    extra_pass: &[String],
) -> Vec<(String, String)> {
    let passes = |k: &str| {
        BASE_ENV.contains(&k)
            || adapter.env.pass.iter().any(|p| p == k)
            || extra_pass.iter().any(|p| p == k)
    };
    let mut env: Vec<(String, String)> = host_env
        .iter()
        .filter(|(k, _)| passes(k))
        .cloned()
        .collect();
    for (k, v) in &adapter.env.set {
        env.retain(|(ek, _)| ek != k);
        env.push((k.clone(), v.clone()));
    }
    env
}

/// Finds the adapter's program: `<ID>_PATH` from `host_env`, else `configured` (AGENT_BINARY),
/// else the adapter's `binary`; a bare name is looked up next to the agent-host executable,
/// then on PATH.
pub fn resolve_program(
    adapter: &AdapterSpec,
    configured: Option<&str>,
    host_env: &[(String, String)],
    cwd: &Path,
) -> Result<PathBuf, LaunchError> {
    let env_var = adapter.path_env_var();
    let from_env = host_env
        .iter()
        .find(|(k, v)| *k == env_var && !v.is_empty())
        .map(|(_, v)| v.clone());
    let name = from_env
        .or_else(|| configured.filter(|c| !c.is_empty()).map(str::to_string))
        .unwrap_or_else(|| adapter.binary.clone());
    if name.is_empty() {
        return Err(LaunchError::NoProgram {
            adapter: adapter.id.clone(),
            hint: format!("AGENT_HOST_BINARY (--binary) or {env_var}"),
        });
    }
    if name == SELF_BINARY {
        return std::env::current_exe().map_err(|_| LaunchError::NotFound {
            adapter: adapter.id.clone(),
            program: name.clone(),
            env_var: env_var.clone(),
            install: String::new(),
        });
    }
    let not_found = || LaunchError::NotFound {
        adapter: adapter.id.clone(),
        program: name.clone(),
        env_var: env_var.clone(),
        install: if adapter.install.is_empty() {
            String::new()
        } else {
            format!("install it ({}) or ", adapter.install)
        },
    };
    if name.contains('/') {
        let base = std::env::current_dir().unwrap_or_else(|_| cwd.to_path_buf());
        let p = base.join(&name);
        return match not_executable_reason(&p) {
            None => Ok(p),
            Some(reason) => Err(LaunchError::NotExecutable {
                adapter: adapter.id.clone(),
                path: name.clone(),
                reason,
            }),
        };
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        let sibling = dir.join(&name);
        if is_executable(&sibling) {
            return Ok(sibling);
        }
        // `cargo test` puts test binaries in target/debug/deps, next to target/debug.
        if let Some(parent) = dir.parent() {
            let up = parent.join(&name);
            if dir.ends_with("deps") && is_executable(&up) {
                return Ok(up);
            }
        }
    }
    let path = host_env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    which::which_in(&name, Some(path), cwd).map_err(|_| not_found())
}

/// Why `p` cannot be run, or None when it is an executable file.
fn not_executable_reason(p: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some("it does not exist".into()),
        Err(e) => Some(format!("it cannot be read ({e})")),
        Ok(m) if m.is_dir() => Some("it is a directory".into()),
        Ok(m) if !m.is_file() => Some("it is not a regular file".into()),
        Ok(m) if m.permissions().mode() & 0o111 == 0 => Some(format!(
            "it has no execute permission (mode {:o}; chmod +x it)",
            m.permissions().mode() & 0o7777
        )),
        Ok(_) => None,
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

mod route;
pub use route::PromptRoute;

#[cfg(test)]
mod tests;
