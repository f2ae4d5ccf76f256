//! The expansion: which kind of fn is traced, and the code around its body.

use proc_macro2::{Span, TokenStream};
use quote::{quote, ToTokens, TokenStreamExt};
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::{
    braced, token, Attribute, Block, Expr, Ident, LitStr, ReturnType, Signature, Stmt, Token, Type,
    TypeParamBound, Visibility,
};

use crate::format::PropertyValue;
use crate::options::{Flag, Options};

/// Which attribute is expanded.
#[derive(Clone, Copy)]
pub(crate) enum Flavor {
    /// `#[trace]`: any fn.
    Trace,
    /// `#[trace_async]`: async fns only.
    TraceAsync,
}

impl Flavor {
    fn attribute(self) -> &'static str {
        match self {
            Flavor::Trace => "`#[trace]`",
            Flavor::TraceAsync => "`#[trace_async]`",
        }
    }
}

/// Expands the attribute. On an error the item is emitted unchanged beside
/// the error, so that the error is the only one the user sees.
pub(crate) fn expand(flavor: Flavor, args: TokenStream, item: TokenStream) -> TokenStream {
    match try_expand(flavor, args, item.clone()) {
        Ok(expanded) => expanded,
        Err(error) => {
            let mut output = error.to_compile_error();
            output.extend(item);
            output
        }
    }
}

