//! The attribute's arguments:
//! `("name", name = "..", short_name = true, enter_on_poll = true, properties = { "k": "v" })`.

use proc_macro2::Span;
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::{braced, Ident, LitBool, LitStr, Token};

use crate::format::{self, PropertyValue};

const EXPECTED: &str =
    "`name = \"..\"`, `short_name = true`, `enter_on_poll = true` or `properties = { .. }`";

/// A boolean option, with where its key is written (for errors).
pub(crate) struct Flag {
    pub key: Span,
    pub value: bool,
}

impl Flag {
    /// Whether the option is given and `true`.
    pub(crate) fn is_set(flag: Option<&Flag>) -> bool {
        flag.is_some_and(|flag| flag.value)
    }
}

/// One entry of `properties = { .. }`.
pub(crate) struct Property {
    pub key: LitStr,
    pub value: PropertyValue,
}

/// Every option of `#[trace]` and `#[trace_async]`, as written.
#[derive(Default)]
pub(crate) struct Options {
    pub name: Option<LitStr>,
    /// Whether the name was given positionally, as `#[trace("name")]`.
    name_is_positional: bool,
    pub short_name: Option<Flag>,
    pub enter_on_poll: Option<Flag>,
    pub properties: Option<Vec<Property>>,
}

impl Parse for Options {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut options = Options::default();

        // `#[trace("name")]`: the name may come first, without a key.
        if input.peek(LitStr) {
            options.name = Some(parse_name(input)?);
            options.name_is_positional = true;
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
        }

        while !input.is_empty() {
            if input.peek(LitStr) {
                return Err(input.error("a span name without `name =` must be the first argument"));
            }
            if !input.peek(Ident::peek_any) {
                return Err(input.error(format!("expected an option: {EXPECTED}")));
            }
            let key = input.call(Ident::parse_any)?;
            let duplicate = match key.to_string().as_str() {
                "name" => options.name.is_some(),
                "short_name" => options.short_name.is_some(),
                "enter_on_poll" => options.enter_on_poll.is_some(),
                "properties" => options.properties.is_some(),
                _ => {
                    return Err(syn::Error::new(
                        key.span(),
                        format!("unknown option `{key}`; expected {EXPECTED}"),
                    ))
                }
            };
            if duplicate {
                let message = if key == "name" && options.name_is_positional {
                    "duplicate option `name`: the span name is already given as the first argument"
                        .to_string()
                } else {
                    format!("duplicate option `{key}`")
                };
                return Err(syn::Error::new(key.span(), message));
            }
            if !input.peek(Token![=]) {
                let usage = match key.to_string().as_str() {
                    "name" => "name = \"..\"",
                    "short_name" => "short_name = true",
                    "enter_on_poll" => "enter_on_poll = true",
                    _ => "properties = { \"key\": \"value\" }",
                };
                return Err(syn::Error::new(
                    key.span(),
                    format!("expected `=` after `{key}`, as in `{usage}`"),
                ));
            }
            input.parse::<Token![=]>()?;
            match key.to_string().as_str() {
                "name" => options.name = Some(parse_name(input)?),
                "short_name" => options.short_name = Some(parse_flag(&key, input)?),
                "enter_on_poll" => options.enter_on_poll = Some(parse_flag(&key, input)?),
                _ => options.properties = Some(parse_properties(input)?),
            }
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }

        if options.name.is_some() {
            if let Some(flag) = options.short_name.as_ref().filter(|flag| flag.value) {
                return Err(syn::Error::new(
                    flag.key,
                    "`short_name` cannot be used together with a span name: the span is named by the name given",
                ));
            }
        }
        if options.properties.is_some() {
            if let Some(flag) = options.enter_on_poll.as_ref().filter(|flag| flag.value) {
                return Err(syn::Error::new(
                    flag.key,
                    "`enter_on_poll` cannot be used together with `properties`: \
                     the spans it records on each poll carry no properties",
                ));
            }
        }
        Ok(options)
    }
}

fn parse_name(input: ParseStream) -> syn::Result<LitStr> {
    let name: LitStr = input.parse()?;
    if name.value().is_empty() {
        return Err(syn::Error::new(name.span(), "the span name cannot be empty"));
    }
    Ok(name)
}

fn parse_flag(key: &Ident, input: ParseStream) -> syn::Result<Flag> {
    let value: LitBool = input.parse()?;
    Ok(Flag { key: key.span(), value: value.value })
}

/// `{ "key": "value {arg:?}", .. }`, a trailing comma allowed.
fn parse_properties(input: ParseStream) -> syn::Result<Vec<Property>> {
    let content;
    braced!(content in input);
    let mut properties: Vec<Property> = Vec::new();
    while !content.is_empty() {
        if !content.peek(LitStr) {
            return Err(content.error("property keys must be string literals, as in `\"key\": \"value\"`"));
        }
        let key: LitStr = content.parse()?;
        if properties.iter().any(|property| property.key.value() == key.value()) {
            return Err(syn::Error::new(key.span(), format!("duplicate property key {:?}", key.value())));
        }
        content.parse::<Token![:]>()?;
        if !content.peek(LitStr) {
            return Err(content.error(
                "property values must be string literals: format strings that may name the fn's arguments",
            ));
        }
        let value = format::parse_value(content.parse()?)?;
        properties.push(Property { key, value });
        if content.is_empty() {
            break;
        }
        content.parse::<Token![,]>()?;
    }
    Ok(properties)
}
