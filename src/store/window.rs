//! The recent events a store keeps in memory for each task it writes, so that live streams
//! read them without a query: bounded in count and in bytes (a long line of output is not
//! kept, and its followers read it from the database). Shared by the SQLite and PostgreSQL
//! stores.
//!
//! How much a task keeps depends on how many tasks the store is writing ([`bound_for`]): a
//! CLI that prints its lines back to back runs ahead of its stream by thousands of events
//! (the stream's task waits for a core while the CLI's is parsed and stored), and a stream
//! that falls out of the window reads the rest from the database, parsing every event again:
//! with 1 MiB per task, a stream of 10,000 back-to-back events read nine tenths of them back,
//! about a tenth of the SQLite store's CPU per event. A few tasks keep up to
//! [`WINDOW_BYTES_MAX`] each; many share [`LIVE_WINDOWS_BYTES`], each keeping at least
//! [`WINDOW_BYTES`].

use std::collections::VecDeque;
use std::sync::Arc;

use crate::task::LoggedEvent;

/// Bytes (of their stored JSON) of the events kept in memory per task being written, at
/// least: what each keeps when many tasks are written at once. An event larger than a
/// window's bound is not kept.
pub const WINDOW_BYTES: usize = 1 << 20;
/// Bytes a task's window keeps at most, when few tasks are written at once.
pub const WINDOW_BYTES_MAX: usize = 4 << 20;
/// Bytes of all the windows of a store together, shared by its tasks being written (beyond
/// [`LIVE_WINDOWS_BYTES`] / [`WINDOW_BYTES`] tasks, each keeps [`WINDOW_BYTES`]).
pub const LIVE_WINDOWS_BYTES: usize = 32 << 20;
/// Stored bytes per event the count bound allows for: a window of `b` bytes keeps at most
/// `b / EVENT_BYTES` events, so a window of tiny events (each also held parsed) stays small.
pub const EVENT_BYTES: usize = 256;
/// Events a window keeps at most.
#[cfg(test)]
pub const WINDOW: usize = WINDOW_BYTES_MAX / EVENT_BYTES;

/// The byte bound of each window of a store writing `live` tasks.
pub(crate) fn bound_for(live: usize) -> usize {
    (LIVE_WINDOWS_BYTES / live.max(1)).clamp(WINDOW_BYTES, WINDOW_BYTES_MAX)
}

/// A task's recent events, contiguous up to the last one kept, each with its stored size.
#[derive(Default)]
pub(crate) struct EventWindow {
    events: VecDeque<(usize, Arc<LoggedEvent>)>,
    bytes: usize,
}

impl EventWindow {
    /// Keeps the event just appended, dropping the oldest ones past either bound (`max`
    /// bytes, from [`bound_for`], and `max / EVENT_BYTES` events); an event over the byte
    /// bound empties the window instead.
    pub(crate) fn keep(&mut self, size: usize, event: Arc<LoggedEvent>, max: usize) {
        if size > max {
            self.events.clear();
            self.bytes = 0;
            return;
        }
        self.events.push_back((size, event));
        self.bytes += size;
        let count = max / EVENT_BYTES;
        while self.events.len() > count || self.bytes > max {
            match self.events.pop_front() {
                Some((n, _)) => self.bytes -= n,
                None => break,
            }
        }
    }

    /// The sequence number of the oldest event kept.
    pub(crate) fn first_seq(&self) -> Option<u64> {
        self.events.front().map(|(_, e)| e.seq)
    }

    /// Up to `limit` events after `after`, up to `upto` (what readers may see). The first is
    /// found by its position (sequence numbers only grow), not by a scan of the window.
    pub(crate) fn after(&self, after: u64, upto: u64, limit: usize) -> Vec<Arc<LoggedEvent>> {
        let start = self.events.partition_point(|(_, e)| e.seq <= after);
        self.events
            .range(start..)
            .map(|(_, e)| e)
            .take_while(|e| e.seq <= upto)
            .take(limit)
            .cloned()
            .collect()
    }

    /// The sequence number of the newest event kept.
    pub(crate) fn last_seq(&self) -> Option<u64> {
        self.events.back().map(|(_, e)| e.seq)
    }

