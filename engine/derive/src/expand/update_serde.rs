//! The update type's `Serialize`, `Deserialize` and `Debug`: a JSON object with one entry per
//! written field, an overwritten field's entry in the form `{"__overwrite__": value}`.

use proc_macro2::TokenStream;
use quote::quote;
use syn::Ident;

use super::field::StateField;
use super::update::field_update_type;
use super::GeneratedNames;

/// `Serialize`, `Deserialize` and `Debug` for the update type.
pub(super) fn update_impls(names: &GeneratedNames<'_>, fields: &[StateField]) -> TokenStream {
    let ser = serialize(&names.update, fields);
    let de = deserialize(names, fields);
    let debug = debug(&names.update, fields);
    quote!(#ser #de #debug)
}

/// `Serialize`: the written fields only, an overwrite winning over a plain write of its field.
fn serialize(update: &Ident, fields: &[StateField]) -> TokenStream {
    let update_name = update.to_string();
    let idents: Vec<&Ident> = fields.iter().map(|f| &f.ident).collect();
    let names: Vec<&String> = fields.iter().map(|f| &f.name).collect();
    let s = quote!(::stategraph::serde);
    quote! {
        #[automatically_derived]
        impl #s::Serialize for #update {
            fn serialize<__S: #s::Serializer>(
                &self,
                __serializer: __S,
            ) -> ::core::result::Result<__S::Ok, __S::Error> {
                use #s::ser::SerializeStruct as _;
                let __ow = self.__overwrite.as_deref();
                let __len = 0usize
                    #(+ (self.#idents.is_some()
                        || __ow.is_some_and(|__o| __o.#idents.is_some())) as usize)*;
                let mut __st = __serializer.serialize_struct(#update_name, __len)?;
                #(
                    match __ow.and_then(|__o| __o.#idents.as_ref()) {
                        ::core::option::Option::Some(__v) => __st.serialize_field(
                            #names,
                            &::stategraph::overwrite::Overwrite(__v),
                        )?,
                        ::core::option::Option::None => match &self.#idents {
                            ::core::option::Option::Some(__v) => __st.serialize_field(#names, __v)?,
                            ::core::option::Option::None => __st.skip_field(#names)?,
                        },
                    }
                )*
                __st.end()
            }
        }
    }
}

/// `Deserialize` from a JSON object: unknown keys are skipped, `null` is no write, a repeated
/// field is an error, an overwrite form sets the field's overwrite.
fn deserialize(names: &GeneratedNames<'_>, fields: &[StateField]) -> TokenStream {
    let GeneratedNames {
        update, field_enum, ..
    } = names;
    let update_name = update.to_string();
    let s = quote!(::stategraph::serde);
    let p = quote!(::stategraph::overwrite::__private);
    let field_names = fields.iter().map(|f| &f.name);
    let arms = fields.iter().enumerate().map(|(i, f)| {
        let ident = &f.ident;
        let variant = &f.variant;
        let name = &f.name;
        let upd = field_update_type(f);
        let ty = &f.ty;
        quote! {
            ::core::option::Option::Some(#field_enum::#variant) => {
                if __seen[#i] {
                    return ::core::result::Result::Err(
                        <__A::Error as #s::de::Error>::duplicate_field(#name),
                    );
                }
                __seen[#i] = true;
                match __map.next_value::<::core::option::Option<#p::FieldWrite<#upd, #ty>>>()? {
                    ::core::option::Option::Some(#p::FieldWrite::Reduce(__v)) => {
                        __out.#ident = ::core::option::Option::Some(__v);
                    }
                    ::core::option::Option::Some(#p::FieldWrite::Overwrite(__v)) => {
                        __out.__overwrite
                            .get_or_insert_with(::core::default::Default::default)
                            .#ident = ::core::option::Option::Some(__v);
                    }
                    ::core::option::Option::None => {}
                }
            }
        }
    });
    let count = fields.len();
    quote! {
        #[automatically_derived]
        impl<'de> #s::Deserialize<'de> for #update {
            fn deserialize<__D: #s::Deserializer<'de>>(
                __deserializer: __D,
            ) -> ::core::result::Result<Self, __D::Error> {
                struct __Visitor;
                impl<'de> #s::de::Visitor<'de> for __Visitor {
                    type Value = #update;

                    fn expecting(&self, __f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                        __f.write_str(::core::concat!("struct ", #update_name))
                    }

                    fn visit_map<__A: #s::de::MapAccess<'de>>(
                        self,
                        mut __map: __A,
                    ) -> ::core::result::Result<#update, __A::Error> {
                        let mut __out = <#update as ::core::default::Default>::default();
                        let mut __seen = [false; #count];
                        while let ::core::option::Option::Some(__key) =
                            __map.next_key::<#p::FieldKey<#field_enum>>()?
                        {
                            match __key.0 {
                                #(#arms)*
                                _ => {
                                    __map.next_value::<#s::de::IgnoredAny>()?;
                                }
                            }
                        }
                        let _ = &mut __seen;
                        ::core::result::Result::Ok(__out)
                    }
                }
                const __FIELDS: &[&str] = &[#(#field_names),*];
                __deserializer.deserialize_struct(#update_name, __FIELDS, __Visitor)
            }
        }
    }
}

/// `Debug`: every field (as `Option`), then the overwrites if any.
fn debug(update: &Ident, fields: &[StateField]) -> TokenStream {
    let update_name = update.to_string();
    let idents = fields.iter().map(|f| &f.ident);
    let names = fields.iter().map(|f| &f.name);
    quote! {
        #[automatically_derived]
        impl ::core::fmt::Debug for #update {
            fn fmt(&self, __f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                let mut __d = __f.debug_struct(#update_name);
                #( __d.field(#names, &self.#idents); )*
                if let ::core::option::Option::Some(__ow) = &self.__overwrite {
                    __d.field("overwrite", __ow);
                }
                __d.finish()
            }
        }
    }
}
