//! The retention settings: `[retention] max_age`, `max_tasks` in the config file,
//! `AGENT_HOST_RETENTION_MAX_AGE` / `AGENT_HOST_RETENTION_MAX_TASKS`, `--retention-max-age` /
//! `--retention-max-tasks`. Unset (the default): tasks are kept for ever.

use std::time::Duration;

use serde::Deserialize;

use super::{ServeArgs, SettingsError};

/// `[retention]` of the config file.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RetentionSection {
    /// Age of a terminal task (since its last status change) past which it is deleted,
    /// e.g. "30d", "12h"; "0" or "off": no age limit.
    pub max_age: Option<String>,
    /// Terminal tasks kept, newest first; 0: no count limit.
    pub max_tasks: Option<usize>,
}

/// What the host keeps; `None`: no limit of that kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionSettings {
    pub max_age: Option<Duration>,
    pub max_tasks: Option<usize>,
}

impl RetentionSettings {
    /// Whether any limit is set (else retention never runs).
    pub fn is_on(&self) -> bool {
        self.max_age.is_some() || self.max_tasks.is_some()
    }
}

/// Parses an age: a whole number followed by `s`, `m`, `h`, `d` or `w` ("30d", "12h");
/// "0" or "off" is `None` (no limit).
///
/// Hand-written rather than a crate: one number and one unit letter is all the syntax.
pub fn parse_age(s: &str) -> Result<Option<Duration>, SettingsError> {
    let t = s.trim().to_ascii_lowercase();
    if t == "0" || t == "off" || t == "none" {
        return Ok(None);
    }
    let bad = || {
        SettingsError::Invalid(format!(
            "age '{s}' is not a number with a unit s, m, h, d or w (e.g. 30d), nor off"
        ))
    };
    let split = t.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return Err(bad()),
    };
    if n == 0 {
        return Ok(None);
    }
    n.checked_mul(secs)
        .map(|s| Some(Duration::from_secs(s)))
        .ok_or_else(bad)
}

/// Merges flags/environment over `[retention]`.
pub fn resolve(
    args: &ServeArgs,
    section: &RetentionSection,
) -> Result<RetentionSettings, SettingsError> {
    let max_age = match args
        .retention_max_age
        .as_deref()
        .or(section.max_age.as_deref())
    {
        Some(s) => parse_age(s).map_err(|e| prefix("retention max_age", e))?,
        None => None,
    };
    let max_tasks = args
        .retention_max_tasks
        .or(section.max_tasks)
        .filter(|n| *n > 0);
    Ok(RetentionSettings { max_age, max_tasks })
}

fn prefix(name: &str, e: SettingsError) -> SettingsError {
    match e {
        SettingsError::Invalid(m) => SettingsError::Invalid(format!("{name}: {m}")),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_parse_with_units_and_off() {
        assert_eq!(
            parse_age("30d").unwrap(),
            Some(Duration::from_secs(30 * 86_400))
        );
        assert_eq!(
            parse_age("12h").unwrap(),
            Some(Duration::from_secs(12 * 3600))
        );
        assert_eq!(
            parse_age(" 2W ").unwrap(),
            Some(Duration::from_secs(14 * 86_400))
        );
        assert_eq!(parse_age("off").unwrap(), None);
        assert_eq!(parse_age("0").unwrap(), None);
        for bad in ["30", "d", "30x", "-1d", "1.5d", ""] {
            assert!(parse_age(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn flags_win_over_the_file_and_zero_is_no_limit() {
        let section = RetentionSection {
            max_age: Some("30d".into()),
            max_tasks: Some(0),
        };
        let mut args = ServeArgs::default();
        let r = resolve(&args, &section).unwrap();
        assert_eq!(r.max_age, Some(Duration::from_secs(30 * 86_400)));
        assert_eq!(r.max_tasks, None);
        args.retention_max_age = Some("1h".into());
        args.retention_max_tasks = Some(5);
        let r = resolve(&args, &section).unwrap();
        assert_eq!(r.max_age, Some(Duration::from_secs(3600)));
        assert_eq!(r.max_tasks, Some(5));
        args.retention_max_age = Some("soon".into());
        let e = resolve(&args, &section).unwrap_err().to_string();
        assert!(e.contains("retention max_age"), "{e}");
    }
}
