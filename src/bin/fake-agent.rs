//! fake-agent: agent-host's demo agent and test double (see `agent_host::fake_agent`).

fn main() {
    agent_host::fake_agent::main_with(std::env::args().skip(1))
}
