//! fake-agent: the demo agent and test double, a coding-agent CLI speaking agent-host's native
//! `agent-host-jsonl` protocol. See `HELP` (or `agent-host fake-agent --help`). It runs as
//! `agent-host fake-agent` (what the `demo` adapter starts, so the demo works with the
//! agent-host binary alone).

use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

mod conformance;
mod edit;
mod scripted;

const HELP: &str = r#"fake-agent: a fake coding-agent CLI speaking the agent-host-jsonl protocol (for tests and demos)

USAGE:
    fake-agent [--session-id ID] [--resume ID] [--model M] [--delay-ms N] [PROMPT]
    fake-agent --scenario FILE [--delay-ms N]
    fake-agent --replay FILE [--delay-ms N]
    fake-agent --conformance [--conformance-version 1.0|0.3] [--message-id ID] [PROMPT]

OPTIONS:
    --session-id ID   session id reported in `init` (default: the --resume id, else a fresh uuid)
    --resume ID       continue session ID (the answer says so)
    --model M         model reported in `init` (default: fake-model-1)
    --delay-ms N      pause N ms between output lines (default 0); stdout is flushed after every line
    --scenario FILE   run the steps in FILE (JSON lines) instead of a session:
                        {"emit": {...}}      print that object as one line
                        {"print": "text"}    print raw text
                        {"stderr": "text"}   print a line on stderr
                        {"sleep_ms": N}      pause
                        {"read_stdin": true} read one stdin line, print it as
                                             {"type":"tool_result","id":"stdin","output":LINE,"is_error":false}
                        {"exit": N}          exit with code N (the end of FILE exits 0)
    --replay FILE     print every line of FILE verbatim (a recorded transcript), then exit 0
    --conformance     play what the A2A conformance kit (a2aproject/a2a-tck) expects for the
                      message id given with --message-id (the `conformance` adapter):
                        1.0 (branch 1.0-dev): the messageId-prefix scenarios of the kit
                          (tck-complete-task, tck-artifact-*, tck-message-response,
                          tck-input-required, tck-reject-task, tck-stream-*, ...)
                        0.3 (branch 0.3.x): every task waits for input until canceled
                        both: test-resubscribe-message-id runs 4.5 s, then completes
    --conformance-version V   1.0 or 0.3 (default: $CONFORMANCE_VERSION, else 1.0)
    --message-id ID   the messageId of the message that started the turn
    -h, --help        this text

PROMPT is read from stdin until EOF when absent. The default session prints init, thinking, a
Bash `ls` tool_use and its tool_result (the real listing of the current directory), the answer as
several text delta chunks, usage, and done (result = the text chunks joined); exit 0. The usage
line's duration_ms is the time since fake-agent started (waits for answers included).

