//! The connection settings of `[server]`: header-read (and keep-alive idle) timeout,
//! connection caps, stream cap (see `crate::server::listen`); each from its flag or variable, else the file, else the
//! default, and greater than 0.

use std::time::Duration;

use super::{positive, ServeArgs, ServerSection, SettingsError};
use crate::server::listen::ConnLimits;

pub(super) fn conn_limits(
    args: &ServeArgs,
    srv: &ServerSection,
) -> Result<ConnLimits, SettingsError> {
    let d = ConnLimits::default();
    let cap = |name: &str, v: Option<usize>, d: usize| -> Result<usize, SettingsError> {
        Ok(positive(name, v.unwrap_or(d) as u64)? as usize)
    };
    Ok(ConnLimits {
        header_timeout: Duration::from_millis(positive(
            "server.header_timeout_ms",
            args.header_timeout_ms
                .or(srv.header_timeout_ms)
                .unwrap_or(d.header_timeout.as_millis() as u64),
        )?),
        max_connections: cap(
            "server.max_connections",
            args.max_connections.or(srv.max_connections),
            d.max_connections,
        )?,
        max_connections_per_address: cap(
            "server.max_connections_per_address",
            args.max_connections_per_address
                .or(srv.max_connections_per_address),
            d.max_connections_per_address,
        )?,
        max_streams: cap(
            "server.max_streams",
            args.max_streams.or(srv.max_streams),
            d.max_streams,
        )?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_over_the_file_over_the_defaults_and_zero_is_refused() {
        let none = ServeArgs::default();
        let d = conn_limits(&none, &ServerSection::default()).unwrap();
        assert_eq!(d, ConnLimits::default());
        let args = ServeArgs {
            max_connections: Some(7),
            ..ServeArgs::default()
        };
        let srv = ServerSection {
            max_connections: Some(9),
            max_streams: Some(3),
            ..ServerSection::default()
        };
        let c = conn_limits(&args, &srv).unwrap();
        assert_eq!((c.max_connections, c.max_streams), (7, 3));
        let zero = ServerSection {
            header_timeout_ms: Some(0),
            ..ServerSection::default()
        };
        let e = conn_limits(&none, &zero).unwrap_err().to_string();
        assert!(e.contains("server.header_timeout_ms"), "{e}");
    }
}