    /// Every event kept, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<LoggedEvent>> {
        self.events.iter().map(|(_, e)| e)
    }

    /// Nothing kept.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// How many events are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.events.len()
    }

    /// The stored size of what is kept.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Forgets the events from `first` to `last` (their write failed).
    pub(crate) fn forget(&mut self, first: u64, last: u64) {
        self.events.retain(|(_, e)| e.seq < first || e.seq > last);
        self.bytes = self.events.iter().map(|(n, _)| n).sum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::TaskEvent;

    fn ev(seq: u64) -> Arc<LoggedEvent> {
        Arc::new(LoggedEvent::new(
            seq,
            TaskEvent::Stream(crate::protocol::v1::StreamResponse::Message(
                Default::default(),
            )),
        ))
    }

    #[test]
    fn bounded_in_count_and_bytes_and_a_huge_event_empties_it() {
        let mut w = EventWindow::default();
        for s in 1..=(WINDOW as u64 + 5) {
            w.keep(10, ev(s), WINDOW_BYTES_MAX);
        }
        assert_eq!(w.first_seq(), Some(6));
        w.keep(
            WINDOW_BYTES_MAX / 2,
            ev(WINDOW as u64 + 6),
            WINDOW_BYTES_MAX,
        );
        w.keep(
            WINDOW_BYTES_MAX / 2,
            ev(WINDOW as u64 + 7),
            WINDOW_BYTES_MAX,
        );
        assert!(w.bytes <= WINDOW_BYTES_MAX);
        w.keep(
            WINDOW_BYTES_MAX + 1,
            ev(WINDOW as u64 + 8),
            WINDOW_BYTES_MAX,
        );
        assert_eq!(w.first_seq(), None);
        w.keep(1, ev(WINDOW as u64 + 9), WINDOW_BYTES_MAX);
        w.keep(1, ev(WINDOW as u64 + 10), WINDOW_BYTES_MAX);
        w.forget(WINDOW as u64 + 10, WINDOW as u64 + 10);
        assert_eq!(w.after(0, u64::MAX, 10).len(), 1);
    }

    #[test]
    fn a_few_tasks_share_the_memory_of_many_each_keeping_at_least_a_floor() {
        assert_eq!(bound_for(0), WINDOW_BYTES_MAX);
        assert_eq!(bound_for(1), WINDOW_BYTES_MAX);
        assert_eq!(bound_for(8), WINDOW_BYTES_MAX);
        assert_eq!(bound_for(16), LIVE_WINDOWS_BYTES / 16);
        assert_eq!(bound_for(32), WINDOW_BYTES);
        assert_eq!(bound_for(10_000), WINDOW_BYTES);
        // The count bound follows the byte bound.
        let mut w = EventWindow::default();
        for s in 1..=(WINDOW as u64) {
            w.keep(1, ev(s), WINDOW_BYTES);
        }
        assert_eq!(w.len(), WINDOW_BYTES / EVENT_BYTES);
        for s in 1..=(WINDOW as u64) {
            w.keep(1, ev(WINDOW as u64 + s), WINDOW_BYTES_MAX);
        }
        assert_eq!(w.len(), WINDOW);
    }

    #[test]
    fn events_after_a_position_are_found_in_order_and_bounded() {
        let mut w = EventWindow::default();
        for s in 10..=20 {
            w.keep(1, ev(s), WINDOW_BYTES);
        }
        fn seqs(w: &EventWindow, after: u64, upto: u64, limit: usize) -> Vec<u64> {
            w.after(after, upto, limit).iter().map(|e| e.seq).collect()
        }
        assert_eq!(seqs(&w, 0, u64::MAX, 3), vec![10, 11, 12]);
        assert_eq!(seqs(&w, 14, u64::MAX, 100), vec![15, 16, 17, 18, 19, 20]);
        assert_eq!(seqs(&w, 14, 16, 100), vec![15, 16]);
        assert!(seqs(&w, 20, u64::MAX, 100).is_empty());
        // A hole left by forgotten events is stepped over.
        w.forget(12, 13);
        assert_eq!(seqs(&w, 11, u64::MAX, 2), vec![14, 15]);
        assert_eq!(seqs(&w, 12, u64::MAX, 1), vec![14]);
        assert_eq!(
            (w.first_seq(), w.last_seq(), w.bytes()),
            (Some(10), Some(20), 9)
        );
    }
}