Keywords in the prompt (case-insensitive words, may combine):
    edit            change the working directory: add the prompt's first line as a list item
                    ("- ...") to NOTES.md, creating the file when missing (an Edit tool_use and
                    its tool_result, after the `ls`); edit=FILE names another file, relative,
                    inside the working directory (folders are created; an absolute path or `..`
                    is refused as a failed tool call)
    approval        ask approval_required (id appr-1, kind command) before running the tool; read one
                    line from stdin: decision "allow" runs it, "deny" finishes with a denied answer;
                    stdin EOF prints an error and exits 2. With edit, the edit is what is asked
                    for (kind file-edit, tool Edit, target the file) and `ls` runs unasked
    question        ask approval_required (id q-1, kind question, "Which file?"); the answer
                    ({"type":"input","text":...} or an approval_response's message) is in the result
    asks=N          then ask N more questions (ids ask-1..ask-N), each as soon as the previous
                    one is answered (the answer-then-re-ask race)
    fail            print some output, then an error "simulated failure"; exit 1
    crash           print init and a text chunk, then abort (SIGABRT, no done)
    exit=N          print init and a text chunk, then exit N without done
    hang            print init, then sleep forever
    slow            300 ms between lines; sleep=MS sets the pause explicitly
    gate            before the first line (init), wait until a file GATE exists in the working
                    directory (at most 60 s)
    flood=N         N more text chunks back to back
    noise           interleave non-JSON lines: plain, ANSI-colored, CRLF, blank, broken JSON
    stderr          also write a few lines to stderr
    long-line=N     one extra text chunk of N bytes (not part of the result)
    long-lines=K    with long-line=N: K such chunks (of x, then y, z, a, ...), one line each
    grandchild      start `sleep 600` in our process group, report "grandchild pid N" in a
                    tool_result, then run until killed
    ignore-sigterm  ignore SIGTERM, print init and a text line, then sleep forever
    echo            the answer is the prompt itself
    tools=N         make N `ls` tool calls in all (tool-1..tool-N), 100 ms apart; a session
                    resumed with --resume keeps making them when its prompt names no tools=
                    (the count is kept per session under the system's temporary directory)

Exit: 0 done, 1 fail, 2 usage error or stdin closed while waiting, N for exit=N.
"#;

#[derive(Debug, Default, PartialEq)]
struct Args {
    session_id: Option<String>,
    resume: Option<String>,
    model: Option<String>,
    scenario: Option<PathBuf>,
    replay: Option<PathBuf>,
    delay_ms: u64,
    prompt: Option<String>,
    conformance: bool,
    conformance_version: Option<String>,
    message_id: Option<String>,
}

#[derive(Debug, PartialEq)]
enum Command {
    Help,
    Run(Box<Args>),
}

/// A command line fake-agent does not understand.
#[derive(Debug, PartialEq, thiserror::Error)]
enum ArgsError {
    #[error("{0} needs a value")]
    MissingValue(String),
    #[error("--delay-ms: not a number: {value}")]
    NotANumber {
        value: String,
        #[source]
        source: std::num::ParseIntError,
    },
    #[error("unknown option {0}")]
    UnknownOption(String),
}

fn parse_args(mut argv: impl Iterator<Item = String>) -> Result<Command, ArgsError> {
    let mut args = Args::default();
    let mut words = Vec::new();
    while let Some(arg) = argv.next() {
        let mut value = |name: &str| {
            argv.next()
                .ok_or_else(|| ArgsError::MissingValue(name.to_string()))
        };
        match arg.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "--session-id" => args.session_id = Some(value(&arg)?),
            "--resume" => args.resume = Some(value(&arg)?),
            "--model" => args.model = Some(value(&arg)?),
            "--scenario" => args.scenario = Some(value(&arg)?.into()),
            "--replay" => args.replay = Some(value(&arg)?.into()),
            "--conformance" => args.conformance = true,
            "--conformance-version" => args.conformance_version = Some(value(&arg)?),
            "--message-id" => args.message_id = Some(value(&arg)?),
            "--delay-ms" => {
                let v = value(&arg)?;
                args.delay_ms = v
                    .parse()
                    .map_err(|source| ArgsError::NotANumber { value: v, source })?;
            }
            "--" => words.extend(argv.by_ref()),
            s if s.starts_with("--") => return Err(ArgsError::UnknownOption(s.to_string())),
            _ => words.push(arg),
        }
    }
    if !words.is_empty() {
        args.prompt = Some(words.join(" "));
    }
    Ok(Command::Run(Box::new(args)))
}

/// Behaviour switches found in the prompt.
#[derive(Debug, Default, PartialEq)]
struct Keywords {
    approval: bool,
    question: bool,
    asks: Option<usize>,
    fail: bool,
    crash: bool,
    exit: Option<i32>,
    hang: bool,
    sleep_ms: Option<u64>,
    /// `gate`: wait for a file `GATE` before the first line.
    gate: bool,
    flood: Option<usize>,
    noise: bool,
    stderr: bool,
    long_line: Option<usize>,
    long_lines: Option<usize>,
    grandchild: bool,
    ignore_sigterm: bool,
    echo: bool,
    /// `edit` / `edit=FILE`: the file the session adds a line to.
    edit: Option<String>,
    /// `tools=N`: tool calls to make in all.
    tools: Option<usize>,
}

fn parse_keywords(prompt: &str) -> Keywords {
    let mut k = Keywords::default();
    for word in prompt.split_whitespace() {
        let word = word
            .trim_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase();
        let (key, num) = match word.split_once('=') {
            Some((key, n)) => (key, n.parse::<u64>().ok()),
            None => (word.as_str(), None),
        };
        match (key, num) {
            ("approval", None) => k.approval = true,
            ("question", None) => k.question = true,
            ("asks", Some(n)) => k.asks = usize::try_from(n).ok(),
            ("fail", None) => k.fail = true,
            ("crash", None) => k.crash = true,
            ("exit", Some(n)) => k.exit = i32::try_from(n).ok(),
            ("hang", None) => k.hang = true,
            ("slow", None) => k.sleep_ms = k.sleep_ms.or(Some(300)),
            ("sleep", Some(n)) => k.sleep_ms = Some(n),
            ("gate", None) => k.gate = true,
            ("flood", Some(n)) => k.flood = usize::try_from(n).ok(),
            ("tools", Some(n)) => k.tools = usize::try_from(n).ok(),
            ("noise", None) => k.noise = true,
            ("stderr", None) => k.stderr = true,
            ("long-line", Some(n)) => k.long_line = usize::try_from(n).ok(),
            ("long-lines", Some(n)) => k.long_lines = usize::try_from(n).ok(),
            ("grandchild", None) => k.grandchild = true,
            ("ignore-sigterm", None) => k.ignore_sigterm = true,
            ("echo", None) => k.echo = true,
            _ => {}
        }
    }
    k.edit = edit::requested(prompt);
    k
}

/// How the program ends after its output.
#[derive(Debug, PartialEq)]
enum End {
    Exit(i32),
    Abort,
    Forever,
}

/// Line-oriented output with the inter-line pause and a flush after every line.
struct Out<'a> {
    stdout: &'a mut dyn Write,
    stderr: &'a mut dyn Write,
    delay: Duration,
    started: bool,
    /// When the program started: the usage line reports the time since.
    clock: Instant,
}

