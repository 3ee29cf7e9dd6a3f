//! Keeping secrets out of what clients see in error messages: the host's own credentials
//! and key-shaped tokens. Paths are kept: an error that names a path (`bwrap: execvp
//! /tmp/x/agent: No such file or directory`) is useless without it; those inside a workspace
//! are shortened to relative ones.

use std::sync::OnceLock;

use regex::Regex;

/// What to hide.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Workspace directories (absolute, canonical): paths inside become relative.
    pub workspace: Vec<String>,
    /// Exact secret values (the host's credentials).
    pub secrets: Vec<String>,
}

#[expect(
    clippy::expect_used,
    reason = "a constant pattern, compiled by the tests below"
)]
fn key_pattern() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        // Invariant: a constant pattern, compiled by the tests below.
        Regex::new(
            r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}|\bsk-[A-Za-z0-9_-]{8,}|\bAIza[0-9A-Za-z_-]{20,}|\bgh[pousr]_[A-Za-z0-9]{20,}|\bxox[abprs]-[A-Za-z0-9-]{10,}",
        )
        .expect("constant pattern")
    })
}

#[expect(
    clippy::expect_used,
    reason = "a constant pattern, compiled by the tests below"
)]
fn path_pattern() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        // Invariant: a constant pattern, compiled by the tests below.
        Regex::new(r#"(?:^|[\s'"`(=:,\[])(/[A-Za-z0-9._@+~-]+(?:/[A-Za-z0-9._@+~-]*)+)"#)
            .expect("constant pattern")
    })
}

impl Redactor {
    /// The text with secrets masked and paths inside a workspace made relative.
    pub fn clean(&self, text: &str) -> String {
        let mut s = text.to_string();
        for secret in self.secrets.iter().filter(|x| x.len() >= 4) {
            s = s.replace(secret.as_str(), "***");
        }
        s = key_pattern()
            .replace_all(&s, |c: &regex::Captures<'_>| {
                let m = &c[0];
                if m.to_ascii_lowercase().starts_with("bearer") {
                    "Bearer ***".to_string()
                } else {
                    "***".to_string()
                }
            })
            .into_owned();
        path_pattern()
            .replace_all(&s, |c: &regex::Captures<'_>| {
                let whole = &c[0];
                let path = &c[1];
                let lead = &whole[..whole.len() - path.len()];
                let shown = self
                    .workspace
                    .iter()
                    .find_map(|root| {
                        let rest = path.strip_prefix(root.as_str())?;
                        if rest.is_empty() {
                            Some(".".to_string())
                        } else {
                            rest.strip_prefix('/').map(|r| format!("./{r}"))
                        }
                    })
                    .unwrap_or_else(|| path.to_string());
                format!("{lead}{shown}")
            })
            .into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_hidden_and_paths_named() {
        let r = Redactor {
            workspace: vec!["/srv/repo".into()],
            secrets: vec!["host-token-123".into()],
        };
        assert_eq!(
            r.clean("cat: /srv/repo/src/main.rs: No such file"),
            "cat: ./src/main.rs: No such file"
        );
        assert_eq!(
            r.clean("bwrap: execvp /tmp/tmp.x1/agent-host: No such file or directory"),
            "bwrap: execvp /tmp/tmp.x1/agent-host: No such file or directory"
        );
        assert_eq!(r.clean("token host-token-123 leaked"), "token *** leaked");
        assert_eq!(
            r.clean("401: invalid key sk-abcdefghijklmnop"),
            "401: invalid key ***"
        );
        assert_eq!(
            r.clean("Authorization: Bearer abc.def.ghijkl"),
            "Authorization: Bearer ***"
        );
        assert_eq!(
            r.clean("see https://example.com/a/b"),
            "see https://example.com/a/b"
        );
        assert_eq!(r.clean("ratio 1/2 and a/b"), "ratio 1/2 and a/b");
    }
}
