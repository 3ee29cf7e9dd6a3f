//! The SQLite store on disk: how events and checkpoints are laid out, migrations to the
//! current schema, file modes, one store per database, and what is read from memory.

use super::*;

#[test]
fn an_event_is_stored_as_serde_encodes_it() {
    let events = [
        chunk("t", "Hello \"quoted\" ü", true),
        status("t", TaskState::Working, "2026-01-01T00:00:01.000Z"),
        TaskEvent::UserMessage(crate::protocol::v1::Message::default()),
        // Too large to cache: stored whole, no v1.0 JSON kept.
        chunk("t", &"z".repeat(crate::task::CACHE_MAX), true),
    ];
    for ev in events {
        let queued = encode(7, ev.clone()).unwrap();
        let json = serde_json::to_string(&ev).unwrap();
        assert_eq!(queued.pieces().concat(), json);
        assert_eq!(queued.len(), json.len());
        let cached = queued.event.v1_json.get().map(|s| s.to_string());
        match &ev {
            TaskEvent::Stream(sr) if json.len() <= crate::task::CACHE_MAX => {
                assert_eq!(cached, Some(serde_json::to_string(sr).unwrap()));
            }
            _ => assert_eq!(cached, None),
        }
        // A row holds it as serde wrote it, and reads back as the same event.
        let mut rows = Vec::new();
        rows::pack(&mut rows, 7, queued.pieces());
        assert_eq!(rows[0].json, json);
        assert_eq!(queued.into_text(), json);
    }
}

/// The sequence of a task's checkpoint (0: none).
fn checkpoint_seq(path: &Path, id: &str) -> i64 {
    use rusqlite::OptionalExtension;
    Connection::open(path)
        .unwrap()
        .query_row("SELECT seq FROM snapshots WHERE task_id = ?1", [id], |r| {
            r.get(0)
        })
        .optional()
        .unwrap()
        .unwrap_or(0)
}

#[tokio::test]
async fn checkpoints_come_at_state_changes_and_at_doubling_sizes_not_per_event() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.db");
    let s = SqliteStore::open(&path).unwrap();
    s.create(task("k", "c", "2026-01-01T00:00:00.000Z"))
        .await
        .unwrap();
    s.append(
        "k",
        vec![status("k", TaskState::Working, "2026-01-01T00:00:01.000Z")],
    )
    .await
    .unwrap();
    s.flush().await.unwrap();
    assert_eq!(
        checkpoint_seq(&path, "k"),
        0,
        "neither the new task nor its start is a checkpoint (its first event is the task)"
    );
    // Chunks of 1/256 of the first checkpoint's size: count the checkpoints written while
    // the task grows to 8 times that size.
    let text = "y".repeat(writer::CHECKPOINT_MIN_BYTES / 256);
    let mut checkpoints = 0;
    let mut last = 0;
    for i in 0..2048 {
        s.append("k", vec![chunk("k", &text, i > 0)]).await.unwrap();
        s.flush().await.unwrap();
        let now = checkpoint_seq(&path, "k");
        if now != last {
            checkpoints += 1;
            last = now;
        }
        if i == 10 {
            assert_eq!(now, 0, "not one checkpoint per event");
        }
    }
    // The first, then each as large as the task: about log2(8) + 1 of them.
    assert!((3..=6).contains(&checkpoints), "{checkpoints} checkpoints");
    // A read rebuilds the task from the checkpoint and the events after it.
    let snap = s.get("k").await.unwrap().unwrap();
    assert_eq!(answer(&snap.task).len(), 2048 * text.len());
    assert_eq!(snap.last_seq, 2 + 2048);
    // The same state again is no checkpoint; waiting for the client is one.
    let before = checkpoint_seq(&path, "k");
    s.append(
        "k",
        vec![status("k", TaskState::Working, "2026-01-01T00:00:02.000Z")],
    )
    .await
    .unwrap();
    s.flush().await.unwrap();
    assert_eq!(checkpoint_seq(&path, "k"), before);
    s.append(
        "k",
        vec![status(
            "k",
            TaskState::InputRequired,
            "2026-01-01T00:00:03.000Z",
        )],
    )
    .await
    .unwrap();
    assert_eq!(checkpoint_seq(&path, "k") as u64, snap.last_seq + 2);
    // Reopened (the writer has forgotten the task): it goes on where it was.
    drop(s);
    let s = SqliteStore::open(&path).unwrap();
    s.append("k", vec![chunk("k", "z", true)]).await.unwrap();
    let snap = s.get("k").await.unwrap().unwrap();
    assert_eq!(snap.task.status.state, TaskState::InputRequired);
    assert!(answer(&snap.task).ends_with("yz"));
}

