//! One field of the state struct as the generated code sees it: its field-id variant and its
//! reducer, read from the `#[reduce(...)]` attribute.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::{ExprPath, FieldsNamed, Ident, Type};

use super::Errors;
use crate::attr::{field_reducer, Builtin, ReducerSpec};

/// One field of the state struct, with everything generated code needs about it.
pub(super) struct StateField {
    /// The field as written (possibly `r#type`).
    pub(super) ident: Ident,
    /// The field's name without `r#`: its stable name.
    pub(super) name: String,
    pub(super) ty: Type,
    /// The variant of the field-id enum.
    pub(super) variant: Ident,
    /// The reducer type, as a path usable in the generated code.
    pub(super) reducer: TokenStream,
    /// What the docs call the reducer.
    pub(super) reducer_doc: String,
    /// Where checks about the reducer point.
    pub(super) span: Span,
    /// For `with = path`: the hidden reducer type and the function.
    pub(super) with: Option<(Ident, ExprPath)>,
}

/// A field's reducer in the three forms the generated code needs.
struct ResolvedReducer {
    /// The reducer type.
    tokens: TokenStream,
    /// What the docs call it.
    doc: String,
    /// For `with = path`: the hidden reducer type and the function.
    with: Option<(Ident, ExprPath)>,
}

impl StateField {
    /// Every field of `named` whose `#[reduce]` attribute reads; the others' errors go to
    /// `errors`.
    pub(super) fn read_all(state: &Ident, named: &FieldsNamed, errors: &mut Errors) -> Vec<Self> {
        let mut fields = Vec::new();
        for (i, field) in named.named.iter().enumerate() {
            let Some(ident) = field.ident.clone() else {
                continue;
            };
            let name = ident.unraw().to_string();
            let variant = format_ident!("{}", variant_name(&name, i), span = ident.span());
            let reducer = match field_reducer(field) {
                Ok(r) => r,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            let ty = field.ty.clone();
            let span = reducer.span;
            let resolved = resolve_reducer(reducer.spec, state, &variant, &ty, span);
            fields.push(StateField {
                ident,
                name,
                ty,
                variant,
                reducer: resolved.tokens,
                reducer_doc: resolved.doc,
                span,
                with: resolved.with,
            });
        }
        fields
    }
}

/// The reducer type a spec names (for `with`, the hidden reducer generated for the field).
fn resolve_reducer(
    spec: ReducerSpec,
    state: &Ident,
    variant: &Ident,
    ty: &Type,
    span: Span,
) -> ResolvedReducer {
    match spec {
        ReducerSpec::Builtin(b) => ResolvedReducer {
            tokens: builtin_path(b, ty, span),
            doc: format!("`{}`", b.keyword()),
            with: None,
        },
        ReducerSpec::Type(t) => ResolvedReducer {
            doc: format!("`{}`", quote!(#t).to_string().replace(' ', "")),
            tokens: quote!(#t),
            with: None,
        },
        ReducerSpec::With(path) => {
            let hidden = format_ident!("__{}{}Reducer", state, variant, span = span);
            ResolvedReducer {
                doc: format!("`with = {}`", quote!(#path).to_string().replace(' ', "")),
                tokens: quote!(#hidden),
                with: Some((hidden, path)),
            }
        }
    }
}

/// `UpperCamelCase` of a field name, usable as an enum variant.
fn variant_name(field: &str, index: usize) -> String {
    let mut out = String::new();
    for part in field.split('_').filter(|p| !p.is_empty()) {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            out.extend(first.to_uppercase());
            out.push_str(chars.as_str());
        }
    }
    if out.is_empty() {
        return format!("Field{index}");
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert_str(0, "Field");
    }
    if out == "Self" {
        out.push('_');
    }
    out
}

/// The path of a built-in reducer over the field type `ty`.
fn builtin_path(b: Builtin, ty: &Type, span: Span) -> TokenStream {
    match b {
        Builtin::LastValue => quote_spanned!(span=> ::stategraph::reducers::LastValue<#ty>),
        Builtin::Append => quote_spanned!(span=> ::stategraph::reducers::Append<#ty>),
        Builtin::AddMessages => quote_spanned!(span=> ::stategraph::reducers::AddMessages<#ty>),
        Builtin::Artifacts => quote_spanned!(span=> ::stategraph::reducers::Artifacts),
        Builtin::Sandbox => quote_spanned!(span=> ::stategraph::reducers::SandboxReducer),
        Builtin::Promoted => quote_spanned!(span=> ::stategraph::reducers::PromotedReducer),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variant_names_are_upper_camel_case_and_valid_identifiers() {
        let cases = [
            ("messages", "Messages"),
            ("tool_calls", "ToolCalls"),
            ("_private", "Private"),
            ("a__b", "AB"),
            ("type", "Type"),
            ("field_1", "Field1"),
            ("_1", "Field1"),
            ("self_", "Self_"),
            ("__", "Field7"),
        ];
        for (field, variant) in cases {
            assert_eq!(variant_name(field, 7), variant, "field `{field}`");
        }
    }

    #[test]
    fn a_with_field_gets_a_hidden_reducer_named_after_state_and_variant() -> syn::Result<()> {
        let named: FieldsNamed = syn::parse_str("{ #[reduce(with = Self::keep)] best: u32 }")?;
        let state: Ident = syn::parse_str("Scores")?;
        let mut errors = Errors::default();
        let fields = StateField::read_all(&state, &named, &mut errors);
        assert!(errors.finish().is_none());
        let [field] = fields.as_slice() else {
            panic!("expected one field, got {}", fields.len());
        };
        assert_eq!(field.variant.to_string(), "Best");
        assert_eq!(field.reducer.to_string(), "__ScoresBestReducer");
        assert_eq!(field.reducer_doc, "`with = Self::keep`");
        Ok(())
    }
}
