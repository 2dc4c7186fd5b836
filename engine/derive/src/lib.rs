//! `#[derive(State)]` for [stategraph](https://example.invalid/stategraph).
//!
//! Use it through the re-export `stategraph::State`; the generated code names only absolute
//! `::stategraph::…` paths, so a crate using the derive depends on `stategraph`, not on this
//! crate. See [`macro@State`] for what it generates and the `#[reduce(...)]` grammar.

use proc_macro::TokenStream;

mod attr;
mod expand;

/// Derive `stategraph::state::State` for a struct with named fields.
///
/// Each field merges the writes of one superstep through a reducer, chosen with the field
/// attribute `#[reduce(...)]`:
///
/// | attribute | reducer | value type | what one write carries |
/// |---|---|---|---|
/// | none, or `#[reduce(last_value)]` | `LastValue<T>` | any `T` | a `T`; two writes in one step are an error |
/// | `#[reduce(append)]` | `Append<Vec<T>>` | `Vec<T>` or `List<T>` | items to append (a `Vec<T>`) |
/// | `#[reduce(add_messages)]` | `AddMessages<Vec<M>>` | `Vec<M>` or `List<M>` | message upserts and removals |
/// | `#[reduce(artifacts)]` | `Artifacts` | its value type | see `Artifacts` |
/// | `#[reduce(sandbox)]` | `SandboxReducer` | its value type | see `SandboxReducer` |
/// | `#[reduce(promoted)]` | `PromotedReducer` | its value type | see `PromotedReducer` |
/// | `#[reduce(path::to::MyReducer)]` | that type | its `Reducer::Value` | its `Reducer::Update` |
/// | `#[reduce(with = path::to::merge)]` | a generated reducer | the field type `T` | a `T`, folded in with `merge(&mut current, write)` |
///
/// The built-in reducers live in `stategraph::reducers` and are generic over the field's
/// value type: the derive writes `LastValue<FieldType>`, `Append<FieldType>`, … for you. A
/// reducer type given by path must implement `stategraph::reducers::Reducer` with
/// `Value` = the field's type; otherwise compilation fails with an error naming the field and
/// pointing at its attribute. A `with` function has the signature
/// `fn(&mut FieldType, FieldType)`; it is called once per write, in task order, and the
/// field counts as replaced. A `with` path may start with `Self::` to name an associated
/// function of the state struct.
///
/// Grammar, one attribute per field at most:
///
/// ```text
/// #[reduce(KEYWORD)]        KEYWORD = last_value | append | add_messages
///                                   | artifacts | sandbox | promoted
/// #[reduce(TYPE)]           TYPE    = any reducer type path, e.g. my_crate::MyReducer
/// #[reduce(with = PATH)]    PATH    = a function path, e.g. my_merge or Self::merge
/// ```
///
/// # Generated items
///
/// For `struct Chat` (with the struct's visibility):
///
/// - `ChatUpdate`: a partial write, one `Option<Reducer::Update>` per field, implementing
///   `Clone`, `Default`, `Debug`, `Serialize` and `Deserialize` as a JSON object (`None`
///   fields are skipped when serializing and default to `None` when missing or `null`); one
///   builder setter per field, named like the field and taking the field's update type (exact
///   type, so integer literals infer); and one `overwrite_<field>` setter per field, taking the
///   field's whole value, that bypasses its reducer (`stategraph::overwrite`; in JSON
///   `{"field": {"__overwrite__": value}}`). The overwrites live in a hidden boxed field.
/// - `Chat::update()`: an empty `ChatUpdate` to chain setters on.
/// - `ChatField`: the field ids, one variant per field in `UpperCamelCase`, implementing
///   `stategraph::state::Field` (`name()` is the field's Rust name without `r#`).
/// - `impl stategraph::state::State for Chat`.
///
/// `ChatUpdate` derives `Debug`, so every write type (`Reducer::Update`) must implement
/// `Debug`. The struct itself must implement `Clone` and `Default` (derive them).
///
/// # Example
///
/// (Compiled as a doc test on the `stategraph::state` module.)
///
/// ```text
/// use stategraph::reducers::{Change, ReduceCtx};
/// use stategraph::state::{Field, State};
///
/// fn keep_longest(current: &mut String, update: String) {
///     if update.len() > current.len() {
///         *current = update;
///     }
/// }
///
/// #[derive(stategraph::State, Clone, Default, Debug)]
/// pub struct Chat {
///     /// Every message, in order.
///     #[reduce(append)]
///     pub messages: Vec<String>,
///     /// Written by one node per step.
///     pub counter: i64,
///     /// The longest title proposed so far.
///     #[reduce(with = keep_longest)]
///     pub title: String,
/// }
///
/// // Generated: `ChatUpdate` (+ setters), `Chat::update()`, `ChatField`, `impl State for Chat`.
/// let writes = vec![
///     Chat::update().messages(vec!["hi".to_string()]).counter(1),
///     Chat::update().messages(vec!["there".to_string()]).title("A title".into()),
/// ];
/// let mut chat = Chat::default();
/// let changes = chat.apply(writes, &mut ReduceCtx::new(0)).map_err(|(field, err)| {
///     format!("{}: {err}", field.name())
/// })?;
/// assert_eq!(chat.messages, ["hi", "there"]);
/// assert_eq!(
///     changes,
///     [
///         (ChatField::Messages, Change::Appended { from: 0 }),
///         (ChatField::Counter, Change::Replaced),
///         (ChatField::Title, Change::Replaced),
///     ]
/// );
/// assert_eq!(ChatField::Title.name(), "title");
/// assert_eq!(
///     stategraph::serde_json::to_string(&Chat::update().counter(3))?,
///     r#"{"counter":3}"#
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
///
/// The derive reports, at the offending tokens: a type that is not a struct with named
/// fields, generic parameters, `#[reduce]` on the struct, an empty `#[reduce()]`, two
/// `#[reduce]` attributes on one field, `with` without a path, an unknown `key = value`
/// option, an unknown lower-case reducer keyword, two fields whose ids would collide, a field
/// named like another field's `overwrite_<field>` setter, and a field named `__overwrite`.
#[proc_macro_derive(State, attributes(reduce))]
pub fn derive_state(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    expand::derive(input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
