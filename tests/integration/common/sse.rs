//! Server-sent events: the frames of a streaming response, read with the client's parser.

use agent_host::client::sse::SseParser;
use futures::StreamExt;
use serde_json::Value;

/// One SSE frame.
#[derive(Debug, Clone)]
pub struct Frame {
    pub id: Option<u64>,
    pub data: Value,
}

/// The SSE frames of a response, read with the client's own parser.
pub struct SseReader {
    pub is_sse: bool,
    body: std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    parser: SseParser,
    ready: std::collections::VecDeque<Frame>,
    /// Keep-alive comments seen so far.
    pub pings: usize,
}

impl SseReader {
    /// Reads the SSE frames of a response.
    pub fn from_response(resp: reqwest::Response) -> SseReader {
        let ct = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        SseReader {
            is_sse: ct.starts_with("text/event-stream"),
            body: Box::pin(resp.bytes_stream()),
            parser: SseParser::new(),
            ready: Default::default(),
            pings: 0,
        }
    }

    /// The next data frame (keep-alive comments are counted and skipped); None at the end.
    pub async fn next(&mut self) -> Option<Frame> {
        loop {
            if let Some(f) = self.ready.pop_front() {
                return Some(f);
            }
            let chunk = match self.body.next().await {
                Some(Ok(chunk)) => chunk,
                Some(Err(_)) | None => return None,
            };
            self.take(&chunk);
        }
    }

    /// Reads on until `n` keep-alive comments have come (data frames are kept for
    /// [`SseReader::next`]); false if the stream ended first.
    pub async fn read_pings(&mut self, n: usize) -> bool {
        while self.pings < n {
            let Some(Ok(chunk)) = self.body.next().await else {
                return false;
            };
            self.take(&chunk);
        }
        true
    }

    /// Parses a chunk of the body into ready frames and counts its comments.
    fn take(&mut self, chunk: &[u8]) {
        for ev in self.parser.push(chunk) {
            let data = serde_json::from_str(&ev.data).expect("frame data is JSON");
            let id = ev.id.and_then(|i| i.trim().parse().ok());
            self.ready.push_back(Frame { id, data });
        }
        self.pings = self.parser.comments();
    }

    pub async fn all(&mut self) -> Vec<Frame> {
        let mut out = Vec::new();
        while let Some(f) = self.next().await {
            out.push(f);
        }
        out
    }
}

/// The v1.0 state of each status update / task among frames.
pub fn states(frames: &[Frame]) -> Vec<String> {
    frames
        .iter()
        .filter_map(|f| {
            let r = &f.data["result"];
            r["statusUpdate"]["status"]["state"]
                .as_str()
                .or(r["task"]["status"]["state"].as_str())
                .or(r["status"]["state"].as_str())
                .map(str::to_string)
        })
        .collect()
}
