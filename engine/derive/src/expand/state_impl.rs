//! The generated `stategraph::state::State` impl: `apply` (reducing writes field by field),
//! `written`, and the per-field codec methods.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::Ident;

use super::field::StateField;
use super::value_cast::value_cast;
use super::GeneratedNames;

/// The tokens each generated method repeats once per field, in declaration order.
struct PerField<'a> {
    /// The field idents.
    idents: Vec<&'a Ident>,
    /// The field-id variants.
    variants: Vec<&'a Ident>,
    /// The field types.
    tys: Vec<&'a syn::Type>,
    /// `<Reducer as Reducer>`, spanned to the attribute.
    reducers: Vec<TokenStream>,
    /// The field's value as `&mut` its reducer's `Value`.
    field_mut: Vec<TokenStream>,
    /// The field's value as `&` its reducer's `Value`.
    field_ref: Vec<TokenStream>,
    /// A decoded reducer `Value` as the field's type.
    into_field: Vec<TokenStream>,
    /// A field-typed value as its reducer's `Value`.
    into_value: Vec<TokenStream>,
    /// The locals collecting each field's writes.
    bucket: Vec<Ident>,
    /// The locals an update is destructured into.
    part: Vec<Ident>,
    /// The bucketed path's overwrite of each field in the step.
    ow: Vec<Ident>,
    /// The bucketed path's count of each field's overwrites.
    ow_count: Vec<Ident>,
}

impl<'a> PerField<'a> {
    fn new(fields: &'a [StateField]) -> Self {
        let casts = |method: &str| -> Vec<TokenStream> {
            (fields.iter().enumerate())
                .map(|(i, f)| value_cast(i, f, method))
                .collect()
        };
        PerField {
            idents: fields.iter().map(|f| &f.ident).collect(),
            variants: fields.iter().map(|f| &f.variant).collect(),
            tys: fields.iter().map(|f| &f.ty).collect(),
            reducers: fields
                .iter()
                .map(|f| {
                    let reducer = &f.reducer;
                    quote_spanned!(f.span=> <#reducer as ::stategraph::reducers::Reducer>)
                })
                .collect(),
            field_mut: casts("__from_field_mut"),
            field_ref: casts("__from_field"),
            into_field: casts("__into_field"),
            into_value: casts("__from_field_owned"),
            bucket: (0..fields.len())
                .map(|i| format_ident!("__writes_{}", i))
                .collect(),
            part: (0..fields.len())
                .map(|i| format_ident!("__part_{}", i))
                .collect(),
            ow: (0..fields.len())
                .map(|i| format_ident!("__ow_{}", i))
                .collect(),
            ow_count: (0..fields.len())
                .map(|i| format_ident!("__ow_count_{}", i))
                .collect(),
        }
    }
}

/// `impl State for <State>`.
pub(super) fn state_impl(names: &GeneratedNames<'_>, fields: &[StateField]) -> TokenStream {
    let GeneratedNames {
        state,
        update,
        field_enum,
        ..
    } = names;
    let per_field = PerField::new(fields);
    let apply = apply_fn(names, &per_field, fields.is_empty());
    let written = written_fn(names, &per_field);
    let codec = codec_fns(field_enum, &per_field);
    let overwrites = overwrites_fn(names, &per_field);
    quote! {
        #overwrites

        #[automatically_derived]
        impl ::stategraph::state::State for #state {
            type Update = #update;
            type Field = #field_enum;

            #apply

            #written

            #codec
        }
    }
}

