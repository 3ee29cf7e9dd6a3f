//! The `[sandbox]` table of an adapter (what its CLI must be able to write) and the byte
//! sizes used by the task limits (`task_memory = "2G"`).

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

/// A number of bytes: an integer, or a string with a unit (`512M`, `2 GiB`, `1g`); `0`,
/// `"none"` or `"unlimited"` lift the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub fn parse(s: &str) -> Result<ByteSize, String> {
        let t = s.trim().to_ascii_lowercase();
        if t == "none" || t == "unlimited" {
            return Ok(ByteSize(0));
        }
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let n: u64 = num
            .parse()
            .map_err(|_| format!("'{s}' is not a size (e.g. 512M, 2G, 1073741824)"))?;
        let shift = match unit.trim().trim_end_matches('b').trim_end_matches('i') {
            "" => 0,
            "k" => 10,
            "m" => 20,
            "g" => 30,
            "t" => 40,
            _ => return Err(format!("'{s}' has an unknown unit (use K, M, G or T)")),
        };
        n.checked_mul(1 << shift)
            .map(ByteSize)
            .ok_or_else(|| format!("'{s}' is too large"))
    }
}

impl std::str::FromStr for ByteSize {
    type Err = String;
    fn from_str(s: &str) -> Result<ByteSize, String> {
        ByteSize::parse(s)
    }
}

impl std::fmt::Display for ByteSize {
    /// In the largest binary unit that divides it (`4MiB`, `16GiB`), else in bytes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0;
        let unit = [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")]
            .into_iter()
            .find(|(shift, _)| n != 0 && n.is_multiple_of(1u64 << shift));
        match unit {
            Some((shift, name)) => write!(f, "{}{name}", n >> shift),
            None => write!(f, "{n}"),
        }
    }
}

impl serde::Serialize for ByteSize {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(n) => Ok(ByteSize(n)),
            Raw::Text(s) => ByteSize::parse(&s).map_err(serde::de::Error::custom),
        }
    }
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
    fn sizes_with_and_without_units() {
        assert_eq!(ByteSize::parse("256M").unwrap().0, 256 << 20);
        assert_eq!(ByteSize::parse("2 GiB").unwrap().0, 2 << 30);
        assert_eq!(ByteSize::parse("1gb").unwrap().0, 1 << 30);
        assert_eq!(ByteSize::parse("4096").unwrap().0, 4096);
        assert_eq!(ByteSize::parse("none").unwrap().0, 0);
        assert!(ByteSize::parse("lots").unwrap_err().contains("not a size"));
        assert!(ByteSize::parse("3X").unwrap_err().contains("unit"));
        for shown in ["4MiB", "16GiB", "1000", "0"] {
            assert_eq!(ByteSize::parse(shown).unwrap().to_string(), shown);
        }
    }

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
