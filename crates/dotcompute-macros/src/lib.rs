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

use dotcompute_translate as translate;

/// Parses an item and runs one translator on it.
fn expand(
    attr: TokenStream,
    item: TokenStream,
    what: &str,
    translate: fn(&syn::ItemFn) -> Result<proc_macro2::TokenStream, Vec<syn::Error>>,
) -> TokenStream {
    let attr = proc_macro2::TokenStream::from(attr);
    if !attr.is_empty() {
        return syn::Error::new_spanned(attr, format!("#[{what}] takes no arguments"))
            .to_compile_error()
            .into();
    }
    let func = match syn::parse::<syn::ItemFn>(item) {
        Ok(f) => f,
        Err(e) => return e.to_compile_error().into(),
    };
    match translate(&func) {
        Ok(ts) => ts.into(),
        Err(errors) => {
            let errs = errors.iter().map(|e| e.to_compile_error());
            // A failed #[kernel_fn] leaves a stand-in of its name, so that the kernels
            // calling it report nothing more than its own errors.
            let stand_in = stand_in(&func, what);
            quote::quote!(#(#errs)* #stand_in).into()
        }
    }
}

use proc_macro::TokenStream;

/// Compiles a Rust function into a dotcompute kernel. See the `dotcompute` crate docs for
/// the kernel language.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand(attr, item, "kernel", translate::kernel)
}

/// Compiles a Rust function in the kernel subset into a device function that kernels (and
/// other kernel functions) call: inlined into their IR, called by their native CPU bodies.
/// It takes scalars and arrays (`&[T]`, `&mut [T]`: a buffer parameter or a shared array,
/// passed by name) and returns a scalar or nothing; its type parameters are inferred from
/// the arguments. See the `dotcompute` crate docs.
#[proc_macro_attribute]
pub fn kernel_fn(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand(attr, item, "kernel_fn", translate::helper)
}

/// What a failed item leaves in its place, so that its users report nothing beyond its own
/// errors: for a `#[kernel_fn]`, a value that is a kernel function; for a `#[kernel]`, a
/// module with `launch` (taking any arguments of the kernel's count), `kernel()` and,
/// for a non-generic kernel, `KERNEL`. None of it runs: the errors stop the build.
fn stand_in(func: &syn::ItemFn, what: &str) -> proc_macro2::TokenStream {
    let (vis, name) = (&func.vis, &func.sig.ident);
    if what == "kernel_fn" {
        return quote::quote! {
            #[allow(non_camel_case_types, dead_code)]
            #vis struct #name;
            impl ::dotcompute::__private::KernelFunction for #name {}
        };
    }
    let generics = &func.sig.generics.params;
    let where_clause = &func.sig.generics.where_clause;
    // An argument whose type is (a slice of) a type parameter is taken as the real
    // `launch` takes it, so that the parameter is still inferred at the call; any other
    // argument is anything.
    let type_params: Vec<&syn::Ident> = func.sig.generics.type_params().map(|t| &t.ident).collect();
    let is_type_param = |t: &syn::Type| match t {
        syn::Type::Path(p) => p
            .path
            .get_ident()
            .is_some_and(|id| type_params.contains(&id)),
        _ => false,
    };
    let args = func.sig.inputs.iter().enumerate().map(|(i, input)| {
        let name = quote::format_ident!("_a{i}");
        let ty = match input {
            syn::FnArg::Typed(t) => Some(&*t.ty),
            syn::FnArg::Receiver(_) => None,
        };
        match ty {
            Some(syn::Type::Reference(r)) => match &*r.elem {
                syn::Type::Slice(slice) if is_type_param(&slice.elem) => {
                    let elem = &slice.elem;
                    if r.mutability.is_some() {
                        quote::quote!(#name: &mut impl ::dotcompute::KernelBufferMut<#elem>)
                    } else {
                        quote::quote!(#name: &impl ::dotcompute::KernelBuffer<#elem>)
                    }
                }
                _ => quote::quote!(#name: impl ::core::marker::Sized),
            },
            Some(t) if is_type_param(t) => quote::quote!(#name: #t),
            _ => quote::quote!(#name: impl ::core::marker::Sized),
        }
    });
    let kernel_static = generics.is_empty().then(|| {
        quote::quote! {
            pub static KERNEL: ::dotcompute::__private::KernelDef =
                ::dotcompute::__private::KernelDef::new(stringify!(#name), __failed, None);
            fn __failed() -> ::core::result::Result<::dotcompute::__private::ir::Kernel, ::dotcompute::__private::ir::BuildError> {
                unreachable!("a kernel that failed to compile")
            }
        }
    });
    quote::quote! {
        #[allow(non_snake_case, dead_code, unused_variables, unused_imports)]
        #vis mod #name {
            use super::*;
            #kernel_static
            pub fn kernel<#generics>() -> &'static ::dotcompute::__private::KernelDef #where_clause {
                unreachable!("a kernel that failed to compile")
            }
            pub fn launch<#generics>(
                _on: &impl ::dotcompute::__private::AsStream,
                _launch: ::dotcompute::Launch,
                #(#args),*
            ) -> ::dotcompute::Result<()> #where_clause {
                unreachable!("a kernel that failed to compile")
            }
        }
    }
}