impl Out<'_> {
    fn raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.started && !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
        self.started = true;
        self.stdout.write_all(bytes)?;
        self.stdout.flush()
    }

    fn line(&mut self, text: &str) -> io::Result<()> {
        self.raw(format!("{text}\n").as_bytes())
    }

    fn emit(&mut self, value: &Value) -> io::Result<()> {
        self.line(&value.to_string())
    }

    fn text(&mut self, chunk: &str) -> io::Result<()> {
        self.emit(&json!({"type": "text", "text": chunk, "delta": true}))
    }

    fn error(&mut self, message: &str, kind: &str) -> io::Result<()> {
        self.emit(&json!({"type": "error", "message": message, "kind": kind}))
    }

    fn err_line(&mut self, text: &str) -> io::Result<()> {
        writeln!(self.stderr, "{text}")?;
        self.stderr.flush()
    }

    fn noise(&mut self) -> io::Result<()> {
        self.line("fake-agent: plain progress text, not JSON")?;
        self.line("\x1b[1;32m✓\x1b[0m colored \x1b[33mstatus\x1b[0m line")?;
        self.raw(b"a line ending in CRLF\r\n")?;
        self.line("")?;
        self.line("{\"type\":")
    }
}

/// One line from the host, as JSON (a non-JSON line counts as free text). `None` on EOF.
fn read_reply(input: &mut dyn BufRead) -> io::Result<Option<Value>> {
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        let trimmed = line.trim();
        if !trimmed.is_empty() {
            let value = serde_json::from_str(trimmed)
                .unwrap_or_else(|_| json!({"type": "input", "text": trimmed}));
            return Ok(Some(value));
        }
    }
}

