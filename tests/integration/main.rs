//! Integration tests: the real server on 127.0.0.1:0 with fake-agent as the CLI.

// Test code, helpers included, may unwrap and expect: a failed setup should stop the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod browser;
mod card_sign;
mod cli_tool;
mod client;
mod common;
mod conformance;
mod console;
mod doctor;
mod edge;
mod ends;
mod errors;
mod forwarding;
mod grpc;
mod grpc_streams;
mod lifecycle;
mod long_prompts;
mod model_server;
mod observe;
mod one_host;
mod postgres;
mod postgres_listing;
mod push;
mod push_hosts;
mod races;
mod real_cli;
mod real_cli_aider;
mod real_cli_gemini;
mod real_cli_qwen;
mod rest;
mod restart;
mod sandbox;
mod sandbox_more;
mod sandbox_setup;
mod security;
mod several_hosts;
mod slow_reader;
mod store_full;
mod streaming;
mod tasks;
mod workspaces;
