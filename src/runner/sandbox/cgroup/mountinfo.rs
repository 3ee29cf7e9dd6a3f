//! Where the cgroup hierarchies are: the kernel's mount table and the host's own place in
//! each hierarchy, read as text.

use std::path::PathBuf;

use super::Kind;

/// One cgroup hierarchy mounted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Mount {
    /// What it offers.
    pub kind: Kind,
    pub point: PathBuf,
    /// The root of the mount in the hierarchy.
    pub root: String,
    /// Mounted with `favordynmods` (see [`super::v1_over_an_empty_unified`]).
    pub favordynmods: bool,
}

/// The cgroup hierarchies mounted.
pub(super) fn mounts(mountinfo: &str) -> Vec<Mount> {
    let mut out = Vec::new();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let l: Vec<&str> = left.split(' ').collect();
        let r: Vec<&str> = right.split(' ').collect();
        let (Some(root), Some(point), Some(fstype)) = (l.get(3), l.get(4), r.first()) else {
            continue;
        };
        let point = PathBuf::from(point.replace("\\040", " "));
        let opts = r.get(2).copied().unwrap_or("");
        let favordynmods = opts.split(',').any(|o| o == "favordynmods");
        let mount = |kind| Mount {
            kind,
            point: point.clone(),
            root: root.to_string(),
            favordynmods,
        };
        match *fstype {
            "cgroup2" => out.push(mount(Kind::Unified)),
            "cgroup" => {
                for kind in [Kind::Pids, Kind::Memory, Kind::Freezer, Kind::Cpu] {
                    if opts.split(',').any(|o| Some(o) == kind.v1_name()) {
                        out.push(mount(kind));
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The host's cgroup path in the hierarchy of `kind`, from `/proc/self/cgroup`.
pub(super) fn own_path(proc_cgroup: &str, kind: Kind) -> Option<String> {
    proc_cgroup.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let hit = match kind.v1_name() {
            None => id == "0" && controllers.is_empty(),
            Some(name) => controllers.split(',').any(|c| c == name),
        };
        hit.then(|| path.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_and_proc_cgroup_lines() {
        let mi = "35 25 0:30 / /sys/fs/cgroup/pids rw,relatime shared:9 - cgroup cgroup rw,pids\n\
                  36 25 0:31 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n\
                  37 25 0:32 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
                  38 25 0:33 /x /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate,favordynmods\n";
        let m = mounts(mi);
        assert_eq!(m.len(), 4);
        assert_eq!(m[0].kind, Kind::Pids);
        assert_eq!(
            m[1],
            Mount {
                kind: Kind::Unified,
                point: PathBuf::from("/sys/fs/cgroup/unified"),
                root: "/".into(),
                favordynmods: false,
            }
        );
        assert_eq!(m[2].kind, Kind::Cpu);
        assert_eq!((m[3].kind, m[3].root.as_str()), (Kind::Unified, "/x"));
        assert!(m[3].favordynmods, "{:?}", m[3]);
        let pc = "8:pids:/\n4:memory:/a/b\n1:cpu,cpuacct:/\n0::/user.slice\n";
        assert_eq!(own_path(pc, Kind::Memory).as_deref(), Some("/a/b"));
        assert_eq!(own_path(pc, Kind::Unified).as_deref(), Some("/user.slice"));
        assert_eq!(own_path(pc, Kind::Cpu).as_deref(), Some("/"));
        assert_eq!(own_path(pc, Kind::Freezer), None);
    }
}
