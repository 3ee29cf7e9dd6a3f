//! The sandbox's last tier and `sandbox_user`:
//! - with cgroups and bubblewrap left unused (`AGENT_SANDBOX_DISABLE=cgroup,bwrap`), the host
//!   as child subreaper still ends every process a task started (`setsid`, `timeout`,
//!   `setpgid`, a double-forking daemon) at exit, cancel and shutdown, and reaps the orphans
//!   it adopts; with `sandbox = "off"` on the same host settings they survive;
//! - with `sandbox_user = "nobody"` on a root host, the agent runs as uid 65534, writes its
//!   working directory, and cannot read a root-only file that it reads without the user and
//!   the sandbox;
//! - a root host in a user namespace of its own (`unshare -rn`) runs its tasks sandboxed.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use super::common::limit;
use super::sandbox::{escapes, text_of, Host};

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// What `agent-host doctor` says with `env` set (its sandbox lines).
async fn doctor(env: &[(&str, &str)]) -> String {
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-host"))
            .args([
                "doctor",
                "--store",
                "memory",
                "--port",
                "0",
                "--adapter",
                "demo",
            ])
            .env_remove("AGENT_HOST_CONFIG")
            .envs(env.iter().copied())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("doctor within 60 s")
    .expect("doctor runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn without_cgroups_and_bubblewrap_the_host_sweeps_what_a_task_started() {
    if !cfg!(target_os = "linux") {
        assert!(!in_ci(), "CI=true: the subreaper tier needs Linux");
        eprintln!("\n*** SKIPPED: the subreaper tier needs Linux ***\n");
        return;
    }
    limit(async {
        let disable = [("AGENT_SANDBOX_DISABLE", "cgroup,bwrap")];
        let said = doctor(&disable).await;
        assert!(said.contains("tracking: subreaper"), "{said}");
        assert!(
            said.contains("not used (sandbox_disable): cgroup, bwrap"),
            "{said}"
        );

        let swept = escapes("auto", &disable).await;
        assert!(swept.exit.is_empty(), "after exit: {:?}", swept.exit);
        assert!(swept.cancel.is_empty(), "after cancel: {:?}", swept.cancel);
        assert!(
            swept.sigterm.is_empty(),
            "after SIGTERM: {:?}",
            swept.sigterm
        );
        assert!(
            swept.zombies.is_empty(),
            "adopted orphans left unreaped: {:?}",
            swept.zombies
        );

        // The same host settings without the sandbox: nothing tracks them, they survive
        // (setsid, setpgid and the daemon leave the process group).
        let kept = escapes("off", &disable).await;
        assert!(kept.exit.len() >= 3, "off, after exit: {:?}", kept.exit);
        assert!(
            kept.cancel.len() >= 3,
            "off, after cancel: {:?}",
            kept.cancel
        );
        assert!(
            kept.sigterm.len() >= 3,
            "off, after SIGTERM: {:?}",
            kept.sigterm
        );
    })
    .await;
}

/// Whether every folder from `/` to `dir` lets other users through (`o+x`).
fn passable_by_others(dir: &Path) -> bool {
    dir.ancestors()
        .all(|d| std::fs::metadata(d).is_ok_and(|m| m.permissions().mode() & 0o001 != 0))
}

/// The probe's `whoami` report: `uid=N`, `write=ok|refused`, `read=ok|refused`.
async fn whoami(sandbox: &str, extra: &[(&str, &str)]) -> String {
    // The user must pass every folder on the way to the working directory, as an operator
    // sees to. The build's scratch folder may lie where it cannot (a clone under /root,
    // mode 0700), and a test does not open /root: the system's temporary folder then.
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let parent = if passable_by_others(scratch) {
        scratch.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let host = Host::start_in(&parent, sandbox, extra).await;
    // As an operator would: the folders on the way passable, the working directory the
    // user's (agent-host gives away only what it creates for a task).
    let root = host.path("");
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let work = host.path("work");
    let nobody = nix::unistd::User::from_name("nobody")
        .expect("passwd")
        .expect("user nobody");
    std::os::unix::fs::chown(&work, Some(nobody.uid.as_raw()), Some(nobody.gid.as_raw()))
        .expect("chown");
    let secret = host.path("work/root-only.txt");
    std::fs::write(&secret, "root's").expect("write");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let task = host.run(&format!("whoami {}", secret.display())).await;
    let written = host.path("work/written-by-agent");
    let owner = std::fs::metadata(&written).map(|m| std::os::unix::fs::MetadataExt::uid(&m));
    host.sigterm().await;
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    format!("{} owner={owner:?}", text_of(&task))
}

#[tokio::test]
async fn a_sandbox_user_runs_the_agent_as_that_user() {
    if !nix::unistd::geteuid().is_root() {
        // The test needs root (only root can switch users); CI runs as root.
        assert!(
            !in_ci(),
            "CI=true but not root: sandbox_user needs a root host"
        );
        eprintln!("\n*** SKIPPED: sandbox_user needs a host running as root ***\n");
        return;
    }
    limit(async {
        let as_nobody = whoami("auto", &[("AGENT_SANDBOX_USER", "nobody")]).await;
        assert!(as_nobody.contains("uid=65534"), "{as_nobody}");
        assert!(as_nobody.contains("write=ok"), "{as_nobody}");
        assert!(as_nobody.contains("owner=Ok(65534)"), "{as_nobody}");
        assert!(as_nobody.contains("read=refused"), "{as_nobody}");

        // doctor says when the user cannot write the working directory, and when it can.
        let repo = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(repo.path(), std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
        let repo_path = repo.path().display().to_string();
        let user = ("AGENT_SANDBOX_USER", "nobody");
        let said = doctor(&[user, ("AGENT_REPO_PATH", &repo_path)]).await;
        assert!(said.contains("user nobody (uid 65534)"), "{said}");
        assert!(
            said.contains("nobody (uid 65534) cannot write the working directory"),
            "{said}"
        );
        std::fs::set_permissions(repo.path(), std::fs::Permissions::from_mode(0o777))
            .expect("chmod");
        let said = doctor(&[user, ("AGENT_REPO_PATH", &repo_path)]).await;
        assert!(said.contains("nobody (uid 65534) can write"), "{said}");

        // Without the user (and without the sandbox) the same agent runs as root and reads it.
        let as_root = whoami("off", &[]).await;
        assert!(as_root.contains("uid=0"), "{as_root}");
        assert!(as_root.contains("read=ok"), "{as_root}");
    })
    .await;
}

/// A root host inside a user namespace of its own (`unshare -rn`: only root is mapped, as a
/// container runtime or a test harness makes) runs tasks with the default sandbox: before,
/// the cgroup folders could not be given to `nobody` (unmapped there: EINVAL) and every
/// task failed to start, while `doctor` passed the cgroup piece. The host inside ends by
/// itself (`timeout`) should the test be cut short.
#[tokio::test]
async fn a_root_host_in_a_user_namespace_of_its_own_runs_its_tasks_sandboxed() {
    if !super::sandbox::sandbox_available() || nix::unistd::geteuid().as_raw() != 0 {
        eprintln!("\n*** SKIPPED: needs a root host with the sandbox ***\n");
        assert!(!in_ci(), "CI runs as root with bubblewrap");
        return;
    }
    limit(async {
        let home = tempfile::tempdir().unwrap();
        let script = format!(
            "ip link set lo up || exit 3
             timeout 80 {bin} serve --port 41399 --store memory --adapter demo >{log} 2>&1 &
             host=$!
             for i in $(seq 100); do {bin} card http://127.0.0.1:41399 >/dev/null 2>&1 && break; sleep 0.1; done
             {bin} call http://127.0.0.1:41399 hello; code=$?
             kill $host; wait $host; exit $code",
            bin = env!("CARGO_BIN_EXE_agent-host"),
            log = home.path().join("host.log").display(),
        );
        let out = tokio::time::timeout(
            Duration::from_secs(90),
            tokio::process::Command::new("unshare")
                .args(["-rn", "sh", "-c", &script])
                .env("HOME", home.path())
                .env_remove("AGENT_HOST_CONFIG")
                .kill_on_drop(true)
                .output(),
        )
        .await
        .expect("within 90 s")
        .expect("unshare runs");
        let log = std::fs::read_to_string(home.path().join("host.log")).unwrap_or_default();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}\nhost log:\n{log}");
        assert!(err.contains("✓ completed"), "{err}");
        assert!(log.contains("sandbox: tracking: cgroup"), "{log}");
    })
    .await;
}
