//! Workspaces beside plain git, in one run: the time and CPU to make a context's workspace
//! (`Workspaces::for_turn` on a context's first turn) against `git worktree add`; to take a
//! turn's change at its end (what the engine runs when a turn ends: the commit, the head and
//! the change; the disk use, measured when `/metrics` is read, on its own) against `git diff
//! --stat` of the same change; and the change alone (what `Workspaces::changes` computes: the
//! files staged and diffed, no commit) against `git diff` (the patch of the same edits, which
//! leaves the new file out) and against plain git's way to show the whole change, the new
//! file included (`git add -A` then `git diff --cached`, two processes as the host's), on
//! repositories of 100, 10,000 and 100,000 files. Plain git and the workspace alternate
//! within each run, so a busy machine slows both alike.
//!
//! CPU is this process's and its children's (the git processes), from `getrusage`: on a
//! machine shared with other work it moves much less than the wall time.
//!
//! `cargo test --release --bench workspace -- --bench [FILES...]` measures (RUNS=N runs,
//! default 5, medians); the time is git's, so a debug build (`cargo test --bench workspace
//! -- --bench`) gives the same figures. Without `--bench` (as `cargo test --all-targets` runs
//! it) it makes one workspace of a 100-file repository and takes one change, as a smoke test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use agent_host::workspace::{Workspace, WorkspaceConfig, Workspaces};
use nix::sys::resource::{getrusage, UsageWho};

/// Wall time and CPU (user + system, this process and its waited-for children).
#[derive(Debug, Clone, Copy, Default)]
struct Cost {
    wall: Duration,
    cpu: Duration,
}

fn cpu_now() -> Duration {
    let tv = |t: nix::sys::time::TimeVal| {
        Duration::from_micros(t.tv_sec() as u64 * 1_000_000 + t.tv_usec() as u64)
    };
    [UsageWho::RUSAGE_SELF, UsageWho::RUSAGE_CHILDREN]
        .into_iter()
        .map(|who| getrusage(who).expect("getrusage"))
        .map(|u| tv(u.user_time()) + tv(u.system_time()))
        .sum()
}

fn measure<T>(f: impl FnOnce() -> T) -> (T, Cost) {
    let (c0, t0) = (cpu_now(), Instant::now());
    let out = f();
    let cost = Cost {
        wall: t0.elapsed(),
        cpu: cpu_now().saturating_sub(c0),
    };
    (out, cost)
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=b", "-c", "user.email=b@b"])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A repository of `files` small files in 100 folders, one commit, its objects packed.
fn repository(dir: &Path, files: usize) -> PathBuf {
    let repo = dir.join(format!("src{files}"));
    for d in 0..100 {
        std::fs::create_dir_all(repo.join(format!("d{d}"))).expect("mkdir");
    }
    for i in 0..files {
        let path = repo.join(format!("d{}/f{i}.txt", i % 100));
        std::fs::write(path, format!("file {i} of the benchmark repository\n")).expect("write");
    }
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "base"]);
    // Packed, as a cloned repository is (loose objects make every lookup a file of its own).
    git(&repo, &["repack", "-adq"]);
    repo
}

/// A turn's change: 10 files edited, 1 added.
fn change(checkout: &Path) {
    for i in 0..10 {
        let path = checkout.join(format!("d{i}/f{i}.txt"));
        let mut text = std::fs::read_to_string(&path).expect("read");
        text.push_str("one more line\n");
        std::fs::write(path, text).expect("write");
    }
    std::fs::write(checkout.join("new.txt"), "a new file\n").expect("write");
}

/// What the engine runs when a turn ends (engine::changes): the commit and the change (the
/// workspace's disk use is measured when `/metrics` is next read).
fn turn_end(all: &Workspaces, ws: &Workspace) -> usize {
    let end = all
        .end_turn(ws, Some(("the prompt's first line", "task-1")))
        .expect("turn end");
    all.changed(ws);
    assert!(end.committed.is_some());
    end.changes.files.len()
}

