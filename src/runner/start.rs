//! Starting a [`Process`]: the command (contained per [`sandbox`], without forking the host:
//! [`sandbox::setup`]), its stdio (pipes or a pty), the readers of its output.

use std::io;
use std::process::Stdio;

use tokio::io::AsyncWrite;
use tokio::process::Child;
use tokio::sync::mpsc;

use super::lines::{LineReader, Stream};
use super::spawner::spawn_cmd;
use super::stdin::write_stdin_task;
use super::{
    pty, sandbox, IoMode, Outputs, Process, RunnerError, SpawnSpec, StdinMode, PARTIAL_LINE_AFTER,
};

impl Process {
    /// Start the child. Must be called inside a tokio runtime.
    #[allow(
        clippy::too_many_lines,
        reason = "the start in the order it must happen (sandbox, command, stdio of the mode, pid, stdin writer), each step using what the one before made; split, the steps would pass half a dozen values along"
    )]
    pub fn spawn(spec: SpawnSpec) -> Result<Process, RunnerError> {
        let mut prepared = match &spec.sandbox {
            Some(policy) if policy.mode != sandbox::Mode::Off => {
                sandbox::log_once(policy);
                Some(sandbox::Prepared::new(
                    policy,
                    &spec.program,
                    &spec.args,
                    &spec.cwd,
                    spec.env
                        .iter()
                        .find(|(k, _)| k == "PATH")
                        .map(|(_, v)| v.as_str()),
                )?)
            }
            _ => None,
        };
        let (program, args) = match &prepared {
            Some(p) => (p.program.clone(), p.args.clone()),
            None => (spec.program.clone(), spec.args.clone()),
        };
        let wrapped = prepared.as_ref().is_some_and(|p| p.wrapped);
        let mark = prepared
            .as_ref()
            .and_then(|p| p.track.as_ref())
            .map(|t| t.mark());
        let mut steps = prepared
            .as_mut()
            .map(sandbox::Prepared::take_steps)
            .unwrap_or_default();
        // On a pty the child leads a new session with the terminal as its controlling tty.
        steps.session = spec.io == IoMode::Pty;
        let mut cmd = sandbox::setup::command(steps, &program, &args)?;
        cmd.current_dir(&spec.cwd)
            .env_clear()
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .kill_on_drop(false);
        if let Some(mark) = &mark {
            cmd.env(sandbox::reaper::MARK_VAR, mark);
        }
        let spawn_err = |source| RunnerError::Spawn {
            program: spec.program.display().to_string(),
            source,
        };
        let max = spec.max_line_bytes;
        let mut output = Outputs::default();
        let mut tasks = Vec::new();
        let (initial, keep_open) = match spec.stdin {
            StdinMode::Null => (None, false),
            StdinMode::Write { initial, keep_open } => (Some(initial), keep_open),
        };
        // From the spawn until the program is recorded, the host's reaping of adopted orphans
        // waits (it must never take the exit status tokio waits for).
        let spawning = sandbox::reaper::spawning();

        let (child, writer): (Child, Option<Box<dyn AsyncWrite + Send + Unpin>>) = match spec.io {
            IoMode::Pipes => {
                cmd.process_group(0)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .stdin(if initial.is_some() {
                        Stdio::piped()
                    } else {
                        Stdio::null()
                    });
                let mut child = spawn_cmd(cmd, wrapped).map_err(spawn_err)?;
                if let Some(out) = child.stdout.take() {
                    output.stdout = Some(LineReader::new(Box::new(out), Stream::Stdout, max, None));
                }
                if let Some(err) = child.stderr.take() {
                    output.stderr = Some(LineReader::new(Box::new(err), Stream::Stderr, max, None));
                }
                let writer = child
                    .stdin
                    .take()
                    .map(|w| Box::new(w) as Box<dyn AsyncWrite + Send + Unpin>);
                (child, writer)
            }
            IoMode::Pty => {
                let pty = pty::open_pty().map_err(RunnerError::Pty)?;
                let slave = |p: &pty::Pty| {
                    p.slave
                        .try_clone()
                        .map(Stdio::from)
                        .map_err(RunnerError::Pty)
                };
                cmd.stdout(slave(&pty)?).stderr(slave(&pty)?);
                cmd.stdin(if initial.is_some() {
                    slave(&pty)?
                } else {
                    Stdio::null()
                });
                // Closes every parent copy of the slave (the Stdio values live in `cmd`, dropped
                // after the spawn), so that reading the master reports EOF once the child side is gone.
                let spawned = spawn_cmd(cmd, wrapped);
                drop(pty.slave);
                let child = spawned.map_err(spawn_err)?;
                let master = pty::Master::new(pty.master).map_err(RunnerError::Pty)?;
                output.stdout = Some(LineReader::new(
                    Box::new(master.clone()),
                    Stream::Stdout,
                    max,
                    Some(PARTIAL_LINE_AFTER),
                ));
                let writer = initial
                    .is_some()
                    .then(|| Box::new(master) as Box<dyn AsyncWrite + Send + Unpin>);
                (child, writer)
            }
        };

        // The leader's pid is known until it is reaped, which only we do.
        let pid = child.id().ok_or_else(|| {
            spawn_err(io::Error::other(
                "child exited and was reaped before its pid was read",
            ))
        })?;
        let start_ticks = sandbox::reaper::leader_started(pid);
        drop(spawning);

        let mut stdin = None;
        if let Some(writer) = writer {
            let (req_tx, req_rx) = mpsc::channel(16);
            tasks.push(tokio::spawn(write_stdin_task(
                writer,
                initial.unwrap_or_default(),
                req_rx,
            )));
            if keep_open {
                stdin = Some(req_tx);
            }
        }

        let (cgroup, wrapped, tracker) = match prepared {
            Some(mut p) => (
                p.cgroup.take(),
                p.wrapped,
                p.track.take().map(|t| t.started(pid)),
            ),
            None => (None, false, None),
        };
        Ok(Process {
            pid,
            child,
            output,
            stdin,
            tasks,
            exit: None,
            group_gone: false,
            cgroup,
            tracker,
            wrapped,
            limit_hit: None,
            start_ticks,
            killed: false,
        })
    }
}
