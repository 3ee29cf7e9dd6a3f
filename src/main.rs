//! `agent-host`: parse the command line, set up logging, run.

use clap::Parser;
use tracing_subscriber::EnvFilter;

use agent_host::cli::{self, Cli, ColorChoice, Command};
use agent_host::settings::{LogFormat, Settings};

/// Keeps the OpenTelemetry exporter (with the `otel` feature) until the command ends.
#[cfg(feature = "otel")]
type Telemetry = Option<agent_host::telemetry::Exporter>;
#[cfg(not(feature = "otel"))]
type Telemetry = Option<std::convert::Infallible>;

fn init_logging(format: LogFormat, color: ColorChoice) -> anyhow::Result<Telemetry> {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::Layer as _;
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(cli::LOG_FILTER));
    use std::io::IsTerminal as _;
    let ansi = color.enabled(std::io::stderr().is_terminal());
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    let fmt = match format {
        LogFormat::Json => fmt.json().boxed(),
        LogFormat::Human => fmt.boxed(),
    };
    let registry = tracing_subscriber::registry().with(filter).with(fmt);
    #[cfg(feature = "otel")]
    {
        let (layer, exporter) = match agent_host::telemetry::layer_from_env()? {
            Some((l, e)) => (Some(l), Some(e)),
            None => (None, None),
        };
        registry.with(layer).init();
        if exporter.is_some() {
            tracing::info!("exporting task spans over OTLP/HTTP");
        }
        Ok(exporter)
    }
    #[cfg(not(feature = "otel"))]
    {
        registry.init();
        Ok(None)
    }
}

/// glibc's malloc serves an allocation of 128 KiB or more from a mapping of its own, given
/// back to the system when it is freed, but after freeing one it raises that threshold (up to
/// 32 MiB) so that later large allocations come from its heaps, where freed memory stays with
/// the process. A task printing lines of 15 MB then left the host hundreds of MB larger after
/// it ended (and its peak higher, from the heaps' fragments). A fixed threshold keeps large
/// buffers (long lines, a task's output being stored or sent) in their own mappings; measured
/// with `bench/memory.sh`, see `bench/log/` (long output lines). musl and other allocators
/// give large blocks back by themselves.
fn large_allocations_return_to_the_system() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes malloc's parameters; it is called before any other thread
    // exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// Raises this process's limit of open files to the most it may have (the soft limit is
/// often 1024 where the hard one is far higher): a host holds a descriptor per client
/// connection, per task's pipes and per connection through a task's proxy.
fn more_open_files() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if soft < hard {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
        }
    }
}

fn main() {
    // `agent-host __exec-setup STEPS -- PROGRAM ARGS`: how the runner starts a task's program
    // without forking the host (runner::sandbox::setup); applies the steps and execs.
    agent_host::runner::sandbox::setup::main_if_asked();
    // `agent-host __egress-relay ... -- PROGRAM ARGS`: the relay inside a task's network
    // namespace (egress::relay); starts the relay and execs the program.
    agent_host::egress::relay::main_if_asked();
    agent_host::runner::sandbox::setup::use_own_executable();
    large_allocations_return_to_the_system();
    more_open_files();
    // Other processes of this user (a task's agent among them) may not read this process's
    // environment or memory (/proc/PID/environ, mem) nor attach to it.
    #[cfg(target_os = "linux")]
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        eprintln!("agent-host: warning: cannot protect the process (PR_SET_DUMPABLE): {e}");
    }
    // The demo agent gets its arguments exactly as given: clap would take a `--` (which the
    // adapters put before the prompt) for its own end of options.
    // Run as `fake-agent` (a link to this binary under that name, as the tests make it: one
    // program the sandbox shows wherever the build lies), the arguments are all the agent's.
    let mut argv = std::env::args_os();
    let invoked_as = argv.next().map(std::path::PathBuf::from);
    if invoked_as.is_some_and(|p| p.file_name().is_some_and(|n| n == "fake-agent")) {
        agent_host::fake_agent::main_with(argv.filter_map(|a| a.into_string().ok()));
    }
    if argv.next().is_some_and(|a| a == "fake-agent") {
        agent_host::fake_agent::main_with(argv.filter_map(|a| a.into_string().ok()));
    }
    // Old variable names (AGENT_ADAPTER, PORT, AGENT_TIMEOUT_MS, ...) are set under their
    // new names before clap reads the environment, while this process has one thread.
    let aliases = agent_host::settings::legacy::apply_env_aliases();
    let cli = parse_command_line(&aliases);
    if let Command::FakeAgent { args } = cli.command {
        agent_host::fake_agent::main_with(args.into_iter());
    }
    let result = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(anyhow::Error::from)
        .and_then(|rt| rt.block_on(run(cli.command, cli.color, &aliases)));
    match result {
        Ok(0) => {}
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("agent-host: {}", error_text(&e));
            std::process::exit(1);
        }
    }
}

/// An error with its causes, each said once: a cause whose text the message already holds
/// (an error that names its source in its own text) is not repeated.
fn error_text(e: &anyhow::Error) -> String {
    let mut out = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !out.contains(&c) {
            out.push_str(": ");
            out.push_str(&c);
        }
    }
    out
}

