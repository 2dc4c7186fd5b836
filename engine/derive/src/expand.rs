//! Code generation for `#[derive(State)]`.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, ExprPath, Fields, Ident, Type, Visibility};

use crate::attr::{field_reducer, Builtin, ReducerSpec};

/// One field of the state struct, with everything generated code needs about it.
struct StateField {
    /// The field as written (possibly `r#type`).
    ident: Ident,
    /// The field's name without `r#`: its stable name.
    name: String,
    ty: Type,
    /// The variant of the field-id enum.
    variant: Ident,
    /// The reducer type, as a path usable in the generated code.
    reducer: TokenStream,
    /// What the docs call the reducer.
    reducer_doc: String,
    /// Where checks about the reducer point.
    span: Span,
    /// For `with = path`: the hidden reducer type and the function.
    with: Option<(Ident, ExprPath)>,
}

/// Expand `#[derive(State)]` on `input`, or say why not.
pub(crate) fn derive(input: DeriveInput) -> syn::Result<TokenStream> {
    let mut errors = Errors::default();

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
    let named = match &input.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(named) => Some(named),
            Fields::Unnamed(_) | Fields::Unit => None,
        },
        Data::Enum(_) | Data::Union(_) => None,
    };
    let Some(named) = named else {
        let span = match &input.data {
            Data::Struct(s) => match &s.fields {
                Fields::Unnamed(f) => f.span(),
                _ => input.ident.span(),
            },
            Data::Enum(e) => e.enum_token.span,
            Data::Union(u) => u.union_token.span,
        };
        errors.push(syn::Error::new(
            span,
            "State can only be derived for a struct with named fields",
        ));
        return Err(errors.finish().unwrap_or_else(|| syn::Error::new(span, "")));
    };

    let state = &input.ident;
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
        let (reducer_tokens, reducer_doc, with) = match reducer.spec {
            ReducerSpec::Builtin(b) => {
                let path = builtin_path(b, &ty, span);
                (path, format!("`{}`", b.keyword()), None)
            }
            ReducerSpec::Type(t) => {
                let doc = format!("`{}`", quote!(#t).to_string().replace(' ', ""));
                (quote!(#t), doc, None)
            }
            ReducerSpec::With(path) => {
                let hidden = format_ident!("__{}{}Reducer", state, variant, span = span);
                let doc = format!("`with = {}`", quote!(#path).to_string().replace(' ', ""));
                (quote!(#hidden), doc, Some((hidden, path)))
            }
        };
        fields.push(StateField {
            ident,
            name,
            ty,
            variant,
            reducer: reducer_tokens,
            reducer_doc,
            span,
            with,
        });
    }

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

    if let Some(err) = errors.finish() {
        return Err(err);
    }
    Ok(generate(&input, &fields))
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

fn generate(input: &DeriveInput, fields: &[StateField]) -> TokenStream {
    let state = &input.ident;
    let vis = &input.vis;
    let update = format_ident!("{}Update", state);
    let field_enum = format_ident!("{}Field", state);
    let r = quote!(::stategraph::reducers);

    let update_struct = gen_update_struct(state, vis, &update, fields);
    let field_enum_def = gen_field_enum(state, vis, &field_enum, fields);
    let checks = gen_value_traits(fields);
    let hidden = gen_hidden_reducers(state, fields);

    let idents: Vec<_> = fields.iter().map(|f| &f.ident).collect();
    let variants: Vec<_> = fields.iter().map(|f| &f.variant).collect();
    let reducers: Vec<_> = fields
        .iter()
        .map(|f| {
            let reducer = &f.reducer;
            quote_spanned!(f.span=> <#reducer as ::stategraph::reducers::Reducer>)
        })
        .collect();
    let field_mut: Vec<_> = (fields.iter().enumerate())
        .map(|(i, f)| value_cast(i, f, "__from_field_mut"))
        .collect();
    let field_ref: Vec<_> = (fields.iter().enumerate())
        .map(|(i, f)| value_cast(i, f, "__from_field"))
        .collect();
    let into_field: Vec<_> = (fields.iter().enumerate())
        .map(|(i, f)| value_cast(i, f, "__into_field"))
        .collect();
    let bucket: Vec<_> = (0..fields.len())
        .map(|i| format_ident!("__writes_{}", i))
        .collect();
    let part: Vec<_> = (0..fields.len())
        .map(|i| format_ident!("__part_{}", i))
        .collect();

    let quiet_unused = if fields.is_empty() {
        quote!(let _ = __ctx;)
    } else {
        quote!()
    };

    quote! {
        #update_struct
        #field_enum_def

        #[allow(non_snake_case, non_camel_case_types, clippy::all)]
        const _: () = {
            #checks
            #hidden

            #[automatically_derived]
            impl ::core::convert::From<#update> for ::stategraph::Command<#state> {
                fn from(update: #update) -> Self {
                    ::stategraph::Command::new().update(update)
                }
            }

            #[automatically_derived]
            impl ::core::convert::From<#update> for ::stategraph::Input<#state> {
                fn from(update: #update) -> Self {
                    ::stategraph::Input::Update(update)
                }
            }

            #[automatically_derived]
            impl ::stategraph::state::State for #state {
                type Update = #update;
                type Field = #field_enum;

                fn apply(
                    &mut self,
                    writes: ::std::vec::Vec<#update>,
                    __ctx: &mut #r::ReduceCtx,
                ) -> ::core::result::Result<
                    ::std::vec::Vec<(#field_enum, #r::Change)>,
                    (#field_enum, #r::ReduceError),
                > {
                    #quiet_unused
                    // Fast path: one write (most steps) needs no per-field buckets.
                    if writes.len() == 1 {
                        let mut writes = writes;
                        let mut __changes = ::std::vec::Vec::new();
                        if let ::core::option::Option::Some(__write) = writes.pop() {
                            let #update { #(#idents: #part),* } = __write;
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
                    #(
                        let mut #bucket: ::std::vec::Vec<#reducers::Update> =
                            ::std::vec::Vec::new();
                    )*
                    for __write in writes {
                        let #update { #(#idents: #part),* } = __write;
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

                fn written(update: &#update, f: &mut dyn ::core::ops::FnMut(#field_enum)) {
                    #(
                        if update.#idents.is_some() {
                            f(#field_enum::#variants);
                        }
                    )*
                }

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
        };
    }
}

fn gen_update_struct(
    state: &Ident,
    vis: &Visibility,
    update: &Ident,
    fields: &[StateField],
) -> TokenStream {
    let struct_doc = format!(
        "A partial write to [`{state}`], as a node returns it: every field optional, `None` \
         leaves the field alone.\n\nBuild one with [`{state}::update`] and the setters; \
         generated by `#[derive(State)]`."
    );
    let defs = fields.iter().map(|f| {
        let ident = &f.ident;
        let doc = format!("A write to `{}` (reduced by {}).", f.name, f.reducer_doc);
        let ty = field_update_type(f);
        quote! {
            #[doc = #doc]
            #[serde(default, skip_serializing_if = "::core::option::Option::is_none")]
            #vis #ident: ::core::option::Option<#ty>
        }
    });
    let setters = fields.iter().map(|f| {
        let ident = &f.ident;
        let ty = field_update_type(f);
        let doc = format!("Write `{}` (reduced by {}).", f.name, f.reducer_doc);
        quote! {
            #[doc = #doc]
            #[must_use]
            #vis fn #ident(mut self, value: #ty) -> Self {
                self.#ident = ::core::option::Option::Some(value);
                self
            }
        }
    });
    let update_fn_doc = format!("An empty [`{update}`]: chain its setters to write fields.");
    quote! {
        #[doc = #struct_doc]
        #[derive(
            ::core::clone::Clone,
            ::core::default::Default,
            ::core::fmt::Debug,
            ::stategraph::serde::Serialize,
            ::stategraph::serde::Deserialize,
        )]
        #[serde(crate = "::stategraph::serde")]
        #vis struct #update {
            #(#defs,)*
        }

        #[automatically_derived]
        #[allow(dead_code, clippy::all)]
        impl #update {
            #(#setters)*
        }

        #[automatically_derived]
        #[allow(dead_code)]
        impl #state {
            #[doc = #update_fn_doc]
            #[must_use]
            #vis fn update() -> #update {
                <#update as ::core::default::Default>::default()
            }
        }
    }
}

/// The type one write to `f` carries.
fn field_update_type(f: &StateField) -> TokenStream {
    if f.with.is_some() {
        // The hidden reducer is private to the generated code; its `Update` is the field type.
        let ty = &f.ty;
        quote!(#ty)
    } else {
        let reducer = &f.reducer;
        quote_spanned!(f.span=> <#reducer as ::stategraph::reducers::Reducer>::Update)
    }
}

fn gen_field_enum(
    state: &Ident,
    vis: &Visibility,
    field_enum: &Ident,
    fields: &[StateField],
) -> TokenStream {
    let doc = format!(
        "The field ids of [`{state}`], in declaration order; generated by `#[derive(State)]`."
    );
    let variants = fields.iter().map(|f| {
        let variant = &f.variant;
        let doc = format!("The `{}` field.", f.name);
        quote!(#[doc = #doc] #variant)
    });
    let all = fields.iter().map(|f| &f.variant);
    let names = fields.iter().map(|f| {
        let variant = &f.variant;
        let name = &f.name;
        quote!(#field_enum::#variant => #name)
    });
    let indices = fields.iter().enumerate().map(|(i, f)| {
        let variant = &f.variant;
        quote!(#field_enum::#variant => #i)
    });
    quote! {
        #[doc = #doc]
        #[derive(
            ::core::clone::Clone,
            ::core::marker::Copy,
            ::core::cmp::PartialEq,
            ::core::cmp::Eq,
            ::core::cmp::PartialOrd,
            ::core::cmp::Ord,
            ::core::hash::Hash,
            ::core::fmt::Debug,
        )]
        #vis enum #field_enum {
            #(#variants,)*
        }

        #[automatically_derived]
        impl ::stategraph::state::Field for #field_enum {
            const ALL: &'static [Self] = &[#(#field_enum::#all),*];

            fn name(self) -> &'static str {
                match self {
                    #(#names,)*
                }
            }

            fn index(self) -> usize {
                match self {
                    #(#indices,)*
                }
            }
        }
    }
}

/// The name of the per-field trait that converts between the field's type and its reducer's
/// `Value` type: implemented only when they are the same type, so a mismatch is one error that
/// names the field and points at its `#[reduce]` attribute.
fn value_trait(index: usize) -> Ident {
    format_ident!("__ValueOfField{}", index)
}

fn gen_value_traits(fields: &[StateField]) -> TokenStream {
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
            }
        }
    });
    quote!(#(#traits)*)
}

/// `<<Reducer>::Value as __ValueOfFieldN<FieldType>>::method`, spanned to the attribute.
fn value_cast(index: usize, f: &StateField, method: &str) -> TokenStream {
    let trait_name = value_trait(index);
    let reducer = &f.reducer;
    let ty = &f.ty;
    let method = Ident::new(method, f.span);
    quote_spanned!(f.span=>
        <<#reducer as ::stategraph::reducers::Reducer>::Value as #trait_name<#ty>>::#method
    )
}

/// The zero-sized reducers generated for `with = path` fields.
fn gen_hidden_reducers(state: &Ident, fields: &[StateField]) -> TokenStream {
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
