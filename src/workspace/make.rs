//! Making a workspace's checkout: `git init` from the host's template, the source's objects
//! borrowed, the base checked out on the context's branch.
//!
//! This is what `git clone --shared --no-checkout` followed by a checkout does, in two git
//! processes instead of four: the clone would also copy the source's branch as a remote
//! (`origin`, which the workspace must not name: a third process removed it), and the
//! workspace's identity would need its own step. Here the identity and the ignore rules come
//! from a template made once per host (`git init --template`), and the borrowing is the one
//! line `objects/info/alternates` that `clone --shared` writes (git's documented repository
//! layout). The processes' start is most of what making a workspace of a small repository
//! costs (about 3 ms each here), so the count is what `git worktree add` is measured against.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use super::changes::SKIP_HASH;
use super::git::Git;
use super::source::Source;
use super::{give_all, io, WorkspaceError, Workspaces, HOST_FILES};

impl Workspaces {
    /// The checkout and the host's scratch folder, in `tmp`.
    pub(super) fn make_in(
        &self,
        tmp: &Path,
        source: &Source,
        commit: &str,
        branch: &str,
    ) -> Result<(), WorkspaceError> {
        std::fs::create_dir_all(tmp.join("scratch")).map_err(io(tmp))?;
        let checkout = tmp.join("repo");
        let mut template = OsString::from("--template=");
        template.push(self.template()?);
        Git::trusted(tmp).output([
            OsStr::new("init"),
            "--quiet".as_ref(),
            &template,
            format!("--initial-branch={branch}").as_ref(),
            format!("--object-format={}", source.object_format).as_ref(),
            "--".as_ref(),
            checkout.as_os_str(),
        ])?;
        borrow_objects(&checkout, &source.git_dir)?;
        copy_shallow(&checkout, &source.git_dir)?;
        Git::fresh_workspace(&checkout)?
            .with_config(&[SKIP_HASH])
            .output(["reset", "--quiet", "--hard", commit])?;
        // The checkout and the host's scratch folder (its temporary indexes, written by git
        // as the user); the workspace's own folder and record stay the host's.
        match self.owner {
            Some((uid, gid)) => {
                give_all(&checkout, uid, gid)?;
                give_all(&tmp.join("scratch"), uid, gid)
            }
            None => Ok(()),
        }
    }

    /// The template every workspace's `git init` copies: the identity the agent commits
    /// with (`user.name`, `user.email` in its configuration) and [`HOST_FILES`] in its
    /// ignore rules (`info/exclude`). Made on first use, in the workspaces' folder, under a
    /// name that digests what it holds (a host with another identity makes its own).
    fn template(&self) -> Result<PathBuf, WorkspaceError> {
        let mut made = self.template.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(dir) = made.as_ref() {
            return Ok(dir.clone());
        }
        let (name, email) = &self.identity;
        let digest = {
            use sha2::Digest;
            sha2::Sha256::digest(format!("{name}\0{email}\0{HOST_FILES}"))
        };
        let dir = self
            .root
            .join(format!(".git-template-{}", hex::encode(&digest[..6])));
        if !dir.is_dir() {
            let tmp = self
                .root
                .join(format!(".making-{}", uuid::Uuid::new_v4().simple()));
            let built = build_template(&tmp, name, email).and_then(|()| {
                // Another host on this folder may have made it meanwhile: the same template.
                std::fs::rename(&tmp, &dir).or_else(|e| {
                    if dir.is_dir() {
                        Ok(())
                    } else {
                        Err(io(&dir)(e))
                    }
                })
            });
            let _ = std::fs::remove_dir_all(&tmp);
            built?;
        }
        *made = Some(dir.clone());
        Ok(dir)
    }
}

