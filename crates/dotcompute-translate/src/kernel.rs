//! `#[kernel]`: the module a kernel function becomes (its definition, `launch`, the IR
//! builder and the native CPU body), made in named steps: the parameters, the body (one
//! walk for both halves), the CPU's group body split at barriers, the definition and the
//! module around them.

use super::*;

/// Translates the whole kernel function into its module.
pub fn kernel(f: &ItemFn) -> Result<TokenStream, Vec<syn::Error>> {
    check_attrs(f, "kernel")?;
    let mut tx = Tx::new(None);
    let sig = &f.sig;
    tx.signature(sig, "kernel");
    if let ReturnType::Type(_, t) = &sig.output {
        tx.errors.push(err(
            t.span(),
            "a kernel returns nothing: write results into a `&mut [T]` parameter",
        ));
    }
    let params = KernelParams::translate(&mut tx, sig);
    tx.scopes.push(HashMap::new());
    // The CPU's group body (split at barriers) walks the body again from here.
    let before_body = tx.clone();
    let (body_b, body_n) = body(&mut tx, f);
    if !tx.errors.is_empty() {
        return Err(tx.errors);
    }
    let (split, lane_regions) = cpu_group_body(&tx, before_body, f, &params.bind);
    Ok(module(
        f,
        &tx,
        &params,
        (body_b, body_n),
        split,
        lane_regions,
    ))
}

/// What a kernel's parameters become, gathered in order by [`KernelParams::translate`].
struct KernelParams {
    /// IR-builder declarations (`let x = __b.buffer(..)`).
    build: TokenStream,
    /// Native bindings of the launch's arguments (`let x = GlobalRef::bind(__l, 0)?`).
    bind: TokenStream,
    /// The typed `launch` function's parameters, and the arguments it hands on.
    launch_params: Vec<TokenStream>,
    launch_args: Vec<TokenStream>,
    /// One line per parameter for `launch`'s documentation.
    docs: Vec<String>,
}

