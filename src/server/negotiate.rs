//! What both HTTP bindings check before they read a request: the body's media type and the
//! requested protocol version (`A2A-Version`).

use std::collections::HashMap;

use axum::http::{header, HeaderMap};

use crate::protocol::A2AError;

/// Protocol version of a method or route.
pub use crate::protocol::ProtocolVersion as Version;

/// True for `application/json` and `application/a2a+json` (parameters ignored), and when
/// there is no `Content-Type` at all (lenient: such a client is not refused).
pub fn acceptable_content_type(headers: &HeaderMap) -> bool {
    match headers.get(header::CONTENT_TYPE) {
        None => true,
        Some(v) => {
            let s = v.to_str().unwrap_or("").to_ascii_lowercase();
            let base = s.split(';').next().unwrap_or("").trim();
            base == "application/json" || base == "application/a2a+json"
        }
    }
}

/// The request's `Content-Type` (empty when absent or not text), for error messages.
pub fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// The requested protocol version: the `A2A-Version` header or query parameter.
pub fn requested_version(headers: &HeaderMap, query: &HashMap<String, String>) -> Option<String> {
    headers
        .get("a2a-version")
        .and_then(|v| v.to_str().ok())
        .map(|s| s.trim().to_string())
        .or_else(|| query.get("A2A-Version").map(|s| s.trim().to_string()))
        .filter(|s| !s.is_empty())
}

/// Checks the requested version against the one of the method or route (`what`, e.g.
/// "method SendMessage"). An absent version is accepted for both (v1.0 and v0.3 methods and
/// routes never overlap); an explicit one must match: 1.x for v1.0, 0.3 for v0.3.
pub fn check_version(
    requested: Option<&str>,
    version: Version,
    what: &str,
) -> Result<(), A2AError> {
    let Some(req) = requested else {
        return Ok(());
    };
    let mut parts = req.split('.');
    let major = parts.next().unwrap_or("");
    let minor = parts.next().unwrap_or("0");
    let ok = match version {
        Version::V1 => major == "1",
        Version::V03 => major == "0" && minor == "3",
    };
    if ok {
        return Ok(());
    }
    let supported = major == "1" || (major == "0" && minor == "3");
    Err(A2AError::VersionNotSupported(if supported {
        match version {
            Version::V1 => format!("{what} is A2A 1.0 but the request says A2A-Version {req}"),
            Version::V03 => format!("{what} is A2A 0.3 but the request says A2A-Version {req}; A2A 1.0 clients use the 1.0 interface of the agent card"),
        }
    } else {
        format!("A2A-Version {req} is not supported; this server speaks 1.0 and 0.3")
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_rules() {
        let m = "method SendMessage";
        assert!(check_version(None, Version::V1, m).is_ok());
        assert!(check_version(None, Version::V03, m).is_ok());
        assert!(check_version(Some("1.0"), Version::V1, m).is_ok());
        assert!(check_version(Some("1.1"), Version::V1, m).is_ok());
        assert!(check_version(Some("0.3"), Version::V03, m).is_ok());
        assert!(check_version(Some("0.3.0"), Version::V03, m).is_ok());
        for (req, v) in [
            ("99.0", Version::V1),
            ("1.0", Version::V03),
            ("0.3", Version::V1),
            ("0.2", Version::V03),
        ] {
            let e = check_version(Some(req), v, m).unwrap_err();
            assert_eq!(e.code(), -32009, "{req} {v:?}");
            assert_eq!(e.http_status(), 400);
        }
    }

    #[test]
    fn content_types() {
        let mut h = HeaderMap::new();
        assert!(acceptable_content_type(&h));
        for ok in [
            "application/json",
            "application/a2a+json",
            "Application/JSON; charset=utf-8",
        ] {
            h.insert(header::CONTENT_TYPE, ok.parse().unwrap());
            assert!(acceptable_content_type(&h), "{ok}");
        }
        h.insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
        assert!(!acceptable_content_type(&h));
        assert_eq!(content_type(&h), "text/plain");
    }
}
