//! Generates the A2A gRPC binding from `proto/a2a.proto`: prost messages, the tonic server
//! and client, and (pbjson) ProtoJSON serde for each message, which is how the messages
//! convert to and from the internal v1.0 model.
//!
//! `protoc` comes from the `protoc-bin-vendored` crate rather than the system: a fresh
//! machine (or CI) then needs no `protobuf-compiler` package, and every build uses the same
//! compiler. A `PROTOC` set in the environment still wins.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
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