fn try_expand(flavor: Flavor, args: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let options: Options = syn::parse2(args)?;
    let mut function = (|input: ParseStream| TracedFn::parse(flavor, input)).parse2(item)?;
    let kind = Kind::of(&mut function);

    if let Some(constness) = &function.sig.constness {
        return Err(syn::Error::new(
            constness.span,
            format!(
                "{} cannot be applied to a `const fn`: spans are started at run time",
                flavor.attribute()
            ),
        ));
    }
    if let Kind::Sync = kind {
        if let Flavor::TraceAsync = flavor {
            return Err(syn::Error::new(
                function.sig.fn_token.span,
                "`#[trace_async]` applies only to async fns (`async fn`, a fn returning `impl Future`, \
                 or an `#[async_trait]` method); use `#[trace]` on a sync fn",
            ));
        }
        if let Some(flag) = options.enter_on_poll.as_ref().filter(|flag| flag.value) {
            return Err(syn::Error::new(
                flag.key,
                "`enter_on_poll` applies only to async fns (`async fn`, a fn returning `impl Future`, \
                 or an `#[async_trait]` method)",
            ));
        }
    }

    let name = span_name(&options, &function.sig.ident);
    let properties = span_properties(&options);
    let enter_on_poll = Flag::is_set(options.enter_on_poll.as_ref());
    let span = Ident::new("__minitrace_span", Span::mixed_site());

    let body = match kind {
        Kind::Sync => {
            let guard = Ident::new("__minitrace_guard", Span::mixed_site());
            let stmts = &function.stmts;
            quote! {
                let #guard = ::minitrace::local::LocalSpan::enter_with_local_parent(#name) #properties;
                #(#stmts)*
            }
        }
        Kind::AsyncFn => {
            let inner = function.braced(quote!(async move), &function.stmts);
            if enter_on_poll {
                quote! {
                    ::minitrace::future::FutureExt::enter_on_poll(#inner, #name).await
                }
            } else {
                quote! {
                    let #span = ::minitrace::Span::enter_with_local_parent(#name) #properties;
                    ::minitrace::future::FutureExt::in_span(#inner, #span).await
                }
            }
        }
        Kind::AsyncTrait(index) => {
            // Replace the argument of `Box::pin(async move { .. })`.
            let argument = boxed_async_block(&mut function.stmts[index]).expect("checked by Kind::of");
            let future = std::mem::replace(argument, Expr::Verbatim(TokenStream::new()));
            *argument = Expr::Verbatim(if enter_on_poll {
                quote! { ::minitrace::future::FutureExt::enter_on_poll(#future, #name) }
            } else {
                quote! {{
                    let #span = ::minitrace::Span::enter_with_local_parent(#name) #properties;
                    ::minitrace::future::FutureExt::in_span(#future, #span)
                }}
            });
            let stmts = &function.stmts;
            quote! { #(#stmts)* }
        }
        Kind::ImplFuture => {
            // The body runs in a closure called at once, so that a `return`
            // in it still gives the future to be traced.
            let call = function.braced(quote!(move ||), &function.stmts);
            let future = Ident::new("__minitrace_future", Span::mixed_site());
            if enter_on_poll {
                quote! {
                    #[allow(clippy::redundant_closure_call)]
                    let #future = (#call)();
                    ::minitrace::future::FutureExt::enter_on_poll(#future, #name)
                }
            } else {
                // The span is also the local parent while the future is built.
                let guard = Ident::new("__minitrace_guard", Span::mixed_site());
                quote! {
                    let #span = ::minitrace::Span::enter_with_local_parent(#name) #properties;
                    let #guard = ::minitrace::Span::set_local_parent(&#span);
                    #[allow(clippy::redundant_closure_call)]
                    let #future = (#call)();
                    ::std::mem::drop(#guard);
                    ::minitrace::future::FutureExt::in_span(#future, #span)
                }
            }
        }
    };

    let TracedFn { attrs, vis, defaultness, sig, brace, inner_attrs, .. } = &function;
    let mut output = quote! { #(#attrs)* #vis #defaultness #sig };
    brace.surround(&mut output, |tokens| {
        tokens.append_all(inner_attrs);
        tokens.extend(body);
    });
    Ok(output)
}

/// The span name, a `&'static str`: the name given, the fn's name for
/// `short_name`, or else `full_name!()`.
///
/// The short name is the string `func_name!()` would return in the fn (its
/// name, without `r#`), written as a literal: it costs nothing at run time,
/// where `func_name!()` trims a type name on every call, even with tracing
/// compiled out.
fn span_name(options: &Options, ident: &Ident) -> TokenStream {
    match &options.name {
        Some(name) => name.to_token_stream(),
        None if Flag::is_set(options.short_name.as_ref()) => {
            LitStr::new(&ident.unraw().to_string(), ident.span()).to_token_stream()
        }
        None => quote!(::minitrace::full_name!()),
    }
}

/// `.with_properties(|| [..])`, or nothing. The closure runs only for a
/// span that records, so a disabled or unparented span formats nothing.
fn span_properties(options: &Options) -> TokenStream {
    let Some(properties) = options.properties.as_ref().filter(|properties| !properties.is_empty()) else {
        return TokenStream::new();
    };
    let entries = properties.iter().map(|property| {
        let key = &property.key;
        let value = match &property.value {
            PropertyValue::Constant(text) => quote!(::std::borrow::Cow::Borrowed(#text)),
            PropertyValue::Format(literal) => quote!(::std::borrow::Cow::Owned(::std::format!(#literal))),
        };
        quote! {
            (::std::borrow::Cow::<'static, str>::Borrowed(#key), #value)
        }
    });
    quote! { .with_properties(|| [#(#entries),*]) }
}

/// A fn the attribute can trace, kept as parsed so that everything but its
/// body is emitted unchanged (with the user's spans).
struct TracedFn {
    attrs: Vec<Attribute>,
    vis: Visibility,
    defaultness: Option<Token![default]>,
    sig: Signature,
    brace: token::Brace,
    inner_attrs: Vec<Attribute>,
    stmts: Vec<Stmt>,
}

impl TracedFn {
    /// A free fn, a method in an impl, or a method with a default body in a
    /// trait; anything else is an error on its first token.
    fn parse(flavor: Flavor, input: ParseStream) -> syn::Result<TracedFn> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis: Visibility = input.parse()?;
        let defaultness =
            if input.peek(Token![default]) && !input.peek2(Token![!]) { Some(input.parse()?) } else { None };
        if input.fork().parse::<Signature>().is_err() {
            return Err(input.error(format!("{} can only be applied to a fn", flavor.attribute())));
        }
        let sig: Signature = input.parse()?;
        if input.peek(Token![;]) {
            let semi: Token![;] = input.parse()?;
            return Err(syn::Error::new(
                semi.span,
                format!("{} needs a fn body to trace; this fn has none", flavor.attribute()),
            ));
        }
        let content;
        let brace = braced!(content in input);
        let inner_attrs = content.call(Attribute::parse_inner)?;
        let stmts = content.call(Block::parse_within)?;
        Ok(TracedFn { attrs, vis, defaultness, sig, brace, inner_attrs, stmts })
    }

    /// `#prefix { #stmts }`, the braces keeping the body's spans.
    fn braced(&self, prefix: TokenStream, stmts: &[Stmt]) -> TokenStream {
        let mut tokens = prefix;
        self.brace.surround(&mut tokens, |tokens| tokens.append_all(stmts));
        tokens
    }
}

/// How the fn's work is run, which decides the expansion.
enum Kind {
    /// Runs when called: a `LocalSpan` guard for the call.
    Sync,
    /// `async fn`: a `Span` bound to the body's future.
    AsyncFn,
    /// A sync fn whose last statement (at this index) is
    /// `Box::pin(async move { .. })`, as `#[async_trait]` writes methods:
    /// the boxed future is traced.
    AsyncTrait(usize),
    /// A sync fn returning `impl Future`: the future it returns is traced.
    ImplFuture,
}

impl Kind {
    fn of(function: &mut TracedFn) -> Kind {
        if function.sig.asyncness.is_some() {
            return Kind::AsyncFn;
        }
        if let Some(index) = function.stmts.len().checked_sub(1) {
            if boxed_async_block(&mut function.stmts[index]).is_some() {
                return Kind::AsyncTrait(index);
            }
        }
        match &function.sig.output {
            ReturnType::Type(_, ty) if is_impl_future(ty) => Kind::ImplFuture,
            _ => Kind::Sync,
        }
    }
}

/// The `async move { .. }` in a tail expression `Box::pin(async move { .. })`
/// (with any path to `Box`).
fn boxed_async_block(stmt: &mut Stmt) -> Option<&mut Expr> {
    let Stmt::Expr(expr, None) = stmt else {
        return None;
    };
    let Expr::Call(call) = ungroup(expr) else {
        return None;
    };
    let Expr::Path(path) = ungroup(&mut call.func) else {
        return None;
    };
    let mut segments = path.path.segments.iter().rev();
    let is_box_pin = segments.next().is_some_and(|segment| segment.ident == "pin")
        && segments.next().is_some_and(|segment| segment.ident == "Box");
    if !is_box_pin || call.args.len() != 1 {
        return None;
    }
    let argument = call.args.first_mut()?;
    match ungroup(argument) {
        Expr::Async(block) if block.capture.is_some() => Some(argument),
        _ => None,
    }
}

fn ungroup(mut expr: &mut Expr) -> &mut Expr {
    loop {
        match expr {
            Expr::Group(group) => expr = &mut group.expr,
            Expr::Paren(paren) => expr = &mut paren.expr,
            _ => return expr,
        }
    }
}

/// `impl Future<..> (+ ..)`, with any path to `Future`.
fn is_impl_future(ty: &Type) -> bool {
    match ty {
        Type::ImplTrait(bounds) => bounds.bounds.iter().any(|bound| {
            matches!(bound, TypeParamBound::Trait(bound)
                if bound.path.segments.last().is_some_and(|segment| segment.ident == "Future"))
        }),
        Type::Group(group) => is_impl_future(&group.elem),
        Type::Paren(paren) => is_impl_future(&paren.elem),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(item: TokenStream) -> &'static str {
        let mut function = (|input: ParseStream| TracedFn::parse(Flavor::Trace, input)).parse2(item).unwrap();
        match Kind::of(&mut function) {
            Kind::Sync => "sync",
            Kind::AsyncFn => "async fn",
            Kind::AsyncTrait(_) => "async-trait",
            Kind::ImplFuture => "impl Future",
        }
    }

    #[test]
    fn kinds() {
        assert_eq!(
            kind(quote!(
                fn f() {}
            )),
            "sync"
        );
        assert_eq!(
            kind(quote!(
                fn f() -> Box<dyn Future<Output = ()>> {
                    todo!()
                }
            )),
            "sync"
        );
        assert_eq!(
            kind(quote!(
                async fn f() {}
            )),
            "async fn"
        );
        assert_eq!(
            kind(quote!(
                pub(crate) async unsafe fn f() {}
            )),
            "async fn"
        );
        assert_eq!(
            kind(quote!(
                fn f() -> impl Future<Output = ()> {
                    async {}
                }
            )),
            "impl Future"
        );
        assert_eq!(
            kind(quote!(
                fn f() -> impl std::future::Future<Output = ()> + Send {
                    async {}
                }
            )),
            "impl Future"
        );
        assert_eq!(
            kind(quote!(
                fn f() -> Pin<Box<dyn Future<Output = ()>>> {
                    Box::pin(async move {})
                }
            )),
            "async-trait"
        );
        assert_eq!(
            kind(quote!(
                fn f() -> X {
                    let x = 1;
                    ::std::boxed::Box::pin(async move { x })
                }
            )),
            "async-trait"
        );
        // Not the shape: no `move`, not the tail, or not `Box::pin`.
        assert_eq!(
            kind(quote!(
                fn f() -> X {
                    Box::pin(async {})
                }
            )),
            "sync"
        );
        assert_eq!(
            kind(quote!(
                fn f() -> X {
                    let f = Box::pin(async move {});
                    f
                }
            )),
            "sync"
        );
        assert_eq!(
            kind(quote!(
                fn f() -> X {
                    Arc::pin(async move {})
                }
            )),
            "sync"
        );
    }

    #[test]
    fn not_a_fn() {
        let error = (|input: ParseStream| TracedFn::parse(Flavor::Trace, input))
            .parse2(quote!(
                #[derive(Debug)]
                pub struct S;
            ))
            .err()
            .unwrap();
        assert_eq!(error.to_string(), "`#[trace]` can only be applied to a fn");
    }
}
