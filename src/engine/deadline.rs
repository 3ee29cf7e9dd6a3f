//! The times a turn watches (idle, hard, linger, drain), as plain instants behind one timer.
//!
//! A turn used to keep a tokio timer for each and reset the idle one on every line of output.
//! Here a line only moves an instant forward; the one timer is set to the earliest deadline
//! that counts, and is moved only when that deadline comes sooner than the timer. When the
//! timer fires for a deadline that has since moved later (the idle one, after output), the
//! turn finds nothing due and sets the timer again: at most one such wake-up per idle period,
//! instead of a timer operation per line. A live task also carries one timer, not four.

use tokio::time::Instant;

/// Which deadline passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Due {
    /// A tick of the drain after the program exited.
    Drain,
    /// The program ended its turn and did not exit within the grace.
    Linger,
    /// The turn's whole time is up.
    Hard,
    /// No output for the idle timeout.
    Idle,
    /// A question waited for its answer longer than the input timeout.
    Input,
    /// The task's (or its context's) time budget is spent.
    Budget,
}

/// Further than any deadline needs to be (thirty years), and still an instant the clock holds.
const FAR: std::time::Duration = std::time::Duration::from_secs(30 * 365 * 24 * 3600);

/// The instant `d` after `now`, at most [`FAR`] after it: a duration from the settings or a
/// budget may be too long for an instant to exist (`Instant + Duration` would panic).
pub(super) fn after(now: Instant, d: std::time::Duration) -> Instant {
    now.checked_add(d.min(FAR)).unwrap_or(now)
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Deadlines {
    /// When the idle timeout ends, from the last output (counts only while the turn works).
    pub idle: Instant,
    /// When the turn's hard timeout ends.
    pub hard: Instant,
    /// When a program that ended its turn is stopped, once it ended it.
    pub linger: Option<Instant>,
    /// The next tick of the drain, once the program exited.
    pub drain: Option<Instant>,
    /// When an unanswered question expires, while the agent waits for an answer.
    pub input: Option<Instant>,
    /// When the time budget is spent.
    pub budget: Option<Instant>,
}

impl Deadlines {
    /// The earliest deadline that counts; the idle one only when `idle_counts`.
    pub fn next(&self, idle_counts: bool) -> Instant {
        let mut next = self.hard;
        for at in [
            idle_counts.then_some(self.idle),
            self.linger,
            self.drain,
            self.input,
            self.budget,
        ]
        .into_iter()
        .flatten()
        {
            next = next.min(at);
        }
        next
    }

    /// The deadline that passed at `now`, if any: the drain's tick first (it only counts
    /// quiet), then the linger, the hard and the idle timeouts.
    pub fn due(&self, now: Instant, idle_counts: bool) -> Option<Due> {
        let passed = |at: Option<Instant>| at.is_some_and(|at| at <= now);
        if passed(self.drain) {
            Some(Due::Drain)
        } else if passed(self.linger) {
            Some(Due::Linger)
        } else if self.hard <= now {
            Some(Due::Hard)
        } else if passed(self.input) {
            Some(Due::Input)
        } else if passed(self.budget) {
            Some(Due::Budget)
        } else if idle_counts && self.idle <= now {
            Some(Due::Idle)
        } else {
            None
        }
    }

    /// Where the one timer must be set, if it must move: the next deadline comes before
    /// it, or it fired and something later is next. A deadline that moved later leaves
    /// the timer where it is.
    pub fn reset_to(&self, timer: Instant, fired: bool, idle_counts: bool) -> Option<Instant> {
        let next = self.next(idle_counts);
        (next < timer || (fired && next != timer)).then_some(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    fn deadlines(t0: Instant) -> Deadlines {
        Deadlines {
            idle: at(t0, 100),
            hard: at(t0, 1000),
            linger: None,
            drain: None,
            input: None,
            budget: None,
        }
    }

    #[test]
    fn the_earliest_deadline_that_counts_is_next() {
        let t0 = Instant::now();
        let mut d = deadlines(t0);
        assert_eq!(d.next(true), at(t0, 100));
        // Waiting for an answer: the idle timeout does not count.
        assert_eq!(d.next(false), at(t0, 1000));
        d.drain = Some(at(t0, 50));
        assert_eq!(d.next(true), at(t0, 50));
        d.linger = Some(at(t0, 20));
        assert_eq!(d.next(false), at(t0, 20));
    }

    #[test]
    fn what_is_due_and_in_which_order() {
        let t0 = Instant::now();
        let mut d = deadlines(t0);
        assert_eq!(d.due(at(t0, 99), true), None);
        assert_eq!(d.due(at(t0, 100), true), Some(Due::Idle));
        assert_eq!(d.due(at(t0, 500), false), None);
        assert_eq!(d.due(at(t0, 1000), false), Some(Due::Hard));
        d.linger = Some(at(t0, 200));
        assert_eq!(d.due(at(t0, 1000), true), Some(Due::Linger));
        d.drain = Some(at(t0, 300));
        assert_eq!(d.due(at(t0, 1000), true), Some(Due::Drain));
        // An unanswered question expires (the idle timeout does not count meanwhile).
        let mut d = deadlines(t0);
        d.input = Some(at(t0, 400));
        assert_eq!(d.next(false), at(t0, 400));
        assert_eq!(d.due(at(t0, 399), false), None);
        assert_eq!(d.due(at(t0, 400), false), Some(Due::Input));
    }

    #[test]
    fn output_moves_the_idle_deadline_without_moving_the_timer() {
        let t0 = Instant::now();
        let mut d = deadlines(t0);
        let timer = d.next(true);
        // A line at 60 ms: the idle deadline moves to 160 ms, the timer stays at 100.
        d.idle = at(t0, 160);
        assert_eq!(d.reset_to(timer, false, true), None);
        // It fires at 100: nothing is due, and it is set to the new deadline.
        assert_eq!(d.due(timer, true), None);
        assert_eq!(d.reset_to(timer, true, true), Some(at(t0, 160)));
        // A deadline sooner than the timer moves it at once.
        d.linger = Some(at(t0, 80));
        assert_eq!(d.reset_to(timer, false, true), Some(at(t0, 80)));
    }
}