/// `State::apply`: one write goes straight to the reducers; several are bucketed per field
/// first. A step with an overwrite takes the cold path of `overwrites_fn`, so the hot paths
/// never look at overwrite slots.
fn apply_fn(names: &GeneratedNames<'_>, per_field: &PerField<'_>, no_fields: bool) -> TokenStream {
    let GeneratedNames {
        update, field_enum, ..
    } = names;
    let r = quote!(::stategraph::reducers);
    let PerField {
        idents,
        variants,
        reducers,
        field_mut,
        bucket,
        part,
        ..
    } = per_field;
    let quiet_unused = if no_fields {
        quote!(let _ = __ctx;)
    } else {
        quote!()
    };
    let single_write = single_write_path(names, per_field);
    let applied = applied_type(field_enum);
    quote! {
        fn apply(
            &mut self,
            writes: ::std::vec::Vec<#update>,
            __ctx: &mut #r::ReduceCtx,
        ) -> #applied {
            #quiet_unused
            if writes.iter().any(|__w| __w.__overwrite.is_some()) {
                return self.__stategraph_apply_overwrites(writes, __ctx);
            }
            #single_write
            #(
                let mut #bucket: ::std::vec::Vec<#reducers::Update> =
                    ::std::vec::Vec::new();
            )*
            for __write in writes {
                let #update { #(#idents: #part,)* __overwrite: _ } = __write;
                #(
                    if let ::core::option::Option::Some(__v) = #part {
                        #bucket.push(__v);
                    }
                )*
            }
            let mut __changes = ::std::vec::Vec::new();
            #(
                if !#bucket.is_empty() {
                    let __change =
                        #reducers::reduce(#field_mut(&mut self.#idents), #bucket, __ctx)
                            .map_err(|__e| (#field_enum::#variants, __e))?;
                    if __change.is_changed() {
                        __changes.push((#field_enum::#variants, __change));
                    }
                }
            )*
            ::core::result::Result::Ok(__changes)
        }
    }
}

/// What `apply` and its cold path return: each changed field's change, or the field whose
/// reducer failed.
fn applied_type(field_enum: &impl quote::ToTokens) -> TokenStream {
    let r = quote!(::stategraph::reducers);
    quote! {
        ::core::result::Result<
            ::std::vec::Vec<(#field_enum, #r::Change)>,
            (#field_enum, #r::ReduceError),
        >
    }
}

/// The cold path of `apply`, for a step where some write overwrites a field: writes are
/// bucketed per field, and an overwritten field skips its reducer (see `overwrite_or_reduce`).
fn overwrites_fn(names: &GeneratedNames<'_>, per_field: &PerField<'_>) -> TokenStream {
    let GeneratedNames {
        state,
        update,
        field_enum,
        ..
    } = names;
    let r = quote!(::stategraph::reducers);
    let PerField {
        idents,
        variants,
        reducers,
        tys,
        bucket,
        part,
        ow,
        ow_count,
        ..
    } = per_field;
    let reduce_buckets = (0..idents.len()).map(|i| {
        let (b, v, c) = (&bucket[i], &variants[i], &ow_count[i]);
        let too_many = quote! {
            if #c > 1 {
                return ::core::result::Result::Err((
                    #field_enum::#v,
                    #r::ReduceError::ConcurrentOverwrite { writes: #c },
                ));
            }
        };
        overwrite_or_reduce(names, per_field, i, &ow[i], too_many, quote!(#b))
    });
    let applied = applied_type(field_enum);
    quote! {
        #[automatically_derived]
        impl #state {
            #[doc(hidden)]
            #[cold]
            #[inline(never)]
            #[allow(clippy::type_complexity)]
            fn __stategraph_apply_overwrites(
                &mut self,
                writes: ::std::vec::Vec<#update>,
                __ctx: &mut #r::ReduceCtx,
            ) -> #applied {
                let _ = &__ctx;
                #(
                    let mut #bucket: ::std::vec::Vec<#reducers::Update> =
                        ::std::vec::Vec::new();
                    let mut #ow: ::core::option::Option<#tys> = ::core::option::Option::None;
                    let mut #ow_count: usize = 0;
                )*
                for __write in writes {
                    let #update { #(#idents: #part,)* __overwrite: __ow } = __write;
                    #(
                        if let ::core::option::Option::Some(__v) = #part {
                            #bucket.push(__v);
                        }
                    )*
                    if let ::core::option::Option::Some(__ow) = __ow {
                        let __ow = *__ow;
                        #(
                            if let ::core::option::Option::Some(__v) = __ow.#idents {
                                #ow = ::core::option::Option::Some(__v);
                                #ow_count += 1;
                            }
                        )*
                    }
                }
                let mut __changes = ::std::vec::Vec::new();
                #(#reduce_buckets)*
                ::core::result::Result::Ok(__changes)
            }
        }
    }
}