#[tokio::test]
async fn a_duplicate_task_fails_alone_not_the_writes_batched_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(SqliteStore::open(&dir.path().join("d.db")).unwrap());
    s.create(task("dup", "c", "2026-01-01T00:00:00.000Z"))
        .await
        .unwrap();
    // Many writes at once, so that the duplicate shares a transaction with others.
    let mut handles = Vec::new();
    for i in 0..32 {
        let s = s.clone();
        handles.push(tokio::spawn(async move {
            let id = if i == 16 {
                "dup".to_string()
            } else {
                format!("t{i}")
            };
            s.create(task(&id, "c", "2026-01-01T00:00:00.000Z")).await
        }));
    }
    for (i, h) in handles.into_iter().enumerate() {
        let r = h.await.unwrap();
        if i == 16 {
            assert!(
                matches!(r, Err(StoreError::Exists(ref id)) if id == "dup"),
                "{r:?}"
            );
        } else {
            assert_eq!(r.unwrap(), 1);
        }
    }
}

#[tokio::test]
async fn the_database_and_its_side_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let path = data.join("agent-host.db");
    let s = SqliteStore::open(&path).unwrap();
    s.create(task("m", "c", "2026-01-01T00:00:00.000Z"))
        .await
        .unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(&path), 0o600);
    for side in schema::side_files(&path) {
        assert_eq!(mode(&side), 0o600, "{}", side.display());
    }
    assert_eq!(mode(&crate::store::lock::lock_path(&path)), 0o600);
    // A database an older agent-host left readable by others is narrowed when opened.
    drop(s);
    for p in [path.clone()].into_iter().chain(schema::side_files(&path)) {
        if p.exists() {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
    }
    let _s = SqliteStore::open(&path).unwrap();
    assert_eq!(mode(&path), 0o600);
}

#[tokio::test]
async fn a_second_store_on_the_same_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("one.db");
    let other = crate::store::lock::tests::other_host(&path, 4242, 8042);
    let err = SqliteStore::open(&path).err().unwrap();
    assert!(matches!(err, StoreError::Locked(_)), "{err}");
    assert!(err.to_string().contains("pid 4242, port 8042"), "{err}");
    assert!(!path.exists(), "refused before it touches the database");
    drop(other);
    SqliteStore::open(&path).expect("free again once the other host is gone");
}

#[tokio::test]
async fn a_few_long_lines_are_kept_out_of_memory_and_never_checkpointed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.db");
    let s = SqliteStore::open(&path).unwrap();
    s.create(task("big", "c", "2026-01-01T00:00:00.000Z"))
        .await
        .unwrap();
    let line = "z".repeat(crate::store::window::WINDOW_BYTES_MAX + 1);
    for i in 0..3 {
        s.append("big", vec![chunk("big", &line, i > 0)])
            .await
            .unwrap();
        let live = s.live.lock().unwrap();
        let l = live.get("big").unwrap();
        assert!(
            l.window.is_empty(),
            "an event over the window's bytes is not kept"
        );
        assert_eq!(l.window.bytes(), 0);
    }
    // Followers read it from the database.
    let evs = s.events_after("big", 1, 10).await.unwrap();
    assert_eq!(evs.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![2, 3, 4]);
    // A small event after it is kept again.
    s.append("big", vec![chunk("big", "tail", true)])
        .await
        .unwrap();
    assert_eq!(s.live.lock().unwrap().get("big").unwrap().window.len(), 1);
    s.append(
        "big",
        vec![status(
            "big",
            TaskState::Completed,
            "2026-01-01T00:00:09.000Z",
        )],
    )
    .await
    .unwrap();
    // Fewer than FEW_EVENTS events, together large: no checkpoint, not even at the end
    // (writing one would hold the whole task several times over).
    assert_eq!(checkpoint_seq(&path, "big"), 0);
    let snap = s.get("big").await.unwrap().unwrap();
    assert_eq!(snap.task.status.state, TaskState::Completed);
    assert_eq!(answer(&snap.task).len(), 3 * line.len() + 4);
    assert_eq!(snap.last_seq, 6);
}

