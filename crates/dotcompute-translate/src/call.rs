//! Calls: builtins, atomics, subgroup and matrix operations, vector constructors,
//! type functions and `#[kernel_fn]` helpers.

use super::*;

impl Tx {
    pub(crate) fn call(&mut self, c: &syn::ExprCall) -> Pair {
        if let Some((name, ir)) = builtins().find(|(n, _)| is_call_to(c, n)) {
            return self.fail(
                c.span(),
                format!("`{name}()` is a 3-vector: use `{name}().x`, `.y` or `.z` ({ir})"),
            );
        }
        if is_call_to(c, "barrier") {
            return self.fail(c.span(), "`barrier()` is a statement, not a value");
        }
        if let Some((name, _)) = mma_shape(c) {
            return self.fail(
                c.span(),
                format!("`{name}(..)` is a statement: it updates its accumulator in place"),
            );
        }
        if is_call_to(c, "shared") || is_call_to(c, "shared_dynamic") {
            return self.fail(
                c.span(),
                "shared arrays are declared with `let name = shared::<T, LEN>();`",
            );
        }
        if let Some(pair) = self.type_function(c) {
            return pair;
        }
        if let Some((name, op)) = subgroup_ops().find(|(n, _)| is_call_to(c, n)) {
            if self.short_circuit > 0 {
                return self.fail(c.span(), format!("`{name}` on the right of `&&` or `||` is not supported: every thread of the subgroup must reach it; use an `if` around a value computed before"));
            }
            let (bs, ns, tmps) = self.operands(&c.args);
            let (op, native) = (format_ident!("{op}"), format_ident!("{name}"));
            return (
                quote!({ #(let #tmps = #bs;)* __b.subgroup(__dc::ir::SubgroupOp::#op, vec![#(#tmps),*])? }),
                quote!(__dc::ops::#native(#(#ns),*)),
            );
        }
        let Some((fname, op)) = atomic_name(c) else {
            return self.helper_call(c);
        };
        if self.short_circuit > 0 {
            return self.fail(c.span(), format!("`{fname}` on the right of `&&` or `||` is not supported: its side effect would not be conditional on every backend; use an `if`"));
        }
        let (arity, operands) = match op.as_str() {
            "CompareExchange" => (3, "&array[index], expected, new"),
            "Load" => (1, "&array[index]"),
            _ => (2, "&array[index], value"),
        };
        if c.args.len() != arity {
            let plural = if arity == 1 { "" } else { "s" };
            return self.fail(
                c.span(),
                format!("`{fname}` takes {arity} argument{plural}: `{fname}({operands})`"),
            );
        }
        let Some(ix) = element_address(&c.args[0], false) else {
            return self.fail(
                c.args[0].span(),
                format!(
                    "the first argument of `{fname}` is the element's address: `&array[index]`"
                ),
            );
        };
        let Some((mem, ib, inn)) = self.element(ix, true) else {
            return (quote!(), quote!());
        };
        let (vbs, vns, tmps) = self.operands(c.args.iter().skip(1));
        let op = format_ident!("{op}");
        let method = format_ident!("{fname}");
        (
            quote!({ let __i = #ib; #(let #tmps = #vbs;)* __b.atomic(__dc::ir::AtomicOp::#op, #mem, __i, vec![#(#tmps),*])? }),
            quote!(#mem.#method(#inn, #(#vns),*)),
        )
    }

    /// `mma_m16n8k8_tf32(&mut acc[base], a0, a1, a2, a3, b0, b1)` and
    /// `mma_m16n8k16_f16(&mut acc[base], a0, .., a7, b0, .., b3)`: a tensor-core
    /// multiply-accumulate into `acc[base..base + 4]` (IR `Mma`). The CPU backend has no
    /// tensor cores: launches there are refused before the native body runs.
    pub(crate) fn mma(&mut self, c: &syn::ExprCall) -> Pair {
        let Some((name, (a_len, b_len))) = mma_shape(c) else {
            return self.fail(c.span(), "not a tensor-core operation");
        };
        let usage = format!(
            "`{name}(&mut acc[base], {} A elements, {} B elements)`",
            a_len, b_len
        );
        if c.args.len() != 1 + a_len + b_len {
            return self.fail(
                c.span(),
                format!(
                    "{usage} takes {} arguments, found {}",
                    1 + a_len + b_len,
                    c.args.len()
                ),
            );
        }
        let Some(ix) = element_address(&c.args[0], true) else {
            return self.fail(
                c.args[0].span(),
                format!("the first argument of {usage} is the accumulator's first element: `&mut acc[base]`"),
            );
        };
        let Some((mem, ib, inn)) = self.element(ix, true) else {
            return (quote!(), quote!());
        };
        let (bs, ns, tmps) = self.operands(c.args.iter().skip(1));
        let (ta, tb) = (&tmps[..a_len], &tmps[a_len..]);
        let shape = if a_len == 4 {
            quote!(M16N8K8Tf32)
        } else {
            quote!(M16N8K16F16)
        };
        (
            quote!({
                let __i = #ib;
                #(let #tmps = #bs;)*
                __b.mma(__dc::ir::MmaShape::#shape, #mem, __i, vec![#(#ta),*], vec![#(#tb),*])?;
            }),
            quote!(__dc::ops::mma(#name, &#mem, #inn, [#(#ns),*]);),
        )
    }

    /// The operands of a builtin call, translated in order: their builder and native
    /// forms, and the temporaries (`__a0`, ..) the builder form binds them to, so each
    /// is built once, before the call, in source order.
    pub(crate) fn operands<'e>(
        &mut self,
        args: impl IntoIterator<Item = &'e Expr>,
    ) -> (Vec<TokenStream>, Vec<TokenStream>, Vec<Ident>) {
        let (mut bs, mut ns) = (Vec::new(), Vec::new());
        for a in args {
            let (b, n) = self.expr(a);
            bs.push(b);
            ns.push(n);
        }
        let tmps = (0..bs.len()).map(|i| format_ident!("__a{i}")).collect();
        (bs, ns, tmps)
    }

    /// Barrier sites number the barriers of one kernel for divergence checks; a helper's
    /// are offset by a hash of its name so that they differ from its callers'.
    pub(crate) fn barrier_site(&self) -> u32 {
        match &self.helper {
            None => self.barrier_sites,
            Some(name) => {
                let hash = name.bytes().fold(0x811c_9dc5u32, |h, b| {
                    (h ^ b as u32).wrapping_mul(0x0100_0193)
                });
                0x8000_0000 | (hash & 0x7fff_0000) | (self.barrier_sites & 0xffff)
            }
        }
    }

    /// `Vec2::new(x, y)`, `Vec4::new(x, y, z, w)` and `Vec{2,4}::splat(v)`.
    pub(crate) fn vector_call(&mut self, c: &syn::ExprCall, vec: &Ident, f: &Ident) -> Pair {
        let lanes: u8 = if vec == "Vec4" { 4 } else { 2 };
        let arity = match f.to_string().as_str() {
            "new" => lanes as usize,
            "splat" => 1,
            other => {
                return self.fail(
                    f.span(),
                    format!("`Vec{lanes}::{other}` is not supported in kernels; vectors are made with `new` and `splat`"),
                )
            }
        };
        if c.args.len() != arity {
            return self.fail(
                c.span(),
                format!("`Vec{lanes}::{f}` takes {arity} argument(s)"),
            );
        }
        let (bs, ns): (Vec<_>, Vec<_>) = c.args.iter().map(|a| self.expr(a)).unzip();
        let tmps: Vec<Ident> = (0..bs.len()).map(|i| format_ident!("__l{i}")).collect();
        let build = if arity == 1 {
            quote!({ let __x = #(#bs)*; __b.splat(__x, #lanes)? })
        } else {
            quote!({ #(let #tmps = #bs;)* __b.vector(vec![#(#tmps),*])? })
        };
        (build, quote!(#vec::#f(#(#ns),*)))
    }

    /// `T::zero()`, `T::one()`, `T::cast(x)` and `T::bitcast(x)` on a generic or scalar
    /// type `T`.
    pub(crate) fn type_function(&mut self, c: &syn::ExprCall) -> Option<Pair> {
        let Expr::Path(p) = &*c.func else { return None };
        let segs = &p.path.segments;
        if p.qself.is_some() || segs.len() != 2 || !segs[1].arguments.is_empty() {
            return None;
        }
        let head = segs[0].ident.to_string();
        if head == "Vec2" || head == "Vec4" {
            return Some(self.vector_call(c, &segs[0].ident, &segs[1].ident));
        }
        let ty: Type = Type::Path(syn::TypePath {
            qself: None,
            path: segs[0].ident.clone().into(),
        });
        if self.type_param(&ty).is_none() && scalar_type(&ty).is_none() {
            return None;
        }
        let f = segs[1].ident.to_string();
        let arity = match f.as_str() {
            "zero" | "one" => 0,
            "cast" | "bitcast" => 1,
            _ => {
                return Some(self.fail(
                    segs[1].span(),
                    format!("`{}::{f}` is not supported in kernels; types offer `zero()`, `one()`, `cast(x)` (an `as` conversion) and `bitcast(x)` (the same bits, as `from_bits` / `to_bits`)", segs[0].ident),
                ))
            }
        };
        if c.args.len() != arity {
            return Some(self.fail(c.span(), format!("`{f}` takes {arity} argument(s)")));
        }
        let Ty { ir, native, .. } = self.scalar_ty(&ty, "a type function")?;
        Some(if arity == 0 {
            let v: i32 = if f == "one" { 1 } else { 0 };
            (
                quote!(__b.typed(__dc::ir::V::Int(#v as i128), #ir, #f)?),
                quote!(__dc::ops::cast::<#native, i32>(#v)),
            )
        } else if f == "bitcast" {
            let (b, n) = self.expr(&c.args[0]);
            (
                quote!({ let __v = #b; __b.bitcast(__v, #ir)? }),
                quote!(__dc::ops::bitcast::<#native, _>(#n)),
            )
        } else {
            let (b, n) = self.expr(&c.args[0]);
            (
                quote!({ let __v = #b; __b.cast(__v, #ir)? }),
                quote!(__dc::ops::cast::<#native, _>(#n)),
            )
        })
    }

    /// A call of a `#[kernel_fn]`: inlined into the IR by its builder function, called
    /// natively. Arrays are passed whole by naming them.
    pub(crate) fn helper_call(&mut self, c: &syn::ExprCall) -> Pair {
        let Expr::Path(p) = &*c.func else {
            return self.fail(
                c.func.span(),
                "only named functions (`#[kernel_fn]`s) can be called in kernels",
            );
        };
        if p.qself.is_some() || p.path.segments.iter().any(|s| !s.arguments.is_empty()) {
            return self.fail(
                p.span(),
                "generic arguments on a #[kernel_fn] call are not supported: its type \
                 parameters are inferred from the arguments",
            );
        }
        if self.short_circuit > 0 {
            return self.fail(
                c.span(),
                "a #[kernel_fn] call on the right of `&&` or `||` is not supported: its \
                 statements would not be conditional on every backend; call it in a `let` \
                 before, or use an `if`",
            );
        }
        let mut bs = Vec::new();
        let mut ns = Vec::new();
        for a in &c.args {
            if let Expr::Path(ap) = a {
                if let Some(id) = ap.path.get_ident() {
                    if self.lookup(&id.to_string()).is_some_and(Binding::is_array) {
                        bs.push(quote!(#id));
                        ns.push(quote!(#id));
                        continue;
                    }
                }
            }
            let (b, n) = self.expr(a);
            bs.push(b);
            ns.push(n);
        }
        let tmps: Vec<Ident> = (0..bs.len()).map(|i| format_ident!("__a{i}")).collect();
        let path = &p.path;
        // Compared as text: syn's PartialEq needs its `extra-traits` feature.
        let text = path.to_token_stream().to_string();
        if !self
            .helper_paths
            .iter()
            .any(|p| p.to_token_stream().to_string() == text)
        {
            self.helper_paths.push(path.clone());
        }
        // A kernel function is a value with `__dc_build` / `__dc_native` methods; any
        // other function falls back to `NotKernelFn`'s, whose bound says "mark it
        // #[kernel_fn]" at the call (one error, no unresolved path after it).
        let build = quote_spanned!(path.span()=> __dc::kernel_fn(&#path).__dc_build);
        let native = quote_spanned!(path.span()=> __dc::kernel_fn(&#path).__dc_native);
        (
            quote!({ #(let #tmps = #bs;)* #build(__b, (#(#tmps,)*))? }),
            quote!(#native(__ctx, (#(#ns,)*))),
        )
    }
}