fn str_field<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key).and_then(Value::as_str)
}

/// The current directory listing, sorted, truncated to a few KB.
fn listing(dir: &Path) -> String {
    let mut names: Vec<String> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(e) => return format!("ls: {e}"),
    };
    names.sort();
    let mut text = names.join("\n");
    if text.len() > 4096 {
        let mut cut = 4096;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("\n[truncated]");
    }
    text
}

fn start_grandchild() -> io::Result<u32> {
    let sleep = ["/bin/sleep", "/usr/bin/sleep"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("sleep");
    // Not waited for on purpose: it stays in our process group until the host kills the group.
    let child = std::process::Command::new(sleep).arg("600").spawn()?;
    Ok(child.id())
}

/// A whole coding session for `prompt`.
#[allow(
    clippy::too_many_lines,
    reason = "the demo agent's session is one script, read top to bottom: each keyword of the prompt and what it makes the agent print, in the order it prints them"
)]
fn run_session(
    args: &Args,
    prompt: &str,
    cwd: &Path,
    out: &mut Out,
    input: &mut dyn BufRead,
) -> io::Result<End> {
    let mut kw = parse_keywords(prompt);
    let session_id = args
        .session_id
        .clone()
        .or_else(|| args.resume.clone())
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    kw.tools = session_tools(&session_id, kw.tools);
    out.emit(&json!({
        "type": "init",
        "session_id": session_id,
        "model": args.model.as_deref().unwrap_or("fake-model-1"),
        "cwd": cwd.display().to_string(),
        "tools": ["Bash", "Read"],
    }))?;
    if kw.stderr {
        for line in [
            "fake-agent: warning: this is stderr",
            "fake-agent: debug: still stderr",
        ] {
            out.err_line(line)?;
        }
    }

    if kw.ignore_sigterm {
        out.text("Ignoring SIGTERM; only SIGKILL stops me.")?;
        return Ok(End::Forever);
    }
    if kw.hang {
        return Ok(End::Forever);
    }
    if kw.crash {
        out.text("Something is about to go very wrong. ")?;
        return Ok(End::Abort);
    }
    if let Some(code) = kw.exit {
        out.text(&format!("Exiting with code {code}. "))?;
        return Ok(End::Exit(code));
    }

    out.emit(
        &json!({"type": "thinking", "text": "I should look at the project before answering."}),
    )?;
    if kw.noise {
        out.noise()?;
    }

    let mut chosen_file = None;
    if kw.question {
        out.emit(&json!({
            "type": "approval_required", "id": "q-1", "kind": "question", "target": "file",
            "detail": "Which file?", "options": [],
        }))?;
        let Some(reply) = read_reply(input)? else {
            out.error("stdin closed while waiting for an answer", "stdin_closed")?;
            return Ok(End::Exit(2));
        };
        let answer = ["text", "message", "option"]
            .iter()
            .find_map(|k| str_field(&reply, k))
            .unwrap_or("");
        chosen_file = Some(answer.to_string());
    }
    for i in 1..=kw.asks.unwrap_or(0) {
        out.emit(&json!({
            "type": "approval_required", "id": format!("ask-{i}"), "kind": "question",
            "target": "answer", "detail": format!("Question {i}?"), "options": [],
        }))?;
        if read_reply(input)?.is_none() {
            out.error("stdin closed while waiting for an answer", "stdin_closed")?;
            return Ok(End::Exit(2));
        }
    }

    out.emit(
        &json!({"type": "tool_use", "id": "tool-1", "name": "Bash", "input": {"command": "ls"}}),
    )?;
    if kw.approval && kw.edit.is_none() {
        out.emit(&json!({
            "type": "approval_required", "id": "appr-1", "kind": "command", "tool": "Bash", "target": "ls",
            "detail": "The agent wants to run a shell command: ls",
            "options": [{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}],
        }))?;
        let Some(reply) = read_reply(input)? else {
            out.error("stdin closed while waiting for approval", "stdin_closed")?;
            return Ok(End::Exit(2));
        };
        let decision = str_field(&reply, "decision").or_else(|| str_field(&reply, "option"));
        if decision != Some("allow") {
            out.emit(&json!({"type": "tool_result", "id": "tool-1", "output": "denied by user", "is_error": true}))?;
            let mut answer =
                String::from("The command `ls` was denied, so I did not look at the project.");
            if let Some(message) = str_field(&reply, "message") {
                answer.push_str(&format!(" You said: {message}"));
            }
            out.emit(&json!({"type": "text", "text": answer, "delta": false}))?;
            return finish(out, &answer);
        }
    }
    let files = listing(cwd);
    let entries = files.lines().count();
    out.emit(&json!({"type": "tool_result", "id": "tool-1", "output": files, "is_error": false}))?;
    for i in 2..=kw.tools.unwrap_or(1) {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let id = format!("tool-{i}");
        out.emit(
            &json!({"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "ls"}}),
        )?;
        out.emit(&json!({"type": "tool_result", "id": id, "output": files, "is_error": false}))?;
    }

    if kw.grandchild {
        out.emit(&json!({"type": "tool_use", "id": "tool-2", "name": "Bash", "input": {"command": "sleep 600 &"}}))?;
        let output = match start_grandchild() {
            Ok(pid) => format!("grandchild pid {pid}"),
            Err(e) => format!("cannot start sleep: {e}"),
        };
        out.emit(
            &json!({"type": "tool_result", "id": "tool-2", "output": output, "is_error": false}),
        )?;
        return Ok(End::Forever);
    }
    if kw.noise {
        out.noise()?;
    }
    if kw.fail {
        out.text("Working on it... ")?;
        out.error("simulated failure", "simulated")?;
        return Ok(End::Exit(1));
    }
    let mut edited = None;
    if let Some(file) = &kw.edit {
        match edit::run(cwd, file, prompt, kw.approval, out, input)? {
            edit::Outcome::Done(sentence) => edited = Some(sentence),
            edit::Outcome::Denied(answer) => {
                out.emit(&json!({"type": "text", "text": answer, "delta": false}))?;
                return finish(out, &answer);
            }
            edit::Outcome::StdinClosed => return Ok(End::Exit(2)),
        }
    }

    let mut chunks: Vec<String> = Vec::new();
    if kw.echo {
        chunks.push(prompt.to_string());
    } else {
        if let Some(id) = &args.resume {
            chunks.push(format!("Resuming session {id}. "));
        }
        chunks.push("I looked at the project. ".into());
        let noun = if entries == 1 { "entry" } else { "entries" };
        chunks.push(format!("The directory has {entries} {noun}. "));
        if let Some(file) = &chosen_file {
            chunks.push(format!("You chose {file}. "));
        }
        chunks.extend(edited);
        chunks.push("Everything looks fine.".into());
    }
    for i in 1..=kw.flood.unwrap_or(0) {
        chunks.push(format!(" chunk {i}"));
    }
    for chunk in &chunks {
        out.text(chunk)?;
    }
    if let Some(n) = kw.long_line {
        for i in 0..kw.long_lines.unwrap_or(1) {
            let letter = char::from(b'a' + ((23 + i) % 26) as u8);
            out.text(&letter.to_string().repeat(n))?;
        }
    }
    finish(out, &chunks.concat())
}

/// The `tools=N` of a session: the prompt's (kept for the session's later turns), else
/// what an earlier turn of the session kept.
fn session_tools(session_id: &str, asked: Option<usize>) -> Option<usize> {
    let safe: String = session_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    // The state folder the demo adapter declares (`[sandbox] write`): each context's own in
    // its sandbox, kept between the turns of its session; the temporary folder without HOME.
    let dir = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| Path::new(&h).join(".local/state/agent-host-demo"))
        .unwrap_or_else(|| std::env::temp_dir().join("agent-host-fake-agent"));
    let path = dir.join(format!("{safe}.tools"));
    if let Some(n) = asked {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = std::fs::write(&path, n.to_string());
        return Some(n);
    }
    std::fs::read_to_string(&path).ok()?.trim().parse().ok()
}

/// usage (its duration the time since the program started) + done, exit 0.
fn finish(out: &mut Out, result: &str) -> io::Result<End> {
    let duration_ms = u64::try_from(out.clock.elapsed().as_millis()).unwrap_or(u64::MAX);
    out.emit(&json!({
        "type": "usage", "input_tokens": 12, "output_tokens": result.len() / 4 + 1,
        "cost_usd": 0.0012, "duration_ms": duration_ms,
    }))?;
    out.emit(&json!({"type": "done", "result": result, "is_error": false}))?;
    Ok(End::Exit(0))
}

/// Runs what `args` ask for, the session's working directory being `cwd`.
fn run(args: &Args, cwd: &Path, out: &mut Out, input: &mut dyn BufRead) -> io::Result<End> {
    if let Some(path) = &args.replay {
        return scripted::run_replay(path, out);
    }
    if let Some(path) = &args.scenario {
        return scripted::run_scenario(path, out, input);
    }
    if args.conformance {
        let version = args
            .conformance_version
            .clone()
            .or_else(|| std::env::var("CONFORMANCE_VERSION").ok())
            .filter(|v| !v.is_empty())
            .map(|v| conformance::Version::parse(&v))
            .transpose()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?
            .unwrap_or(conformance::Version::V1);
        let message_id = args.message_id.as_deref().unwrap_or("");
        return conformance::run(version, message_id, out, input);
    }
    let prompt = match &args.prompt {
        Some(p) => p.clone(),
        None => {
            let mut p = String::new();
            input.read_to_string(&mut p)?;
            p
        }
    };
    let kw = parse_keywords(&prompt);
    if let Some(ms) = kw.sleep_ms {
        out.delay = Duration::from_millis(ms);
    }
    if kw.gate {
        wait_for_gate(cwd);
    }
    if kw.ignore_sigterm {
        // SAFETY: installs SIG_IGN (no handler code runs); nothing else here touches SIGTERM.
        unsafe {
            nix::sys::signal::signal(
                nix::sys::signal::Signal::SIGTERM,
                nix::sys::signal::SigHandler::SigIgn,
            )
        }
        .map_err(io::Error::from)?;
    }
    run_session(args, &prompt, cwd, out, input)
}

/// Waits until a file `GATE` exists in `cwd` (a test lets the program go on), at most 60 s.
fn wait_for_gate(cwd: &Path) {
    let until = Instant::now() + Duration::from_secs(60);
    while !cwd.join("GATE").exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs fake-agent with these arguments (without the program name) and exits.
pub fn main_with(argv: impl Iterator<Item = String>) -> ! {
    let args = match parse_args(argv) {
        Ok(Command::Help) => {
            print!("{HELP}");
            std::process::exit(0);
        }
        Ok(Command::Run(args)) => args,
        Err(e) => {
            eprintln!("fake-agent: {e} (see --help)");
            std::process::exit(2);
        }
    };
    let (mut stdout, mut stderr) = (io::stdout().lock(), io::stderr().lock());
    let mut out = Out {
        stdout: &mut stdout,
        stderr: &mut stderr,
        delay: Duration::from_millis(args.delay_ms),
        started: false,
        clock: Instant::now(),
    };
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let end = run(&args, &cwd, &mut out, &mut io::stdin().lock());
    match end {
        Ok(End::Exit(code)) => std::process::exit(code),
        Ok(End::Abort) => std::process::abort(),
        Ok(End::Forever) => loop {
            std::thread::sleep(Duration::from_secs(3600));
        },
        Err(e) => {
            eprintln!("fake-agent: {e}");
            std::process::exit(1);
        }
    }
}

#[cfg(test)]
mod tests;