#[tokio::test]
async fn a_version_6_database_is_migrated_to_rows_of_batches() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v6.db");
    {
        // As agent-host left it at schema 6: one row per event, a checkpoint at 2.
        let mut conn = Connection::open(&path).unwrap();
        schema::migrate_to(&mut conn, 6).unwrap();
        let t = task("old", "c", "2026-01-01T00:00:00.000Z");
        conn.execute(
            "INSERT INTO tasks (id, context_id, state, status_ts, created_at, last_seq, owner)
             VALUES ('old', 'c', 'TASK_STATE_WORKING', 'x', 'x', 5, 'alice')",
            [],
        )
        .unwrap();
        let mut working = t.clone();
        working.status.state = TaskState::Working;
        conn.execute(
            "INSERT INTO snapshots (task_id, seq, json) VALUES ('old', 2, ?1)",
            [serde_json::to_string(&working).unwrap()],
        )
        .unwrap();
        let events = [
            TaskEvent::Stream(StreamResponse::Task(t)),
            status("old", TaskState::Working, "2026-01-01T00:00:01.000Z"),
            chunk("old", "a", false),
            chunk("old", "b", true),
            chunk("old", "c", true),
        ];
        for (i, ev) in events.iter().enumerate() {
            conn.execute(
                "INSERT INTO events (task_id, seq, json) VALUES ('old', ?1, ?2)",
                params![i as i64 + 1, serde_json::to_string(ev).unwrap()],
            )
            .unwrap();
        }
    }
    let s = SqliteStore::open(&path).unwrap();
    let conn = Connection::open(&path).unwrap();
    let rows: Vec<(i64, i64)> = conn
        .prepare("SELECT first_seq, last_seq FROM events WHERE task_id = 'old' ORDER BY last_seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(rows, (1..=5).map(|i| (i, i)).collect::<Vec<_>>());
    let snap = s.get("old").await.unwrap().unwrap();
    assert_eq!((snap.last_seq, snap.owner.as_deref()), (5, Some("alice")));
    assert_eq!(answer(&snap.task), "abc");
    let seqs = |evs: Vec<Arc<LoggedEvent>>| evs.iter().map(|e| e.seq).collect::<Vec<_>>();
    assert_eq!(
        seqs(s.events_after("old", 3, 10).await.unwrap()),
        vec![4, 5]
    );
    // New events go on in rows of batches after the migrated ones.
    s.append(
        "old",
        vec![chunk("old", "d", true), chunk("old", "e", true)],
    )
    .await
    .unwrap();
    s.flush().await.unwrap();
    let last: (i64, i64) = conn
        .query_row(
            "SELECT first_seq, last_seq FROM events WHERE task_id = 'old' ORDER BY last_seq DESC",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(last, (6, 7), "one row for the two events of the append");
    drop(s);
    let s = SqliteStore::open(&path).unwrap();
    assert_eq!(answer(&s.get("old").await.unwrap().unwrap().task), "abcde");
    assert_eq!(seqs(s.events_after("old", 4, 2).await.unwrap()), vec![5, 6]);
    assert_eq!(seqs(s.events_after("old", 6, 10).await.unwrap()), vec![7]);
}

#[tokio::test]
async fn a_new_database_has_8_kib_pages() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    let _s = SqliteStore::open(&path).unwrap();
    let size: i64 = Connection::open(&path)
        .unwrap()
        .pragma_query_value(None, "page_size", |r| r.get(0))
        .unwrap();
    assert_eq!(size, schema::PAGE_SIZE);
}

