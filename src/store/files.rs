//! Private files and folders: everything agent-host writes (its database and the database's
//! WAL and shared-memory files, the lock file, the push key, attachment folders) is readable
//! by its own user only, whatever the umask.
//!
//! A mode given at creation is masked by the umask, which can only remove bits; so each
//! function also sets the exact mode on what it created.

use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Mode of the files agent-host writes.
pub const FILE_MODE: u32 = 0o600;
/// Mode of the folders agent-host creates.
pub const DIR_MODE: u32 = 0o700;

/// The part of `dir`'s path that is in the way of making it a folder: the nearest part that
/// exists, when it is not a folder (a file where a folder is wanted). Looked at without
/// writing; what `create_dir_all` would otherwise report as "File exists" or "Not a
/// directory" without naming the part.
pub fn blocked_at(dir: &Path) -> Option<PathBuf> {
    let existing = dir
        .ancestors()
        .filter(|d| !d.as_os_str().is_empty())
        .find(|d| d.exists())?;
    (!existing.is_dir()).then(|| existing.to_path_buf())
}

/// The error for a part of a path that is not a folder.
pub fn not_a_directory(part: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotADirectory,
        format!("{} is not a directory", part.display()),
    )
}

/// Creates `dir` and its missing parents, each new one 0700; folders that exist keep their
/// mode (they may be shared, like a home directory). A part of the path that is not a folder
/// is named in the error.
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    if let Some(part) = blocked_at(dir) {
        return Err(not_a_directory(&part));
    }
    let mut missing: Vec<PathBuf> = Vec::new();
    let mut at = Some(dir);
    while let Some(d) = at.filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
        missing.push(d.to_path_buf());
        at = d.parent();
    }
    DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)?;
    for d in missing {
        std::fs::set_permissions(&d, Permissions::from_mode(DIR_MODE))?;
    }
    Ok(())
}

/// Opens `path` for reading and writing, creating it 0600 when missing (never truncating).
pub fn open_private(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(FILE_MODE)
        .open(path)?;
    restrict(&file)?;
    Ok(file)
}

/// Creates `path` 0600; an existing file (or link) is an error.
pub fn create_new_private(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(path)?;
    restrict(&file)?;
    Ok(file)
}

/// Sets an open file of ours to 0600 (when it is not already).
pub fn restrict(file: &File) -> io::Result<()> {
    if file.metadata()?.permissions().mode() & 0o777 != FILE_MODE {
        file.set_permissions(Permissions::from_mode(FILE_MODE))?;
    }
    Ok(())
}

/// Sets `path` to 0600 if it exists (a database's WAL and shared-memory files, which SQLite
/// creates itself).
pub fn restrict_path(path: &Path) -> io::Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if m.permissions().mode() & 0o777 != FILE_MODE => {
            std::fs::set_permissions(path, Permissions::from_mode(FILE_MODE))
        }
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn new_files_and_folders_are_private_whatever_the_umask() {
        let dir = tempfile::tempdir().unwrap();
        // A permissive mask (set back right after) shows that the modes do not depend on it.
        let old = nix::sys::stat::umask(nix::sys::stat::Mode::empty());
        let nested = dir.path().join("a/b");
        let made = create_dir_all(&nested);
        let file = nested.join("f");
        let opened = open_private(&file).map(|_| ());
        nix::sys::stat::umask(old);
        made.unwrap();
        opened.unwrap();
        assert_eq!(mode(&dir.path().join("a")), 0o700);
        assert_eq!(mode(&nested), 0o700);
        assert_eq!(mode(&file), 0o600);
        // An existing, wider file is narrowed.
        let wide = dir.path().join("wide");
        std::fs::write(&wide, "x").unwrap();
        std::fs::set_permissions(&wide, Permissions::from_mode(0o644)).unwrap();
        restrict_path(&wide).unwrap();
        assert_eq!(mode(&wide), 0o600);
        assert!(create_new_private(&wide).is_err(), "never replaces a file");
    }
}