impl KernelParams {
    /// Translates and binds each parameter (buffers and scalars; errors for the rest).
    fn translate(tx: &mut Tx, sig: &syn::Signature) -> KernelParams {
        let mut build_params = TokenStream::new();
        let mut bind_params = TokenStream::new();
        let mut launch_params = Vec::new();
        let mut launch_args = Vec::new();
        let mut param_docs = Vec::new();
        for (index, input) in sig.inputs.iter().enumerate() {
            let Some(ParamSpec {
                pat: pi,
                array,
                ty,
                ty_syntax,
            }) = tx.param(input, "kernel")
            else {
                continue;
            };
            if pi.mutability.is_some() {
                tx.errors.push(err(
                    pi.span(),
                    "kernel parameters are immutable; copy into a local (`let mut x = x;`)",
                ));
                continue;
            }
            let pname = &pi.ident;
            let pname_str = pname.to_string();
            let Ty {
                name: elem,
                ir: t,
                native: elem_id,
                ..
            } = ty;
            match array {
                Some(writable) => {
                    if elem == "bool" {
                        tx.errors.push(err(
                            ty_syntax.span(),
                            "buffers of bool are not supported (no GPU stores bool in memory); use u32",
                        ));
                        continue;
                    }
                    let ir_access = if writable {
                        quote!(ReadWrite)
                    } else {
                        quote!(Read)
                    };
                    let view = if writable {
                        quote!(GlobalMut)
                    } else {
                        quote!(GlobalRef)
                    };
                    build_params.extend(
                        quote!(let #pname = __b.buffer(#pname_str, #t, __dc::ir::Access::#ir_access);),
                    );
                    bind_params.extend(
                        quote!(let #pname = __dc::cpu::#view::<#elem_id>::bind(__l, #index)?;),
                    );
                    // A buffer or a view of one (indexed from the view's start), by reference
                    // so that a `&mut Buffer` variable is reborrowed, not moved.
                    if writable {
                        launch_params.push(
                            quote!(#pname: &'__dc_a mut impl ::dotcompute::KernelBufferMut<#elem_id>),
                        );
                        launch_args.push(quote!(::dotcompute::KernelBufferMut::arg_mut(#pname)));
                    } else {
                        launch_params.push(
                            quote!(#pname: &'__dc_a impl ::dotcompute::KernelBuffer<#elem_id>),
                        );
                        launch_args.push(quote!(::dotcompute::KernelBuffer::arg(#pname)));
                    }
                    tx.bind(
                        &pname_str,
                        if writable {
                            Binding::Buffer
                        } else {
                            Binding::ReadOnlyBuffer
                        },
                    );
                    param_docs.push(format!(
                        "* `{pname_str}`: `{}[{elem}]`",
                        if writable { "&mut " } else { "&" }
                    ));
                }
                None => {
                    build_params.extend(quote!(let #pname = __b.scalar(#pname_str, #t);));
                    bind_params.extend(
                        quote!(let #pname: #elem_id = __dc::cpu::scalar::<#elem_id>(__l, #index)?;),
                    );
                    launch_params.push(quote!(#pname: #elem_id));
                    launch_args.push(quote!(__dc::Arg::scalar(#pname)));
                    tx.bind(&pname_str, Binding::Scalar);
                    param_docs.push(format!("* `{pname_str}`: `{elem}` by value"));
                }
            }
        }
        KernelParams {
            build: build_params,
            bind: bind_params,
            launch_params,
            launch_args,
            docs: param_docs,
        }
    }
}

/// The body: builder and native code from one walk, a `__b.line` before each statement.
fn body(tx: &mut Tx, f: &ItemFn) -> Pair {
    let mut body_b = TokenStream::new();
    let mut body_n = TokenStream::new();
    for s in &f.block.stmts {
        let (sb, sn) = tx.stmt(s);
        let line = line_of(s.span());
        body_b.extend(quote!(__b.line(#line); #sb));
        body_n.extend(sn);
    }
    (body_b, body_n)
}

/// Kernels with barriers run on the CPU as a group body split at the barriers where the
/// body allows it, unless a #[kernel_fn] it calls has barriers of its own (the split
/// cannot see inside it), which the helpers' constants tell at compile time.
/// Returns the native code that takes the split body where it may (empty where the
/// kernel has no barrier or the split gives up), and its number of lane regions.
fn cpu_group_body(
    tx: &Tx,
    before_body: Tx,
    f: &ItemFn,
    bind_params: &TokenStream,
) -> (TokenStream, usize) {
    let mut lane_regions = 0usize;
    let split = match (tx.barrier_sites > 0)
        .then(|| fission::group_body(before_body, &f.block.stmts))
        .flatten()
    {
        Some((group, lanes)) => {
            lane_regions = lanes;
            let helper_barriers = barrier_calls(&tx.helper_paths);
            let run = quote! {
                __dc::cpu::execute_groups(__l, move |__g: &__dc::cpu::Group<'_>| {
                    #group
                })
            };
            // A copy compiled for AVX2 (the closures inside inherit the target feature),
            // where the processor has it: lane regions then use 8-wide registers. Kernels
            // with generic parameters keep the one copy (an inner fn cannot name them).
            let avx2 = match f.sig.generics.params.is_empty() {
                true => quote! {
                    #[cfg(target_arch = "x86_64")]
                    {
                        #[target_feature(enable = "avx2")]
                        unsafe fn __dc_split_avx2(
                            __l: &__dc::NativeLaunch<'_>,
                        ) -> ::dotcompute::Result<()> {
                            #bind_params
                            #run
                        }
                        if __dc::cpu::lanes::avx2() {
                            // SAFETY: the processor has AVX2 (checked just above).
                            return unsafe { __dc_split_avx2(__l) };
                        }
                    }
                },
                false => quote!(),
            };
            quote! {
                let __dc_split: bool = true #(&& !#helper_barriers)*;
                if __dc_split
                    && __dc::cpu::barrier_schedule() == __dc::cpu::BarrierSchedule::Fission
                {
                    #avx2
                    return #run;
                }
            }
        }
        None => quote!(),
    };
    (split, lane_regions)
}

/// `launch`'s documentation: how it runs, its arguments in order, what it returns.
fn launch_doc(name_str: &str, param_docs: &[String]) -> String {
    let params_doc = param_docs.join("\n");
    let launch_doc = format!(
        "Runs `{name_str}` with the geometry `launch` on `queue`: a `Device` (its default \
         stream) or a `Stream`.\n\nArguments, in order:\n{params_doc}\n\n\
         Returns when the results are visible to later operations on the stream (and, \
         through the buffers' use tracking, on every stream that uses them next). Errors \
         (never panics) on launch geometry beyond the device's limits, buffers of another \
         device, empty buffers, and out-of-bounds accesses the backend detects."
    );
    launch_doc
}

/// A generic kernel has one definition per instantiation, made on first use; a plain
/// one keeps its `KERNEL` static.
/// Returns the definition's items and the expression that names the definition.
fn definition(f: &ItemFn, generics: &Generics) -> (TokenStream, TokenStream) {
    let sig = &f.sig;
    let name_str = sig.ident.to_string();
    let Generics {
        decl,
        turbofish,
        bare,
        bare_args,
        ..
    } = generics;
    let where_clause = &generics.where_clause;
    if sig.generics.params.is_empty() {
        (
            quote! {
                /// The kernel definition handed to backends.
                pub static KERNEL: __dc::KernelDef =
                    __dc::KernelDef::new(#name_str, __build, ::core::option::Option::Some(__native));
                /// The kernel definition (`KERNEL`), named as a generic kernel's is:
                /// `my_kernel::kernel().source(Target::Cuda)` shows its generated code.
                pub fn kernel() -> &'static __dc::KernelDef { &KERNEL }
                fn __instance_name() -> ::std::string::String { #name_str.into() }
            },
            quote!((&KERNEL)),
        )
    } else {
        let parts = sig.generics.params.iter().map(|g| match g {
            syn::GenericParam::Type(t) => {
                let id = &t.ident;
                quote!(<#id as __dc::cpu::KernelScalar>::SCALAR.name().to_string())
            }
            syn::GenericParam::Const(c) => {
                let id = &c.ident;
                quote!(__dc::instance_part(#id))
            }
            syn::GenericParam::Lifetime(_) => quote!(),
        });
        (
            quote! {
                /// Marks one instantiation (its `TypeId` keys the definitions).
                pub struct __Instance<#bare>(::core::marker::PhantomData<fn() -> (#(#bare_args,)*)>);

                /// The kernel definition of one instantiation, handed to backends (made
                /// on first use and kept for the process).
                pub fn kernel #decl () -> &'static __dc::KernelDef #where_clause {
                    static INSTANCES: __dc::Instances = __dc::Instances::new();
                    INSTANCES.get(::core::any::TypeId::of::<__Instance #turbofish>(), || {
                        __dc::KernelDef::new(
                            __dc::leak_name(__instance_name #turbofish ()),
                            __build #turbofish,
                            ::core::option::Option::Some(__native #turbofish),
                        )
                    })
                }

                /// The kernel's name for this instantiation, as its IR and generated code
                /// give it: the parameters appended (`matmul_f32_16`).
                fn __instance_name #decl () -> ::std::string::String #where_clause {
                    let mut __n = ::std::string::String::from(#name_str);
                    #( __n.push('_'); __n.push_str(&#parts); )*
                    __n
                }
            },
            quote!(kernel #turbofish ()),
        )
    }
}

/// The module the kernel becomes, around the steps' results.
fn module(
    f: &ItemFn,
    tx: &Tx,
    params: &KernelParams,
    (body_b, body_n): Pair,
    split: TokenStream,
    lane_regions: usize,
) -> TokenStream {
    let sig = &f.sig;
    let name = &sig.ident;
    let vis = &f.vis;
    let docs = doc_attrs(f);
    let launch_doc = launch_doc(&name.to_string(), &params.docs);
    let (build_params, bind_params) = (&params.build, &params.bind);
    let (launch_params, launch_args) = (&params.launch_params, &params.launch_args);
    let span = sig.ident.span();
    let fast_views: Vec<Ident> = tx
        .gid_indexed
        .iter()
        .map(|n| format_ident!("{n}"))
        .collect();
    let generics = Generics::of(sig, &tx.type_params);
    let Generics {
        decl,
        turbofish,
        bare_args,
        ty_vars,
        ..
    } = &generics;
    let where_clause = &generics.where_clause;
    // The launch function's lifetime ties its arguments together (`Arg<'a>`).
    let declared = &generics.params;
    let launch_decl = quote!(<'__dc_a, #(#declared),*>);
    let (definition, def) = definition(f, &generics);
    quote_spanned! {span=>
        #(#docs)*
        #[allow(non_snake_case, unused_imports, dead_code, unused_variables, unused_mut, unused_braces, unused_parens, clippy::all)]
        #vis mod #name {
            use super::*;
            #[allow(unused_imports)]
            use ::dotcompute::__private as __dc;
            #[allow(unused_imports)]
            use ::dotcompute::__private::NotKernelFn as _;

            #definition

            /// Barrier-free regions of the CPU's split group body that also run in lane
            /// form, a chunk of threads at a time (tests check that a kernel takes it).
            #[doc(hidden)]
            pub const __DC_LANE_REGIONS: usize = #lane_regions;

            #[doc = #launch_doc]
            pub fn launch #launch_decl (
                __queue: &impl ::dotcompute::AsStream,
                __launch: ::dotcompute::Launch,
                #(#launch_params),*
            ) -> ::dotcompute::Result<()> #where_clause {
                ::dotcompute::AsStream::launch_kernel(__queue, #def, __launch, &[#(#launch_args),*])
            }

            /// The kernel's IR (built and validated on first use).
            pub fn ir #decl () -> ::dotcompute::Result<::std::sync::Arc<__dc::ir::Kernel>> #where_clause {
                #def.ir().cloned()
            }

            fn __build #decl () -> ::core::result::Result<__dc::ir::Kernel, __dc::ir::BuildError> #where_clause {
                #( let #ty_vars = <#bare_args as __dc::cpu::KernelScalar>::SCALAR; )*
                let mut __builder = __dc::ir::Builder::new(&__instance_name #turbofish ());
                {
                    let __b = &mut __builder;
                    #build_params
                    #body_b
                }
                __builder.finish()
            }

            fn __native #decl (__l: &__dc::NativeLaunch<'_>) -> ::dotcompute::Result<()> #where_clause {
                #bind_params
                #split
                // Threads with global_id().x below this bound index every array listed in
                // the fast body's assumption in bounds.
                let __fast_limit: u32 = [#(#fast_views.len()),*].into_iter().min().unwrap_or(u32::MAX);
                __dc::cpu::execute(
                    __l,
                    __fast_limit,
                    move |__ctx: &__dc::cpu::ThreadCtx<'_>| {
                        #[allow(unused_macros)]
                        macro_rules! __dc_assume_in_bounds { ($i:ident) => {}; }
                        #body_n
                    },
                    move |__ctx: &__dc::cpu::ThreadCtx<'_>| {
                        #[allow(unused_macros)]
                        macro_rules! __dc_assume_in_bounds {
                            ($i:ident) => {
                                // SAFETY: the executor runs this body only for threads with
                                // global_id().x < __fast_limit, the smallest length among
                                // these arrays, and `$i` is exactly global_id().x.
                                unsafe { ::core::hint::assert_unchecked(true #(&& $i < #fast_views.len())*) }
                            };
                        }
                        #body_n
                    },
                )
            }
        }
    }
}
