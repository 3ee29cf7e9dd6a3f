//! Retention: only terminal tasks go, by age and by count, with their rows and attachments.

use super::*;
use crate::protocol::v1::{StreamResponse, Task, TaskState, TaskStatus, TaskStatusUpdateEvent};
use crate::store::{ContextRecord, MemoryStore, PushRecord, PushStore, SqliteStore};
use crate::task::TaskEvent;

/// Applies `policy` once, without workspaces.
async fn prune(
    store: &dyn TaskStore,
    policy: &RetentionSettings,
    work_dir: &Path,
    dry_run: bool,
) -> Result<Pruned, StoreError> {
    prune_with(store, policy, work_dir, &Folders::default(), dry_run).await
}

fn ts(days_ago: i64) -> String {
    (Utc::now() - chrono::Duration::days(days_ago))
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

fn task(id: &str, ctx: &str, state: TaskState, days_ago: i64) -> Task {
    Task {
        id: id.into(),
        context_id: ctx.into(),
        status: TaskStatus {
            state,
            message: None,
            timestamp: Some(ts(days_ago)),
        },
        ..Task::default()
    }
}

fn status(id: &str, ctx: &str, state: TaskState, days_ago: i64) -> TaskEvent {
    TaskEvent::Stream(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: id.into(),
        context_id: ctx.into(),
        status: TaskStatus {
            state,
            message: None,
            timestamp: Some(ts(days_ago)),
        },
        metadata: None,
    }))
}

/// Old and new tasks in every kind of state; returns the ids of the terminal ones.
async fn fill(store: &dyn TaskStore) {
    use TaskState::*;
    for (id, ctx, state, days) in [
        ("old-done", "c1", Completed, 40),
        ("old-failed", "c2", Failed, 35),
        ("old-working", "c3", Working, 50),
        ("old-waiting", "c3", InputRequired, 60),
        ("old-submitted", "c4", Submitted, 45),
        ("new-done", "c2", Completed, 1),
        ("new-canceled", "c5", Canceled, 2),
        ("mid-rejected", "c6", Rejected, 10),
    ] {
        store.create(task(id, ctx, Submitted, days)).await.unwrap();
        if state != Submitted {
            store
                .append(id, vec![status(id, ctx, state, days)])
                .await
                .unwrap();
        }
    }
    for c in ["c1", "c2", "c3", "c4", "c5", "c6"] {
        store
            .put_context(&ContextRecord {
                context_id: c.into(),
                session_id: Some(format!("s-{c}")),
                ..ContextRecord::default()
            })
            .await
            .unwrap();
    }
}

async fn ids(store: &dyn TaskStore) -> Vec<String> {
    let mut out = Vec::new();
    for id in [
        "old-done",
        "old-failed",
        "old-working",
        "old-waiting",
        "old-submitted",
        "new-done",
        "new-canceled",
        "mid-rejected",
    ] {
        if store.get(id).await.unwrap().is_some() {
            out.push(id.to_string());
        }
    }
    out
}

fn age(days: u64) -> RetentionSettings {
    RetentionSettings {
        max_age: Some(Duration::from_secs(days * 86_400)),
        max_tasks: None,
    }
}

