//! A2A wire types and errors (no I/O). v1.0 is the internal model ([`v1`]); v0.3 is a
//! conversion at the edge ([`v03`]).
pub mod card;
pub mod error;
pub mod jws;
pub mod method;
pub mod v03;
pub mod v1;

pub use error::A2AError;
pub use method::{Method, ProtocolVersion};
