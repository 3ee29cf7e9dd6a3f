use super::*;

fn p(task: &str) -> Pending {
    Pending {
        task_id: task.to_string(),
        prompt: format!("prompt of {task}"),
        traceparent: None,
        tool_trace: false,
        message_id: String::new(),
        continuing: false,
    }
}

fn dflt() -> PathBuf {
    PathBuf::from("/work")
}

/// Admits and enqueues `task` in `ctx`; the ids of the turns that start.
fn send(s: &mut Scheduler, ctx: &str, task: &str) -> Vec<String> {
    let t = s.admit(ctx, None, None, &dflt()).expect("admitted");
    ids(s.enqueue(t, p(task)))
}

fn ids(starts: Vec<Start>) -> Vec<String> {
    starts.into_iter().map(|s| s.pending.task_id).collect()
}

#[test]
fn a_free_context_starts_at_once_and_a_busy_one_queues_in_order() {
    let mut s = Scheduler::new(4, 10, 64);
    assert_eq!(send(&mut s, "c", "t1"), ["t1"]);
    assert!(send(&mut s, "c", "t2").is_empty());
    assert!(send(&mut s, "c", "t3").is_empty());
    assert_eq!((s.running(), s.queued()), (1, 2));
    // Per-context FIFO: t2 then t3, one at a time.
    assert_eq!(ids(s.finish("t1")), ["t2"]);
    assert_eq!(ids(s.finish("t2")), ["t3"]);
    assert!(s.finish("t3").is_empty());
    assert_eq!((s.running(), s.queued()), (0, 0));
    assert!(
        s.contexts.is_empty(),
        "an anonymous context with nothing left is forgotten"
    );
}

#[test]
fn other_contexts_run_concurrently_up_to_max_running() {
    let mut s = Scheduler::new(2, 10, 64);
    assert_eq!(send(&mut s, "a", "t1"), ["t1"]);
    assert_eq!(send(&mut s, "b", "t2"), ["t2"]);
    assert!(send(&mut s, "c", "t3").is_empty(), "no slot: waits");
    assert!(send(&mut s, "d", "t4").is_empty());
    assert_eq!((s.running(), s.queued()), (2, 2));
    // A freed slot goes to the oldest ready turn.
    assert_eq!(ids(s.finish("t2")), ["t3"]);
    assert_eq!(ids(s.finish("t1")), ["t4"]);
    assert_eq!(s.running(), 2);
}

#[test]
fn admission_reserves_so_a_burst_never_exceeds_the_limits() {
    let mut s = Scheduler::new(1, 5, 64);
    // 100 admissions before any is enqueued (the sends await the store in between).
    let mut tickets = Vec::new();
    let mut refused = 0;
    for i in 0..100 {
        match s.admit(&format!("c{i}"), None, None, &dflt()) {
            Ok(t) => tickets.push(t),
            Err(Refusal::Busy { .. }) => refused += 1,
            Err(e) => panic!("{e:?}"),
        }
    }
    assert_eq!((tickets.len(), refused), (6, 94));
    let mut started = Vec::new();
    for (i, t) in tickets.into_iter().enumerate() {
        started.extend(ids(s.enqueue(t, p(&format!("t{i}")))));
    }
    assert_eq!(started, ["t0"]);
    assert_eq!((s.running(), s.queued()), (1, 5));
    assert!(matches!(
        s.admit("x", None, None, &dflt()),
        Err(Refusal::Busy { queued: 5 })
    ));
    assert!(
        !s.contexts.contains_key("x"),
        "a refused send creates no context"
    );
}

#[test]
fn two_sends_to_one_new_context_do_not_both_reserve_a_start() {
    let mut s = Scheduler::new(4, 10, 64);
    let a = s.admit("c", None, None, &dflt()).unwrap();
    let b = s.admit("c", None, None, &dflt()).unwrap();
    assert_eq!(ids(s.enqueue(a, p("t1"))), ["t1"]);
    assert!(s.enqueue(b, p("t2")).is_empty());
    assert_eq!((s.running(), s.queued()), (1, 1));
}

#[test]
fn a_new_context_belongs_to_its_first_caller_at_once() {
    let mut s = Scheduler::new(4, 10, 64);
    let alice = s.admit("c", Some("alice"), None, &dflt()).unwrap();
    assert_eq!(
        alice.new_context.as_ref().and_then(|r| r.owner.as_deref()),
        Some("alice")
    );
    // Bob races the same new context before Alice's task is enqueued: refused.
    assert_eq!(
        s.admit("c", Some("bob"), None, &dflt()).unwrap_err(),
        Refusal::NotOwner
    );
    let again = s.admit("c", Some("alice"), None, &dflt()).unwrap();
    assert!(again.new_context.is_none());
    s.enqueue(alice, p("t1"));
    s.enqueue(again, p("t2"));
    // The owner outlives the tasks.
    s.finish("t1");
    s.finish("t2");
    assert_eq!(
        s.admit("c", Some("bob"), None, &dflt()).unwrap_err(),
        Refusal::NotOwner
    );
}

