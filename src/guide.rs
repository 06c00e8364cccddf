// The user guide: one page per topic, written in `docs/guide/*.md` and shown here, so that
// every code block in it is compiled and run as a doc test (as governor's `_guide`). Only
// documentation lives here; the module exists for rustdoc and doc tests, never in a build.
//
// Links between the pages are markdown reference links whose targets each `.md` file defines
// at its end, relative to the file (`[keyed]: keyed.md`): what GitHub follows. Every page here
// starts with the definitions of `guide_links!` (in lib.rs) instead, and in markdown the first
// definition of a label wins, so in rustdoc the same links lead to the modules below.

/// Declares one page: rustdoc's link targets first, then the file.
macro_rules! page {
    ($name:ident, $file:literal) => {
        #[doc = guide_links!()]
        #[doc = include_str!(concat!("../docs/", $file))]
        pub mod $name {}
    };
}

page!(quotas_and_methods, "guide/quotas-and-methods.md");
page!(keyed, "guide/keyed.md");
page!(concurrency, "guide/concurrency.md");
page!(penalties, "guide/penalties.md");
page!(algorithms, "guide/algorithms.md");
page!(asynchronous, "guide/async.md");
page!(http, "guide/http.md");
page!(redis, "guide/redis.md");
page!(guava, "guide/guava.md");
page!(semantics, "guide/semantics.md");
page!(clocks, "guide/clocks.md");
page!(testing, "guide/testing.md");
page!(operations, "guide/operations.md");
page!(design, "design.md");