/// Writes the template's configuration (by git, which quotes the values) and ignore rules.
fn build_template(dir: &Path, name: &str, email: &str) -> Result<(), WorkspaceError> {
    let info = dir.join("info");
    std::fs::create_dir_all(&info).map_err(io(&info))?;
    let exclude = info.join("exclude");
    std::fs::write(&exclude, format!("{HOST_FILES}\n")).map_err(io(&exclude))?;
    let config = dir.join("config");
    for (key, value) in [("user.name", name), ("user.email", email)] {
        Git::trusted(dir).output([
            OsStr::new("config"),
            "--file".as_ref(),
            config.as_os_str(),
            key.as_ref(),
            value.as_ref(),
        ])?;
    }
    Ok(())
}

/// Lets the checkout read the source's objects (`objects/info/alternates`, as `git clone
/// --shared` writes it): one absolute folder on one line.
fn borrow_objects(checkout: &Path, source_git: &Path) -> Result<(), WorkspaceError> {
    let file = checkout.join(".git/objects/info/alternates");
    std::fs::write(&file, alternates_line(source_git)?).map_err(io(&file))
}

/// The largest list of shallow commits copied from a source (some 400,000 commits).
const LARGEST_SHALLOW: u64 = 16 << 20;

/// Gives the checkout the source's list of shallow commits (`shallow` in its git folder, as
/// `git clone --depth` writes it): the commits whose parents the source does not have. The
/// checkout borrows the source's objects but not this list, and without it git there takes
/// those parents for missing objects: the agent's `git log` stops at "Could not read", and
/// `git fetch` of the context's branch gets no pack. Copied, not linked (the agent may write
/// its own), and only a regular file of a bounded size, never through a link: a source
/// without one is not shallow.
fn copy_shallow(checkout: &Path, source_git: &Path) -> Result<(), WorkspaceError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let from = source_git.join("shallow");
    let refused = |why: &str| WorkspaceError::Io {
        path: from.clone(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_string()),
    };
    let opened = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&from);
    let file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(refused(
                "the source's list of shallow commits is a link: not followed",
            ))
        }
        Err(e) => return Err(io(&from)(e)),
    };
    let meta = file.metadata().map_err(io(&from))?;
    if !meta.is_file() {
        return Err(refused(
            "the source's list of shallow commits is not a regular file",
        ));
    }
    let mut bytes = Vec::new();
    file.take(LARGEST_SHALLOW + 1)
        .read_to_end(&mut bytes)
        .map_err(io(&from))?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > LARGEST_SHALLOW {
        return Err(refused(
            "the source's list of shallow commits is larger than 16 MiB",
        ));
    }
    let to = checkout.join(".git/shallow");
    std::fs::write(&to, bytes).map_err(io(&to))
}

/// Puts back the checkout's `objects/info/alternates` when it differs from what the host
/// wrote (only the source's objects). The agent may write that file: a line naming another
/// repository's objects (another context's workspace, a repository the host can read)
/// would let refs the agent writes bring that repository's files to whoever fetches this
/// workspace. Called after [`Git::check_contained`](super::git::Git::check_contained) (the
/// file, if any, is a regular file); replaced by a rename, never written through.
pub(crate) fn keep_borrowing(checkout: &Path, source_git: &Path) -> Result<(), WorkspaceError> {
    let file = checkout.join(".git/objects/info/alternates");
    let line = alternates_line(source_git)?;
    if std::fs::read(&file).is_ok_and(|now| now == line) {
        return Ok(());
    }
    let info = checkout.join(".git/objects/info");
    std::fs::create_dir_all(&info).map_err(io(&info))?;
    let tmp = info.join(format!("alternates.{}", uuid::Uuid::new_v4().simple()));
    std::fs::write(&tmp, line).map_err(io(&tmp))?;
    std::fs::rename(&tmp, &file).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(&file)(e)
    })
}

/// The alternates line naming `source_git`'s objects.
fn alternates_line(source_git: &Path) -> Result<Vec<u8>, WorkspaceError> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let objects = source_git.join("objects");
    if objects.as_os_str().as_bytes().contains(&b'\n') {
        return Err(WorkspaceError::Io {
            path: objects,
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the source's git folder has a line break in its name, which alternates cannot hold",
            ),
        });
    }
    let mut line = objects.into_os_string().into_vec();
    line.push(b'\n');
    Ok(line)
}
