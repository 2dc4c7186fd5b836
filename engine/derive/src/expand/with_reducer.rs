//! The hidden zero-sized reducers generated for `#[reduce(with = path)]` fields.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{ExprPath, Ident};

use super::field::StateField;

/// The zero-sized reducers generated for `with = path` fields.
pub(super) fn with_reducers(state: &Ident, fields: &[StateField]) -> TokenStream {
    let r = quote!(::stategraph::reducers);
    let defs = fields.iter().filter_map(|f| {
        let (hidden, path) = f.with.as_ref()?;
        let ty = &f.ty;
        let path = resolve_self(path, state);
        let call = quote_spanned!(path.span()=> #path(&mut *__value, __write));
        Some(quote! {
            struct #hidden;

            #[automatically_derived]
            impl #r::Reducer for #hidden {
                type Value = #ty;
                type Update = #ty;

                fn reduce(
                    __value: &mut #ty,
                    __writes: ::std::vec::Vec<#ty>,
                    _: &mut #r::ReduceCtx,
                ) -> ::core::result::Result<#r::Change, #r::ReduceError> {
                    for __write in __writes {
                        #call;
                    }
                    ::core::result::Result::Ok(#r::Change::Replaced)
                }
            }
        })
    });
    quote!(#(#defs)*)
}

/// Replace a leading `Self` in a `with` path by the state type: the function is called from
/// inside the hidden reducer's impl, where `Self` means the reducer.
fn resolve_self(path: &ExprPath, state: &Ident) -> ExprPath {
    let mut path = path.clone();
    if path.qself.is_none() && path.path.leading_colon.is_none() {
        if let Some(first) = path.path.segments.first_mut() {
            if first.ident == "Self" {
                first.ident = Ident::new(&state.to_string(), first.ident.span());
            }
        }
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leading_self_becomes_the_state_type() -> syn::Result<()> {
        let state: Ident = syn::parse_str("Scores")?;
        let cases = [
            ("Self::keep_max", "Scores :: keep_max"),
            ("keep_max", "keep_max"),
            ("::Self::f", ":: Self :: f"),
            ("other::Self", "other :: Self"),
        ];
        for (path, resolved) in cases {
            let path: ExprPath = syn::parse_str(path)?;
            let out = resolve_self(&path, &state);
            assert_eq!(quote!(#out).to_string(), resolved);
        }
        Ok(())
    }
}
