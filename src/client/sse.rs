//! A server-sent events parser (the WHATWG rules the A2A bindings use): `data:` lines joined
//! with newlines, `id:` kept as the last event id, `event:` names, `:` comments ignored, lines
//! ended by LF, CRLF or CR, events ended by a blank line. Bytes may arrive split anywhere.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The last event id seen so far (ids persist across events, as in browsers).
    pub id: Option<String>,
    /// The `event:` name (`message` when absent).
    pub event: String,
    pub data: String,
}

/// Incremental parser: feed it chunks, get complete events.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
    data: Vec<String>,
    event: Option<String>,
    last_id: Option<String>,
    /// The previous chunk ended with CR: a LF at the start of the next one belongs to it.
    after_cr: bool,
    /// Comment lines seen (keep-alives).
    comments: usize,
}

impl SseParser {
    pub fn new() -> SseParser {
        SseParser::default()
    }

    /// The last event id seen (also from events without data).
    pub fn last_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// How many comment lines (`:` ..., what servers send as keep-alives) were seen.
    pub fn comments(&self) -> usize {
        self.comments
    }

    /// Feeds bytes; returns the events they complete.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        let mut bytes = chunk;
        if self.after_cr && bytes.first() == Some(&b'\n') {
            bytes = &bytes[1..];
        }
        self.after_cr = false;
        for (i, &b) in bytes.iter().enumerate() {
            match b {
                b'\n' | b'\r' => {
                    if b == b'\r' {
                        if bytes.get(i + 1) == Some(&b'\n') {
                            continue; // the LF ends this line
                        }
                        if i + 1 == bytes.len() {
                            self.after_cr = true;
                        }
                    }
                    let line = std::mem::take(&mut self.buf);
                    let line = String::from_utf8_lossy(&line).into_owned();
                    if let Some(ev) = self.line(&line) {
                        out.push(ev);
                    }
                }
                _ => self.buf.push(b),
            }
        }
        out
    }

    fn line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            let event = self.event.take();
            if self.data.is_empty() {
                return None;
            }
            let data = std::mem::take(&mut self.data).join("\n");
            return Some(SseEvent {
                id: self.last_id.clone(),
                event: event.unwrap_or_else(|| "message".into()),
                data,
            });
        }
        if line.starts_with(':') {
            self.comments += 1;
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => self.data.push(value.to_string()),
            "event" => self.event = Some(value.to_string()),
            "id" if !value.contains('\0') => self.last_id = Some(value.to_string()),
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut p = SseParser::new();
        chunks.iter().flat_map(|c| p.push(c)).collect()
    }

    #[test]
    fn frames_with_ids_comments_and_multiline_data() {
        let evs = feed_all(&[b": ping\n\nid: 1\ndata: {\"a\":1}\n\nid: 2\ndata: x\ndata: y\n\n"]);
        assert_eq!(evs.len(), 2);
        assert_eq!(evs[0].id.as_deref(), Some("1"));
        assert_eq!(evs[0].data, "{\"a\":1}");
        assert_eq!(evs[0].event, "message");
        assert_eq!(evs[1].data, "x\ny");
        let mut p = SseParser::new();
        p.push(b": ping\n\n:\n\ndata: x\n\n: ping\n");
        assert_eq!(p.comments(), 3, "keep-alive comments are counted");
    }

    #[test]
    fn split_anywhere_and_any_line_ending() {
        let whole = b"id: 7\r\nevent: error\r\ndata: {\"e\":\"\xc3\xa9\"}\r\n\r\ndata:no-space\r\rdata: z\n\n";
        for cut in 0..whole.len() {
            let evs = feed_all(&[&whole[..cut], &whole[cut..]]);
            assert_eq!(evs.len(), 3, "cut at {cut}");
            assert_eq!(evs[0].event, "error");
            assert_eq!(evs[0].data, "{\"e\":\"é\"}");
            assert_eq!(evs[1].data, "no-space");
            assert_eq!(evs[1].id.as_deref(), Some("7"), "ids persist");
            assert_eq!(evs[2].data, "z");
        }
    }

    #[test]
    fn an_unfinished_event_is_not_dispatched() {
        let mut p = SseParser::new();
        assert!(p.push(b"id: 3\ndata: partial").is_empty());
        assert_eq!(p.last_id(), Some("3"));
    }
}
