use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;
use crate::workspace::changes::FileStatus;
use crate::workspace::source::may_be_in_work_tree;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgSign=false",
        ])
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim_end().to_string()
}

/// A repository with a few files committed, a tag `v1` at its first commit.
fn source(dir: &Path) -> PathBuf {
    let repo = dir.join("src");
    std::fs::create_dir_all(repo.join("sub")).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(repo.join("gone.txt"), "to be deleted\n").unwrap();
    std::fs::write(
        repo.join("old.txt"),
        "a file that is renamed\nwith two lines\n",
    )
    .unwrap();
    std::fs::write(repo.join("sub/b.txt"), "b\n").unwrap();
    std::fs::write(repo.join(".gitignore"), "*.log\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    git(&repo, &["tag", "v1"]);
    std::fs::write(repo.join("a.txt"), "one\ntwo\nthree\nfour\n").unwrap();
    git(&repo, &["commit", "-q", "-am", "second"]);
    std::fs::canonicalize(repo).unwrap()
}

fn workspaces(dir: &Path, limit: usize) -> Workspaces {
    let config = WorkspaceConfig {
        dir: Some(dir.join("ws")),
        patch_limit: crate::units::ByteSize(limit as u64),
        ..WorkspaceConfig::default()
    };
    Workspaces::open(&config, None).unwrap()
}

fn state(repo: &Path) -> (String, String, String) {
    (
        git(repo, &["status", "--porcelain"]),
        git(repo, &["rev-parse", "HEAD"]),
        git(repo, &["for-each-ref"]),
    )
}

#[test]
fn a_workspace_starts_at_head_on_its_branch_and_leaves_the_source_alone() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let before = state(&src);
    let all = workspaces(t.path(), 1 << 20);
    let ws = all
        .for_turn("ctx-12345678-abc", &src.join("sub"), None)
        .unwrap()
        .expect("a workspace");
    assert_eq!(ws.branch, "agent-host/ctx-12345678-abc");
    assert_eq!(ws.base_commit, git(&src, &["rev-parse", "HEAD"]));
    assert!(!ws.source_dirty);
    let co = ws.checkout();
    assert_eq!(
        git(&co, &["symbolic-ref", "HEAD"]),
        "refs/heads/agent-host/ctx-12345678-abc"
    );
    assert_eq!(
        std::fs::read_to_string(co.join("a.txt")).unwrap(),
        "one\ntwo\nthree\nfour\n"
    );
    assert_eq!(ws.map_cwd(&src.join("sub")), co.join("sub"));
    assert_eq!(ws.map_cwd(t.path()), co);
    // Its own objects and refs: it borrows the source's objects only to read them.
    assert!(co.join(".git/objects/info/alternates").is_file());
    assert_eq!(git(&co, &["remote"]), "");
    // A follow-up gets the same workspace.
    let again = all
        .for_turn("ctx-12345678-abc", &src, Some("v1"))
        .unwrap()
        .unwrap();
    assert_eq!(again, ws);
    assert_eq!(state(&src), before);
    assert_eq!(all.list().len(), 1);
    assert!(all.disk_use() > 0);
    assert!(all.remove("ctx-12345678-abc").unwrap());
    assert!(all.list().is_empty());
    assert!(!all.remove("ctx-12345678-abc").unwrap());
}

#[test]
fn distinct_contexts_get_distinct_valid_branch_names() {
    assert_eq!(
        branch_name("5b2e90aa-1c3d-4e5f-8a9b-0c1d2e3f4a5b"),
        "agent-host/5b2e90aa",
        "a UUID (the host's own ids): its first 8"
    );
    assert_eq!(branch_name("session-1"), "agent-host/session-1");
    let ids = [
        "session-1",
        "session-2",
        "a.b",
        "a:b",
        "a-b",
        "x.lock",
        "..",
        &"long-".repeat(30),
        &format!("{}1", "long-".repeat(30)),
    ];
    let names: Vec<String> = ids.iter().map(|id| branch_name(id)).collect();
    let unique: std::collections::HashSet<&String> = names.iter().collect();
    assert_eq!(unique.len(), ids.len(), "{names:?}");
    for name in &names {
        assert!(
            name.len() <= "agent-host/".len() + LONGEST_BRANCH_ID,
            "{name}"
        );
        let ok = Command::new("git")
            .args(["check-ref-format", &format!("refs/heads/{name}")])
            .status()
            .unwrap();
        assert!(ok.success(), "{name}");
    }
}

