//! agent-host: serves local coding-agent CLIs over the A2A protocol (v1.0 and v0.3).
pub mod adapter;
pub mod engine;
pub mod protocol;
pub mod runner;
pub mod server;
pub mod store;
pub mod task;
