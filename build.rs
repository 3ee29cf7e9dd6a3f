//! Generates the A2A gRPC binding from `proto/a2a.proto`: prost messages, the tonic server
//! and client, and (pbjson) ProtoJSON serde for each message, which is how the messages
//! convert to and from the internal v1.0 model.
//!
//! `protoc` comes from the `protoc-bin-vendored` crate rather than the system: a fresh
//! machine (or CI) then needs no `protobuf-compiler` package, and every build uses the same
//! compiler. A `PROTOC` set in the environment still wins.

use std::path::PathBuf;
use std::process::Command;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    build_enter();
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

/// Builds `helpers/enter.rs` (`agent-host-enter`, see its docs and
/// `src/runner/sandbox/enter.rs`) into `OUT_DIR`: one file, no crates, no C library, with
/// `panic = "abort"`, which the package's own profile does not have. The `agent_host_enter`
/// cfg says it was built; where it cannot be (another architecture, no linker), agent-host
/// does the same step with its setup mode instead, and the build goes on.
fn build_enter() {
    println!("cargo:rerun-if-changed=helpers/enter.rs");
    println!("cargo::rustc-check-cfg=cfg(agent_host_enter)");
    let target = std::env::var("TARGET").unwrap_or_default();
    let arch_ok = target.starts_with("x86_64-") || target.starts_with("aarch64-");
    if !arch_ok || !target.contains("-linux-") {
        return;
    }
    let (Some(out), Some(rustc)) = (std::env::var_os("OUT_DIR"), std::env::var_os("RUSTC")) else {
        return;
    };
    let exe = PathBuf::from(out).join("agent-host-enter");
    let mut cmd = Command::new(rustc);
    cmd.args(["--edition", "2021", "--crate-type", "bin"])
        .args(["--crate-name", "agent_host_enter", "--target", &target])
        .args([
            "-C",
            "panic=abort",
            "-C",
            "opt-level=2",
            "-C",
            "debuginfo=0",
        ])
        .args(["-C", "strip=symbols", "-C", "relocation-model=static"])
        .args(["-C", "link-arg=-nostartfiles", "-C", "link-arg=-nostdlib"])
        .args(["-C", "link-arg=-static"]);
    let linker_var = format!(
        "CARGO_TARGET_{}_LINKER",
        target.to_uppercase().replace('-', "_")
    );
    if let Some(linker) = std::env::var_os(linker_var) {
        cmd.arg("-C")
            .arg(format!("linker={}", linker.to_string_lossy()));
    }
    let source = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default())
        .join("helpers/enter.rs");
    cmd.arg("-o").arg(&exe).arg(source);
    match cmd.output() {
        Ok(o) if o.status.success() => println!("cargo:rustc-cfg=agent_host_enter"),
        Ok(o) => {
            println!(
            "cargo:warning=agent-host-enter not built (the setup mode does its step instead): {}",
            String::from_utf8_lossy(&o.stderr).lines().next().unwrap_or_default()
        )
        }
        Err(e) => println!("cargo:warning=agent-host-enter not built: {e}"),
    }
}
