//! How a task's events are laid out in the `events` table: one row per batch of a task's
//! events written in one transaction, not one row per event.
//!
//! A row holds consecutive events `first_seq..=last_seq` of one task: their stored JSON
//! joined with newlines (serde_json's compact JSON never contains a raw newline), up to
//! [`ROW_BYTES`] (an event larger than that gets a row of its own). Rows are keyed by the
//! task and their last sequence number, so "the events after `n`" are the rows whose last
//! sequence is greater than `n`, the first of them entered part-way: its earlier events are
//! skipped by finding newlines, without parsing them. Rows are only ever inserted, so an
//! append's cost does not depend on the task's length; and a stream of events written
//! together costs one B-tree insert per [`ROW_BYTES`] rather than one per event.

use std::sync::Arc;

use crate::store::StoreError;
use crate::task::{LoggedEvent, TaskEvent, CACHE_MAX, STREAM_OPEN};

/// The most bytes one row takes events up to (a larger event has a row of its own).
pub(super) const ROW_BYTES: usize = 64 * 1024;

/// An event queued for the writer: the event as logged, and its stored JSON. For a stream
/// event that is `{"stream":` + its v1.0 wire JSON + `}`, and the wire JSON is serialized
/// once, straight into the event's v1.0 cache ([`LoggedEvent::v1_json`]) that every v1.0
/// subscriber reads: the writer copies it into the row between those two pieces, and no
/// second copy of the event's JSON is made for the store.
pub(super) struct Queued {
    pub(super) event: Arc<LoggedEvent>,
    /// The stored JSON when it is not the event's cached wire JSON: an event that is not a
    /// stream event, or one too large to cache ([`CACHE_MAX`]).
    text: Option<String>,
}

impl Queued {
    /// The stored JSON, in pieces to be joined.
    pub(super) fn pieces(&self) -> [&str; 3] {
        match (&self.text, self.event.v1_json.get()) {
            (None, Some(wire)) => [STREAM_OPEN, wire, "}"],
            (Some(text), _) => [text, "", ""],
            // Not made by `encode`.
            (None, None) => ["", "", ""],
        }
    }

    /// The stored JSON's length in bytes.
    pub(super) fn len(&self) -> usize {
        self.pieces().iter().map(|p| p.len()).sum()
    }

    /// The stored JSON, joined.
    pub(super) fn into_text(self) -> String {
        match self.text {
            Some(text) => text,
            None => self.pieces().concat(),
        }
    }
}

/// Serializes `value` into a buffer sized for a typical event (serde_json's own starts at
/// 128 bytes and grows twice for one).
fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    let mut buf = Vec::with_capacity(512);
    serde_json::to_writer(&mut buf, value)?;
    // serde_json writes UTF-8 only.
    String::from_utf8(buf).map_err(|e| StoreError::Json(serde::ser::Error::custom(e)))
}

/// An event as queued for the writer (see [`Queued`]).
pub(super) fn encode(seq: u64, ev: TaskEvent) -> Result<Queued, StoreError> {
    let wire = match &ev {
        TaskEvent::Stream(sr) => Some(to_json(sr)?),
        _ => None,
    };
    let (logged, text) = match wire {
        Some(wire) if wire.len() <= CACHE_MAX => {
            let logged = LoggedEvent::new(seq, ev);
            let _ = logged.v1_json.set(wire.into_boxed_str());
            (logged, None)
        }
        Some(wire) => {
            let text = [STREAM_OPEN, &wire, "}"].concat();
            (LoggedEvent::new(seq, ev), Some(text))
        }
        None => {
            let text = to_json(&ev)?;
            (LoggedEvent::new(seq, ev), Some(text))
        }
    };
    Ok(Queued {
        event: Arc::new(logged),
        text,
    })
}

/// One row being built: events `first..=last` of a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Row {
    pub(super) first: u64,
    pub(super) last: u64,
    pub(super) json: String,
}

/// Adds event `seq` (its stored JSON in `pieces`, joined) to the rows being built for a task:
/// to the last one when it follows on and fits, else to a new one.
pub(super) fn pack(rows: &mut Vec<Row>, seq: u64, pieces: [&str; 3]) {
    let len: usize = pieces.iter().map(|p| p.len()).sum();
    if let Some(row) = rows.last_mut() {
        if row.last + 1 == seq && row.json.len() + 1 + len <= ROW_BYTES {
            row.json.push('\n');
            row.json.extend(pieces);
            row.last = seq;
            return;
        }
    }
    let mut buf = String::with_capacity(len.clamp(4096, ROW_BYTES));
    buf.extend(pieces);
    rows.push(Row {
        first: seq,
        last: seq,
        json: buf,
    });
}

