//! The store's conformance suite: one set of behaviours, run on every backend.
//!
//! Each behaviour is an `async fn(Backend) -> TestResult` in a module by concept; the
//! `conformance!` macro instantiates every one of them as a `#[tokio::test]` for a backend.
//! A backend is one line at the bottom of this file: a name and a function that opens a
//! fresh, empty store with a given [`StoreConfig`] (or `None` to skip, e.g. without a
//! database URL).

#![allow(
    missing_docs,
    unreachable_pub,
    clippy::expect_used,
    clippy::unwrap_used
)]

mod basic;
mod batch;
mod filters;
mod namespaces;
#[cfg(feature = "postgres")]
mod postgres;
mod ranking;
mod search;
mod support;
mod ttl;

/// Instantiates every conformance test for one backend: `conformance!(name, open_fn);`.
macro_rules! conformance {
    ($backend:ident, $open:expr) => {
        mod $backend {
            conformance!(@tests $open;
                basic::put_then_get_returns_the_value_and_its_times,
                basic::overwrite_keeps_created_at_and_moves_updated_at,
                basic::delete_removes_the_item_and_a_missing_one_is_fine,
                basic::get_of_a_missing_key_is_none,
                basic::an_empty_key_or_a_root_namespace_is_refused,
                basic::values_round_trip_unchanged,
                batch::batch_returns_one_result_per_op_in_order,
                batch::a_read_in_a_batch_sees_the_batchs_earlier_writes,
                batch::a_batch_with_an_invalid_later_op_applies_nothing,
                batch::a_batch_puts_then_deletes_in_order,
                filters::eq_compares_numbers_by_value_and_strings_exactly,
                filters::eq_on_booleans_null_objects_and_arrays,
                filters::ne_matches_an_item_without_the_field,
                filters::ordering_operators_on_numbers,
                filters::ordering_operators_on_strings_compare_bytes,
                filters::ordering_across_types_never_matches,
                filters::nested_paths_reach_into_objects_only,
                filters::a_numeric_path_segment_names_a_key_not_an_array_index,
                filters::every_condition_must_hold,
                filters::odd_keys_are_values_not_syntax,
                namespaces::listing_is_sorted_and_distinct,
                namespaces::listing_by_prefix_and_suffix,
                namespaces::a_star_label_matches_any_label,
                namespaces::max_depth_cuts_and_dedups,
                namespaces::listing_pages_with_limit_and_offset,
                search::search_finds_only_items_under_the_prefix,
                search::root_prefix_searches_every_item,
                search::without_a_query_the_newest_updated_come_first,
                search::search_pages_with_limit_and_offset,
                search::a_search_without_a_query_pages_as_the_memory_store_under_wide_and_narrow_prefixes,
                search::search_applies_filter_and_prefix_together,
                search::a_search_without_query_returns_no_score,
                search::ties_order_namespaces_by_their_joined_text,
                ttl::an_item_expires_after_its_ttl_for_every_read,
                ttl::a_get_refreshes_the_ttl,
                ttl::no_refresh_when_the_read_does_not_ask,
                ttl::no_refresh_when_the_store_refreshes_never,
                ttl::a_search_refreshes_what_it_returns,
                ttl::default_ttl_applies_and_never_overrides_it,
                ttl::sweep_counts_and_removes_expired_items,
                ttl::a_put_over_an_expired_item_starts_it_anew,
                ttl::vector_search_skips_expired_items_and_fills_the_page,
                ranking::full_text_ranks_items_holding_more_query_words_first,
                ranking::full_text_skips_items_without_any_query_word,
                ranking::full_text_ignores_case_and_punctuation,
                ranking::full_text_pages_and_filters,
                ranking::vector_search_returns_scores_best_first,
                ranking::a_later_put_of_a_key_in_one_batch_keeps_only_its_vectors,
                ranking::vector_search_skips_items_indexed_off,
                ranking::vector_search_uses_a_puts_field_override,
                ranking::vector_search_applies_filter_and_prefix_before_ranking,
                ranking::vector_search_pages_deterministically,
                ranking::a_limit_beyond_every_item_returns_them_all,
            );
        }
    };
    (@tests $open:expr; $($module:ident :: $test:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() -> crate::support::TestResult {
                crate::support::run($open, crate::$module::$test).await
            }
        )*
    };
}

conformance!(memory, crate::support::open_memory);
conformance!(sqlite, crate::support::open_sqlite);
#[cfg(feature = "postgres")]
conformance!(postgres_auto, crate::postgres::open);
#[cfg(feature = "postgres")]
conformance!(postgres_fallback, crate::postgres::open_fallback);
#[cfg(feature = "postgres")]
conformance!(postgres_prepared, crate::postgres::open_prepared);
