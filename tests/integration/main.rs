//! Integration tests: the real server on 127.0.0.1:0 with fake-agent as the CLI.

mod browser;
mod card_sign;
mod client;
mod common;
mod conformance;
mod console;
mod errors;
mod lifecycle;
mod model_server;
mod observe;
mod push;
mod races;
mod real_cli;
mod rest;
mod restart;
mod security;
mod streaming;
mod tasks;
