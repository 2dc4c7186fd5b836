//! Parsing of the `#[reduce(...)]` field attribute.

use proc_macro2::Span;
use syn::ext::IdentExt;
use syn::parse::ParseStream;
use syn::spanned::Spanned;
use syn::{Attribute, ExprPath, Ident, LitStr, Meta, Token, Type};

/// The built-in reducers selected by a bare keyword.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Builtin {
    LastValue,
    Append,
    AddMessages,
    Artifacts,
    Sandbox,
    Promoted,
}

impl Builtin {
    /// Every keyword, in the order the docs and error messages list them.
    const ALL: &'static [(&'static str, Builtin)] = &[
        ("last_value", Builtin::LastValue),
        ("append", Builtin::Append),
        ("add_messages", Builtin::AddMessages),
        ("artifacts", Builtin::Artifacts),
        ("sandbox", Builtin::Sandbox),
        ("promoted", Builtin::Promoted),
    ];

    fn from_keyword(word: &str) -> Option<Builtin> {
        Builtin::ALL
            .iter()
            .find(|(name, _)| *name == word)
            .map(|(_, b)| *b)
    }

    /// The keyword that selects this reducer.
    pub(crate) fn keyword(self) -> &'static str {
        Builtin::ALL
            .iter()
            .find(|(_, b)| *b == self)
            .map_or("last_value", |(name, _)| name)
    }

    fn keyword_list() -> String {
        Builtin::ALL
            .iter()
            .map(|(name, _)| format!("`{name}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// How one field reduces its writes.
pub(crate) enum ReducerSpec {
    /// A built-in reducer, by keyword (or by default: `LastValue`).
    Builtin(Builtin),
    /// A reducer type given by path.
    Type(Box<Type>),
    /// `with = path`: a generated reducer that folds each write with the function.
    With(ExprPath),
}

/// The parsed `#[reduce]` attribute of one field.
pub(crate) struct FieldReducer {
    pub(crate) spec: ReducerSpec,
    /// Where generated checks about this reducer point: the attribute's argument, or the
    /// field's type when the field has no attribute.
    pub(crate) span: Span,
}

const EXPECTED: &str = "expected a reducer: a built-in (`last_value`, `append`, `add_messages`, \
`artifacts`, `sandbox`, `promoted`), a reducer type path, or `with = path::to::merge_fn`";

/// The reducer of `field`: its single `#[reduce(...)]` attribute, or last value.
pub(crate) fn field_reducer(field: &syn::Field) -> syn::Result<FieldReducer> {
    let mut found: Option<FieldReducer> = None;
    let mut errors: Option<syn::Error> = None;
    let mut push = |err: syn::Error| match &mut errors {
        Some(all) => all.combine(err),
        None => errors = Some(err),
    };
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("reduce")) {
        if found.is_some() {
            push(syn::Error::new_spanned(
                attr,
                "duplicate `#[reduce]` attribute: a field has exactly one reducer",
            ));
            continue;
        }
        match parse_attr(attr) {
            Ok(r) => found = Some(r),
            Err(e) => {
                push(e);
                // Do not report the next attribute as a duplicate of a broken one.
                found = Some(FieldReducer {
                    spec: ReducerSpec::Builtin(Builtin::LastValue),
                    span: attr.span(),
                });
            }
        }
    }
    if let Some(err) = errors {
        return Err(err);
    }
    Ok(found.unwrap_or_else(|| FieldReducer {
        spec: ReducerSpec::Builtin(Builtin::LastValue),
        span: field.ty.span(),
    }))
}

fn parse_attr(attr: &Attribute) -> syn::Result<FieldReducer> {
    let list = match &attr.meta {
        Meta::List(list) => list,
        Meta::Path(_) | Meta::NameValue(_) => {
            return Err(syn::Error::new_spanned(
                attr,
                format!("{EXPECTED}, e.g. `#[reduce(append)]`"),
            ))
        }
    };
    if list.tokens.is_empty() {
        return Err(syn::Error::new_spanned(
            attr,
            format!("empty `#[reduce()]`: {EXPECTED}"),
        ));
    }
    let spec = list.parse_args_with(parse_spec)?;
    Ok(FieldReducer {
        spec,
        span: list.tokens.span(),
    })
}

fn parse_spec(input: ParseStream<'_>) -> syn::Result<ReducerSpec> {
    let spec = if input.peek(Ident::peek_any) && input.peek2(Token![=]) {
        let key = input.call(Ident::parse_any)?;
        let eq: Token![=] = input.parse()?;
        if key != "with" {
            return Err(syn::Error::new(
                key.span(),
                format!(
                    "unknown option `{}`: the only option is `with = path::to::merge_fn`",
                    key.unraw()
                ),
            ));
        }
        parse_with_path(input, &key, eq)?
    } else if input.peek(Ident) && is_bare_with(input) {
        let key: Ident = input.parse()?;
        return Err(syn::Error::new(
            key.span(),
            "`with` needs a function path: `#[reduce(with = path::to::merge_fn)]`, \
             where `fn merge_fn(current: &mut FieldType, update: FieldType)`",
        ));
    } else {
        let ty: Type = input
            .parse()
            .map_err(|e| syn::Error::new(e.span(), EXPECTED))?;
        match bare_ident(&ty) {
            Some(word) => match Builtin::from_keyword(&word) {
                Some(b) => ReducerSpec::Builtin(b),
                None if word.chars().all(|c| c.is_ascii_lowercase() || c == '_') => {
                    return Err(syn::Error::new_spanned(
                        &ty,
                        format!(
                            "unknown reducer `{word}`: expected one of {}, a reducer type path, \
                             or `with = path::to::merge_fn`",
                            Builtin::keyword_list()
                        ),
                    ));
                }
                None => ReducerSpec::Type(Box::new(ty)),
            },
            None => ReducerSpec::Type(Box::new(ty)),
        }
    };
    if !input.is_empty() {
        return Err(
            input.error("unexpected tokens after the reducer: a field takes exactly one reducer")
        );
    }
    Ok(spec)
}

fn parse_with_path(input: ParseStream<'_>, key: &Ident, eq: Token![=]) -> syn::Result<ReducerSpec> {
    if input.is_empty() || input.peek(Token![,]) {
        let span = key.span().join(eq.span).unwrap_or_else(|| key.span());
        return Err(syn::Error::new(
            span,
            "`with` needs a function path: `#[reduce(with = path::to::merge_fn)]`",
        ));
    }
    if input.peek(LitStr) {
        let lit: LitStr = input.parse()?;
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "`with` takes a function path, not a string: write `with = {}`",
                lit.value()
            ),
        ));
    }
    let path: ExprPath = input.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            "`with` needs a function path: `#[reduce(with = path::to::merge_fn)]`",
        )
    })?;
    Ok(ReducerSpec::With(path))
}