#[test]
fn a_tag_or_a_commit_is_a_base_and_a_bad_ref_is_refused_with_nothing_made() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let all = workspaces(t.path(), 1 << 20);
    let first = git(&src, &["rev-parse", "v1^{commit}"]);
    let ws = all.for_turn("tag", &src, Some("v1")).unwrap().unwrap();
    assert_eq!(
        (ws.base_ref.as_str(), ws.base_commit.as_str()),
        ("v1", first.as_str())
    );
    assert_eq!(
        std::fs::read_to_string(ws.checkout().join("a.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
    let ws = all
        .for_turn("commit", &src, Some(&first[..10]))
        .unwrap()
        .unwrap();
    assert_eq!(ws.base_commit, first);
    for bad in [
        "no-such-branch",
        "--upload-pack=x",
        "0123456789abcdef0123456789abcdef01234567",
        "",
        "^main",
        "^HEAD",
        "main..v1",
        "v1...main",
        "HEAD@{0}",
        ":/first",
        "v1:a.txt",
    ] {
        let err = all
            .for_turn(&format!("bad{bad}"), &src, Some(bad))
            .unwrap_err();
        assert!(matches!(err, WorkspaceError::BadRef { .. }), "{bad}: {err}");
        assert!(err.is_bad_input());
        assert!(all.check_base(&src, Some(bad)).is_err());
    }
    assert_eq!(all.list().len(), 2, "nothing half-made");
    let leftovers: Vec<_> = std::fs::read_dir(all.root())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with('.') && !name.starts_with(".git-template-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_base_is_a_plain_name_of_one_commit_with_ancestry_steps() {
    use crate::workspace::source::unusable;
    for good in [
        "HEAD",
        "HEAD~1",
        "HEAD^",
        "main~2^1",
        "v1",
        "refs/heads/main",
        "feature/x-1.2",
        "0123abc",
    ] {
        assert!(!unusable(good), "{good}");
    }
    for bad in [
        "",
        "^main",
        "^HEAD",
        "main..feature",
        "main...feature",
        "HEAD@{1}",
        "@{-1}",
        "@",
        ":/text",
        "v1:path",
        "v1^{tree}",
        "HEAD~x",
        "-x",
        "a b",
        "x.lock",
        ".hidden",
        "a//b",
        "a/",
        "a\nb",
    ] {
        assert!(unusable(bad), "{bad}");
    }
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let all = workspaces(t.path(), 1 << 20);
    let parent = git(&src, &["rev-parse", "HEAD~1"]);
    let full = git(&src, &["rev-parse", "HEAD"]);
    for (i, (base, commit)) in [
        ("HEAD~1", &parent),
        ("refs/heads/main", &full),
        (&full[..], &full),
        ("main^", &parent),
    ]
    .into_iter()
    .enumerate()
    {
        let ws = all.for_turn(&format!("ok{i}"), &src, Some(base)).unwrap();
        assert_eq!(&ws.expect("a workspace").base_commit, commit, "{base}");
    }
}

#[test]
fn no_repository_no_commits_and_a_dirty_source() {
    let t = tempfile::tempdir().unwrap();
    let plain = t.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let auto = workspaces(t.path(), 1 << 20);
    assert!(
        auto.for_turn("c", &plain, None).unwrap().is_none(),
        "auto shares outside a repository"
    );
    let isolated = Workspaces::open(
        &WorkspaceConfig {
            mode: Some(WorkspaceMode::Isolated),
            dir: Some(t.path().join("ws2")),
            ..Default::default()
        },
        None,
    )
    .unwrap();
    assert!(matches!(
        isolated.for_turn("c", &plain, None),
        Err(WorkspaceError::NotARepository { .. })
    ));
    let empty = t.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    git(&empty, &["init", "-q"]);
    // A fresh `git init` has no base: auto shares the folder (a newcomer's first task
    // works), while a named baseRef and isolated are refused.
    assert!(auto.for_turn("c", &empty, None).unwrap().is_none());
    assert!(auto.check_base(&empty, None).is_ok());
    assert!(matches!(
        auto.for_turn("c", &empty, Some("main")),
        Err(WorkspaceError::NoCommits { .. })
    ));
    assert!(matches!(
        isolated.for_turn("c", &empty, None),
        Err(WorkspaceError::NoCommits { .. })
    ));
    // HEAD on a branch without commits while another branch has some: said as such, with
    // baseRef as the way out.
    let unborn = source(&t.path().join("unborn"));
    git(&unborn, &["checkout", "-q", "--orphan", "fresh"]);
    git(&unborn, &["rm", "-rfq", "--cached", "."]);
    let err = isolated.for_turn("u", &unborn, None).unwrap_err();
    assert!(
        matches!(&err, WorkspaceError::UnbornHead { branch, .. } if branch == "fresh"),
        "{err}"
    );
    assert!(err.is_bad_input());
    let text = err.to_string();
    assert!(
        text.contains("baseRef") && !text.contains("no commits yet:"),
        "{text}"
    );
    assert!(matches!(
        isolated.check_base(&unborn, None),
        Err(WorkspaceError::UnbornHead { .. })
    ));
    assert!(isolated
        .for_turn("u", &unborn, Some("main"))
        .unwrap()
        .is_some());
    assert!(auto.for_turn("u2", &unborn, None).unwrap().is_none());
    let src = source(t.path());
    std::fs::create_dir_all(src.join("build/out")).unwrap();
    std::fs::write(src.join(".gitignore"), "*.log\nbuild/\n").unwrap();
    assert!(
        auto.for_turn("c", &src.join("build/out"), None)
            .unwrap()
            .is_none(),
        "an ignored folder is shared"
    );
    std::fs::write(src.join("a.txt"), "uncommitted\n").unwrap();
    let ws = auto.for_turn("dirty", &src, None).unwrap().unwrap();
    assert!(ws.source_dirty);
    assert_eq!(
        std::fs::read_to_string(ws.checkout().join("a.txt")).unwrap(),
        "one\ntwo\nthree\nfour\n"
    );
    let shared = Workspaces::open(
        &WorkspaceConfig {
            mode: Some(WorkspaceMode::Shared),
            dir: Some(t.path().join("ws3")),
            ..Default::default()
        },
        None,
    )
    .unwrap();
    assert!(shared.for_turn("c", &src, None).unwrap().is_none());
}

#[test]
fn the_limit_refuses_a_new_workspace_and_keeps_the_old_ones() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let config = WorkspaceConfig {
        dir: Some(t.path().join("ws")),
        max_workspaces: 2,
        ..Default::default()
    };
    let all = Workspaces::open(&config, None).unwrap();
    all.for_turn("one", &src, None).unwrap();
    all.for_turn("two", &src, None).unwrap();
    assert!(matches!(
        all.for_turn("three", &src, None),
        Err(WorkspaceError::TooMany { max: 2, .. })
    ));
    assert!(
        all.for_turn("one", &src, None).unwrap().is_some(),
        "follow-ups still run"
    );
    assert_eq!(all.list().len(), 2);
}

/// The limit bounds the host's workspaces, every adapter's together (each adapter has a
/// folder of its own).
#[test]
fn the_limit_counts_every_adapters_workspaces() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let config = |dir: &str| WorkspaceConfig {
        dir: Some(t.path().join(dir)),
        max_workspaces: 2,
        ..Default::default()
    };
    let first = Workspaces::open(&config("ws"), None).unwrap();
    let second = Workspaces::open(&config("ws-other"), None)
        .unwrap()
        .counted_with(&first.host());
    first.for_turn("one", &src, None).unwrap();
    second.for_turn("two", &src, None).unwrap();
    for all in [&first, &second] {
        assert!(matches!(
            all.for_turn("three", &src, None),
            Err(WorkspaceError::TooMany { max: 2, .. })
        ));
    }
}

/// The agent's kinds of change: an edit, a new file, an untracked and an ignored file, a
/// binary file, a rename, a deletion.
fn edit(co: &Path) {
    std::fs::write(co.join("a.txt"), "one\n2\nthree\nfour\nfive\n").unwrap();
    std::fs::write(co.join("new.txt"), "new\n").unwrap();
    std::fs::write(co.join("debug.log"), "ignored\n").unwrap();
    std::fs::write(co.join("img.bin"), [0u8, 159, 146, 150, 0, 255, 1, 2]).unwrap();
    std::fs::rename(co.join("old.txt"), co.join("renamed.txt")).unwrap();
    std::fs::remove_file(co.join("gone.txt")).unwrap();
    // Staged in the agent's own index: the host's diff must not disturb it.
    git(co, &["add", "new.txt"]);
}

/// The tree `patch` gives applied onto a clean checkout of `base`.
fn applied_tree(src: &Path, base: &str, patch: &[u8], dir: &Path) -> String {
    let clean = dir.join("clean");
    git(
        src,
        &[
            "worktree",
            "add",
            "-q",
            "--detach",
            clean.to_str().unwrap(),
            base,
        ],
    );
    let file = dir.join("p.patch");
    std::fs::write(&file, patch).unwrap();
    git(&clean, &["apply", "--index", file.to_str().unwrap()]);
    let tree = git(&clean, &["write-tree"]);
    git(
        src,
        &["worktree", "remove", "--force", clean.to_str().unwrap()],
    );
    tree
}

fn tree_of(co: &Path, dir: &Path) -> String {
    let idx = dir.join("tree-index");
    let _ = std::fs::remove_file(&idx);
    let run = |args: &[&str]| {
        let out = Command::new("git")
            .arg("-C")
            .arg(co)
            .args(args)
            .env("GIT_INDEX_FILE", &idx)
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    run(&["add", "-A"]);
    run(&["write-tree"])
}

#[test]
fn the_changes_list_every_kind_of_change_and_the_patch_applies() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let all = workspaces(t.path(), 1 << 20);
    let ws = all.for_turn("kinds", &src, None).unwrap().unwrap();
    let co = ws.checkout();
    assert_eq!(
        all.changes(&ws).unwrap(),
        Changes::default(),
        "nothing changed yet"
    );
    edit(&co);
    let staged_before = git(&co, &["diff", "--cached", "--name-only"]);
    let ch = all.changes(&ws).unwrap();
    assert_eq!(
        git(&co, &["diff", "--cached", "--name-only"]),
        staged_before,
        "the agent's index is untouched"
    );
    let find = |p: &str| {
        ch.files
            .iter()
            .find(|f| f.path == p)
            .unwrap_or_else(|| panic!("{p} in {:?}", ch.files))
    };
    assert_eq!(find("a.txt").status, FileStatus::Modified);
    assert_eq!((find("a.txt").additions, find("a.txt").deletions), (2, 1));
    assert_eq!(find("new.txt").status, FileStatus::Added);
    assert_eq!(find("gone.txt").status, FileStatus::Deleted);
    assert_eq!(find("renamed.txt").status, FileStatus::Renamed);
    assert_eq!(find("renamed.txt").old_path.as_deref(), Some("old.txt"));
    assert!(find("img.bin").binary);
    assert!(
        ch.files.iter().all(|f| f.path != "debug.log"),
        "ignored files stay out"
    );
    assert_eq!(ch.files.len(), 5);
    assert!(!ch.truncated);
    let text = String::from_utf8_lossy(&ch.patch);
    assert!(text.contains("GIT binary patch"), "{text}");
    assert!(text.contains("rename from old.txt"));
    assert_eq!(
        applied_tree(&src, &ws.base_commit, &ch.patch, t.path()),
        tree_of(&co, t.path())
    );
}

#[test]
fn a_turns_end_gives_the_same_commit_and_change_as_the_two_steps_apart() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let all = workspaces(t.path(), 1 << 20);
    let ws = all.for_turn("end", &src, None).unwrap().unwrap();
    let co = ws.checkout();
    let nothing = all.end_turn(&ws, Some(("nothing", "t0"))).unwrap();
    assert_eq!(nothing.committed, None);
    assert_eq!(nothing.head, ws.base_commit);
    assert_eq!(nothing.changes, Changes::default());
    edit(&co);
    let end = all.end_turn(&ws, Some(("Edit\nmore", "t1"))).unwrap();
    let commit = end.committed.clone().expect("a commit");
    assert_eq!(end.head, commit);
    assert_eq!(git(&co, &["rev-parse", "HEAD"]), commit);
    assert_eq!(git(&co, &["log", "-1", "--format=%s"]), "Edit");
    assert_eq!(
        git(&co, &["status", "--porcelain"]),
        "",
        "the index follows the commit"
    );
    assert_eq!(
        end.changes,
        all.changes(&ws).unwrap(),
        "the change as taken apart"
    );
    assert_eq!(end.changes.files.len(), 5);
    std::fs::write(co.join("later.txt"), "not committed\n").unwrap();
    let off = all.end_turn(&ws, None).unwrap();
    assert_eq!((off.committed, off.head), (None, commit));
    assert_eq!(off.changes.files.len(), 6);
}