/// The command line (and the variables clap reads); on an error, clap's message, and when
/// the bad value came from a variable rather than the flag clap names, which variable.
fn parse_command_line(aliases: &[agent_host::settings::legacy::EnvAlias]) -> Cli {
    use clap::CommandFactory;
    match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            if let Some(said) = old_flag_error(&e) {
                eprintln!("error: {said}");
                std::process::exit(e.exit_code());
            }
            let note = from_variable(&e, &Cli::command(), aliases);
            let _ = e.print();
            if let Some(note) = note {
                eprintln!("\nnote: {note}");
            }
            std::process::exit(e.exit_code());
        }
    }
}

/// An unknown argument that is an old flag: what to use instead (clap's own tip may name
/// another setting).
fn old_flag_error(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    let flag = arg.split('=').next().unwrap_or(arg);
    agent_host::settings::legacy::old_flag(flag)
}

/// "the value came from VARIABLE" for an invalid value of a flag that was not on the command
/// line but whose variable is set (an old name set it, if one did).
fn from_variable(
    e: &clap::Error,
    cmd: &clap::Command,
    aliases: &[agent_host::settings::legacy::EnvAlias],
) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if !matches!(
        e.kind(),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation
    ) {
        return None;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    let flag = arg.split_whitespace().next()?.to_string();
    let long = flag.strip_prefix("--")?;
    if std::env::args().any(|a| a == flag || a.starts_with(&format!("{flag}="))) {
        return None;
    }
    let var = variable_of(cmd, long)?;
    std::env::var_os(&var)?;
    Some(match aliases.iter().find(|a| a.new == var) {
        Some(a) => format!(
            "the value came from the environment variable {} (read as {var})",
            a.old
        ),
        None => format!("the value came from the environment variable {var}"),
    })
}

/// The variable of the flag `--long` in `cmd` or any of its subcommands.
fn variable_of(cmd: &clap::Command, long: &str) -> Option<String> {
    cmd.get_arguments()
        .find(|a| a.get_long() == Some(long))
        .and_then(|a| a.get_env())
        .map(|v| v.to_string_lossy().into_owned())
        .or_else(|| cmd.get_subcommands().find_map(|c| variable_of(c, long)))
}

/// Says once which old names of settings were used, and their new names.
fn log_old_names(aliases: &[agent_host::settings::legacy::EnvAlias], settings: &Settings) {
    for (warn, line) in agent_host::settings::legacy::describe(aliases) {
        if warn {
            tracing::warn!("{line}");
        } else {
            tracing::info!("{line}");
        }
    }
    for line in &settings.notices {
        tracing::warn!("config file: {line}");
    }
}

/// Runs a command; its exit code.
async fn run(
    command: Command,
    color: ColorChoice,
    aliases: &[agent_host::settings::legacy::EnvAlias],
) -> anyhow::Result<i32> {
    // Output goes through print_stdout: a closed stdout (`| head -1`) ends a command
    // normally instead of panicking.
    use agent_host::cli::call::print_stdout;
    match command {
        Command::Serve(args) => {
            let settings = Settings::resolve(&args)?;
            let _telemetry = init_logging(settings.log_format, color)?;
            log_old_names(aliases, &settings);
            cli::serve::serve(settings).await?;
        }
        Command::Adapters(args) => {
            let settings = Settings::resolve(&args.serve_args()?)?;
            print_stdout(&cli::adapters::list_adapters(&settings).await?);
        }
        Command::Completions { shell } => {
            print_stdout(&String::from_utf8_lossy(&cli::completions::completions(
                shell,
            )));
        }
        Command::Man { command } => print_stdout(&String::from_utf8_lossy(
            &cli::completions::man_page(&command)?,
        )),
        Command::Doctor(args) => {
            let checks = match Settings::resolve(&args.serve) {
                Ok(settings) => cli::doctor::run(&settings, &args).await,
                Err(e) => cli::doctor::unresolved(&e),
            };
            let text = if args.json {
                cli::doctor::render_json(&checks)
            } else {
                cli::doctor::render(&checks)
            };
            print_stdout(&text);
            return Ok(cli::doctor::exit_code(&checks));
        }
        Command::Card(cli::CardArgs {
            command: Some(cli::CardCommand::Verify(v)),
            ..
        }) => return Ok(cli::card::run(v).await),
        Command::Card(cli::CardArgs { serve: args, .. }) => {
            let settings = Settings::resolve(&args)?;
            print_stdout(&format!("{}\n", cli::card::print_card(&settings)?));
        }
        Command::Call(args) => return Ok(cli::call::run_call(args).await),
        Command::Tasks(args) => return Ok(cli::tasks::run_tasks(args).await),
        Command::Workspaces(args) => {
            return Ok(match cli::workspaces::run(&args) {
                Ok(text) => {
                    print_stdout(&text);
                    0
                }
                Err(e) => {
                    eprintln!("agent-host: {e}");
                    e.exit_code()
                }
            })
        }
        Command::Mcp(args) => {
            // stdout carries the protocol; diagnostics go to stderr only.
            cli::mcp::run(args).await?;
        }
        Command::FakeAgent { args } => agent_host::fake_agent::main_with(args.into_iter()),
    }
    Ok(0)
}
