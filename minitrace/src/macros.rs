/// The name of the enclosing function, e.g. `"handle"`.
///
/// ```
/// fn handle() -> &'static str {
///     minitrace::func_name!()
/// }
/// assert_eq!(handle(), "handle");
/// ```
#[macro_export]
macro_rules! func_name {
    () => {{
        fn marker() {}
        $crate::__private::function_name($crate::__private::type_name_of(marker), false)
    }};
}

/// The full path of the enclosing function, e.g. `"my_crate::server::handle"`.
///
/// ```
/// mod server {
///     pub fn handle() -> &'static str {
///         minitrace::full_name!()
///     }
/// }
/// assert!(server::handle().ends_with("::server::handle"));
/// ```
#[macro_export]
macro_rules! full_name {
    () => {{
        fn marker() {}
        $crate::__private::function_name($crate::__private::type_name_of(marker), true)
    }};
}

/// `"file:line:column"` of the place the macro is written.
///
/// ```
/// let location = minitrace::file_location!();
/// let mut parts = location.rsplitn(3, ':');
/// let (column, line) = (parts.next().unwrap(), parts.next().unwrap());
/// assert_eq!(column, "16", "{location}");
/// assert!(line.parse::<u32>().is_ok() && parts.next().unwrap().ends_with(".rs"), "{location}");
/// ```
#[macro_export]
macro_rules! file_location {
    () => {
        ::std::concat!(::std::file!(), ":", ::std::line!(), ":", ::std::column!())
    };
}

/// Support for the macros; not part of the public API.
#[doc(hidden)]
pub mod __private {
    #[inline]
    pub fn type_name_of<T>(_: T) -> &'static str {
        std::any::type_name::<T>()
    }

    /// `path::to::f::marker` (possibly inside `{{closure}}`s) to `f` or
    /// `path::to::f`.
    #[inline]
    pub fn function_name(marker: &'static str, full: bool) -> &'static str {
        let path = marker.strip_suffix("::marker").unwrap_or(marker);
        let mut path = path;
        while let Some(outer) = path.strip_suffix("::{{closure}}") {
            path = outer;
        }
        if full {
            path
        } else {
            path.rsplit("::").next().unwrap_or(path)
        }
    }
}