#[test]
fn turn_commits_are_one_per_changing_turn_and_the_patch_stays_cumulative() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let before = state(&src);
    let all = workspaces(t.path(), 1 << 20);
    let ws = all.for_turn("commits", &src, None).unwrap().unwrap();
    let co = ws.checkout();
    assert_eq!(all.commit_turn(&ws, "nothing", "t0").unwrap(), None);
    std::fs::write(co.join("one.txt"), "1\n").unwrap();
    let c1 = all
        .commit_turn(&ws, "Add one\nand more words", "t1")
        .unwrap()
        .expect("a commit");
    assert_eq!(
        git(&co, &["status", "--porcelain"]),
        "",
        "the agent's index follows the commit"
    );
    assert_eq!(
        git(
            &co,
            &[
                "log",
                "-1",
                "--format=%s|%an <%ae>|%cn|%(trailers:key=Agent-Host-Task,valueonly)"
            ]
        ),
        "Add one|agent-host <agent-host@localhost>|agent-host|t1"
    );
    assert_eq!(all.commit_turn(&ws, "again", "t1b").unwrap(), None);
    std::fs::write(co.join("two.txt"), "2\n").unwrap();
    let c2 = all.commit_turn(&ws, "Add two", "t2").unwrap().unwrap();
    assert_eq!(git(&co, &["rev-parse", "HEAD^"]), c1);
    assert_eq!(git(&co, &["rev-parse", "agent-host/commits"]), c2);
    assert_eq!(all.head(&ws).unwrap(), c2);
    assert_eq!(
        git(
            &co,
            &["rev-list", "--count", &format!("{}..HEAD", ws.base_commit)]
        ),
        "2"
    );
    let ch = all.changes(&ws).unwrap();
    let paths: Vec<_> = ch.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["one.txt", "two.txt"], "cumulative from the base");
    assert_eq!(
        applied_tree(&src, &ws.base_commit, &ch.patch, t.path()),
        tree_of(&co, t.path())
    );
    assert_eq!(
        state(&src),
        before,
        "the source's refs, HEAD and files are as they were"
    );
}

#[test]
fn the_turn_commit_goes_on_the_contexts_branch_whatever_branch_the_agent_is_on() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let all = workspaces(t.path(), 1 << 20);
    let ws = all.for_turn("switcher", &src, None).unwrap().unwrap();
    let co = ws.checkout();
    std::fs::write(co.join("one.txt"), "1\n").unwrap();
    let c1 = all.end_turn(&ws, Some(("one", "t1"))).unwrap().committed;
    let c1 = c1.expect("a commit");
    // The agent makes a branch of its own, commits a file there, and leaves another
    // uncommitted and unstaged.
    git(&co, &["checkout", "-q", "-b", "mybranch"]);
    std::fs::write(co.join("z.txt"), "z\n").unwrap();
    git(&co, &["add", "z.txt"]);
    git(&co, &["commit", "-q", "-m", "the agent's own"]);
    let mine = git(&co, &["rev-parse", "mybranch"]);
    std::fs::write(co.join("loose.txt"), "loose\n").unwrap();
    let end = all.end_turn(&ws, Some(("two", "t2"))).unwrap();
    let c2 = end.committed.expect("a commit");
    assert_eq!(git(&co, &["rev-parse", "agent-host/switcher"]), c2);
    assert_eq!(
        git(&co, &["rev-parse", &format!("{c2}^")]),
        c1,
        "on the branch's tip"
    );
    assert_eq!(end.head, c2, "the data part's head is the branch's");
    let files = git(&co, &["ls-tree", "-r", "--name-only", &c2]);
    for f in ["one.txt", "z.txt", "loose.txt"] {
        assert!(files.lines().any(|l| l == f), "{f} in {files}");
    }
    // The agent's branch, HEAD and index are as it left them.
    assert_eq!(git(&co, &["symbolic-ref", "HEAD"]), "refs/heads/mybranch");
    assert_eq!(git(&co, &["rev-parse", "mybranch"]), mine);
    assert_eq!(git(&co, &["status", "--porcelain"]), "?? loose.txt");
    // Nothing new: no commit, the head still the branch's.
    let again = all.end_turn(&ws, Some(("three", "t3"))).unwrap();
    assert_eq!((again.committed, again.head), (None, c2.clone()));
    // The context's branch deleted: it starts again from the base.
    git(&co, &["branch", "-D", "agent-host/switcher"]);
    let end = all.end_turn(&ws, Some(("four", "t4"))).unwrap();
    let c4 = end.committed.expect("a commit");
    assert_eq!(git(&co, &["rev-parse", &format!("{c4}^")]), ws.base_commit);
    assert_eq!(git(&co, &["rev-parse", "agent-host/switcher"]), c4);
}

