//! Values with units in settings: [`Dur`] (`500ms`, `30s`, `10m`, `12h`, `30d`) and
//! [`ByteSize`] (`4MiB`, `16M`, plain bytes). Both parse from and print as strings, the same
//! way in flags, environment variables and the config file. Pure: no I/O.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A duration written with its unit: `500ms`, `30s`, `10m`, `12h`, `30d`, `2w`, or combined
/// (`1h 30m`); `0` and `off` are zero (what "no limit" means where a setting says so).
/// A bare number is refused with a message naming the units, so that `30` is never taken
/// for seconds when milliseconds were meant. Whole milliseconds are the resolution: a unit
/// below them is refused, not rounded to zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Dur(pub Duration);

/// A duration that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurError {
    #[error("'{0}' has no unit: write it with one of ms, s, m, h, d, w (e.g. 30s, 10m, 30d)")]
    NoUnit(String),
    #[error("'{0}' is not a duration (e.g. 500ms, 30s, 10m, 12h, 30d): {1}")]
    Bad(String, String),
    #[error("'{0}': durations are counted in whole milliseconds; use ms, s, m, h, d or w")]
    BelowResolution(String),
}

/// The units of a duration, in milliseconds; the long names are read too.
const UNITS: &[(&[&str], u64)] = &[
    (&["ms", "msec", "msecs", "millisecond", "milliseconds"], 1),
    (&["s", "sec", "secs", "second", "seconds"], 1000),
    (&["m", "min", "mins", "minute", "minutes"], 60_000),
    (&["h", "hr", "hrs", "hour", "hours"], 3_600_000),
    (&["d", "day", "days"], 86_400_000),
    (&["w", "week", "weeks"], 604_800_000),
];

/// Units finer than a millisecond, refused by name.
const BELOW_MS: &[&str] = &["ns", "nsec", "us", "usec", "µs"];

/// `N unit` pieces, summed (`1h 30m`): the milliseconds, or why not.
///
/// Read here rather than by `humantime` (which the settings used before): its errors list
/// units the settings do not document (months, years), and it reads `1ns` as a duration
/// the settings' whole milliseconds turn into zero. What is read here is a few lines: whole
/// numbers and the six units of the docs.
fn parse_pieces(s: &str) -> Result<u64, DurError> {
    let bad = |why: String| DurError::Bad(s.to_string(), why);
    let mut total: u64 = 0;
    let mut rest = s.trim();
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(bad(format!(
                "expected a whole number and a unit (ms, s, m, h, d or w) at '{rest}'"
            )));
        }
        let n: u64 = rest[..digits]
            .parse()
            .map_err(|_| bad("the number is too large".into()))?;
        let after = rest[digits..].trim_start();
        let end = after
            .find(|c: char| c.is_ascii_digit() || c.is_whitespace())
            .unwrap_or(after.len());
        let unit = after[..end].to_ascii_lowercase();
        if BELOW_MS.contains(&unit.as_str()) {
            return Err(DurError::BelowResolution(s.to_string()));
        }
        let Some((_, ms)) = UNITS
            .iter()
            .find(|(names, _)| names.contains(&unit.as_str()))
        else {
            let why = if unit.is_empty() {
                format!("'{n}' has no unit")
            } else {
                format!("unknown unit '{unit}'")
            };
            return Err(bad(format!("{why}: use ms, s, m, h, d or w")));
        };
        total = n
            .checked_mul(*ms)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| bad("too long".into()))?;
        rest = after[end..].trim_start();
    }
    Ok(total)
}

impl Dur {
    pub const ZERO: Dur = Dur(Duration::ZERO);

    pub const fn from_secs(s: u64) -> Dur {
        Dur(Duration::from_secs(s))
    }

    pub const fn from_millis(ms: u64) -> Dur {
        Dur(Duration::from_millis(ms))
    }

    /// None for zero (`0`, `off`): the settings where zero means "no limit".
    pub fn non_zero(self) -> Option<Duration> {
        (!self.0.is_zero()).then_some(self.0)
    }
}