async fn by_age_then_count(store: &dyn TaskStore) {
    fill(store).await;
    let work = tempfile::tempdir().unwrap();
    // A dry run deletes nothing.
    let dry = prune(store, &age(30), work.path(), true).await.unwrap();
    let mut names: Vec<_> = dry.tasks.iter().map(|t| t.id.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["old-done", "old-failed"]);
    assert_eq!(ids(store).await.len(), 8);

    let done = prune(store, &age(30), work.path(), false).await.unwrap();
    assert_eq!(done.tasks.len(), 2);
    assert_eq!(
        ids(store).await,
        [
            "old-working",
            "old-waiting",
            "old-submitted",
            "new-done",
            "new-canceled",
            "mid-rejected"
        ]
    );
    // c1 had only the deleted task; c2 still has new-done.
    let ctx: Vec<String> = store
        .contexts()
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.context_id)
        .collect();
    assert!(!ctx.contains(&"c1".to_string()), "{ctx:?}");
    assert!(ctx.contains(&"c2".to_string()), "{ctx:?}");
    assert!(store
        .events_after("old-done", 0, 10)
        .await
        .map_or(true, |e| e.is_empty()));

    // Keep one terminal task: the newest (new-done); the non-terminal ones all stay.
    let keep_one = RetentionSettings {
        max_age: None,
        max_tasks: Some(1),
    };
    let done = prune(store, &keep_one, work.path(), false).await.unwrap();
    assert_eq!(done.tasks.len(), 2);
    assert_eq!(
        ids(store).await,
        ["old-working", "old-waiting", "old-submitted", "new-done"]
    );
    // Nothing is left to take, whatever the limits.
    let all = RetentionSettings {
        max_age: Some(Duration::from_secs(1)),
        max_tasks: Some(1),
    };
    let _ = prune(store, &all, work.path(), false).await.unwrap();
    let left = ids(store).await;
    for keep in ["old-working", "old-waiting", "old-submitted"] {
        assert!(left.contains(&keep.to_string()), "{left:?}");
    }
}

#[tokio::test]
async fn memory_store_deletes_only_old_terminal_tasks() {
    by_age_then_count(&MemoryStore::new()).await;
}

#[tokio::test]
async fn sqlite_store_deletes_only_old_terminal_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("t.db")).unwrap();
    by_age_then_count(&store).await;
    // The rows are gone from the database, not only hidden.
    drop(store);
    let conn = rusqlite::Connection::open(dir.path().join("t.db")).unwrap();
    for table in ["events", "snapshots"] {
        let n: i64 = conn
            .query_row(
                &format!(
                    "SELECT COUNT(*) FROM {table} WHERE task_id IN ('old-done', 'mid-rejected')"
                ),
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 0, "{table}");
    }
}

#[tokio::test]
async fn delete_terminal_refuses_a_running_task_and_drops_push_configs() {
    let store = MemoryStore::new();
    fill(&store).await;
    let rec = PushRecord {
        task_id: "new-done".into(),
        id: "p1".into(),
        ..PushRecord::default()
    };
    store.put_push(&rec).await.unwrap();
    let deleted = store
        .delete_terminal(&["old-working".into(), "new-done".into(), "nope".into()])
        .await
        .unwrap();
    assert_eq!(deleted, ["new-done"]);
    assert!(store.get("old-working").await.unwrap().is_some());
    assert!(store.list_push("new-done").await.unwrap().is_empty());
}

#[tokio::test]
async fn attachments_go_with_their_task_and_links_are_not_followed() {
    let store = MemoryStore::new();
    fill(&store).await;
    let work = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(elsewhere.path().join("keep.txt"), "keep").unwrap();
    let att = |id: &str| crate::engine::input::attachments_dir(work.path(), id);
    for id in ["old-done", "new-done", "old-working"] {
        std::fs::create_dir_all(att(id)).unwrap();
        std::fs::write(att(id).join("shot.png"), "png").unwrap();
    }
    // old-failed's folder is a link to a folder outside: never followed.
    std::os::unix::fs::symlink(elsewhere.path(), att("old-failed")).unwrap();

    let dry = prune(&store, &age(30), work.path(), true).await.unwrap();
    assert_eq!(dry.attachments, [att("old-done")]);
    assert!(att("old-done").exists());

    let done = prune(&store, &age(30), work.path(), false).await.unwrap();
    assert_eq!(done.attachments, [att("old-done")]);
    assert!(!att("old-done").exists());
    assert!(att("new-done").join("shot.png").exists());
    assert!(att("old-working").join("shot.png").exists());
    assert!(elsewhere.path().join("keep.txt").exists());
}

