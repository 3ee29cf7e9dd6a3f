//! The `[sandbox]` table of an adapter (what its CLI must be able to write).

use serde::Deserialize;

/// An adapter's `[sandbox]` table.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct SandboxSpec {
    /// Files and folders the CLI keeps its state in (sessions, logins, settings), writable
    /// inside the sandbox besides the working directory: `~/.claude`, `${CODEX_HOME:-~/.codex}`.
    /// `~` is the CLI's HOME; `${NAME:-default}` a variable of its environment.
    #[serde(default)]
    pub write: Vec<String>,
    /// The CLI's configuration in its state folders (`~/.gemini/settings.json`; a folder
    /// ends in `/`): copied from the host user's into a context's own folder when it has
    /// none. `~` and variables as in `write`.
    #[serde(default)]
    pub config: Vec<String>,
    /// `auto`, `required` or `off`, when the host's settings do not choose.
    pub mode: Option<String>,
    /// `proxy`, `open` or `none`, when the host's settings do not choose.
    pub network: Option<String>,
    /// Host Unix sockets the CLI needs, bound into the sandbox (the host's others are out of
    /// sight: `/run`, `/var/run` and `/tmp` are empty there). `~` and variables as in `write`.
    #[serde(default)]
    pub sockets: Vec<String>,
}

/// `path` with `${NAME:-default}`, `$NAME` (from `env`) and a leading `~` (`home`) replaced.
/// None when it names an unset variable without a default, or `~` without a home.
pub fn expand_path(path: &str, env: &[(String, String)], home: Option<&str>) -> Option<String> {
    let var = |name: &str| {
        env.iter()
            .find(|(k, v)| k == name && !v.is_empty())
            .map(|(_, v)| v.clone())
    };
    let mut p = path.to_string();
    if let Some(inner) = p.strip_prefix("${").and_then(|r| r.split_once('}')) {
        let (expr, rest) = (inner.0.to_string(), inner.1.to_string());
        let value = match expr.split_once(":-") {
            Some((name, default)) => var(name).unwrap_or_else(|| default.to_string()),
            None => var(&expr)?,
        };
        p = format!("{value}{rest}");
    } else if let Some(name) = p.strip_prefix('$') {
        let (name, rest) = name.split_at(name.find('/').unwrap_or(name.len()));
        p = format!("{}{rest}", var(name)?);
    }
    if p == "~" || p.starts_with("~/") {
        p = format!("{}{}", home?.trim_end_matches('/'), &p[1..]);
    }
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_paths_expand_variables_and_home() {
        let env = vec![("CODEX_HOME".to_string(), "/c".to_string())];
        let home = Some("/home/me");
        assert_eq!(
            expand_path("~/.claude", &env, home).unwrap(),
            "/home/me/.claude"
        );
        assert_eq!(
            expand_path("${CODEX_HOME:-~/.codex}", &env, home).unwrap(),
            "/c"
        );
        assert_eq!(
            expand_path("${NOPE:-~/.codex}", &env, home).unwrap(),
            "/home/me/.codex"
        );
        assert_eq!(expand_path("$CODEX_HOME/x", &env, home).unwrap(), "/c/x");
        assert_eq!(expand_path("$NOPE/x", &env, home), None);
        assert_eq!(expand_path("~/.x", &env, None), None);
    }
}