impl From<Dur> for Duration {
    fn from(d: Dur) -> Duration {
        d.0
    }
}

impl FromStr for Dur {
    type Err = DurError;

    /// Units ms, s, m, h, d, w (and their long names), whole numbers, pieces summed.
    fn from_str(s: &str) -> Result<Dur, DurError> {
        let t = s.trim();
        if matches!(t.to_ascii_lowercase().as_str(), "0" | "off" | "none") {
            return Ok(Dur::ZERO);
        }
        if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.') {
            return Err(DurError::NoUnit(s.to_string()));
        }
        if t.is_empty() {
            return Err(DurError::Bad(s.to_string(), "it is empty".into()));
        }
        parse_pieces(t).map(Dur::from_millis)
    }
}

impl fmt::Display for Dur {
    /// The largest unit that divides the duration (`30m`, not `1800s`), so a value prints as
    /// it is usually written and parses back to itself.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if ms == 0 {
            return f.write_str("0s");
        }
        const UNITS: [(u128, &str); 5] = [
            (86_400_000, "d"),
            (3_600_000, "h"),
            (60_000, "m"),
            (1000, "s"),
            (1, "ms"),
        ];
        let (size, unit) = UNITS
            .iter()
            .find(|(size, _)| ms.is_multiple_of(*size))
            .copied()
            .unwrap_or((1, "ms"));
        write!(f, "{}{unit}", ms / size)
    }
}

impl Serialize for Dur {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Dur {
    /// A string with a unit; a number (`timeout = 30`) gets the same "no unit" message.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = match Raw::deserialize(d)? {
            Raw::Text(s) => s,
            other => other.to_string(),
        };
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A size or a duration as a file gives it: a whole number, text, or a value of another
/// type, which is read as its text so that the error names it (`'-5' is not a size`, not
/// serde's "did not match any variant").
#[derive(Deserialize)]
#[serde(untagged)]
enum Raw {
    Int(u64),
    Negative(i64),
    Fraction(f64),
    Flag(bool),
    Text(String),
}

impl std::fmt::Display for Raw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Raw::Int(n) => write!(f, "{n}"),
            Raw::Negative(n) => write!(f, "{n}"),
            Raw::Fraction(x) => write!(f, "{x}"),
            Raw::Flag(b) => write!(f, "{b}"),
            Raw::Text(t) => f.write_str(t),
        }
    }
}

/// A number of bytes: an integer, or a string with a unit (`512M`, `2 GiB`, `1g`); `0`,
/// `"none"` or `"unlimited"` lift the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize(pub u64);

/// A size that does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ByteSizeError {
    #[error("'{0}' is not a size (e.g. 512M, 2G, 1073741824)")]
    NotASize(String),
    #[error("'{0}' has an unknown unit (use K, M, G or T)")]
    Unit(String),
    #[error("'{0}' is too large")]
    TooLarge(String),
}

impl ByteSize {
    pub fn parse(s: &str) -> Result<ByteSize, ByteSizeError> {
        let t = s.trim().to_ascii_lowercase();
        if t == "none" || t == "unlimited" {
            return Ok(ByteSize(0));
        }
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let n: u64 = num
            .parse()
            .map_err(|_| ByteSizeError::NotASize(s.to_string()))?;
        let shift = match unit.trim().trim_end_matches('b').trim_end_matches('i') {
            "" => 0,
            "k" => 10,
            "m" => 20,
            "g" => 30,
            "t" => 40,
            _ => return Err(ByteSizeError::Unit(s.to_string())),
        };
        n.checked_mul(1 << shift)
            .map(ByteSize)
            .ok_or_else(|| ByteSizeError::TooLarge(s.to_string()))
    }
}

