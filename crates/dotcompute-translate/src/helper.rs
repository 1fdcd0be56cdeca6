//! `#[kernel_fn]`: a helper function callable from kernels, as an IR builder and a native
//! function.

use super::*;

/// Translates a `#[kernel_fn]` into its module: `__dc_build` inlines the body into the
/// calling kernel's IR (so backends never see a call), `__dc_native` is the native body.
/// Type parameters are run-time IR types in the builder, inferred from the arguments; in
/// the native body they are ordinary generics.
pub fn helper(f: &ItemFn) -> Result<TokenStream, Vec<syn::Error>> {
    check_attrs(f, "#[kernel_fn]")?;
    let sig = &f.sig;
    let name = &sig.ident;
    let mut tx = Tx::new(Some(name.to_string()));
    tx.signature(sig, "#[kernel_fn]");
    let params = HelperParams::translate(&mut tx, sig);
    let infer = infer_types(&mut tx, &params.sources);
    let (body_b, body_n, ret_b, ret_n) = body(&mut tx, f);
    if !tx.errors.is_empty() {
        return Err(tx.errors);
    }
    Ok(module(
        f,
        &tx,
        params,
        infer,
        (body_b, body_n),
        (ret_b, ret_n),
    ))
}

/// What a helper's parameters become, gathered in order by [`HelperParams::translate`].
struct HelperParams {
    /// `__dc_build`'s parameters: (pattern, type).
    build_params: Vec<(TokenStream, TokenStream)>,
    /// `__dc_native`'s parameters: (pattern, type).
    native_params: Vec<(TokenStream, TokenStream)>,
    /// A const `bool` per `&[T]` parameter: whether the array passed is writable.
    access_generics: Vec<TokenStream>,
    /// The builder's checks and bindings of the arguments.
    bind: TokenStream,
    /// Per type parameter: the arrays and values whose type it is.
    sources: HashMap<String, (Vec<TokenStream>, Vec<Ident>)>,
}

