//! The per-field conversion traits between a field's type and its reducer's `Value` type:
//! implemented only when the two are the same type, so a mismatch is one error that names the
//! field and points at its `#[reduce]` attribute.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::Ident;

use super::field::StateField;

/// The name of the conversion trait of the field at `index`.
fn value_trait(index: usize) -> Ident {
    format_ident!("__ValueOfField{}", index)
}

/// One conversion trait per field, with its blanket identity impl.
pub(super) fn value_traits(fields: &[StateField]) -> TokenStream {
    let traits = fields.iter().enumerate().map(|(i, f)| {
        let trait_name = value_trait(i);
        let message = format!(
            "the reducer of field `{}` reduces values of type `{{Self}}`, not the field's type `{{T}}`",
            f.name
        );
        let label = format!(
            "this reducer's `Value` is `{{Self}}`, but field `{}` is a `{{T}}`",
            f.name
        );
        quote! {
            #[diagnostic::on_unimplemented(
                message = #message,
                label = #label,
                note = "a field's reducer must implement `stategraph::reducers::Reducer` with `Value` = the field's type"
            )]
            trait #trait_name<T> {
                fn __from_field_mut(value: &mut T) -> &mut Self;
                fn __from_field(value: &T) -> &Self;
                fn __into_field(self) -> T;
                fn __from_field_owned(value: T) -> Self;
            }

            impl<T> #trait_name<T> for T {
                #[inline(always)]
                fn __from_field_mut(value: &mut T) -> &mut T {
                    value
                }
                #[inline(always)]
                fn __from_field(value: &T) -> &T {
                    value
                }
                #[inline(always)]
                fn __into_field(self) -> T {
                    self
                }
                #[inline(always)]
                fn __from_field_owned(value: T) -> T {
                    value
                }
            }
        }
    });
    quote!(#(#traits)*)
}

/// `<<Reducer>::Value as __ValueOfFieldN<FieldType>>::method`, spanned to the attribute.
pub(super) fn value_cast(index: usize, f: &StateField, method: &str) -> TokenStream {
    let trait_name = value_trait(index);
    let reducer = &f.reducer;
    let ty = &f.ty;
    let method = Ident::new(method, f.span);
    quote_spanned!(f.span=>
        <<#reducer as ::stategraph::reducers::Reducer>::Value as #trait_name<#ty>>::#method
    )
}