/// One field's part of applying a step with overwrites: if `overwrite` (an `Option` of the
/// field's type) holds a value, `check` runs, the reducer's `overwrite` hook sets the field and
/// it counts as replaced; otherwise the non-empty `writes` go through the reducer.
fn overwrite_or_reduce(
    names: &GeneratedNames<'_>,
    per_field: &PerField<'_>,
    i: usize,
    overwrite: &Ident,
    check: TokenStream,
    writes: TokenStream,
) -> TokenStream {
    let field_enum = &names.field_enum;
    let r = quote!(::stategraph::reducers);
    let (ident, variant, reducer) = (
        per_field.idents[i],
        per_field.variants[i],
        &per_field.reducers[i],
    );
    let (field_mut, into_value) = (&per_field.field_mut[i], &per_field.into_value[i]);
    quote! {
        if let ::core::option::Option::Some(__v) = #overwrite {
            #check
            #reducer::overwrite(#field_mut(&mut self.#ident), #into_value(__v), __ctx)
                .map_err(|__e| (#field_enum::#variant, __e))?;
            __changes.push((#field_enum::#variant, #r::Change::Replaced));
        } else if !#writes.is_empty() {
            let __change = #reducer::reduce(#field_mut(&mut self.#ident), #writes, __ctx)
                .map_err(|__e| (#field_enum::#variant, __e))?;
            if __change.is_changed() {
                __changes.push((#field_enum::#variant, __change));
            }
        }
    }
}

/// The fast path of `apply`: one write (most steps) needs no per-field buckets.
fn single_write_path(names: &GeneratedNames<'_>, per_field: &PerField<'_>) -> TokenStream {
    let GeneratedNames {
        update, field_enum, ..
    } = names;
    let PerField {
        idents,
        variants,
        reducers,
        field_mut,
        part,
        ..
    } = per_field;
    quote! {
        // Fast path: one write (most steps) needs no per-field buckets.
        if writes.len() == 1 {
            let mut writes = writes;
            let mut __changes = ::std::vec::Vec::new();
            if let ::core::option::Option::Some(__write) = writes.pop() {
                let #update { #(#idents: #part,)* __overwrite: _ } = __write;
                #(
                    if let ::core::option::Option::Some(__v) = #part {
                        let __change = #reducers::reduce(
                            #field_mut(&mut self.#idents),
                            ::std::vec![__v],
                            __ctx,
                        )
                        .map_err(|__e| (#field_enum::#variants, __e))?;
                        if __change.is_changed() {
                            __changes.push((#field_enum::#variants, __change));
                        }
                    }
                )*
            }
            return ::core::result::Result::Ok(__changes);
        }
    }
}

/// `State::written`: the fields an update writes or overwrites.
fn written_fn(names: &GeneratedNames<'_>, per_field: &PerField<'_>) -> TokenStream {
    let GeneratedNames {
        update, field_enum, ..
    } = names;
    let PerField {
        idents, variants, ..
    } = per_field;
    quote! {
        fn written(update: &#update, f: &mut dyn ::core::ops::FnMut(#field_enum)) {
            match update.__overwrite.as_deref() {
                ::core::option::Option::None => {
                    #(
                        if update.#idents.is_some() {
                            f(#field_enum::#variants);
                        }
                    )*
                }
                ::core::option::Option::Some(__o) => {
                    #(
                        if update.#idents.is_some() || __o.#idents.is_some() {
                            f(#field_enum::#variants);
                        }
                    )*
                }
            }
        }
    }
}

/// `State::encode_field`, `decode_field` and `extend_field`, each a match over the field ids.
fn codec_fns(field_enum: &Ident, per_field: &PerField<'_>) -> TokenStream {
    let r = quote!(::stategraph::reducers);
    let PerField {
        idents,
        variants,
        reducers,
        field_mut,
        field_ref,
        into_field,
        ..
    } = per_field;
    quote! {
        fn encode_field(
            &self,
            field: #field_enum,
            change: #r::Change,
        ) -> ::core::result::Result<#r::Stored, ::stategraph::serde_json::Error> {
            match field {
                #(
                    #field_enum::#variants =>
                        #reducers::encode(#field_ref(&self.#idents), change),
                )*
            }
        }

        fn decode_field(
            &mut self,
            field: #field_enum,
            parts: &[#r::StoredRef<'_>],
        ) -> ::core::result::Result<(), ::stategraph::serde_json::Error> {
            match field {
                #(
                    #field_enum::#variants => {
                        self.#idents = #into_field(#reducers::decode(parts)?);
                        ::core::result::Result::Ok(())
                    }
                )*
            }
        }

        fn extend_field(
            &mut self,
            field: #field_enum,
            tails: &[#r::StoredRef<'_>],
        ) -> ::core::result::Result<(), ::stategraph::serde_json::Error> {
            match field {
                #(
                    #field_enum::#variants => #reducers::extend(#field_mut(&mut self.#idents), tails),
                )*
            }
        }
    }
}