impl HelperParams {
    /// Translates and binds each parameter (arrays and values).
    fn translate(tx: &mut Tx, sig: &syn::Signature) -> HelperParams {
        let mut build_params = Vec::new();
        let mut native_params = Vec::new();
        let mut access_generics = Vec::new();
        let mut bind = TokenStream::new();
        let mut sources: HashMap<String, (Vec<TokenStream>, Vec<Ident>)> = HashMap::new();
        for (k, input) in sig.inputs.iter().enumerate() {
            let Some(ParamSpec {
                pat: pi,
                array,
                ty: Ty { ir, native, .. },
                ty_syntax,
            }) = tx.param(input, "#[kernel_fn]")
            else {
                continue;
            };
            let pname = &pi.ident;
            let pname_str = pname.to_string();
            let type_param = tx.type_param(ty_syntax).map(|t| t.to_string());
            match array {
                Some(writable) => {
                    build_params.push((quote!(#pname), quote!(__dc::ir::Mem)));
                    bind.extend(quote!(__b.check_array(#pname, #ir, #writable, #pname_str)?;));
                    // A `&[T]` parameter accepts read-only buffers and writable arrays alike.
                    let access = if writable {
                        quote!(true)
                    } else {
                        let w = format_ident!("__DC_W{k}");
                        access_generics.push(quote!(const #w: bool));
                        quote!(#w)
                    };
                    native_params.push((
                        quote!(#pname),
                        quote!(__dc::cpu::View<'_, #native, #access>),
                    ));
                    if let Some(t) = type_param {
                        sources.entry(t).or_default().0.push(quote!(#pname.elem()));
                    }
                    tx.bind(
                        &pname_str,
                        if writable {
                            Binding::Shared
                        } else {
                            Binding::ReadOnlyArray
                        },
                    );
                }
                None => {
                    let mutable = pi.mutability.is_some();
                    let mut_tok = pi.mutability;
                    build_params.push((quote!(#pname), quote!(__dc::ir::V)));
                    bind.extend(
                        quote!(let #pname = __b.let_(#pname_str, Some(__dc::ir::Type::from(#ir)), #mutable, #pname)?;),
                    );
                    native_params.push((quote!(#mut_tok #pname), quote!(#native)));
                    if let Some(t) = type_param {
                        sources.entry(t).or_default().1.push(pname.clone());
                    }
                    tx.bind(&pname_str, Binding::Local);
                }
            }
        }
        HelperParams {
            build_params,
            native_params,
            access_generics,
            bind,
            sources,
        }
    }
}

/// The builder's inference of each type parameter from the arguments of its type (an
/// error for a type parameter no parameter has).
fn infer_types(
    tx: &mut Tx,
    sources: &HashMap<String, (Vec<TokenStream>, Vec<Ident>)>,
) -> TokenStream {
    let mut infer = TokenStream::new();
    for t in tx.type_params.clone() {
        let var = ty_var(&t);
        let t_str = t.to_string();
        let Some((arrays, values)) = sources.get(&t_str) else {
            tx.errors.push(err(
                t.span(),
                format!(
                    "type parameter `{t}` must be the type of a parameter: a #[kernel_fn]'s \
                     type parameters are inferred from its arguments"
                ),
            ));
            continue;
        };
        infer
            .extend(quote!(let #var = __b.infer_type(#t_str, &[#(#arrays),*], &[#(&#values),*])?;));
    }
    infer
}

/// The body in both halves, and the return type in both (`()` without one).
fn body(tx: &mut Tx, f: &ItemFn) -> (TokenStream, TokenStream, TokenStream, TokenStream) {
    let (sig, name) = (&f.sig, &f.sig.ident);
    let ret = match &sig.output {
        ReturnType::Default => None,
        ReturnType::Type(_, t) => tx.ty(t, "a return type"),
    };
    match &ret {
        Some(Ty { ir, native, .. }) => {
            let (sb, vb, n) = tx.value_block(&f.block, f.block.span());
            let what = format!("the value returned by `{name}`");
            (
                quote!(#sb let __r = #vb; __b.typed(__r, #ir, #what)),
                n,
                quote!(__dc::ir::V),
                native.clone(),
            )
        }
        None => {
            let (bb, bn) = tx.block(&f.block.stmts);
            (quote!(#bb Ok(())), bn, quote!(()), quote!(()))
        }
    }
}

/// The helper's marker struct and its `impl` around the steps' results.
fn module(
    f: &ItemFn,
    tx: &Tx,
    params: HelperParams,
    infer: TokenStream,
    (body_b, body_n): Pair,
    (ret_b, ret_n): Pair,
) -> TokenStream {
    let name = &f.sig.ident;
    let sig = &f.sig;
    let HelperParams {
        build_params,
        native_params,
        access_generics,
        bind,
        ..
    } = params;
    let vis = &f.vis;
    let docs = doc_attrs(f);
    let generics = Generics::of(sig, &tx.type_params);
    let where_clause = &generics.where_clause;
    let declared = &generics.params;
    let span = name.span();
    let own_barriers = tx.barrier_sites > 0;
    let callee_barriers = barrier_calls(&tx.helper_paths);
    let (build_pats, build_tys): (Vec<_>, Vec<_>) = build_params.into_iter().unzip();
    let (native_pats, native_tys): (Vec<_>, Vec<_>) = native_params.into_iter().unzip();
    quote_spanned! {span=>
        #(#docs)*
        ///
        /// A device function (`#[kernel_fn]`): call it from kernels and other kernel
        /// functions, where it is inlined.
        #[allow(non_camel_case_types)]
        #vis struct #name;

        #[allow(non_snake_case, unused_imports, dead_code, unused_variables, unused_mut, unused_braces, unused_parens, clippy::all)]
        const _: () = {
            #[allow(unused_imports)]
            use ::dotcompute::__private as __dc;
            #[allow(unused_imports)]
            use ::dotcompute::__private::NotKernelFn as _;

            impl __dc::KernelFunction for #name {}

            impl #name {
                /// Whether the body, or a kernel function it calls, has a barrier (a
                /// kernel calling it then runs on the CPU with a coroutine per thread).
                #[doc(hidden)]
                pub fn __dc_barrier(&self) -> bool {
                    #own_barriers #(|| #callee_barriers)*
                }

                /// Emits the body into the calling kernel's IR and returns its value.
                #[doc(hidden)]
                pub fn __dc_build(
                    &self,
                    __b: &mut __dc::ir::Builder,
                    (#(#build_pats,)*): (#(#build_tys,)*),
                ) -> ::core::result::Result<#ret_b, __dc::ir::BuildError> {
                    #infer
                    #bind
                    #body_b
                }

                /// The native body, called by the native bodies of kernels.
                #[doc(hidden)]
                #[inline(always)]
                pub fn __dc_native<#(#declared,)* #(#access_generics),*>(
                    &self,
                    __ctx: &__dc::cpu::ThreadCtx<'_>,
                    (#(#native_pats,)*): (#(#native_tys,)*),
                ) -> #ret_n #where_clause {
                    #body_n
                }
            }
        };
    }
}

/// `kernel_fn(&callee).__dc_barrier()` for each callee, spanned at the call, so that a
/// callee that is not a kernel function is reported once, where it is called.
pub(crate) fn barrier_calls(paths: &[syn::Path]) -> Vec<TokenStream> {
    paths
        .iter()
        .map(|p| quote_spanned!(p.span()=> __dc::kernel_fn(&#p).__dc_barrier()))
        .collect()
}
