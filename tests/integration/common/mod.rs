//! Test harness, by concern: the server under test, HTTP and SSE helpers, the agents and their
//! processes, and waiting for events.

mod agents;
mod http;
mod server;
mod sse;
mod wait;

pub use agents::*;
pub use http::*;
pub use server::*;
pub use sse::*;
pub use wait::*;
