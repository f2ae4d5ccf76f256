//! What the middlewares read of gRPC: the content type that tells a gRPC
//! call, the path that names it and the `grpc-status` that ends it.

use std::borrow::Cow;

use http::HeaderMap;

/// Whether the request is a gRPC call (`application/grpc`, `+proto`, ...).
pub(crate) fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"application/grpc"))
}

/// `pkg.Service` and `Method` of a path `/pkg.Service/Method`.
pub(crate) fn service_and_method(path: &str) -> Option<(&str, &str)> {
    path.strip_prefix('/')?
        .split_once('/')
        .filter(|(service, method)| !service.is_empty() && !method.is_empty())
}

/// The name of a gRPC span: `pkg.Service/Method`, or the path as it came.
pub(crate) fn span_name(path: &str) -> Cow<'static, str> {
    Cow::Owned(path.strip_prefix('/').unwrap_or(path).to_owned())
}

/// The `grpc-status` in `headers` (or trailers): `None` if absent or not a
/// number.
pub(crate) fn status(headers: &HeaderMap) -> Option<u32> {
    let value = headers.get("grpc-status")?.to_str().ok()?;
    value.trim().parse().ok()
}

/// The name gRPC gives a status code.
pub(crate) fn code_name(code: u32) -> &'static str {
    match code {
        0 => "OK",
        1 => "CANCELLED",
        2 => "UNKNOWN",
        3 => "INVALID_ARGUMENT",
        4 => "DEADLINE_EXCEEDED",
        5 => "NOT_FOUND",
        6 => "ALREADY_EXISTS",
        7 => "PERMISSION_DENIED",
        8 => "RESOURCE_EXHAUSTED",
        9 => "FAILED_PRECONDITION",
        10 => "ABORTED",
        11 => "OUT_OF_RANGE",
        12 => "UNIMPLEMENTED",
        13 => "INTERNAL",
        14 => "UNAVAILABLE",
        15 => "DATA_LOSS",
        16 => "UNAUTHENTICATED",
        _ => "UNKNOWN_CODE",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_values_read_as_absent() {
        let mut headers = HeaderMap::new();
        assert_eq!(status(&headers), None);
        for (value, expected) in
            [("0", Some(0)), ("5", Some(5)), (" 14 ", Some(14)), ("x", None), ("-1", None)]
        {
            headers.insert("grpc-status", value.parse().unwrap());
            assert_eq!(status(&headers), expected, "{value:?}");
        }
        headers.insert("grpc-status", http::HeaderValue::from_bytes(b"\xff").unwrap());
        assert_eq!(status(&headers), None);
        assert_eq!(service_and_method("/pkg.Svc/Get"), Some(("pkg.Svc", "Get")));
        for path in ["", "/", "//Get", "/pkg.Svc/", "pkg.Svc/Get"] {
            assert_eq!(service_and_method(path), None, "{path:?}");
        }
    }
}
