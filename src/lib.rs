//! agent-host serves local coding-agent CLIs over the A2A protocol (v1.0 and v0.3): each A2A
//! task runs the CLI that the adapter names, its output becomes A2A status and artifact
//! updates streamed over SSE, its questions become `input-required`, and cancel stops it and
//! everything it started.
//!
//! # Layout
//!
//! Dependencies point inward. The modules in layers, lowest first; a module uses only the
//! modules of the layers below its own, and below the top no two modules of one parent use
//! each other (the `layering` unit test reads this list and checks both on the code):
//!
//! 1. [`units`], [`protocol`], [`telemetry`], [`fake_agent`] (pure values and wire types;
//!    the OpenTelemetry exporter and the demo agent stand alone).
//! 2. [`adapter`] (pure).
//! 3. [`task`], [`policy`] (pure).
//! 4. [`egress`], [`workspace`], [`client`] (the first I/O: sockets, `git`, HTTP).
//! 5. [`runner`], [`store`].
//! 6. [`home`] (each context's CLI state folders, made for the runner's sandbox).
//! 7. [`engine`], [`push`] (no HTTP).
//! 8. [`retention`].
//! 9. [`server`].
//! 10. [`settings`] (the sections of the modules below, as one command line and file).
//! 11. [`app`] (the composition root).
//! 12. [`cli`] (one module per command).
//!
//! - [`protocol`]: A2A wire types. v1.0 ([`protocol::v1`]) is the internal model; v0.3
//!   ([`protocol::v03`]) is converted at the edge; the agent card; error codes
//!   ([`protocol::A2AError`], the one place that maps errors to JSON-RPC codes); the JSON-RPC
//!   method names of both versions ([`protocol::Method`]).
//! - [`adapter`]: adapter definitions (`adapters/*.toml`, embedded; [`adapter::AdapterSpec`]),
//!   the normalized [`adapter::AgentEvent`], one parser per CLI output format in
//!   [`adapter::wire`] (the native `agent-host-jsonl` protocol first), and the one table from
//!   a CLI's error text to the task's `errorKind` ([`adapter::error_kind`]).
//! - [`policy`]: what a task may do without asking and spend (pure, no I/O): approval rule
//!   sets (`[approvals]`, `metadata.approvals`, first match wins, a request only narrows)
//!   and budgets per task and per context (`metadata.budget`, the ceilings and defaults of
//!   `[limits]`) with the meter a turn counts its events against; see
//!   `docs/budgets-and-rules.md`.
//! - [`task`]: the task model: [`task::TaskEvent`]s applied to a task in place, the event log
//!   entry, id rules, and [`task::TurnMapper`] (AgentEvent → A2A updates, exactly one terminal
//!   state per turn); a context's earlier turns as text ([`task::history`]).
//! - [`runner`]: the only place with child processes, ptys and signals: spawn in its own
//!   process group (pipes or a raw pty), bounded clean line reading, stop = SIGTERM to the
//!   group, grace, SIGKILL, reap; and the sandbox per task ([`runner::sandbox`]): a cgroup
//!   per task (tracking, `cgroup.kill`, memory/process/CPU limits), bubblewrap (own PID
//!   namespace, read-only system, host data hidden, optional no network) or Landlock; where
//!   neither cgroups nor bubblewrap serve, the host as child subreaper sweeping each task's
//!   processes ([`runner::sandbox::reaper`]); another user for the task on a root host
//!   ([`runner::sandbox::user`]); and the pieces this machine offers. Programs start
//!   without forking the host: what a child does to itself before its program runs (join its
//!   cgroups, limits, user, Landlock, session) happens in an exec of the host's own binary in
//!   a hidden mode ([`runner::sandbox::setup`]).
//! - [`store`]: the [`store::TaskStore`] trait (tasks and their sequence-numbered event logs:
//!   rows of events plus checkpoints; context sessions, process groups) and
//!   [`store::PushStore`]; the SQLite store (the default, with migrations), the PostgreSQL
//!   store (shared by several hosts, versioned migrations) and the in-memory one; the suite
//!   of tests every store passes; [`store::window`], the recent events the SQLite and PostgreSQL
//!   stores keep in memory per task, bounded in count and bytes; the data folder's lock (one host per database) and private file modes;
//!   [`store::cluster`]: a shared store's leases, task and context owners, takeover of dead
//!   hosts and wake-ups (`LISTEN/NOTIFY`), see `docs/several-hosts.md`.
//! - [`engine`]: accepts messages, runs turns (one tokio task owns each CLI process), queues
//!   follow-ups per context, relays answers to approvals, cancels, shuts down; builds each
//!   turn's process from the adapter and settings ([`engine::launch`]), a prompt too long
//!   for one argument going on stdin or in a file, or refused ([`engine::PromptRoute`]);
//!   checks messages against the input modes and saves their binary parts as files for the
//!   agent ([`engine::input`]); as one of several hosts on a shared store it claims its own
//!   tasks, renews its lease, takes over dead hosts and follows other hosts' tasks
//!   ([`engine::ClusterRole`]), and passes commands for another live host's task or context
//!   to it through the [`engine::Forwarder`] the application gives it. Which turn runs when (contexts, queues, admission against the
//!   running and queued limits) is a synchronous state machine with no I/O (`schedule`);
//!   turns start their program through [`engine::child::Spawner`] (the runner by default,
//!   a scripted child in the turn tests); the HTTP layer passes a request's trace and
//!   extensions as [`engine::RequestOptions`].
//! - [`push`]: push notifications: webhook configs, in-order at-least-once delivery from each
//!   config's cursor into the task's event log, retries and dead letters, SSRF guard, secrets
//!   sealed at rest; with a store several hosts share, each config's deliveries claimed by one
//!   host at a time (a lease in the database, held under the host id), woken by the store's
//!   wake-ups of any host's writes, and the shared queue scanned for work left by a dead host.
//! - [`server`]: the axum router: JSON-RPC and HTTP+JSON for both versions, SSE with replay,
//!   the agent card, an index at `GET /`, health, metrics, the request guard (auth, hosts, origins), push-config
//!   methods, the extended card and A2A extensions; several adapters on one port
//!   (`/agents/{id}/`, routing by `metadata.agent`); the connection layer (`server::listen`:
//!   hyper with a header-read/idle timeout, connection and stream caps) and graceful shutdown.
//!   [`server::grpc`]: the A2A 1.0 gRPC binding (generated from `proto/a2a.proto`) on its own
//!   port, on the same operations, guard and engines. [`server::mcp`]: the MCP binding
//!   (rmcp, Streamable HTTP at `/mcp`): tools on the same engine operations, behind the same
//!   guard, with no task state of its own; `start_task` as an MCP 2025-11-25 task that is the
//!   A2A task, served by a layer in front of rmcp ([`server::mcp`]'s `tasks`). [`server::peer`]: the HTTP
//!   [`engine::Forwarder`] (the owner's JSON-RPC endpoint, the caller's credentials).
//!   The web console ([`server::ui`]: the `ui/` folder's files embedded and served at `/ui/`,
//!   plus `/ui/api/host`).
//! - [`workspace`]: a git workspace per context (a checkout borrowing the objects of the task's
//!   repository, at `metadata.baseRef`, on a branch `agent-host/<context>`), reused by its
//!   follow-ups; at a turn's end its change from the base (files and a `git apply`-able
//!   patch), on a follow-up its change since the previous turn's end, and a commit of it on
//!   the context's branch; listing, removal, disk use. Runs the `git` program (the
//!   only module besides the runner that starts programs), hardened against a `.git` the
//!   agent wrote. See `docs/workspaces.md`.
//! - [`home`]: each context's CLI home: a folder per context (in the host's data folder)
//!   holding the CLI's state paths (the adapter's `[sandbox] write`), its configuration
//!   copied in from the host user's; the sandbox shows it at the CLI's own paths for that
//!   context's turns, with the host's credentials read-only over it; removed with the
//!   context by retention and `tasks prune`.
//! - [`egress`]: the way out of a task's sandbox in the `proxy` network mode (the default):
//!   an HTTP proxy per task on a Unix socket bound into its sandbox, reaching only the hosts
//!   of the task's allow-list, resolving names itself and refusing loopback, private and
//!   metadata addresses; the relay inside the task's network namespace
//!   ([`egress::relay`], a hidden mode of the binary). See `docs/network.md`.
//! - [`telemetry`]: OpenTelemetry export of the task spans (the `otel` cargo feature).
//! - [`client`]: an A2A client library for orchestrators (card discovery and interface
//!   choice, send, stream with resubscribe, get, list, cancel; JSON-RPC and HTTP+JSON, v1.0
//!   and v0.3, one v1.0 model); the server's [`server::peer`] forwards with it, and the
//!   `call` and `tasks` commands are built on it.
//! - [`app`]: the composition root: [`app::App::start`] turns [`settings::Settings`] into
//!   engines, stores, push services, the guard and the HTTP service; the `serve` command and
//!   the integration tests start through it.
//! - [`settings`]: defaults < config file < environment < flags, checked with clear errors.
//!   Each setting is declared once (flag, variable, file key, type, default, help) in the
//!   section struct of the module that uses it: [`engine::config`] (`[agent]`, `[limits]`,
//!   `[workspace]`), [`server::config`] (`[server]`, `[auth]`, `[security]`, `[card]`),
//!   [`runner::sandbox::config`] (`[sandbox]`), [`push::config`] (`[push]`), [`retention`]
//!   (`[retention]`), [`store::config`] (`[store]`, `[cluster]`); those modules never import
//!   `settings`. `settings` flattens the sections into the `serve` flags, merges the config
//!   file over them generically ([`settings::file`]), keeps the old variable and key names
//!   working ([`settings::legacy`]), runs the checks across sections, and generates the
//!   reference of `docs/configuration.md` ([`settings::reference`]). Only [`app`], [`cli`]
//!   and `main` import it.
//! - [`units`]: the value types with units of settings: durations (`30s`, `10m`, `30d`) and
//!   sizes (`4MiB`).
//! - [`retention`]: which terminal tasks are deleted (age, count) and deleting them with
//!   their attachments; run in the background by [`app`] and once by `tasks prune`.
//! - [`cli`]: the command line, one module per command: [`cli::serve`],
//!   [`cli::adapters`], [`cli::card`] (and `card verify`), [`cli::call`] (its terminal
//!   output in `cli::render`, `--apply`/`--fetch` in [`cli::changes`]), [`cli::tasks`]
//!   (`tasks prune` in [`cli::prune`]), [`cli::workspaces`], [`cli::doctor`], [`cli::mcp`]
//!   (MCP over stdio relayed to a host's `/mcp`), [`cli::completions`] (and `man`);
//!   `src/main.rs` only parses, sets up logging and calls them.
//!
//! One binary, `agent-host` (`src/main.rs`); its hidden `fake-agent` subcommand is the demo
//! agent and test double CLI that speaks the native protocol ([`fake_agent`]).
//!
//! Outside `src/`:
//!
//! - `adapters/`: the built-in adapters (embedded in the binary) and `adapters/README.md`
//!   (the adapter schema, wire formats, the native protocol); `adapters/examples/` is not
//!   built in.
//! - `ui/`: the web console's HTML, CSS and ES modules, embedded by [`server::ui`].
//! - `proto/a2a.proto`: the A2A 1.0 gRPC service; `build.rs` generates its code.
//!   `helpers/enter.rs`: `agent-host-enter`, the step a root task's sandbox runs before its
//!   program, with no C library; `build.rs` builds it and [`runner::sandbox::enter`] embeds it.
//! - `config/agent-host.toml`: an annotated config file with every key;
//!   `contrib/agent-host.service`: a systemd unit.
//! - Unit tests sit beside their module, in `MODULE/tests.rs` (several files:
//!   `MODULE/tests/*.rs`, declared by `tests.rs`).
//! - `tests/integration/`: the one integration test binary (`tests/integration/main.rs` lists
//!   its modules; `common/` is the harness: the server, HTTP and SSE helpers, the agents'
//!   processes, and `eventually`, with which a test waits for an event, never a fixed time);
//!   `tests/fixtures/`: recorded CLI transcripts, scenarios, keys, databases;
//!   `tests/clis/`: the pins of the real CLIs the ignored tests drive; `tests/clients/`: the
//!   official SDKs against agent-host. `.ci/run` is what CI runs.
//! - `benches/`: criterion benchmarks (parsing, mapping, SSE frames, the stores); `bench/`:
//!   the side-by-side harness (`bench/run.sh`) and its dated log (`bench/log/`).
//! - `examples/`: the client library at work (`fan_out.rs`, `sdk_interop.rs`), the Python
//!   SDK against agent-host, a shell-script agent with its adapter;
//!   `scripts/conformance.sh`: the A2A conformance kits.
//!
//! # Documents
//!
//! `docs/README.md` is the index of the documentation, one page per reader's question. The
//! settings: `docs/configuration.md` (every setting, generated from the declarations;
//! precedence; value syntax; the old names that keep working). The pages about the inside: `docs/processes.md` (how a turn runs and ends its program),
//! `docs/dependencies.md` (every crate used and why, and the ones considered and not used:
//! nix's pty calls instead of portable-pty, one mutex-guarded engine state instead of
//! dashmap, the own line reader instead of tokio-util's codec), `docs/several-hosts.md`
//! (several hosts on one PostgreSQL database: host ids, leases, owners, commands passed to
//! the owner, live events across hosts, takeover of a dead host, restarts),
//! `docs/orchestrators.md` (what a program driving many
//! tasks can rely on: streams that end, waiting tasks, expiring questions, early cancels),
//! `docs/workspaces.md` (a git workspace per context, the
//! `changes` artifact, the turn commits, the mechanism and its figures), `docs/mcp.md` (the MCP binding: transports, tools,
//! security, client configuration), `docs/wire-formats.md` (what each CLI prints and reads in the formats the parsers of
//! [`adapter::wire`] understand, with the CLI versions they were recorded from) and
//! `docs/performance.md` (what it costs, and `bench/log/` for how that was measured).

pub mod adapter;
pub mod app;
pub mod cli;
pub mod client;
pub mod egress;
pub(crate) mod engine;
pub mod fake_agent;
pub(crate) mod home;
pub(crate) mod policy;
pub mod protocol;
pub mod push;
pub(crate) mod retention;
pub mod runner;
pub mod server;
pub mod settings;
pub mod store;
pub mod task;
pub mod telemetry;
pub(crate) mod units;
pub mod workspace;

#[cfg(test)]
mod layering;