/// The events of a stored row after sequence `after`, each with its sequence number; the
/// earlier ones are skipped without being parsed.
pub(super) fn unpack(
    first: u64,
    last: u64,
    json: &str,
    after: u64,
) -> Result<Events<'_>, StoreError> {
    let mut rest = json;
    let mut seq = first;
    while seq <= after && seq <= last {
        match rest.find('\n') {
            Some(i) => rest = &rest[i + 1..],
            // The row ends here: nothing after `after` in it.
            None if seq == last => rest = "",
            None => return Err(bad(first, last, "fewer events than its sequence numbers")),
        }
        seq += 1;
    }
    Ok(Events {
        seq,
        first,
        last,
        rest,
    })
}

/// The events of one row, from [`unpack`].
pub(super) struct Events<'a> {
    seq: u64,
    first: u64,
    last: u64,
    rest: &'a str,
}

impl<'a> Iterator for Events<'a> {
    type Item = Result<(u64, &'a str), StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.seq > self.last {
            return None;
        }
        let (line, rest) = match self.rest.find('\n') {
            Some(i) if self.seq < self.last => (&self.rest[..i], &self.rest[i + 1..]),
            None if self.seq == self.last => (self.rest, ""),
            _ => {
                self.seq = self.last + 1;
                return Some(Err(bad(
                    self.first,
                    self.last,
                    "its events do not match its sequence numbers",
                )));
            }
        };
        self.rest = rest;
        let seq = self.seq;
        self.seq += 1;
        Some(Ok((seq, line)))
    }
}

fn bad(first: u64, last: u64, what: &str) -> StoreError {
    StoreError::BadRow {
        what: "events",
        column: 3,
        detail: format!("the row of events {first} to {last}: {what}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(row: &Row, after: u64) -> Vec<(u64, String)> {
        unpack(row.first, row.last, &row.json, after)
            .unwrap()
            .map(|r| r.map(|(s, j)| (s, j.to_string())))
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn events_written_together_share_a_row_and_read_back_from_any_position() {
        let mut rows = Vec::new();
        for seq in 5..=9 {
            pack(&mut rows, seq, [&format!("{{\"n\":{seq}}}"), "", ""]);
        }
        assert_eq!(rows.len(), 1);
        let row = &rows[0];
        assert_eq!((row.first, row.last), (5, 9));
        assert_eq!(row.json.lines().count(), 5);
        let seqs = |after| all(row, after).into_iter().map(|e| e.0).collect::<Vec<_>>();
        assert_eq!(seqs(0), vec![5, 6, 7, 8, 9]);
        assert_eq!(seqs(4), vec![5, 6, 7, 8, 9]);
        assert_eq!(seqs(7), vec![8, 9]);
        assert_eq!(seqs(8), vec![9]);
        assert!(seqs(9).is_empty());
        assert!(seqs(100).is_empty());
        assert_eq!(all(row, 6)[0], (7, "{\"n\":7}".to_string()));
    }

    #[test]
    fn a_row_is_bounded_and_a_large_event_has_one_of_its_own() {
        let mut rows = Vec::new();
        let chunk = "x".repeat(ROW_BYTES / 4);
        for seq in 1..=8 {
            pack(&mut rows, seq, [&chunk, "", ""]);
        }
        assert!(rows.len() >= 2);
        assert!(rows.iter().all(|r| r.json.len() <= ROW_BYTES));
        let big = "y".repeat(ROW_BYTES * 2);
        pack(&mut rows, 9, [&big, "", ""]);
        pack(&mut rows, 10, ["{}", "", ""]);
        let n = rows.len();
        assert_eq!((rows[n - 2].first, rows[n - 2].last), (9, 9));
        assert_eq!(rows[n - 2].json, big);
        assert_eq!((rows[n - 1].first, rows[n - 1].last), (10, 10));
        // Contiguous, and every event reads back whole.
        let mut expected = 1;
        for row in &rows {
            assert_eq!(row.first, expected);
            for (seq, json) in all(row, 0) {
                assert_eq!(seq, expected);
                let want = match seq {
                    9 => big.as_str(),
                    10 => "{}",
                    _ => chunk.as_str(),
                };
                assert_eq!(json, want);
                expected += 1;
            }
        }
        assert_eq!(expected, 11);
    }

    #[test]
    fn a_gap_in_the_sequence_starts_a_new_row() {
        let mut rows = Vec::new();
        pack(&mut rows, 1, ["a", "", ""]);
        pack(&mut rows, 3, ["b", "", ""]);
        assert_eq!(rows.len(), 2);
    }

    #[test]
    fn a_row_whose_lines_do_not_match_its_sequence_numbers_is_an_error() {
        // Too few lines, skipping into it and reading it whole.
        assert!(unpack(1, 3, "a\nb", 1).is_ok());
        assert!(unpack(1, 3, "a\nb", 2).is_err());
        let read: Result<Vec<_>, _> = unpack(1, 3, "a\nb", 0).unwrap().collect();
        assert!(matches!(read, Err(StoreError::BadRow { .. })));
        // Too many.
        let read: Result<Vec<_>, _> = unpack(1, 2, "a\nb\nc", 0).unwrap().collect();
        assert!(read.is_err());
    }
}
