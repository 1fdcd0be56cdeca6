//! # dotcompute-macros: `#[kernel]`
//!
//! Turns a Rust function written in the kernel subset into a module of the same name with:
//!
//! * `launch(&impl AsStream, Launch, args...)` (a `Device` or a `Stream`): typed, so wrong argument types or counts are
//!   compile errors (`&[T]` takes `&Buffer<T>`, `&mut [T]` takes `&mut Buffer<T>`, a
//!   scalar `T` takes a `T`);
//! * `KERNEL`, the [`KernelDef`] backends receive, and `ir()`, the kernel's IR;
//! * a native CPU body compiled by rustc from the same text.
//!
//! Both the IR builder and the native body come from one walk over the syntax tree, so
//! they cover exactly the same constructs. The IR is built at run time by ordinary Rust, so
//! host constants (`const TILE: u32`) specialise kernels.
//!
//! ## Contract
//!
//! *Validates* syntax: anything outside the kernel subset is a compile error spanned at the
//! construct and naming it. Types are checked twice: by rustc on the native body (at
//! compile time) and by the IR builder (when the kernel is first used).
//!
//! *Trusts* `dotcompute` to provide the paths under `::dotcompute::__private`.
//!
//! [`KernelDef`]: https://docs.rs/dotcompute-hal

mod translate;

use proc_macro::TokenStream;

/// Compiles a Rust function into a dotcompute kernel. See the `dotcompute` crate docs for
/// the kernel language.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    let attr = proc_macro2::TokenStream::from(attr);
    if !attr.is_empty() {
        return syn::Error::new_spanned(attr, "#[kernel] takes no arguments")
            .to_compile_error()
            .into();
    }
    let func = match syn::parse::<syn::ItemFn>(item) {
        Ok(f) => f,
        Err(e) => return e.to_compile_error().into(),
    };
    match translate::kernel(&func) {
        Ok(ts) => ts.into(),
        Err(errors) => {
            let errs = errors.iter().map(|e| e.to_compile_error());
            quote::quote!(#(#errs)*).into()
        }
    }
}