#[test]
fn a_context_keeps_its_directory() {
    let mut s = Scheduler::new(4, 10, 64);
    let dir = PathBuf::from("/work/sub");
    let t = s.admit("c", None, Some(&dir), &dflt()).unwrap();
    let started = s.enqueue(t, p("t1"));
    assert_eq!(started[0].cwd.as_ref(), Some(&dir));
    assert_eq!(
        s.admit("c", None, Some(&dflt()), &dflt()).unwrap_err(),
        Refusal::CwdDiffers
    );
    let t = s.admit("c", None, Some(&dir), &dflt()).unwrap();
    assert_eq!(t.context_cwd.as_ref(), Some(&dir));
    s.release(t);
    // A context without a directory has the adapter's, recorded as its own (a host that
    // takes it over runs its turns there, not in that host's default).
    let t = s.admit("d", None, None, &dflt()).unwrap();
    assert_eq!(
        t.new_context.as_ref().and_then(|r| r.cwd.clone()),
        Some(dflt().to_string_lossy().into_owned())
    );
    let started = s.enqueue(t, p("t2"));
    assert_eq!(started[0].cwd.as_ref(), Some(&dflt()));
    assert_eq!(
        s.set_session("d", "s1").cwd,
        Some(dflt().to_string_lossy().into_owned())
    );
    assert!(s.admit("d", None, Some(&dflt()), &dflt()).is_ok());
}

#[test]
fn a_released_ticket_frees_its_place_and_its_new_context() {
    let mut s = Scheduler::new(1, 1, 64);
    let a = s.admit("a", Some("alice"), None, &dflt()).unwrap();
    let b = s.admit("b", None, None, &dflt()).unwrap();
    assert!(s.admit("c", None, None, &dflt()).is_err());
    assert!(s.release(a).is_empty());
    assert!(!s.contexts.contains_key("a"));
    assert!(
        s.admit("a", Some("bob"), None, &dflt()).is_ok(),
        "the context was never created"
    );
    s.release(b);
}

#[test]
fn a_released_start_lets_a_waiting_turn_start() {
    let mut s = Scheduler::new(1, 5, 64);
    let a = s.admit("a", None, None, &dflt()).unwrap();
    // b waits for the slot a reserved.
    assert!(send(&mut s, "b", "t2").is_empty());
    assert_eq!(ids(s.release(a)), ["t2"]);
}

#[test]
fn canceling_a_queued_or_ready_task_takes_it_out() {
    let mut s = Scheduler::new(1, 10, 64);
    send(&mut s, "a", "t1");
    send(&mut s, "a", "t2"); // behind t1 in its context
    send(&mut s, "b", "t3"); // holds b, waits for a slot
    assert_eq!(s.cancel("t1"), CancelPlan::Running);
    assert_eq!(
        s.cancel("t2"),
        CancelPlan::Finalize {
            context_id: Some("a".into()),
            holds_context: false
        }
    );
    assert_eq!(
        s.cancel("t3"),
        CancelPlan::Finalize {
            context_id: Some("b".into()),
            holds_context: true
        }
    );
    assert_eq!(s.queued(), 0);
    // t3 held its context: finishing it frees the context, and starts nothing.
    assert!(s.finish("t3").is_empty());
    assert!(
        s.finish("t1").is_empty(),
        "t2 was canceled: nothing follows t1"
    );
    assert_eq!(s.running(), 0);
    assert_eq!(
        s.cancel("unknown"),
        CancelPlan::Finalize {
            context_id: None,
            holds_context: false
        }
    );
}

#[test]
fn shutdown_drains_the_queues_and_starts_nothing() {
    let mut s = Scheduler::new(1, 10, 64);
    send(&mut s, "a", "t1");
    send(&mut s, "a", "t2");
    send(&mut s, "b", "t3");
    let mut drained = s.shutdown();
    drained.sort();
    assert_eq!(
        drained,
        [
            ("t2".to_string(), "a".to_string()),
            ("t3".to_string(), "b".to_string())
        ]
    );
    assert!(s.is_shutting_down());
    assert_eq!(s.queued(), 0);
    assert!(s.finish("t1").is_empty());
    assert_eq!(s.running(), 0);
    assert_eq!(
        s.admit("c", None, None, &dflt()).unwrap_err(),
        Refusal::ShuttingDown
    );
}

#[test]
fn sessions_are_kept_and_given_to_the_next_turn() {
    let mut s = Scheduler::new(2, 10, 64);
    send(&mut s, "a", "t1");
    let rec = s.set_session("a", "sess-1");
    assert_eq!(rec.session_id.as_deref(), Some("sess-1"));
    assert!(s.finish("t1").is_empty());
    assert_eq!(
        s.session_of("a"),
        Some("sess-1"),
        "a context with a session is kept"
    );
    let t = s.admit("a", None, None, &dflt()).unwrap();
    let started = s.enqueue(t, p("t2"));
    assert_eq!(started[0].session.as_deref(), Some("sess-1"));
}

