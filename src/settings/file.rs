//! The config file (`--config`, TOML) and the one generic merge of a section: the value of
//! each key the file sets replaces the one clap gave, unless a flag or an environment
//! variable gave that one. No per-setting code: a section is serialized to a map, the file's
//! keys are laid over it, and the map is read back into the section (which checks the file's
//! values with the same types as the flags).

use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::legacy::{convert_value, KEY_ALIASES, REMOVED_KEYS};
use super::{ServeArgs, SettingsError};

/// A section of the config file, declared by a module as one struct that is both its clap
/// arguments and its serde table.
pub trait Section: Serialize + DeserializeOwned {
    /// The table's name in the file; every setting's id is `NAME.key`.
    const NAME: &'static str;
    /// Keys only the file sets (no flag), with their help.
    const FILE_ONLY: &'static [(&'static str, &'static str)] = &[];
}

/// The config file as read, old keys renamed.
#[derive(Debug, Clone, Default)]
pub struct FileConfig {
    /// Where it was read from (for messages); None: no file.
    path: Option<String>,
    table: toml::Table,
    /// One line per old key the file used, naming its new key.
    pub notices: Vec<String>,
    /// The old keys read as new ones: (new id, old `[section] key`), for errors.
    renamed: Vec<(String, String)>,
}

impl FileConfig {
    /// Reads `path` (none: an empty file) and renames its old keys.
    pub fn load(path: Option<&Path>) -> Result<FileConfig, SettingsError> {
        let Some(path) = path else {
            return Ok(FileConfig::default());
        };
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|reason| SettingsError::Read {
            path: shown.clone(),
            reason,
        })?;
        let table: toml::Table = toml::from_str(&text).map_err(|e| SettingsError::Parse {
            path: shown.clone(),
            message: e.to_string(),
        })?;
        let mut file = FileConfig {
            path: Some(shown),
            table,
            notices: Vec::new(),
            renamed: Vec::new(),
        };
        file.rename_old_keys()?;
        Ok(file)
    }

    fn error(&self, message: String) -> SettingsError {
        SettingsError::Parse {
            path: self.path.clone().unwrap_or_default(),
            message,
        }
    }

    /// `[agent] timeout_ms = 5000` becomes `[limits] timeout = "5000ms"`, with a notice; a
    /// key set under both names keeps the new one. A removed key is an error.
    fn rename_old_keys(&mut self) -> Result<(), SettingsError> {
        for (old, became, same) in REMOVED_KEYS {
            let Some(value) = self.take(old) else {
                continue;
            };
            let (section, key) = split(old);
            let text = format!("[{section}] {key} is no longer a setting: it became {became}");
            if value.as_integer() != Some(*same) {
                return Err(self.error(text));
            }
            self.notices.push(format!("{text}; remove it"));
        }
        for (old, new, conversion) in KEY_ALIASES {
            let Some(value) = self.take(old) else {
                continue;
            };
            let (os, ok) = split(old);
            let (ns, nk) = split(new);
            let section = self
                .table
                .entry(ns.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            let Some(section) = section.as_table_mut() else {
                return Err(self.error(format!("[{ns}] must be a table")));
            };
            if section.contains_key(nk) {
                self.notices.push(format!(
                    "[{os}] {ok} is ignored: [{ns}] {nk} is set too (its new name)"
                ));
                continue;
            }
            section.insert(nk.to_string(), convert_value(*conversion, value));
            self.notices.push(format!(
                "[{os}] {ok} is an old key: read as [{ns}] {nk}; use that"
            ));
            self.renamed.push((new.to_string(), format!("[{os}] {ok}")));
        }
        Ok(())
    }

    /// Whether the file sets the setting `id` (under its name or an old one).
    pub fn sets(&self, id: &str) -> bool {
        let (section, key) = split(id);
        self.table
            .get(section)
            .and_then(toml::Value::as_table)
            .is_some_and(|t| t.contains_key(key))
    }

    /// How an error names the file key of the setting `id`: `[section] key`, or the old key
    /// the file gave it under (`[agent] timeout_ms (read as [limits] timeout)`).
    pub fn key_name(&self, id: &str) -> String {
        let (section, key) = split(id);
        match self.renamed.iter().find(|(new, _)| new == id) {
            Some((_, old)) => format!("{old} (read as [{section}] {key})"),
            None => format!("[{section}] {key}"),
        }
    }

    /// Removes `section.key` from the table; its value.
    fn take(&mut self, id: &str) -> Option<toml::Value> {
        let (section, key) = split(id);
        let table = self.table.get_mut(section)?.as_table_mut()?;
        let value = table.remove(key);
        if table.is_empty() {
            self.table.remove(section);
        }
        value
    }

    /// Refuses a section no module declares.
    pub fn check_sections(&self, known: &[&str]) -> Result<(), SettingsError> {
        match self.table.keys().find(|k| !known.contains(&k.as_str())) {
            Some(k) => Err(self.error(format!(
                "unknown section [{k}] (the sections are {})",
                known.join(", ")
            ))),
            None => Ok(()),
        }
    }

    /// `parsed` (what clap gave) with the file's keys of section `T` laid over it, except
    /// where a flag or an environment variable gave the value.
    pub fn merge<T: Section>(&self, parsed: &T, args: &ServeArgs) -> Result<T, SettingsError> {
        let section = T::NAME;
        let mut map = match serde_json::to_value(parsed) {
            Ok(serde_json::Value::Object(m)) => m,
            _ => return Err(self.error(format!("[{section}] cannot be merged"))),
        };
        let base = map.clone();
        let Some(table) = self.table.get(section) else {
            return read(map).map_err(|e| self.error(format!("[{section}]: {e}")));
        };
        let Some(table) = table.as_table() else {
            return Err(self.error(format!("[{section}] must be a table")));
        };
        for (key, value) in table {
            if !map.contains_key(key) {
                return Err(self.error(format!(
                    "[{section}] has no key '{key}' (its keys: {})",
                    keys(&base)
                )));
            }
            if args.is_explicit(&format!("{section}.{key}")) {
                continue;
            }
            let value = serde_json::to_value(value)
                .map_err(|e| self.error(format!("[{section}] {key}: {e}")))?;
            map.insert(key.clone(), value);
        }
        read::<T>(map).map_err(|e| self.key_error::<T>(&base, table, e))
    }

    /// Names the file key whose value was refused: the first that fails on its own.
    fn key_error<T: Section>(
        &self,
        base: &serde_json::Map<String, serde_json::Value>,
        table: &toml::Table,
        whole: serde_json::Error,
    ) -> SettingsError {
        for (key, value) in table {
            let mut one = base.clone();
            if let Ok(v) = serde_json::to_value(value) {
                one.insert(key.clone(), v);
            }
            if let Err(e) = read::<T>(one) {
                let name = self.key_name(&format!("{}.{key}", T::NAME));
                return self.error(format!("{name}: {e}"));
            }
        }
        self.error(format!("[{}]: {whole}", T::NAME))
    }
}

fn read<T: DeserializeOwned>(
    map: serde_json::Map<String, serde_json::Value>,
) -> Result<T, serde_json::Error> {
    serde_json::from_value(serde_json::Value::Object(map))
}

fn keys(map: &serde_json::Map<String, serde_json::Value>) -> String {
    map.keys().cloned().collect::<Vec<_>>().join(", ")
}

/// `section.key` into its two parts.
pub fn split(id: &str) -> (&str, &str) {
    id.split_once('.').unwrap_or((id, ""))
}
