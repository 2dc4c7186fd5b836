//! Code generation for `#[derive(State)]`: checking the input, then emitting each generated item.

mod field;
mod field_enum;
mod overwrite;
mod state_impl;
mod update;
mod update_serde;
mod value_cast;
mod with_reducer;

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, FieldsNamed, Ident};

use field::StateField;

/// Expand `#[derive(State)]` on `input`, or say why not.
pub(crate) fn derive(input: DeriveInput) -> syn::Result<TokenStream> {
    let mut errors = Errors::default();
    check_struct_attrs_and_generics(&input, &mut errors);
    let named = match named_fields(&input) {
        Ok(named) => named,
        Err(span) => {
            errors.push(syn::Error::new(
                span,
                "State can only be derived for a struct with named fields",
            ));
            return Err(errors.finish().unwrap_or_else(|| syn::Error::new(span, "")));
        }
    };
    let fields = StateField::read_all(&input.ident, named, &mut errors);
    check_field_id_collisions(&fields, &mut errors);
    overwrite::check_setter_collisions(&fields, &mut errors);
    if let Some(err) = errors.finish() {
        return Err(err);
    }
    Ok(generate(&input, &fields))
}

/// `#[reduce]` on the struct itself and generic parameters: both unsupported.
fn check_struct_attrs_and_generics(input: &DeriveInput, errors: &mut Errors) {
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("reduce")) {
        errors.push(syn::Error::new_spanned(
            attr,
            "`#[reduce(...)]` goes on the fields of a State struct, not on the struct",
        ));
    }
    if !input.generics.params.is_empty() {
        errors.push(syn::Error::new_spanned(
            &input.generics,
            "State does not support generic parameters yet",
        ));
    }
}

/// The struct's named fields, or where to point the error if `input` has none.
fn named_fields(input: &DeriveInput) -> Result<&FieldsNamed, Span> {
    match &input.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(named) => Ok(named),
            Fields::Unnamed(f) => Err(f.span()),
            Fields::Unit => Err(input.ident.span()),
        },
        Data::Enum(e) => Err(e.enum_token.span),
        Data::Union(u) => Err(u.union_token.span),
    }
}

/// Two fields whose names map to the same field-id variant.
fn check_field_id_collisions(fields: &[StateField], errors: &mut Errors) {
    for (i, a) in fields.iter().enumerate() {
        if let Some(b) = fields[..i].iter().find(|b| b.variant == a.variant) {
            errors.push(syn::Error::new(
                a.ident.span(),
                format!(
                    "fields `{}` and `{}` both map to the field id `{}`; rename one of them",
                    b.name, a.name, a.variant
                ),
            ));
        }
    }
}

/// Collects every error so the user sees them all at once.
#[derive(Default)]
struct Errors(Option<syn::Error>);

impl Errors {
    fn push(&mut self, err: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(err),
            None => self.0 = Some(err),
        }
    }

    fn finish(self) -> Option<syn::Error> {
        self.0
    }
}

/// The names of the two generated types of a state struct.
struct GeneratedNames<'a> {
    /// The state struct.
    state: &'a Ident,
    /// `<State>Update`.
    update: Ident,
    /// `<State>Field`.
    field_enum: Ident,
    /// `__<State>Overwrite`, the hidden struct of a write's overwritten fields.
    overwrite: Ident,
}

/// Every generated item: the update type, its overwrite struct, the field-id enum, and (in an
/// anonymous const) the value-type checks, the hidden `with` reducers, the update's conversions
/// and serde impls, and the `State` impl.
fn generate(input: &DeriveInput, fields: &[StateField]) -> TokenStream {
    let state = &input.ident;
    let vis = &input.vis;
    let names = GeneratedNames {
        state,
        update: format_ident!("{}Update", state),
        field_enum: format_ident!("{}Field", state),
        overwrite: format_ident!("__{}Overwrite", state),
    };

    let update_struct = update::update_struct(state, vis, &names.update, &names.overwrite, fields);
    let overwrite_struct =
        overwrite::overwrite_struct(vis, &names.overwrite, &names.update, fields);
    let update_impls = update_serde::update_impls(&names, fields);
    let field_enum_def = field_enum::field_enum(state, vis, &names.field_enum, fields);
    let checks = value_cast::value_traits(fields);
    let hidden = with_reducer::with_reducers(state, fields);
    let conversions = update::update_conversions(state, &names.update);
    let state_impl = state_impl::state_impl(&names, fields);

    quote! {
        #update_struct
        #overwrite_struct
        #field_enum_def

        #[allow(non_snake_case, non_camel_case_types, clippy::all)]
        const _: () = {
            #checks
            #hidden

            #conversions
            #update_impls

            #state_impl
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derive_rejects_what_it_cannot_handle() {
        let cases: [(DeriveInput, &str); 4] = [
            (
                syn::parse_quote!(
                    enum E {
                        A,
                    }
                ),
                "State can only be derived for a struct with named fields",
            ),
            (
                syn::parse_quote!(
                    struct T(i64);
                ),
                "State can only be derived for a struct with named fields",
            ),
            (
                syn::parse_quote!(
                    struct G<T> {
                        x: T,
                    }
                ),
                "State does not support generic parameters yet",
            ),
            (
                syn::parse_quote!(
                    #[reduce(append)]
                    struct S {
                        x: i64,
                    }
                ),
                "`#[reduce(...)]` goes on the fields of a State struct, not on the struct",
            ),
        ];
        for (input, message) in cases {
            match derive(input) {
                Ok(_) => panic!("expected `{message}`"),
                Err(e) => assert_eq!(e.to_string(), message),
            }
        }
    }

    #[test]
    fn derive_reports_every_field_error_at_once() {
        let input: DeriveInput = syn::parse_quote!(
            struct S {
                #[reduce()]
                a: i64,
                #[reduce(nope = x)]
                b: i64,
            }
        );
        let err = derive(input).err().map(|e| e.into_iter().count());
        assert_eq!(err, Some(2));
    }
}