#[test]
fn a_repository_the_agent_made_inside_is_named_as_one() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let all = workspaces(t.path(), 1 << 20);
    let ws = all.for_turn("nested", &src, None).unwrap().unwrap();
    let nested = ws.checkout().join("nested");
    std::fs::create_dir_all(&nested).unwrap();
    git(&nested, &["init", "-q"]);
    std::fs::write(nested.join("inner.txt"), "inner\n").unwrap();
    git(&nested, &["add", "-A"]);
    git(&nested, &["commit", "-q", "-m", "inner"]);
    std::fs::write(ws.checkout().join("plain.txt"), "plain\n").unwrap();
    let end = all.end_turn(&ws, Some(("nested", "t1"))).unwrap();
    let got: Vec<_> = end
        .changes
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.embedded_repository))
        .collect();
    assert_eq!(got, [("nested", true), ("plain.txt", false)]);
}

/// A repository the agent made and never committed in (`git init` of a scaffold): git
/// cannot take it as a gitlink; the rest of the change is taken, the folder left out
/// (before, `git add` failed and the turn's whole change was lost).
#[test]
fn a_repository_without_a_commit_inside_is_left_out_and_the_rest_taken() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let all = workspaces(t.path(), 1 << 20);
    let ws = all.for_turn("fresh", &src, None).unwrap().unwrap();
    let nested = ws.checkout().join("newproj");
    std::fs::create_dir_all(&nested).unwrap();
    git(&nested, &["init", "-q"]);
    std::fs::write(nested.join("main.c"), "int main;\n").unwrap();
    std::fs::write(ws.checkout().join("important.txt"), "work\n").unwrap();
    let end = all.end_turn(&ws, Some(("scaffold", "t1"))).unwrap();
    let got: Vec<&str> = end.changes.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(got, ["important.txt"]);
    assert!(end.committed.is_some());
}

#[test]
fn a_removed_git_folder_is_said_to_be_missing() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let all = workspaces(t.path(), 1 << 20);
    let ws = all.for_turn("nogit", &src, None).unwrap().unwrap();
    std::fs::remove_dir_all(ws.checkout().join(".git")).unwrap();
    let err = all.end_turn(&ws, Some(("x", "t"))).unwrap_err();
    assert!(
        matches!(err, WorkspaceError::GitFolderMissing { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("is missing"), "{err}");
    assert!(err.for_client(&ws.checkout()).contains("is gone"));
    // A .git that is a file (a gitfile pointing elsewhere) is still refused as tampered.
    std::fs::write(ws.checkout().join(".git"), "gitdir: /elsewhere\n").unwrap();
    let err = all.end_turn(&ws, Some(("x", "t"))).unwrap_err();
    assert!(matches!(err, WorkspaceError::Tampered { .. }), "{err}");
    assert!(
        err.for_client(&ws.checkout())
            .contains("workspace's .git is a link"),
        "{}",
        err.for_client(&ws.checkout())
    );
}

#[test]
fn a_follow_up_also_carries_its_change_since_the_previous_turn() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let all = workspaces(t.path(), 1 << 20);
    let ws = all.for_turn("turns", &src, None).unwrap().unwrap();
    let co = ws.checkout();
    std::fs::write(co.join("one.txt"), "1\n").unwrap();
    let first = all.end_turn(&ws, Some(("one", "t1"))).unwrap();
    assert_eq!(first.turn, None, "a first turn has no earlier end");
    std::fs::write(co.join("two.txt"), "2\n").unwrap();
    std::fs::write(co.join("a.txt"), "changed\n").unwrap();
    // Commits off: the turn's end is recorded all the same.
    let second = all.end_turn(&ws, None).unwrap();
    let turn = second.turn.expect("the change since the first turn");
    let paths: Vec<_> = turn.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["a.txt", "two.txt"]);
    assert_eq!(second.changes.files.len(), 3, "the whole change as before");
    // The first turn's patch, then this turn's: the workspace's files.
    let clean = t.path().join("clean");
    git(
        t.path(),
        &[
            "clone",
            "-q",
            src.to_str().unwrap(),
            clean.to_str().unwrap(),
        ],
    );
    for (i, patch) in [&first.changes.patch, &turn.patch].into_iter().enumerate() {
        let file = t.path().join(format!("p{i}.patch"));
        std::fs::write(&file, patch).unwrap();
        git(&clean, &["apply", "--index", file.to_str().unwrap()]);
    }
    assert_eq!(git(&clean, &["write-tree"]), tree_of(&co, t.path()));
    // Nothing since: an empty change of the turn.
    let third = all.end_turn(&ws, Some(("three", "t3"))).unwrap();
    let turn = third.turn.expect("a follow-up");
    assert!(turn.files.is_empty() && turn.patch.is_empty());
}

#[test]
fn a_large_change_is_cut_after_its_last_whole_file() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let all = workspaces(t.path(), 64 * 1024);
    let ws = all.for_turn("large", &src, None).unwrap().unwrap();
    let co = ws.checkout();
    std::fs::write(co.join("a-small.txt"), "small\n").unwrap();
    let big: String = (0..20_000)
        .map(|i| format!("line {i} of a large file\n"))
        .collect();
    std::fs::write(co.join("b-big.txt"), &big).unwrap();
    let ch = all.changes(&ws).unwrap();
    assert!(ch.truncated);
    assert_eq!(ch.files.len(), 2, "the list names every file");
    assert!(ch.patch.len() <= 64 * 1024);
    let text = String::from_utf8_lossy(&ch.patch);
    assert!(
        text.contains("a/a-small.txt") && !text.contains("b-big.txt"),
        "{text}"
    );
}

#[test]
fn a_workspace_config_that_would_run_programs_runs_none_on_the_host() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let all = workspaces(t.path(), 1 << 20);
    let ws = all.for_turn("evil", &src, None).unwrap().unwrap();
    let co = ws.checkout();
    let marker = t.path().join("ran");
    let cmd = format!("touch {}; cat", marker.display());
    // What an agent may write into its own .git and .gitattributes.
    git(&co, &["config", "core.fsmonitor", &cmd]);
    git(&co, &["config", "filter.x.clean", &cmd]);
    git(&co, &["config", "filter.x.process", &cmd]);
    git(&co, &["config", "diff.x.textconv", &cmd]);
    git(&co, &["config", "diff.external", &cmd]);
    // A name `-c NAME=VALUE` would split at its `=`.
    git(&co, &["config", "filter.a=b.clean", &cmd]);
    std::fs::write(
        co.join(".gitattributes"),
        "*.txt filter=x diff=x\n*.md filter=a=b\n",
    )
    .unwrap();
    std::fs::write(co.join("notes.md"), "new\n").unwrap();
    std::fs::create_dir_all(co.join(".git/hooks")).unwrap();
    let hook = co.join(".git/hooks/reference-transaction");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(
        &mut std::fs::metadata(&hook).unwrap().permissions(),
        0o755,
    );
    Command::new("chmod")
        .arg("755")
        .arg(&hook)
        .status()
        .unwrap();
    std::fs::write(co.join("a.txt"), "changed\n").unwrap();
    let ch = all.changes(&ws).unwrap();
    assert!(!ch.files.is_empty());
    all.commit_turn(&ws, "x", "t").unwrap().unwrap();
    assert!(
        !marker.exists(),
        "the host ran a program the workspace named"
    );
    // The same configuration does run it when git is run plainly (the test proves something).
    std::fs::write(co.join("a.txt"), "changed again\n").unwrap();
    let _ = Command::new("git")
        .arg("-C")
        .arg(&co)
        .args(["add", "-A"])
        .output();
    assert!(marker.exists());
}