#[tokio::test]
async fn a_recently_ended_task_is_read_from_memory_as_the_database_has_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let s = SqliteStore::open(&path).unwrap();
    s.create_owned(
        task("r", "c", "2026-01-01T00:00:00.000Z"),
        Some("bob".into()),
    )
    .await
    .unwrap();
    s.append(
        "r",
        vec![status("r", TaskState::Working, "2026-01-01T00:00:01.000Z")],
    )
    .await
    .unwrap();
    for i in 0..20 {
        s.append("r", vec![chunk("r", &format!("{i} "), i > 0)])
            .await
            .unwrap();
    }
    s.append(
        "r",
        vec![status(
            "r",
            TaskState::Completed,
            "2026-01-01T00:00:02.000Z",
        )],
    )
    .await
    .unwrap();
    assert!(s.live.lock().unwrap().is_empty());
    let from_memory = s.recent.lock().unwrap().snapshot("r").expect("kept");
    let conn = Connection::open(&path).unwrap();
    let from_disk = read::load_owned(&conn, "r").unwrap().unwrap();
    assert_eq!(from_memory.task, from_disk.task);
    assert_eq!(from_memory.last_seq, 23);
    assert_eq!(from_memory.owner, from_disk.owner);
    let got = s.get("r").await.unwrap().unwrap();
    assert_eq!(got.task, from_disk.task);
    let evs = s.events_after("r", 20, 10).await.unwrap();
    assert_eq!(
        evs.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![21, 22, 23]
    );
    // A deleted task is forgotten.
    s.delete_terminal(&["r".into()]).await.unwrap();
    assert!(s.get("r").await.unwrap().is_none());
}

/// Another process that opens the database and closes it (a `sqlite3` shell, say) while the
/// host runs. SQLite deletes the WAL on a close when it can lock the database exclusively,
/// which it can only when the host holds no lock: the host's locks must survive its own
/// readers being opened (each used to open and close the file first, which drops every POSIX
/// lock the process held on it, and the next outside close deleted the WAL under the host).
#[tokio::test]
async fn an_outside_reader_closing_the_database_leaves_the_hosts_wal_alone() {
    let python = std::process::Command::new("python3")
        .args(["-c", "import sqlite3"])
        .status()
        .is_ok_and(|s| s.success());
    if !python {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "python3 with its sqlite3 module is needed for this test"
        );
        eprintln!("SKIPPED an_outside_reader_closing...: python3 (sqlite3 module) not found");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent-host.db");
    let s = SqliteStore::open(&path).unwrap();
    s.create(task("t", "c", "2026-01-01T00:00:00.000Z"))
        .await
        .unwrap();
    s.append("t", vec![chunk("t", "one", false)]).await.unwrap();
    s.flush().await.unwrap();
    // A read opens a reader connection beside the writer's.
    s.get("missing").await.unwrap();
    let [wal, _] = schema::side_files(&path);
    assert!(wal.exists());
    let outside = std::process::Command::new("python3")
        .arg("-c")
        .arg("import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('SELECT count(*) FROM tasks').fetchall(); c.close()")
        .arg(&path)
        .output()
        .unwrap();
    assert!(outside.status.success(), "{outside:?}");
    assert!(wal.exists(), "the outside reader deleted the host's WAL");
    s.append("t", vec![chunk("t", "two", false)]).await.unwrap();
    s.flush().await.unwrap();
    let got = s.get("t").await.unwrap().expect("the task reads back");
    assert_eq!(got.last_seq, 3);
}
