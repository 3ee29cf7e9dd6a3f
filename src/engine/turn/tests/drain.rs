//! The output a program printed before it exited reaches the task's log, all of it and in
//! order, however long storing it takes (the bench's "lost" events under load: a turn used
//! to stop reading 500 ms after the exit, dropping what was still waiting in the pipe).

use crate::protocol::v1::StreamResponse;
use crate::store::TaskStore;
use crate::task::TaskEvent;

use super::failing::Disk;
use super::*;

/// The texts of the task's artifact updates, in log order.
async fn texts(store: &Disk, task: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let evs = store.events_after(task, after, 512).await.unwrap();
        let Some(last) = evs.last() else {
            return out;
        };
        after = last.seq;
        for e in &evs {
            if let TaskEvent::Stream(StreamResponse::ArtifactUpdate(u)) = &e.event {
                out.extend(u.artifact.parts.iter().filter_map(|p| p.text.clone()));
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn lines_waiting_in_the_pipe_at_exit_are_all_stored_however_slow_the_store() {
    // Each append takes 50 ms: the 200 lines left in the pipe take 10 s to store, twenty
    // times the quiet wait after the exit.
    let (store, e, mut scripts) = Disk::engine(Duration::from_millis(50), Duration::ZERO);
    let (task, mut script) = start(&e, &mut scripts).await;
    let want: Vec<String> = (0..200).map(|i| format!("line {i:03} ")).collect();
    for t in &want {
        script.emit(json!({"type": "text", "text": t, "delta": true}));
    }
    script.emit(json!({"type": "done", "result": "ok", "is_error": false}));
    script.exit_before_its_output_is_read(0);
    let snap = settled(&e, &task, 0).await;
    assert_eq!(snap.task.status.state, TaskState::Completed);
    // Every line, in order, then the end's result.
    let got = texts(&store, &task).await;
    assert_eq!(got.len(), want.len() + 1, "{got:?}");
    assert_eq!(got[..want.len()], want[..]);
    assert_eq!(got[want.len()], "ok");
    assert!(!script.log().contains(&"terminate".to_string()));
}

/// The host hardly runs for twenty seconds (a loaded machine, a process stopped again and
/// again) right after the program exited, before its last lines could be read: they are
/// still read, since the time the host did not run is no quiet of the output.
#[tokio::test(start_paused = true)]
async fn lines_read_after_the_host_was_not_running_are_still_delivered() {
    let (store, e, mut scripts) = Disk::engine(Duration::ZERO, Duration::ZERO);
    let (task, mut script) = start(&e, &mut scripts).await;
    let out = script.out.clone().unwrap();
    script.exit_before_its_output_is_read(0);
    while !script.log().contains(&"exit reported".to_string()) {
        tokio::task::yield_now().await;
    }
    // The clock moves on a second at a time while the host does not run (as for a stopped
    // process), more times than the quiet wait has ticks; it runs only a moment in between.
    for _ in 0..20 {
        tokio::time::advance(Duration::from_secs(1)).await;
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }
    let want: Vec<String> = (0..50).map(|i| format!("late {i:02} ")).collect();
    for t in &want {
        let line = json!({"type": "text", "text": t, "delta": true}).to_string();
        out.send(Output::Line(line)).unwrap();
    }
    let done = json!({"type": "done", "result": "ok", "is_error": false}).to_string();
    out.send(Output::Line(done)).unwrap();
    drop(out);
    let snap = settled(&e, &task, 0).await;
    assert_eq!(snap.task.status.state, TaskState::Completed);
    let got = texts(&store, &task).await;
    assert_eq!(got.len(), want.len() + 1, "{got:?}");
    assert_eq!(got[..want.len()], want[..]);
}