#[test]
fn a_linked_refs_folder_stops_the_host_from_committing() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let before = state(&src);
    let all = workspaces(t.path(), 1 << 20);
    let ws = all.for_turn("links", &src, None).unwrap().unwrap();
    let co = ws.checkout();
    std::fs::write(co.join("a.txt"), "x\n").unwrap();
    // The agent points its refs at the source's: a host commit would move the source's branch.
    git(&co, &["symbolic-ref", "HEAD", "refs/heads/main"]);
    std::fs::remove_dir_all(co.join(".git/refs/heads")).unwrap();
    std::os::unix::fs::symlink(src.join(".git/refs/heads"), co.join(".git/refs/heads")).unwrap();
    assert!(matches!(
        all.commit_turn(&ws, "x", "t"),
        Err(WorkspaceError::Tampered { .. })
    ));
    assert_eq!(state(&src), before);
}

/// Replaces `at` (a folder or file of the workspace's `.git`, if any) with a link to `to`.
fn plant_link(at: &Path, to: &Path) {
    if at.is_dir() {
        std::fs::remove_dir_all(at).unwrap();
    } else if at.exists() {
        std::fs::remove_file(at).unwrap();
    }
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(to, at).unwrap();
}

#[test]
fn a_linked_reflog_stops_the_hosts_commit_from_appending_to_a_host_file() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let all = workspaces(t.path(), 1 << 20);
    let ws = all.for_turn("reflog", &src, None).unwrap().unwrap();
    let co = ws.checkout();
    std::fs::write(co.join("a.txt"), "x\n").unwrap();
    let victim = t.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    plant_link(&co.join(".git/logs/HEAD"), &victim);
    assert!(matches!(
        all.commit_turn(&ws, "x", "t"),
        Err(WorkspaceError::Tampered { .. })
    ));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    // git run plainly appends its reflog line through the link (the test proves something).
    let head = git(&co, &["rev-parse", "HEAD"]);
    let tree = git(&co, &["rev-parse", "HEAD^{tree}"]);
    let next = git(&co, &["commit-tree", &tree, "-p", &head, "-m", "plain"]);
    git(&co, &["update-ref", "-m", "plain", "HEAD", &next]);
    assert!(std::fs::read_to_string(&victim).unwrap().contains("plain"));
}

#[test]
fn a_linked_object_folder_stops_the_hosts_git_from_writing_outside() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let all = workspaces(t.path(), 1 << 20);
    let ws = all.for_turn("objects", &src, None).unwrap().unwrap();
    let co = ws.checkout();
    std::fs::write(co.join("a.txt"), "written outside?\n").unwrap();
    let blob = git(&co, &["hash-object", "a.txt"]);
    let outside = t.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    plant_link(&co.join(".git/objects").join(&blob[..2]), &outside);
    assert!(matches!(
        all.changes(&ws),
        Err(WorkspaceError::Tampered { .. })
    ));
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    // git run plainly writes the new object through the link (the test proves something).
    git(&co, &["add", "-A"]);
    assert!(outside.join(&blob[2..]).is_file());
}

#[test]
fn a_linked_index_is_refused_and_a_huge_one_is_not_copied() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let all = workspaces(t.path(), 1 << 20);
    let ws = all.for_turn("index", &src, None).unwrap().unwrap();
    let co = ws.checkout();
    std::fs::write(co.join("a.txt"), "one\ntwo\n").unwrap();
    let secret = t.path().join("secret");
    std::fs::write(&secret, "root:$y$j9T$not-an-index\n").unwrap();
    plant_link(&co.join(".git/index"), &secret);
    assert!(matches!(
        all.changes(&ws),
        Err(WorkspaceError::Tampered { .. })
    ));
    // A sparse index of a terabyte is not copied: git reads every file instead.
    std::fs::remove_file(co.join(".git/index")).unwrap();
    let huge = std::fs::File::create(co.join(".git/index")).unwrap();
    huge.set_len(1 << 40).unwrap();
    let ch = all.changes(&ws).unwrap();
    let names: Vec<&str> = ch.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(names, ["a.txt"]);
    std::fs::remove_file(co.join(".git/index")).unwrap();
    plant_link(&co.join(".git/index"), &secret);
    // git reading that file as its index fails on it (the test proves something).
    let out = Command::new("git")
        .arg("-C")
        .arg(&co)
        .args(["add", "-A"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn a_turn_folder_the_agent_replaced_by_a_link_is_not_entered() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let all = workspaces(t.path(), 1 << 20);
    let ws = all.for_turn("cwd", &src, None).unwrap().unwrap();
    let co = ws.checkout();
    assert_eq!(ws.map_cwd(&src.join("sub")), co.join("sub"));
    // Turn 1's agent replaces the folder the next turn starts in by a link to a host folder.
    let outside = t.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    plant_link(&co.join("sub"), &outside);
    assert!(co.join("sub").is_dir(), "the link leads to a folder");
    assert_eq!(ws.map_cwd(&src.join("sub")), co);
    assert_eq!(ws.map_cwd(&src.join("sub/deeper")), co);
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    // A missing folder is still made inside the checkout.
    assert_eq!(ws.map_cwd(&src.join("new/deeper")), co.join("new/deeper"));
    assert!(co.join("new/deeper").is_dir());
}

#[test]
fn alternates_the_agent_pointed_at_another_repository_are_put_back() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let other = t.path().join("other");
    std::fs::create_dir(&other).unwrap();
    git(&other, &["init", "-q", "-b", "main"]);
    std::fs::write(other.join("secret.txt"), "not this context's\n").unwrap();
    git(&other, &["add", "-A"]);
    git(&other, &["commit", "-qm", "secret"]);
    let secret = git(&other, &["rev-parse", "HEAD"]);
    let all = workspaces(t.path(), 1 << 20);
    let ws = all.for_turn("alt", &src, None).unwrap().unwrap();
    let co = ws.checkout();
    let alternates = co.join(".git/objects/info/alternates");
    let made = std::fs::read_to_string(&alternates).unwrap();
    let borrowed = format!("{made}{}\n", other.join(".git/objects").display());
    std::fs::write(&alternates, &borrowed).unwrap();
    // With that line, a ref of the workspace names the other repository's commit, which
    // `git fetch` of this workspace would then send (the test proves something).
    git(&co, &["update-ref", "refs/heads/leak", &secret]);
    assert_eq!(git(&co, &["cat-file", "-t", &secret]), "commit");
    std::fs::write(co.join("a.txt"), "x\n").unwrap();
    all.changes(&ws).unwrap();
    assert_eq!(std::fs::read_to_string(&alternates).unwrap(), made);
    let seen = Command::new("git")
        .arg("-C")
        .arg(&co)
        .args(["cat-file", "-e", &secret])
        .status()
        .unwrap();
    assert!(
        !seen.success(),
        "the other repository's commit is out of reach"
    );
}

