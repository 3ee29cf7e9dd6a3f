//! Where the cgroup hierarchies are: the kernel's mount table and the host's own place in
//! each hierarchy, read as text.

use std::path::PathBuf;

use super::Kind;

/// The cgroup hierarchies mounted: (what it offers, mount point, root of the mount).
pub(super) fn mounts(mountinfo: &str) -> Vec<(Kind, PathBuf, String)> {
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
        match *fstype {
            "cgroup2" => out.push((Kind::Unified, point, root.to_string())),
            "cgroup" => {
                let opts = r.get(2).copied().unwrap_or("");
                for kind in [Kind::Pids, Kind::Memory, Kind::Freezer, Kind::Cpu] {
                    if opts.split(',').any(|o| Some(o) == kind.v1_name()) {
                        out.push((kind, point.clone(), root.to_string()));
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
                  37 25 0:32 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n";
        let m = mounts(mi);
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].0, Kind::Pids);
        assert_eq!(
            m[1],
            (
                Kind::Unified,
                PathBuf::from("/sys/fs/cgroup/unified"),
                "/".into()
            )
        );
        assert_eq!(m[2].0, Kind::Cpu);
        let pc = "8:pids:/\n4:memory:/a/b\n1:cpu,cpuacct:/\n0::/user.slice\n";
        assert_eq!(own_path(pc, Kind::Memory).as_deref(), Some("/a/b"));
        assert_eq!(own_path(pc, Kind::Unified).as_deref(), Some("/user.slice"));
        assert_eq!(own_path(pc, Kind::Cpu).as_deref(), Some("/"));
        assert_eq!(own_path(pc, Kind::Freezer), None);
    }
}
