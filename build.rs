//! Generates the A2A gRPC binding from `proto/a2a.proto`: prost messages, the tonic server
//! and client, and (pbjson) ProtoJSON serde for each message, which is how the messages
//! convert to and from the internal v1.0 model.
//!
//! `protoc` comes from the `protoc-bin-vendored` crate rather than the system: a fresh
//! machine (or CI) then needs no `protobuf-compiler` package, and every build uses the same
//! compiler. A `PROTOC` set in the environment still wins.
//!
//! It also tells the linker how to lay out a release binary on Linux ([`start_layout`]).

use std::path::{Path, PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    start_layout();
    println!("cargo:rerun-if-changed=proto/a2a.proto");
    println!("cargo:rerun-if-env-changed=PROTOC");
    if std::env::var_os("PROTOC").is_none() {
        // SAFETY: build scripts are single-threaded; nothing else reads the environment now.
        unsafe { std::env::set_var("PROTOC", protoc_bin_vendored::protoc_bin_path()?) };
    }
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let descriptors = out.join("a2a_descriptor.bin");
    tonic_prost_build::configure()
        .file_descriptor_set_path(&descriptors)
        // Well-known types with serde: Struct, Value and ListValue from this crate (sorted
        // fields, see src/server/grpc/wkt.rs), Timestamp and Empty from pbjson-types.
        .compile_well_known_types(true)
        .extern_path(
            ".google.protobuf.Struct",
            "crate::server::grpc::wkt::Struct",
        )
        .extern_path(".google.protobuf.Value", "crate::server::grpc::wkt::Value")
        .extern_path(
            ".google.protobuf.ListValue",
            "crate::server::grpc::wkt::ListValue",
        )
        .extern_path(".google.protobuf", "::pbjson_types")
        .compile_protos(&["proto/a2a.proto"], &["proto"])?;
    let set = std::fs::read(&descriptors)?;
    pbjson_build::Builder::new()
        .register_descriptors(&set)?
        .ignore_unknown_fields()
        .build(&[".lf.a2a.v1"])?;
    Ok(())
}

/// Release builds on Linux: the functions the start executes, then those serving a few tasks
/// adds, listed in `link/start.ld` (written by `scripts/start-layout.sh`), go side by side at
/// the front of the code, and
/// relative relocations are packed (DT_RELR) where glibc reads them (2.36 and later).
///
/// Why: most of an idle host's RSS is the executable's own code. The kernel maps the 64 KiB
/// around each page of the file that the start touches (fault-around), and the few thousand
/// functions the start runs were spread over the whole 12 MB of code, so nearly all of it
/// became resident (8.8 MiB); packed together, 2.6 MiB is. Relative relocations (~24,000, 24
/// bytes each as RELA, 562 KiB) are read at every start; as RELR they take 7 KiB.
///
/// The list names functions without their hash, so it still links after a toolchain or
/// dependency update (it then packs less until regenerated). Skipped for debug builds, other
/// targets, and when a linker of one's own is configured (`target.*.linker`, `-C linker`,
/// `-fuse-ld`, `-C linker-flavor` / `linker-features`): gold, for one, has no `INSERT`.
fn start_layout() {
    let env = |k: &str| std::env::var(k).unwrap_or_default();
    println!("cargo:rerun-if-changed=link/start.ld");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    println!("cargo:rerun-if-env-changed=AGENT_HOST_START_LAYOUT");
    let flags = env("CARGO_ENCODED_RUSTFLAGS");
    let own_linker = std::env::var_os("RUSTC_LINKER").is_some()
        || ["linker", "fuse-ld", "link-self-contained"]
            .iter()
            .any(|f| flags.contains(f));
    if env("PROFILE") != "release" || env("CARGO_CFG_TARGET_OS") != "linux" || own_linker {
        return;
    }
    let script = Path::new(&env("CARGO_MANIFEST_DIR")).join("link/start.ld");
    // `off`: the default layout (scripts/start-layout.sh profiles such a binary: valgrind
    // names only the functions in `.text`).
    if script.is_file() && env("AGENT_HOST_START_LAYOUT") != "off" {
        // Two arguments, not `-Wl,-T,PATH`: a comma in the path would split it.
        println!("cargo:rustc-link-arg-bins=-Xlinker");
        println!("cargo:rustc-link-arg-bins=--script={}", script.display());
    }
    if env("CARGO_CFG_TARGET_ENV") == "gnu" && env("HOST") == env("TARGET") && glibc_has_relr() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// Whether this machine's glibc (the one a native build links against) is 2.36 or later,
/// the first to read DT_RELR (`getconf GNU_LIBC_VERSION` prints `glibc 2.36`).
fn glibc_has_relr() -> bool {
    let Ok(out) = std::process::Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
    else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text.split_whitespace().nth(1).unwrap_or("");
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (2, 36)
}