#[test]
fn a_linked_packed_refs_a_linked_logs_folder_and_a_fifo_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let all = workspaces(t.path(), 1 << 20);
    let ws = all.for_turn("special", &src, None).unwrap().unwrap();
    let co = ws.checkout();
    let dot_git = co.join(".git");
    let refused = |all: &Workspaces, ws: &Workspace| {
        matches!(all.changes(ws), Err(WorkspaceError::Tampered { .. }))
    };
    plant_link(&dot_git.join("packed-refs"), &src.join(".git/packed-refs"));
    assert!(refused(&all, &ws));
    std::fs::remove_file(dot_git.join("packed-refs")).unwrap();
    let elsewhere = t.path().join("logs-elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    plant_link(&dot_git.join("logs"), &elsewhere);
    assert!(refused(&all, &ws));
    std::fs::remove_file(dot_git.join("logs")).unwrap();
    // A fifo git would open and wait on for ever.
    nix::unistd::mkfifo(
        &dot_git.join("shallow"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    assert!(refused(&all, &ws));
    std::fs::remove_file(dot_git.join("shallow")).unwrap();
    // A socket (git's file-system monitor's) is nothing git opens as a file: accepted.
    let _monitor =
        std::os::unix::net::UnixListener::bind(dot_git.join("fsmonitor--daemon.ipc")).unwrap();
    assert!(all.changes(&ws).is_ok());
}

#[test]
fn ignore_rules_from_a_file_the_workspace_config_names_are_not_read() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let all = workspaces(t.path(), 1 << 20);
    let ws = all.for_turn("excludes", &src, None).unwrap().unwrap();
    let co = ws.checkout();
    // A file of the host's (it could be one that never ends, a fifo) named by the agent.
    let host_file = t.path().join("host-ignore");
    std::fs::write(&host_file, "*.md\n").unwrap();
    git(
        &co,
        &["config", "core.excludesFile", host_file.to_str().unwrap()],
    );
    std::fs::write(co.join("notes.md"), "new\n").unwrap();
    let ch = all.changes(&ws).unwrap();
    assert!(ch.files.iter().any(|f| f.path == "notes.md"));
    // git run plainly reads that file and leaves the new file out (the test proves something).
    assert_eq!(git(&co, &["status", "--porcelain", "--", "notes.md"]), "");
}

#[test]
fn a_twenty_megabyte_change_is_cut_at_the_default_limit_and_what_is_kept_applies() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let all = workspaces(t.path(), settings::DEFAULT_PATCH_LIMIT.0 as usize);
    let ws = all.for_turn("twenty", &src, None).unwrap().unwrap();
    let co = ws.checkout();
    // 20 files of 1 MiB of text: 20 MiB of change.
    let mib: String = (0..30_000)
        .map(|i| format!("{i:>8} of a large change, line by line.\n"))
        .collect::<String>()
        .chars()
        .take(1 << 20)
        .collect();
    for n in 0..20 {
        std::fs::write(co.join(format!("big-{n:02}.txt")), &mib).unwrap();
    }
    let ch = all.changes(&ws).unwrap();
    assert!(ch.truncated);
    assert_eq!(ch.files.len(), 20, "the list names every file");
    assert!(ch.patch.len() as u64 <= settings::DEFAULT_PATCH_LIMIT.0);
    // Whole files only: the kept part applies, and holds 3 of the 1 MiB files.
    let kept = String::from_utf8_lossy(&ch.patch)
        .matches("+++ b/big-")
        .count();
    assert_eq!(kept, 3, "4 MiB holds three whole 1 MiB files");
    let tree = applied_tree(&src, &ws.base_commit, &ch.patch, t.path());
    assert!(!tree.is_empty());
}

#[test]
fn git_is_asked_only_below_a_dot_git_entry() {
    let t = tempfile::tempdir().unwrap();
    let deep = t.path().join("a/b");
    std::fs::create_dir_all(&deep).unwrap();
    // No `.git` anywhere above a fresh temporary folder: no git process, shared.
    assert!(!may_be_in_work_tree(&deep));
    // A linked worktree's `.git` is a file naming its git folder.
    std::fs::write(t.path().join("a/.git"), "gitdir: /elsewhere\n").unwrap();
    assert!(may_be_in_work_tree(&deep));
    std::fs::remove_file(t.path().join("a/.git")).unwrap();
    git(t.path(), &["init", "-q"]);
    assert!(may_be_in_work_tree(&deep));
    assert!(may_be_in_work_tree(Path::new("relative/left/to/git")));
}

#[test]
fn an_edit_in_the_second_the_workspace_was_made_that_keeps_the_size_is_in_the_change() {
    use std::os::unix::fs::MetadataExt;
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let all = workspaces(t.path(), 1 << 20);
    // git tells a file changed in the second its index was written only by reading it: the
    // edit must land in that second (retried when a second's end falls in between).
    for attempt in 0..5 {
        let ws = all
            .for_turn(&format!("racy{attempt}"), &src, None)
            .unwrap()
            .unwrap();
        let file = ws.checkout().join("a.txt");
        let before = std::fs::metadata(&file).unwrap();
        std::fs::write(&file, "ONE\ntwo\nthree\nfour\n").unwrap();
        let handle = std::fs::File::options().write(true).open(&file).unwrap();
        handle.set_modified(before.modified().unwrap()).unwrap();
        let after = std::fs::metadata(&file).unwrap();
        let index = std::fs::metadata(ws.checkout().join(".git/index")).unwrap();
        assert_eq!(after.len(), before.len());
        if after.ctime() != index.mtime() || before.ctime() != index.mtime() {
            continue;
        }
        // The turn ends in a later second.
        while std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            <= index.mtime() as u64
        {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let end = all.end_turn(&ws, None).unwrap();
        let paths: Vec<_> = end.changes.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["a.txt"], "the edit is in the change");
        return;
    }
    panic!("no attempt edited the file within the second its workspace was made");
}

/// Waits (a few seconds at most) for the refreshed copy of `ws`'s index.
fn seeded(all: &Workspaces, ws: &Workspace) -> bool {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::time::Instant::now() < until {
        if all.seeds.usable(&ws.checkout()).is_some() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    false
}

#[test]
fn a_refreshed_index_is_made_after_a_second_and_misses_no_edit() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let all = workspaces(t.path(), 1 << 20);
    let ws = all.for_turn("seed", &src, None).unwrap().unwrap();
    let co = ws.checkout();
    // An edit before the copy is made, keeping the file's size, in the second the
    // workspace was made.
    std::fs::write(co.join("a.txt"), "one\ntwo\nthreE\n").unwrap();
    assert!(seeded(&all, &ws), "a refreshed copy within a few seconds");
    // One after it, keeping the size too, and a new file.
    std::fs::write(co.join("sub/b.txt"), "B\n").unwrap();
    std::fs::write(co.join("new.txt"), "n\n").unwrap();
    let ch = all.changes(&ws).unwrap();
    let mut names: Vec<&str> = ch.files.iter().map(|f| f.path.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["a.txt", "new.txt", "sub/b.txt"]);
    // A commit replaces the workspace's index: the copy is no longer the one to start from.
    all.commit_turn(&ws, "x", "t").unwrap().unwrap();
    assert!(all.seeds.usable(&co).is_none());
    std::fs::write(co.join("a.txt"), "one\ntwo\nthrEE\n").unwrap();
    let ch = all.changes(&ws).unwrap();
    assert!(ch.files.iter().any(|f| f.path == "a.txt"));
}