#[test]
fn select_counts_from_the_newest() {
    let t = |id: &str, d: i64| TerminalTask {
        id: id.into(),
        context_id: "c".into(),
        status_ts: ts(d),
    };
    let tasks = [t("a", 0), t("b", 1), t("c", 2), t("bad", 3)];
    let mut tasks = tasks.to_vec();
    tasks[3].status_ts = "not a time".into();
    let keep2 = RetentionSettings {
        max_age: None,
        max_tasks: Some(2),
    };
    let ids: Vec<_> = select(&tasks, &keep2, Utc::now())
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(ids, ["c", "bad"]);
    let ids: Vec<_> = select(&tasks, &age(1), Utc::now() + chrono::Duration::hours(1))
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(ids, ["b", "c"]);
}

#[tokio::test]
async fn a_started_host_applies_retention_in_the_background() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("host.db");
    {
        let store = SqliteStore::open(&db).unwrap();
        for (id, days) in [("a", 3), ("b", 2), ("c", 1)] {
            store
                .create(task(id, "ctx", TaskState::Completed, days))
                .await
                .unwrap();
        }
    }
    let store = format!("sqlite:{}", db.display());
    let flags = [
        "--adapter",
        "demo",
        "--store",
        &store,
        "--repo-path",
        dir.path().to_str().unwrap(),
        "--retention-max-tasks",
        "1",
    ];
    let args = crate::settings::ServeArgs::from_flags(flags).unwrap();
    let settings = crate::settings::Settings::resolve(&args).unwrap();
    let app = crate::app::App::start(&settings, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    // The same process may open the database again (it shares the host's lock).
    let store = SqliteStore::open(&db).unwrap();
    let left = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let left = store.terminal_tasks().await.unwrap();
            if left.len() == 1 {
                return left;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("retention never ran");
    assert_eq!(left[0].id, "c");
    drop(app);
}

/// A git repository with one commit, in `dir`.
fn repo(dir: &Path) -> PathBuf {
    let r = dir.join("repo");
    std::fs::create_dir_all(&r).unwrap();
    for args in [
        &["init", "-q", "-b", "main"][..],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "one",
        ],
    ] {
        let ok = std::process::Command::new("git")
            .arg("-C")
            .arg(&r)
            .args(args)
            .env_remove("GIT_DIR")
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }
    r
}

#[tokio::test]
async fn a_context_left_without_tasks_loses_its_workspace_and_cli_home() {
    let dir = tempfile::tempdir().unwrap();
    let src = repo(dir.path());
    let config = crate::workspace::WorkspaceConfig {
        dir: Some(dir.path().join("ws")),
        ..crate::workspace::WorkspaceConfig::default()
    };
    let all = std::sync::Arc::new(Workspaces::open(&config, None).unwrap());
    let homes =
        std::sync::Arc::new(crate::home::Homes::open(Some(&dir.path().join("homes"))).unwrap());
    let layout = crate::runner::sandbox::StateLayout::new(
        &["/h/.cli/".to_string()],
        Some(Path::new("/h")),
        &[],
        &[],
    );
    for c in ["c1", "c2"] {
        assert!(all.for_turn(c, &src, None).unwrap().is_some());
        homes.prepare(c, &layout, None).unwrap();
    }
    let folders = Folders {
        workspaces: Some(all.clone()),
        homes: Some(homes.clone()),
    };
    let store = MemoryStore::new();
    fill(&store).await;
    // c1's only task is old; c2 keeps a new one.
    let dry = prune_with(&store, &age(30), dir.path(), &folders, true)
        .await
        .unwrap();
    assert_eq!(dry.workspaces, ["c1"]);
    assert_eq!(dry.homes, ["c1"]);
    assert!(
        all.get("c1").unwrap().is_some() && homes.exists("c1"),
        "a dry run removes nothing"
    );
    let done = prune_with(&store, &age(30), dir.path(), &folders, false)
        .await
        .unwrap();
    assert_eq!(done.workspaces, ["c1"]);
    assert_eq!(done.homes, ["c1"]);
    assert!(all.get("c1").unwrap().is_none());
    assert!(all.get("c2").unwrap().is_some());
    assert!(!homes.exists("c1") && homes.exists("c2"));
}