#[test]
fn recovery_requeues_holds_and_resumes() {
    let mut s = Scheduler::new(1, 10, 64);
    s.restore_context(ContextRecord {
        context_id: "a".into(),
        session_id: Some("sa".into()),
        owner: Some("alice".into()),
        cwd: None,
    });
    s.claim("a", Some("bob".into()));
    assert_eq!(
        s.admit("a", Some("bob"), None, &dflt()).unwrap_err(),
        Refusal::NotOwner,
        "a restored owner is kept"
    );
    s.claim("b", Some("bob".into()));
    s.requeue("a", p("t1"));
    s.requeue("b", p("t2"));
    s.hold("c", "t3");
    let started = s.start_idle();
    assert_eq!(ids(started), ["t1"], "one slot: a's turn, b's waits");
    assert_eq!(s.queued(), 1);
    // The held task gets its turn when answered, after the waiting one.
    assert!(s.resume(p("t3")).is_none());
    assert_eq!(ids(s.finish("t1")), ["t2"]);
    assert_eq!(ids(s.finish("t2")), ["t3"]);
    assert!(s.resume(p("unknown")).is_none());
}

#[test]
fn finishing_an_unknown_or_twice_finished_task_changes_nothing() {
    let mut s = Scheduler::new(1, 10, 64);
    send(&mut s, "a", "t1");
    assert!(s.finish("nope").is_empty());
    assert!(s.finish("t1").is_empty());
    assert!(s.finish("t1").is_empty());
    assert_eq!(s.running(), 0);
}

#[test]
fn visibility_needs_the_same_owner_only_when_both_are_known() {
    assert!(visible(&None, None));
    assert!(visible(&None, Some("a")));
    assert!(visible(&Some("a".into()), None));
    assert!(visible(&Some("a".into()), Some("a")));
    assert!(!visible(&Some("a".into()), Some("b")));
}

#[test]
fn a_task_waiting_for_an_answer_gives_its_slot_to_the_next_within_the_live_limit() {
    // Two slots, three live programs at most.
    let mut s = Scheduler::new(2, 10, 3);
    assert_eq!(send(&mut s, "a", "t1"), ["t1"]);
    assert_eq!(send(&mut s, "b", "t2"), ["t2"]);
    assert!(send(&mut s, "c", "t3").is_empty());
    let t4 = s.admit("d", None, None, &dflt()).expect("admitted");
    assert_eq!(
        t4.wait,
        Some(Wait::Slot {
            place: 2,
            running: 2,
            max_running: 2,
            live: 2,
            max_live: 3
        })
    );
    assert!(s.enqueue(t4, p("t4")).is_empty());
    // t1 asks a question: its slot goes to t3.
    assert_eq!(ids(s.wait_for_answer("t1")), ["t3"]);
    assert!(s.wait_for_answer("t1").is_empty(), "once");
    assert_eq!((s.running(), s.waiting()), (2, 1));
    // t2 asks too: a slot is free, but three programs live already.
    assert!(s.wait_for_answer("t2").is_empty());
    assert_eq!((s.running(), s.waiting()), (1, 2));
    // Answered: t1 takes a slot back at once; t2 ends, and t4 starts (2 running, 3 live).
    s.answered("t1");
    assert_eq!((s.running(), s.waiting()), (2, 1));
    assert!(s.finish("t2").is_empty(), "two running: no slot for t4");
    assert_eq!(ids(s.finish("t3")), ["t4"]);
    assert_eq!((s.running(), s.waiting()), (2, 0));
    // A task behind its context says which one it waits for.
    let t5 = s.admit("a", None, None, &dflt()).expect("admitted");
    assert_eq!(
        t5.wait,
        Some(Wait::Context {
            ahead: "t1".into(),
            place: 1
        })
    );
    assert!(s.enqueue(t5, p("t5")).is_empty());
}

#[test]
fn a_task_ending_while_it_waits_for_an_answer_frees_its_live_place() {
    let mut s = Scheduler::new(1, 10, 1);
    assert_eq!(send(&mut s, "a", "t1"), ["t1"]);
    assert!(send(&mut s, "b", "t2").is_empty());
    assert!(
        s.wait_for_answer("t1").is_empty(),
        "one live program at most"
    );
    assert_eq!(ids(s.finish("t1")), ["t2"]);
    assert_eq!((s.running(), s.waiting()), (1, 0));
}

#[test]
fn a_queued_task_counts_the_turns_admitted_to_start_as_running() {
    // Two slots: two turns admitted (not yet started) hold both; the third says so.
    let mut s = Scheduler::new(2, 10, 4);
    let a = s.admit("a", None, None, &dflt()).expect("a");
    let b = s.admit("b", None, None, &dflt()).expect("b");
    assert_eq!((a.wait.clone(), b.wait.clone()), (None, None));
    let c = s.admit("c", None, None, &dflt()).expect("c");
    assert_eq!(
        c.wait,
        Some(Wait::Slot {
            place: 1,
            running: 2,
            max_running: 2,
            live: 2,
            max_live: 4
        })
    );
}