#[test]
fn the_refresh_runs_no_program_the_agents_configuration_names() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let all = workspaces(t.path(), 1 << 20);
    let ws = all.for_turn("seed-filter", &src, None).unwrap().unwrap();
    let co = ws.checkout();
    let marker = t.path().join("ran");
    let cmd = format!("touch {}; cat", marker.display());
    // Written while the agent runs, before the host's refresh: nothing stops it then.
    git(&co, &["config", "filter.x.clean", &cmd]);
    git(&co, &["config", "core.fsmonitor", &cmd]);
    std::fs::write(co.join(".gitattributes"), "*.txt filter=x\n").unwrap();
    assert!(seeded(&all, &ws));
    assert!(
        !marker.exists(),
        "the host ran a program the workspace named"
    );
    // The same refresh with the workspace's own git folder does run it (the test proves
    // something).
    std::fs::copy(co.join(".git/index"), t.path().join("plain-index")).unwrap();
    let _ = Command::new("git")
        .arg("-C")
        .arg(&co)
        .env("GIT_INDEX_FILE", t.path().join("plain-index"))
        .args(["update-index", "-q", "--refresh"])
        .output();
    assert!(marker.exists());
}

/// A source repository an agent could write (it worked in the folder before it was one, or
/// in a `shared` workspace): the host's look at it for a new workspace runs none of the
/// programs its configuration names, and writes nothing into it.
#[test]
fn a_source_config_that_would_run_programs_runs_none_on_the_host() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let marker = t.path().join("ran");
    let cmd = format!("touch {}; cat", marker.display());
    git(&src, &["config", "filter.x.clean", &cmd]);
    git(&src, &["config", "filter.x.process", &cmd]);
    git(&src, &["config", "filter.a=b.clean", &cmd]);
    std::fs::write(
        src.join(".gitattributes"),
        "*.txt filter=x\n*.md filter=a=b\n",
    )
    .unwrap();
    std::fs::write(src.join("notes.md"), "one\n").unwrap();
    git(&src, &["add", "notes.md"]);
    git(&src, &["add", ".gitattributes"]);
    git(&src, &["commit", "-q", "-m", "attributes"]);
    std::fs::remove_file(&marker).unwrap_or_default();
    // An edit that keeps the file's size: git must read (and clean) it to tell.
    std::fs::write(src.join("a.txt"), "one\ntwo\nthree\nFOUR\n").unwrap();
    std::fs::write(src.join("notes.md"), "two\n").unwrap();
    let index = std::fs::metadata(src.join(".git/index"))
        .unwrap()
        .modified()
        .unwrap();
    let all = workspaces(t.path(), 1 << 20);
    let ws = all.for_turn("dirty-evil", &src, None).unwrap().unwrap();
    assert!(ws.source_dirty, "the edit is seen");
    assert!(!marker.exists(), "the host ran a program the source named");
    let after = std::fs::metadata(src.join(".git/index"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(index, after, "the source's index was written");
    // Plain git runs it (the test proves something).
    let _ = Command::new("git")
        .arg("-C")
        .arg(&src)
        .args(["status"])
        .output();
    assert!(marker.exists());
}

/// A filter the agent writes into its configuration after the host last read it (while the
/// agent still runs: a task waiting for input, a program left behind) is not run by the
/// turn's end: its git reads a configuration of the host's, whatever the workspace's says
/// now. The same staging with the workspace's own git folder, its filters read before the
/// swap (none), does run it: what the host did before.
#[test]
fn a_filter_written_after_the_host_looked_is_not_run_at_the_turns_end() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let all = workspaces(t.path(), 1 << 20);
    let ws = all.for_turn("swap", &src, None).unwrap().unwrap();
    let co = ws.checkout();
    let looked = Git::workspace(&co).unwrap();
    assert!(looked.filter_overrides().is_empty());
    let marker = t.path().join("ran");
    let cmd = format!("touch {}; cat", marker.display());
    git(&co, &["config", "filter.late.clean", &cmd]);
    std::fs::write(co.join(".gitattributes"), "* filter=late\n").unwrap();
    std::fs::write(co.join("a.txt"), "changed\n").unwrap();
    // The turn's end after the swap: staged, diffed and committed from the staged index.
    let (staged, _index) = changes::stage_all(&co, &ws.scratch(), "sha1", None).unwrap();
    let ch = changes::diff_staged(&staged, &ws.base_commit, 1 << 20).unwrap();
    assert!(!ch.files.is_empty());
    assert!(staged.text(["write-tree"]).is_ok());
    assert!(!marker.exists(), "the host ran the agent's filter");
    all.end_turn(&ws, Some(("x", "t"))).unwrap();
    assert!(!marker.exists(), "the host ran the agent's filter");
    // What the host's staging did before: the workspace's git, its filters read earlier.
    std::fs::write(co.join("a.txt"), "changed again\n").unwrap();
    let tmp = t.path().join("plain-index");
    std::fs::copy(co.join(".git/index"), &tmp).unwrap();
    let _ = looked.with_index(&tmp).output(["add", "-A", "--", "."]);
    assert!(marker.exists());
}

/// A clone of `src` with only its last commit (`git clone --depth 1`), as CI systems make.
fn shallow_clone(src: &Path, at: &Path) -> PathBuf {
    let url = format!("file://{}", src.display());
    git(
        src.parent().unwrap(),
        &["clone", "-q", "--depth", "1", &url, at.to_str().unwrap()],
    );
    let at = std::fs::canonicalize(at).unwrap();
    assert!(at.join(".git/shallow").is_file(), "a shallow clone");
    at
}

#[test]
fn a_workspace_of_a_shallow_clone_has_its_history_commits_and_serves_its_branch() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let shallow = shallow_clone(&src, &t.path().join("shallow"));
    let all = workspaces(t.path(), 1 << 20);
    let ws = all.for_turn("shallow", &shallow, None).unwrap().unwrap();
    let co = ws.checkout();
    // The agent's git reads the history (it stops at the shallow commit, as in the source).
    assert_eq!(git(&co, &["log", "--format=%s"]), "second");
    edit(&co);
    let end = all.end_turn(&ws, Some(("a shallow turn", "t1"))).unwrap();
    let committed = end.committed.expect("a commit of the turn");
    assert_eq!(
        git(&co, &["log", "--format=%s", &ws.branch]),
        "a shallow turn\nsecond"
    );
    // What `git fetch` of the context's branch runs (upload-pack) serves it: into the
    // shallow source itself, and into a repository of its own.
    git(&shallow, &["fetch", "-q", co.to_str().unwrap(), &ws.branch]);
    assert_eq!(git(&shallow, &["rev-parse", "FETCH_HEAD"]), committed);
    let mine = t.path().join("mine");
    std::fs::create_dir_all(&mine).unwrap();
    git(&mine, &["init", "-q"]);
    git(
        &mine,
        &[
            "fetch",
            "-q",
            "--update-shallow",
            co.to_str().unwrap(),
            &ws.branch,
        ],
    );
    assert_eq!(git(&mine, &["rev-parse", "FETCH_HEAD"]), committed);
}