/// Whether the input is the bare word `with`, alone or followed by a comma.
fn is_bare_with(input: ParseStream<'_>) -> bool {
    let fork = input.fork();
    match fork.parse::<Ident>() {
        Ok(ident) => ident == "with" && (fork.is_empty() || fork.peek(Token![,])),
        Err(_) => false,
    }
}

/// The single identifier `ty` consists of, if it is one (no `::`, no generics).
fn bare_ident(ty: &Type) -> Option<String> {
    match ty {
        Type::Path(tp) if tp.qself.is_none() => tp.path.get_ident().map(|i| i.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(field: syn::FieldsNamed) -> syn::Result<FieldReducer> {
        let field = field
            .named
            .first()
            .ok_or_else(|| syn::Error::new(Span::call_site(), "test input has no field"))?;
        field_reducer(field)
    }

    fn err(field: syn::FieldsNamed) -> String {
        match parse(field) {
            Ok(_) => String::from("<no error>"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn no_attribute_is_last_value() -> syn::Result<()> {
        let r = parse(syn::parse_quote!({ x: i64 }))?;
        assert!(matches!(r.spec, ReducerSpec::Builtin(Builtin::LastValue)));
        Ok(())
    }

    #[test]
    fn keywords_select_builtins_and_other_paths_are_types() -> syn::Result<()> {
        for (name, builtin) in Builtin::ALL {
            let ident = Ident::new(name, Span::call_site());
            let r = parse(syn::parse_quote!({ #[reduce(#ident)] x: Vec<i64> }))?;
            assert!(matches!(r.spec, ReducerSpec::Builtin(b) if b == *builtin));
        }
        let r = parse(syn::parse_quote!({ #[reduce(my::Max<i64>)] x: i64 }))?;
        assert!(matches!(r.spec, ReducerSpec::Type(_)));
        let r = parse(syn::parse_quote!({ #[reduce(Max)] x: i64 }))?;
        assert!(matches!(r.spec, ReducerSpec::Type(_)));
        let r = parse(syn::parse_quote!({ #[reduce(with = Self::merge)] x: i64 }))?;
        assert!(matches!(r.spec, ReducerSpec::With(_)));
        Ok(())
    }

    #[test]
    fn misuse_is_an_error_naming_the_problem() {
        assert!(err(syn::parse_quote!({ #[reduce()] x: i64 })).starts_with("empty `#[reduce()]`"));
        assert!(err(syn::parse_quote!({ #[reduce] x: i64 })).starts_with("expected a reducer"));
        assert!(err(syn::parse_quote!({ #[reduce = "append"] x: i64 }))
            .starts_with("expected a reducer"));
        assert!(
            err(syn::parse_quote!({ #[reduce(append)] #[reduce(append)] x: i64 }))
                .starts_with("duplicate `#[reduce]`")
        );
        assert!(err(syn::parse_quote!({ #[reduce(with)] x: i64 }))
            .starts_with("`with` needs a function path"));
        assert!(err(syn::parse_quote!({ #[reduce(with = )] x: i64 }))
            .starts_with("`with` needs a function path"));
        assert!(
            err(syn::parse_quote!({ #[reduce(with = "f")] x: i64 })).contains("write `with = f`")
        );
        assert!(err(syn::parse_quote!({ #[reduce(merge = f)] x: i64 }))
            .starts_with("unknown option `merge`"));
        assert!(err(syn::parse_quote!({ #[reduce(apend)] x: i64 }))
            .starts_with("unknown reducer `apend`"));
        assert!(
            err(syn::parse_quote!({ #[reduce(append, with = f)] x: i64 }))
                .starts_with("unexpected tokens after the reducer")
        );
    }
}
