//! Property values: format strings checked for balanced braces at expansion
//! time, so that a stray brace is reported on the attribute rather than as a
//! `format!` error on generated code.

use syn::LitStr;

/// A property value, ready for code generation.
pub(crate) enum PropertyValue {
    /// No placeholders: the text with `{{` and `}}` unescaped, used as is.
    Constant(String),
    /// At least one placeholder: the literal as written, for `format!`, so
    /// that the names it captures resolve among the fn's arguments and
    /// errors point at it.
    Format(LitStr),
}

/// Checks `literal`: `{{` and `}}` are literal braces, `{...}` is a
/// placeholder, and any other brace is an error on the literal.
pub(crate) fn parse_value(literal: LitStr) -> syn::Result<PropertyValue> {
    let text = literal.value();
    let unbalanced =
        |what: &str| syn::Error::new(literal.span(), format!("unbalanced braces in property value: {what}"));

    let mut constant = String::with_capacity(text.len());
    let mut placeholders = 0;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                constant.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                constant.push('}');
            }
            '{' => {
                loop {
                    match chars.next() {
                        Some('}') => break,
                        Some('{') => {
                            return Err(unbalanced(
                                "`{` inside a placeholder; write `{{` for a literal brace",
                            ))
                        }
                        Some(_) => {}
                        None => return Err(unbalanced("unmatched `{`; write `{{` for a literal brace")),
                    }
                }
                placeholders += 1;
            }
            '}' => return Err(unbalanced("unmatched `}`; write `}}` for a literal brace")),
            c => constant.push(c),
        }
    }
    if placeholders == 0 {
        Ok(PropertyValue::Constant(constant))
    } else {
        Ok(PropertyValue::Format(literal))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Option<String>, String> {
        let literal = LitStr::new(text, proc_macro2::Span::call_site());
        match parse_value(literal) {
            Ok(PropertyValue::Constant(constant)) => Ok(Some(constant)),
            Ok(PropertyValue::Format(_)) => Ok(None),
            Err(error) => Err(error.to_string()),
        }
    }

    #[test]
    fn constants_are_unescaped() {
        assert_eq!(parse(""), Ok(Some(String::new())));
        assert_eq!(parse("plain"), Ok(Some("plain".into())));
        assert_eq!(parse("{{literal}}"), Ok(Some("{literal}".into())));
        assert_eq!(parse("a {{{{ b }}}}"), Ok(Some("a {{ b }}".into())));
    }

    #[test]
    fn placeholders_need_format() {
        assert_eq!(parse("{a}"), Ok(None));
        assert_eq!(parse("x = {x:?}, {{escaped}}"), Ok(None));
        assert_eq!(parse("{{{a}}}"), Ok(None));
        assert_eq!(parse("{a:>8}"), Ok(None));
    }

    #[test]
    fn unbalanced_braces_are_errors() {
        for text in ["{", "}", "a {b", "a} b", "{a}}", "{{}", "{a{b}}", "}{"] {
            let error = parse(text).expect_err(text);
            assert!(error.starts_with("unbalanced braces in property value"), "{text}: {error}");
        }
    }
}
