use super::*;

const MIB: usize = 1024 * 1024;

fn held(snapshot: usize) -> Progress {
    Progress::holding(snapshot, None, Some((Task::default(), 1)))
}

/// `n` events to apply (their encoded form is not read: `appended` is told their bytes).
fn rows(n: usize) -> Vec<Queued> {
    let event =
        crate::task::TaskEvent::Stream(crate::protocol::v1::StreamResponse::Task(Task::default()));
    (0..n)
        .map(|i| super::super::rows::encode(i as u64 + 2, event.clone()).unwrap())
        .collect()
}

#[test]
fn a_long_task_of_small_events_stays_held_past_a_mebibyte() {
    // 3 MiB at its last checkpoint, then 2,000 events of 1 KB: no checkpoint is due yet, and
    // the next one is taken from memory, not read back.
    let mut p = held(3 * MIB);
    let r = rows(2000);
    assert!(!p.appended(r.len(), 2000 * 1024, false, false));
    p.apply(&r);
    assert!(p.task.is_some());
}

#[test]
fn a_task_of_a_few_large_events_is_let_go() {
    // Long lines of output: no checkpoint comes for them, so the writer holds none of it.
    let mut p = held(64 * 1024);
    let r = rows(1);
    assert!(!p.appended(r.len(), 2 * MIB, false, false));
    p.apply(&r);
    assert!(p.task.is_none());
}

#[test]
fn a_task_over_the_bound_is_let_go() {
    let mut p = held(KEEP_TASK_BYTES - 1024);
    let r = rows(100);
    p.appended(r.len(), 100 * 1024, false, false);
    p.apply(&r);
    assert!(p.task.is_none());
}

#[test]
fn the_tasks_held_together_stay_within_their_bound() {
    let mut progress: HashMap<String, Progress> = HashMap::new();
    assert!(may_hold(&progress, KEEP_TASK_BYTES));
    assert!(!may_hold(&progress, KEEP_TASK_BYTES + 1));
    progress.insert("a".into(), held(KEEP_TASK_BYTES));
    progress.insert("b".into(), held(KEEP_ALL_BYTES - KEEP_TASK_BYTES - MIB));
    // Tasks whose checkpoints are read back count for nothing.
    progress.insert("c".into(), Progress::fresh(KEEP_ALL_BYTES));
    assert!(may_hold(&progress, MIB));
    assert!(!may_hold(&progress, MIB + 1));
}

#[test]
fn a_task_of_short_lines_is_checkpointed_as_its_event_log_doubles() {
    // 100,000 events of 300 bytes, each adding 60 bytes to the task (its text, without the
    // ids every event carries): checkpoints at 1, 2, 4, 8 and 16 MiB of events, then the end.
    let mut p = Progress::fresh(0);
    let (mut checkpoints, mut written) = (0, 0);
    for i in 1..=100_000usize {
        let ended = i == 100_000;
        if p.appended(1, 300, false, ended) {
            checkpoints += 1;
            written += 60 * i;
            p.checkpointed(60 * i);
        }
    }
    assert_eq!(checkpoints, 6);
    // All checkpoints together: those while it doubled (twice the last of them) and the end.
    assert!(written < 3 * 60 * 100_000, "{written}");
}