/// One run on `repo`: plain git, then the workspace. The costs: `git worktree add`, the
/// workspace made, `git diff --stat`, the turn's end, the disk use, `git diff` (the patch),
/// the change alone (no commit), plain git's whole change (`add -A`, `diff --cached`).
/// `turn`: how long the turn lasts between making the checkouts and editing them (full runs).
fn run(dir: &Path, repo: &Path, all: &Workspaces, n: usize, turn: Option<Duration>) -> [Cost; 8] {
    let wt = dir.join(format!("wt{n}"));
    let wt_arg = wt.to_str().expect("utf-8 path");
    let ((), worktree) = measure(|| {
        git(
            repo,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                &format!("wt{n}"),
                wt_arg,
                "HEAD",
            ],
        )
    });
    let context = format!("{n:08x}-bench");
    let (ws, made) = measure(|| all.for_turn(&context, repo, None).expect("workspace"));
    let ws = ws.expect("a workspace (the folder is a repository)");
    if let Some(turn) = turn {
        // A turn of a few seconds. Both checkouts' indexes were written in the second their
        // files were, so git reads every file again until an index is written in a later
        // second ("racily clean" entries): plain git does at its first look, the host in the
        // background a second after it made the workspace (its refreshed copy of the index,
        // `workspace::seed`), which this wait lets finish (about a second at 100,000 files);
        // its CPU is not in the turn's end's column. An edit in the second of the checkout
        // would make both sides pay for it, which no real turn does.
        std::thread::sleep(turn);
    }
    change(&wt);
    change(&ws.checkout());
    // In pairs, each side in the same place: the first git to read the edited files reads
    // every file whose index entry is "racily clean" (checked out in the second its index
    // was written) and leaves an index that is not (`git diff` writes back what it
    // refreshed; the turn's end's commit replaces the workspace's index), so the next one
    // costs less. First the stat and the turn's end, then the patch and the change alone
    // (taken from a temporary index, as the turn's end's change is).
    let ((), diff) = measure(|| git(&wt, &["diff", "--stat"]));
    let (files, ended) = measure(|| turn_end(all, &ws));
    let ((), patch) = measure(|| git(&wt, &["diff"]));
    let (change_alone, alone) = measure(|| all.changes(&ws).expect("changes"));
    let ((), whole) = measure(|| {
        git(&wt, &["add", "-A"]);
        git(&wt, &["diff", "--cached"]);
    });
    assert_eq!(change_alone.files.len(), 11, "10 files edited, 1 added");
    assert_eq!(files, 11, "10 files edited, 1 added");
    let (_, disk) = measure(|| all.refresh_gauges());
    git(repo, &["worktree", "remove", "--force", wt_arg]);
    git(repo, &["branch", "-q", "-D", &format!("wt{n}")]);
    all.remove(&context).expect("remove");
    [worktree, made, diff, ended, disk, patch, alone, whole]
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let full = args.iter().any(|a| a == "--bench");
    let mut sizes: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    if sizes.is_empty() {
        sizes = if full {
            vec![100, 10_000, 100_000]
        } else {
            vec![100]
        };
    }
    let runs: usize = if full {
        std::env::var("RUNS")
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(5)
    } else {
        1
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let all = Workspaces::open(
        &WorkspaceConfig {
            dir: Some(tmp.path().join("workspaces")),
            ..WorkspaceConfig::default()
        },
        None,
    )
    .expect("workspaces");
    if full {
        println!("| files | `git worktree add` | workspace made | ratio | `git diff --stat` | turn's end (commit, change) | ratio | `git diff` (the patch) | the change alone (no commit) | ratio | plain git, new file included (`add -A`, `diff --cached`) | ratio | disk use (next `/metrics`) |");
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    }
    for files in sizes {
        let repo = repository(tmp.path(), files);
        let turn = full.then(|| Duration::from_secs(if files > 50_000 { 3 } else { 2 }));
        let results: Vec<[Cost; 8]> = (0..runs)
            .map(|r| run(tmp.path(), &repo, &all, r, turn))
            .collect();
        if !full {
            continue;
        }
        let col =
            |i: usize, f: fn(&Cost) -> Duration| median(results.iter().map(|c| f(&c[i])).collect());
        let cell = |i: usize| {
            format!(
                "{} wall, {} CPU",
                ms(col(i, |c| c.wall)),
                ms(col(i, |c| c.cpu))
            )
        };
        let ratio = |a: usize, b: usize| {
            let r = |f: fn(&Cost) -> Duration| {
                col(b, f).as_secs_f64() / col(a, f).as_secs_f64().max(1e-9)
            };
            format!("{:.2}× wall, {:.2}× CPU", r(|c| c.wall), r(|c| c.cpu))
        };
        println!(
            "| {files} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell(0),
            cell(1),
            ratio(0, 1),
            cell(2),
            cell(3),
            ratio(2, 3),
            cell(5),
            cell(6),
            ratio(5, 6),
            cell(7),
            ratio(7, 6),
            cell(4)
        );
        std::fs::remove_dir_all(&repo).expect("rm repo");
    }
}