impl std::str::FromStr for ByteSize {
    type Err = ByteSizeError;
    fn from_str(s: &str) -> Result<ByteSize, ByteSizeError> {
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
        match Raw::deserialize(d)? {
            Raw::Int(n) => Ok(ByteSize(n)),
            Raw::Text(s) => ByteSize::parse(&s).map_err(serde::de::Error::custom),
            other => Err(serde::de::Error::custom(ByteSizeError::NotASize(
                other.to_string(),
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_value_of_a_wrong_kind_is_named_in_its_error() {
        #[derive(Debug, Deserialize)]
        struct File {
            #[allow(dead_code)]
            size: Option<ByteSize>,
            #[allow(dead_code)]
            time: Option<Dur>,
        }
        let err = |text: &str| toml::from_str::<File>(text).unwrap_err().to_string();
        assert!(
            err("size = -5").contains("'-5' is not a size"),
            "{}",
            err("size = -5")
        );
        assert!(err("size = 1.5").contains("'1.5' is not a size"));
        assert!(err("size = true").contains("'true' is not a size"));
        assert!(err("time = 30.5").contains("'30.5' has no unit"));
        assert!(err("time = -5").contains("'-5' is not a duration"));
        assert!(err("time = 30").contains("'30' has no unit"));
    }

    #[test]
    fn sizes_with_and_without_units() {
        assert_eq!(ByteSize::parse("256M").unwrap().0, 256 << 20);
        assert_eq!(ByteSize::parse("2 GiB").unwrap().0, 2 << 30);
        assert_eq!(ByteSize::parse("1gb").unwrap().0, 1 << 30);
        assert_eq!(ByteSize::parse("4096").unwrap().0, 4096);
        assert_eq!(ByteSize::parse("none").unwrap().0, 0);
        assert!(matches!(
            ByteSize::parse("lots"),
            Err(ByteSizeError::NotASize(_))
        ));
        assert!(matches!(ByteSize::parse("3X"), Err(ByteSizeError::Unit(_))));
        for shown in ["4MiB", "16GiB", "1000", "0"] {
            assert_eq!(ByteSize::parse(shown).unwrap().to_string(), shown);
        }
    }

    #[test]
    fn durations_need_units_and_print_in_the_largest_one() {
        for (text, d, shown) in [
            ("500ms", Duration::from_millis(500), "500ms"),
            ("30s", Duration::from_secs(30), "30s"),
            ("10m", Duration::from_secs(600), "10m"),
            ("90s", Duration::from_secs(90), "90s"),
            ("30d", Duration::from_secs(30 * 86_400), "30d"),
            ("1h 30m", Duration::from_secs(5400), "90m"),
            ("off", Duration::ZERO, "0s"),
            ("0", Duration::ZERO, "0s"),
        ] {
            let v: Dur = text.parse().unwrap();
            assert_eq!(v.0, d, "{text}");
            assert_eq!(v.to_string(), shown, "{text}");
            assert_eq!(shown.parse::<Dur>().unwrap(), v);
        }
        let e = "30".parse::<Dur>().unwrap_err().to_string();
        assert!(e.contains("no unit") && e.contains("ms, s, m"), "{e}");
        assert!("soon".parse::<Dur>().is_err());
        // Long names are read; units finer than a millisecond, and others, are refused
        // naming only the units of the docs.
        assert_eq!("2 hours 5min".parse::<Dur>().unwrap(), Dur::from_secs(7500));
        let e = "1ns".parse::<Dur>().unwrap_err().to_string();
        assert!(e.contains("whole milliseconds"), "{e}");
        for bad in ["3 months", "1y", "5 parsecs", "1.5s", "-5s", "s"] {
            let e = bad.parse::<Dur>().unwrap_err().to_string();
            assert!(e.contains("ms, s, m, h, d"), "{bad}: {e}");
            assert!(!e.contains("month") || bad.contains("month"), "{bad}: {e}");
            assert!(!e.contains("year"), "{bad}: {e}");
        }
        let e = serde_json::from_str::<Dur>("5000").unwrap_err().to_string();
        assert!(e.contains("no unit"), "{e}");
        assert_eq!(
            serde_json::to_string(&Dur::from_secs(1800)).unwrap(),
            "\"30m\""
        );
    }
}
