//! agent-host: serves local coding-agent CLIs over the A2A protocol (v1.0 and v0.3).
pub mod adapter;
pub mod cli;
pub mod engine;
pub mod protocol;
pub mod runner;
pub mod server;
pub mod settings;
pub mod store;
pub mod task;