#[test]
fn a_shallow_list_that_is_a_link_is_not_followed() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let shallow = shallow_clone(&src, &t.path().join("shallow"));
    let list = shallow.join(".git/shallow");
    let elsewhere = t.path().join("elsewhere");
    std::fs::rename(&list, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &list).unwrap();
    let all = workspaces(t.path(), 1 << 20);
    let err = all.for_turn("linked", &shallow, None).unwrap_err();
    assert!(err.to_string().contains("is a link"), "{err}");
    assert!(all.list().is_empty(), "nothing left half-made");
}

#[test]
fn disk_use_counts_the_blocks_of_files_and_folders_as_du_does() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("d");
    std::fs::create_dir_all(dir.join("a/b")).unwrap();
    std::fs::write(dir.join("a/small"), "x").unwrap();
    std::fs::write(dir.join("a/b/data"), vec![7u8; 100_000]).unwrap();
    // A sparse file of 1 GiB: almost no block.
    let sparse = std::fs::File::create(dir.join("sparse")).unwrap();
    sparse.set_len(1 << 30).unwrap();
    drop(sparse);
    let counted = disk_use(&dir);
    assert!(
        counted < 1 << 20,
        "the sparse file's length counted: {counted}"
    );
    assert!(counted >= 100_000, "{counted}");
    let du = Command::new("du").arg("-sB1").arg(&dir).output();
    if let Some(out) = du.ok().filter(|o| o.status.success()) {
        let du: u64 = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap();
        assert_eq!(counted, du, "as du counts");
    }
}

#[test]
fn the_hosts_own_folders_in_the_source_do_not_make_it_dirty() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    // The workspaces, the host's data and a task's attachments, all inside the source.
    let config = WorkspaceConfig {
        dir: Some(src.join("agent-workspaces")),
        ..WorkspaceConfig::default()
    };
    std::fs::create_dir_all(src.join("data/homes")).unwrap();
    std::fs::write(src.join("data/agent-host.db"), "db").unwrap();
    std::fs::create_dir_all(src.join("sub/.agent-host/attachments/t1")).unwrap();
    std::fs::write(src.join("sub/.agent-host/attachments/t1/f"), "x").unwrap();
    let all = Workspaces::open(&config, None)
        .unwrap()
        .keeping(&[src.join("data")]);
    assert_eq!(all.inside_repository().as_deref(), Some(src.as_path()));
    let first = all.for_turn("first", &src, None).unwrap().unwrap();
    assert!(!first.source_dirty);
    // The second sees the first's workspace in the source's folder: still clean.
    let second = all.for_turn("second", &src, None).unwrap().unwrap();
    assert!(!second.source_dirty);
    // An untracked file of the user's is a change.
    std::fs::write(src.join("notes.txt"), "mine\n").unwrap();
    assert!(
        all.for_turn("third", &src, None)
            .unwrap()
            .unwrap()
            .source_dirty
    );
    // Outside a repository: none around.
    assert_eq!(workspaces(t.path(), 1 << 20).inside_repository(), None);
}

#[test]
fn the_objects_a_shared_clone_borrows_are_named_for_the_sandbox() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let shared = t.path().join("shared");
    git(
        t.path(),
        &[
            "clone",
            "-q",
            "--shared",
            src.to_str().unwrap(),
            shared.to_str().unwrap(),
        ],
    );
    let shared = std::fs::canonicalize(shared).unwrap();
    let all = workspaces(t.path(), 1 << 20);
    let ws = all.for_turn("shared", &shared, None).unwrap().unwrap();
    assert_eq!(
        ws.borrowed_objects(),
        [shared.join(".git/objects"), src.join(".git/objects")]
    );
    // A line naming no folder, a comment, and the source itself again are passed over.
    let alternates = shared.join(".git/objects/info/alternates");
    let mut text = std::fs::read_to_string(&alternates).unwrap();
    text.push_str("# a comment\n/no/such/folder\n../../.git/objects\n");
    std::fs::write(&alternates, text).unwrap();
    assert_eq!(
        ws.borrowed_objects(),
        [shared.join(".git/objects"), src.join(".git/objects")]
    );
    // A repository of its own borrows nothing more.
    let own = all.for_turn("own", &src, None).unwrap().unwrap();
    assert_eq!(own.borrowed_objects(), [src.join(".git/objects")]);
}

/// The check whether the source has uncommitted changes reads no configuration of the
/// source's: a filter written there after the host could have looked (by an agent working
/// in the source, in a `shared` workspace) is not run. The status with the source's filters
/// read before the swap (none), as the host ran it before, does run it.
#[test]
fn a_filter_written_into_the_source_after_the_host_looked_is_not_run_by_the_dirty_check() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let looked = Git::trusted(&src).with_own_filters().unwrap();
    assert!(looked.filter_overrides().is_empty());
    let marker = t.path().join("ran");
    let cmd = format!("touch {}; cat", marker.display());
    git(&src, &["config", "filter.late.clean", &cmd]);
    std::fs::write(src.join(".git/info/attributes"), "*.txt filter=late\n").unwrap();
    // A size kept: git reads the file (and would clean it) to tell.
    std::fs::write(src.join("a.txt"), "one\ntwo\nthree\nFOUR\n").unwrap();
    let found = Source::find(&src, None).unwrap().expect("a repository");
    let scratch = t.path().join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    assert!(
        source_dirty(&found, None, &scratch, &[]).unwrap(),
        "the edit is seen"
    );
    assert!(
        !marker.exists(),
        "the host ran the filter written into the source"
    );
    assert_eq!(
        std::fs::read_dir(&scratch).unwrap().count(),
        0,
        "the check's git folder is left behind"
    );
    // What the host ran before: the source's git, its filters read before the swap.
    let _ = looked
        .with_env(&[("GIT_OPTIONAL_LOCKS", "0")])
        .output(["status", "--porcelain"]);
    assert!(marker.exists());
}

/// A source that is a linked worktree (`git worktree add`): its own index and `HEAD` are
/// the ones compared, and a clean one is clean.
#[test]
fn a_linked_worktree_source_is_clean_until_it_is_edited() {
    let t = tempfile::tempdir().unwrap();
    let src = source(t.path());
    let linked = t.path().join("linked");
    git(
        &src,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "side",
            linked.to_str().unwrap(),
            "v1",
        ],
    );
    let linked = std::fs::canonicalize(linked).unwrap();
    let found = Source::find(&linked, None).unwrap().expect("a repository");
    let scratch = t.path().join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    assert!(!source_dirty(&found, None, &scratch, &[]).unwrap());
    std::fs::write(linked.join("new.txt"), "new\n").unwrap();
    assert!(source_dirty(&found, None, &scratch, &[]).unwrap());
}
