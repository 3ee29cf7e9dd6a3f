//! The URL paths the router serves that other parts of the server must know too (the card
//! announces them, the guard tells them apart): owned here, by none of those parts, so that
//! they depend on this list and not on each other.

/// Root paths of the JSON-RPC endpoint.
pub(crate) const JSONRPC_PATHS: [&str; 3] = ["/", "/a2a", "/a2a/jsonrpc"];

/// Interface URL path of the v1.0 HTTP+JSON binding.
pub const V1_BASE: &str = "/a2a/rest";
/// Interface URL path of the v0.3 HTTP+JSON binding (its routes add `/v1/...`).
pub const V03_BASE: &str = "/a2a/rest03";

/// The MCP endpoint's path on the host's port.
pub const MCP: &str = "/mcp";

/// Whether `path` is one of the console's public files (not its API).
pub(crate) fn is_public_file(path: &str) -> bool {
    path == "/ui" || (path.starts_with("/ui/") && !path.starts_with("/ui/api/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_consoles_files_are_public() {
        assert!(is_public_file("/ui") && is_public_file("/ui/main.js"));
        assert!(!is_public_file("/ui/api/host") && !is_public_file("/uix"));
    }
}
