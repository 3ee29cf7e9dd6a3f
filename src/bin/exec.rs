//! `agent-host-exec`: the setup mode of a task's first process on its own
//! (`agent-host-exec __exec-setup STEPS -- PROGRAM ARGS`, see `runner::sandbox::setup`).
//!
//! `agent-host` itself offers the same mode, but it is a large executable: at every task's
//! start its exec cost about 2 ms of CPU, most of it the kernel mapping and the loader
//! relocating its pages before `main`. This one links only the setup steps, so the host
//! starts it instead when it is installed beside `agent-host` (as `cargo install` does).

fn main() {
    agent_host::runner::sandbox::setup::main_if_asked();
    eprintln!(
        "agent-host-exec: agent-host runs this program to start its tasks' programs \
         (agent-host-exec __exec-setup STEPS -- PROGRAM ARGS); it is not meant to be run by hand"
    );
    std::process::exit(2);
}
