//! The translation of one kernel function. Every construct yields a pair of token streams:
//! IR-builder code (`B`, evaluating to a `V` for expressions) and native Rust code (`N`).

use dotcompute_ir::{AtomicOp, Builtin, MathFn, SubgroupOp};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use std::collections::HashMap;
use syn::spanned::Spanned;
use syn::{
    BinOp, Expr, FnArg, GenericArgument, Ident, ItemFn, Lit, Pat, PathArguments, RangeLimits,
    ReturnType, Stmt, Type, UnOp,
};

mod fission;
mod lanes;
mod uniform;

type Pair = (TokenStream, TokenStream);

#[derive(Clone, Copy, PartialEq)]
enum Binding {
    Local,
    /// An immutable local that is exactly `global_id().x`.
    GidX,
    Scalar,
    /// A writable buffer parameter (`&mut [T]`).
    Buffer,
    /// A read-only buffer parameter (`&[T]`).
    ReadOnlyBuffer,
    /// A writable array that is not a kernel parameter: a shared array, a `mut` local
    /// array, a kernel function's `&mut [T]`.
    Shared,
    /// An immutable local array, or a kernel function's `&[T]`.
    ReadOnlyArray,
    /// A local whose initial value already failed with an error: its uses report
    /// nothing more (one error per mistake).
    Failed,
}

impl Binding {
    fn is_array(self) -> bool {
        matches!(
            self,
            Binding::Buffer | Binding::ReadOnlyBuffer | Binding::Shared | Binding::ReadOnlyArray
        )
    }
}

const SCALARS: [&str; 8] = ["bool", "i32", "u32", "i64", "u64", "f32", "f64", "f16"];

/// `x` of a `for` step written `x as usize`, which stays a `usize` in native code (the
/// translator and the lane emitter both keep the cast), or `None`.
fn usize_step(s: &Expr) -> Option<&Expr> {
    match s {
        Expr::Cast(c) if matches!(&*c.ty, Type::Path(p) if p.path.is_ident("usize")) => {
            Some(&c.expr)
        }
        _ => None,
    }
}

/// The kernel language's names, from the IR's tables: (name, IR variant).
fn builtins() -> impl Iterator<Item = (&'static str, String)> {
    Builtin::ALL
        .into_iter()
        .map(|b| (b.name(), format!("{b:?}")))
}
/// `atomic_add` and so on: (name, IR variant).
fn atomics() -> impl Iterator<Item = (String, String)> {
    AtomicOp::ALL
        .into_iter()
        .map(|op| (format!("atomic_{}", op.name()), format!("{op:?}")))
}
/// Subgroup functions: (name, also the native `ops` function; IR variant).
fn subgroup_ops() -> impl Iterator<Item = (&'static str, String)> {
    SubgroupOp::ALL
        .into_iter()
        .map(|op| (op.name(), format!("{op:?}")))
}
/// Math methods: (method name, IR variant, native `ops` function, arity with receiver).
fn math_methods() -> impl Iterator<Item = (&'static str, String, &'static str, usize)> {
    MathFn::ALL
        .into_iter()
        .map(|f| (f.method(), format!("{f:?}"), f.name(), f.arity()))
}

#[derive(Clone)]
struct Tx {
    errors: Vec<syn::Error>,
    scopes: Vec<HashMap<String, Binding>>,
    shared_slots: usize,
    barrier_sites: u32,
    /// Depth of right-hand sides of `&&` / `||` being translated.
    short_circuit: u32,
    /// Whether we are directly in the kernel's top-level block.
    top_level: bool,
    /// Arrays indexed by a `global_id().x` alias somewhere (for bounds-check elimination).
    gid_indexed: std::collections::BTreeSet<String>,
    /// `match` expressions desugared so far (names their scrutinee locals).
    matches: u32,
    /// Row lengths of the 2-D shared arrays in scope, by name.
    row_len: HashMap<String, TokenStream>,
    /// Local arrays declared so far (their index in `Kernel::local_arrays`).
    local_arrays: usize,
    /// Generic type parameters of the function being translated.
    type_params: Vec<Ident>,
    /// Its const parameters (a local array's length naming one is known only per
    /// instance: natively it cannot be a Rust array length).
    const_params: Vec<Ident>,
    /// The name of the `#[kernel_fn]` being translated; `None` in a kernel.
    helper: Option<String>,
    /// `#[kernel_fn]`s called (their paths), whose barriers decide whether the CPU may
    /// split the kernel at its own barriers.
    helper_paths: Vec<syn::Path>,
    /// While translating one region of a kernel split at its barriers (the CPU's group
    /// body, `fission.rs`): the depth of loops entered inside the region. `break` and
    /// `continue` at depth 0 leave the loop around the region, and `return` ends the
    /// thread, so they become `Flow` values returned from the region's closure.
    region: Option<u32>,
    /// Set by the splitter for a local array declared at a region's top level: its
    /// per-thread slot, which replaces the thread's stack storage.
    lift_array: Option<Ident>,
}

fn err(span: Span, msg: impl std::fmt::Display) -> syn::Error {
    syn::Error::new(span, msg)
}

/// A kernel type as both halves see it: the IR's `ScalarType` (an expression, since a
/// generic parameter's type is a run-time value in the builder) and the native Rust type.
#[derive(Clone)]
struct Ty {
    name: String,
    ir: TokenStream,
    native: TokenStream,
    /// 1 for a scalar, 2 or 4 for `Vec2<T>` / `Vec4<T>`.
    lanes: u8,
}

/// `Vec2<T>` or `Vec4<T>`: the lane count and the lane type's syntax.
fn vector_type(ty: &Type) -> Option<(u8, &Type)> {
    let Type::Path(p) = ty else { return None };
    if p.qself.is_some() || p.path.segments.len() != 1 {
        return None;
    }
    let seg = &p.path.segments[0];
    let lanes = match seg.ident.to_string().as_str() {
        "Vec2" => 2,
        "Vec4" => 4,
        _ => return None,
    };
    let PathArguments::AngleBracketed(args) = &seg.arguments else {
        return None;
    };
    match args.args.first() {
        Some(GenericArgument::Type(t)) if args.args.len() == 1 => Some((lanes, t)),
        _ => None,
    }
}

fn scalar_type(ty: &Type) -> Option<(String, Ident)> {
    if let Type::Path(p) = ty {
        if p.qself.is_none() && p.path.segments.len() == 1 {
            let id = &p.path.segments[0].ident;
            let name = id.to_string();
            if SCALARS.contains(&name.as_str()) && p.path.segments[0].arguments.is_empty() {
                return Some((name, id.clone()));
            }
        }
    }
    None
}

fn ir_type(name: &str) -> TokenStream {
    let v = format_ident!(
        "{}",
        match name {
            "bool" => "Bool",
            "i32" => "I32",
            "u32" => "U32",
            "i64" => "I64",
            "u64" => "U64",
            "f32" => "F32",
            "f16" => "F16",
            _ => "F64",
        }
    );
    quote!(__dc::ir::ScalarType::#v)
}

fn line_of(span: Span) -> u32 {
    span.start().line as u32
}

impl Tx {
    fn fail(&mut self, span: Span, msg: impl std::fmt::Display) -> Pair {
        self.errors.push(err(span, msg));
        (quote!(), quote!())
    }

    fn lookup(&self, name: &str) -> Option<Binding> {
        self.scopes.iter().rev().find_map(|s| s.get(name).copied())
    }

    fn bind(&mut self, name: &str, b: Binding) {
        self.scopes.last_mut().unwrap().insert(name.to_string(), b);
    }

    /// A kernel type that must be a scalar (shared and local arrays, casts, a kernel's
    /// scalar parameters).
    fn scalar_ty(&mut self, ty: &Type, what: &str) -> Option<Ty> {
        let t = self.ty(ty, what)?;
        if t.lanes > 1 {
            self.errors.push(err(
                ty.span(),
                format!(
                    "{what} cannot be a vector: vectors are buffer elements (`&[Vec4<f32>]`), \
                     locals and #[kernel_fn] values"
                ),
            ));
            return None;
        }
        Some(t)
    }

    fn ty(&mut self, ty: &Type, what: &str) -> Option<Ty> {
        if let Some((lanes, lane)) = vector_type(ty) {
            let lane_ty = self.ty(lane, what)?;
            if lane_ty.lanes > 1
                || !["f32", "i32", "u32"].contains(&lane_ty.name.as_str())
                    && self.type_param(lane).is_none()
            {
                self.errors.push(err(
                    lane.span(),
                    format!(
                        "Vec{lanes} lanes are f32, i32 or u32 (8- and 16-byte vectors), found `{}`",
                        lane_ty.name
                    ),
                ));
                return None;
            }
            let (ir, native) = (&lane_ty.ir, &lane_ty.native);
            // The user's own name for the type (`use dotcompute::Vec4;`), as Rust resolves it.
            let vec = match ty {
                Type::Path(p) => p.path.segments[0].ident.clone(),
                _ => format_ident!("Vec{lanes}"),
            };
            return Some(Ty {
                name: format!("Vec{lanes}<{}>", lane_ty.name),
                ir: quote!(__dc::ir::Type::vector(#ir, #lanes)),
                native: quote!(#vec<#native>),
                lanes,
            });
        }
        if let Some(param) = self.type_param(ty) {
            return Some(Ty {
                name: param.to_string(),
                ir: ty_var(&param).to_token_stream(),
                native: param.to_token_stream(),
                lanes: 1,
            });
        }
        match scalar_type(ty) {
            Some((name, id)) => Some(Ty {
                lanes: 1,
                ir: ir_type(&name),
                // `f16` is no Rust primitive (on stable): kernels mean dotcompute's.
                native: if name == "f16" {
                    quote!(::dotcompute::f16)
                } else {
                    id.to_token_stream()
                },
                name,
            }),
            None => {
                self.errors.push(err(
                    ty.span(),
                    format!(
                        "unsupported type in {what}: kernels use the scalar types \
                         bool, i32, u32, i64, u64, f32, f64 and f16 (indices and lengths are \
                         u32), their generic type parameters, and Vec2<T> / Vec4<T> of f32, \
                         i32 or u32"
                    ),
                ));
                None
            }
        }
    }

    /// The generic type parameter `ty` names, if it is one.
    fn type_param(&self, ty: &Type) -> Option<Ident> {
        let Type::Path(p) = ty else { return None };
        let id = p.path.get_ident()?;
        p.qself
            .is_none()
            .then(|| self.type_params.iter().find(|t| *t == id).cloned())
            .flatten()
    }

    // ---------------------------------------------------------------- blocks

    /// The body of a `for`, `while` or `loop`.
    fn loop_body(&mut self, stmts: &[Stmt]) -> Pair {
        if let Some(d) = &mut self.region {
            *d += 1;
        }
        let r = self.block(stmts);
        if let Some(d) = &mut self.region {
            *d -= 1;
        }
        r
    }

    fn block(&mut self, stmts: &[Stmt]) -> Pair {
        self.scopes.push(HashMap::new());
        let mut b = TokenStream::new();
        let mut n = TokenStream::new();
        for s in stmts {
            let (sb, sn) = self.stmt(s);
            let line = line_of(s.span());
            b.extend(quote!(__b.line(#line); #sb));
            n.extend(sn);
        }
        self.scopes.pop();
        (quote!({ #b }), quote!({ #n }))
    }

    /// A block used as a value: statements, then a tail expression. `tail` receives the
    /// builder tokens of the value and returns what to do with it.
    fn value_block(
        &mut self,
        block: &syn::Block,
        span: Span,
    ) -> (TokenStream, TokenStream, TokenStream) {
        let (last, init) = match block.stmts.split_last() {
            Some((Stmt::Expr(e, None), init)) => (e, init),
            _ => {
                self.fail(
                    span,
                    "this block must end with a value (an expression without `;`)",
                );
                return (quote!(), quote!(), quote!());
            }
        };
        self.scopes.push(HashMap::new());
        let mut b = TokenStream::new();
        let mut n = TokenStream::new();
        for s in init {
            let (sb, sn) = self.stmt(s);
            b.extend(sb);
            n.extend(sn);
        }
        let (vb, vn) = self.expr(last);
        self.scopes.pop();
        (b, vb, quote!({ #n #vn }))
    }

    // ---------------------------------------------------------------- statements

    fn stmt(&mut self, s: &Stmt) -> Pair {
        match s {
            Stmt::Local(local) => self.local(local),
            Stmt::Expr(e, _) => self.expr_stmt(e),
            Stmt::Item(syn::Item::Const(c)) => {
                // A const item is needed by both the builder and the native body.
                (quote!(#c), quote!(#c))
            }
            Stmt::Item(i) => self.fail(
                i.span(),
                "items inside kernels are not supported (only `const`); define them outside",
            ),
            Stmt::Macro(m) => self.fail(
                m.span(),
                format!(
                    "macro `{}!` is not supported in kernels",
                    m.mac
                        .path
                        .segments
                        .last()
                        .map(|s| s.ident.to_string())
                        .unwrap_or_default()
                ),
            ),
        }
    }

    fn local(&mut self, local: &syn::Local) -> Pair {
        let (pat, ty) = match &local.pat {
            Pat::Type(pt) => (&*pt.pat, Some(&*pt.ty)),
            p => (p, None),
        };
        let Pat::Ident(pi) = pat else {
            return self.fail(
                pat.span(),
                "unsupported pattern: kernels bind one name per `let` (no tuples or destructuring)",
            );
        };
        if pi.by_ref.is_some() || pi.subpat.is_some() {
            return self.fail(pat.span(), "unsupported pattern: `ref` and `@` bindings");
        }
        let name = &pi.ident;
        let name_str = name.to_string();
        let Some(init) = &local.init else {
            return self.fail(
                local.span(),
                "a kernel local needs an initial value (`let x: f32 = 0.0;`)",
            );
        };
        if init.diverge.is_some() {
            return self.fail(local.span(), "`let ... else` is not supported in kernels");
        }
        if let Expr::Repeat(rep) = &*init.expr {
            return self.local_array(name, pi.mutability.is_some(), ty, rep, local.span());
        }
        // Shared arrays.
        if let Expr::Call(call) = &*init.expr {
            if let Expr::Path(p) = &*call.func {
                let last = p.path.segments.last().unwrap();
                let fname = last.ident.to_string();
                if fname == "shared" || fname == "shared_dynamic" {
                    return self.shared_decl(name, &fname, last, call, local.span());
                }
            }
        }
        let ty_info = match ty {
            Some(t) => match self.ty(t, "a local's type") {
                Some(t) => Some(t),
                None => return (quote!(), quote!()),
            },
            None => None,
        };
        let errors_before = self.errors.len();
        let (ib, inn) = self.expr(&init.expr);
        if self.errors.len() > errors_before {
            self.bind(&name_str, Binding::Failed);
            return (quote!(), quote!());
        }
        let mutable = pi.mutability.is_some();
        let mut_tok = pi.mutability;
        // Helpers have no fast body, so no in-bounds assumption to record.
        let is_gid_x = !mutable
            && self.helper.is_none()
            && ty_info.as_ref().is_none_or(|t| t.name == "u32")
            && is_global_id_x(&init.expr);
        self.bind(
            &name_str,
            if is_gid_x {
                Binding::GidX
            } else {
                Binding::Local
            },
        );

        let ty_b = optional_ir(ty_info.as_ref());
        let ty_n = match &ty_info {
            Some(t) => {
                let t = &t.native;
                quote!(: #t)
            }
            None => quote!(),
        };
        let assume = if is_gid_x {
            // The CPU backend's fast path may assume this index is in bounds of every array
            // it indexes (see dotcompute_cpu::runtime::execute).
            quote!(__dc_assume_in_bounds!(#name);)
        } else {
            quote!()
        };
        (
            quote!(let #name = { let __v = #ib; __b.let_(#name_str, #ty_b, #mutable, __v)? };),
            quote!(let #mut_tok #name #ty_n = #inn; #assume),
        )
    }

    /// `let mut acc = [init; LEN];` (optionally `: [T; LEN]`): a thread-private array.
    /// Natively a Rust array on the thread's stack behind a checked view.
    fn local_array(
        &mut self,
        name: &Ident,
        mutable: bool,
        ty: Option<&Type>,
        rep: &syn::ExprRepeat,
        span: Span,
    ) -> Pair {
        // Taken first: the initial value's translation must not see it.
        let lifted_slot = self.lift_array.take();
        if self.helper.is_some() {
            return self.fail(
                span,
                "local arrays are declared in kernels; pass one to a #[kernel_fn] as `&mut [T]`",
            );
        }
        let elem = match ty {
            None => None,
            Some(Type::Array(a)) => match self.scalar_ty(&a.elem, "a local array") {
                Some(t) => Some(t),
                None => return (quote!(), quote!()),
            },
            Some(other) => {
                return self.fail(other.span(), "a local array's type is `[T; LEN]`");
            }
        };
        let (ib, inn) = self.expr(&rep.expr);
        // The length is a host expression (a literal or a constant, `usize` as Rust
        // requires), evaluated when the kernel is built.
        let len = &rep.len;
        let name_str = name.to_string();
        let slot = self.local_arrays;
        self.local_arrays += 1;
        self.bind(
            &name_str,
            if mutable {
                Binding::Shared
            } else {
                Binding::ReadOnlyArray
            },
        );
        let elem_b = match &elem {
            Some(Ty { ir, .. }) => quote!(Some(#ir)),
            None => quote!(None),
        };
        let ty_n = match ty {
            Some(t) => quote!(: #t),
            None => quote!(),
        };
        let storage = format_ident!("__dc_storage_{name}");
        if let Some(lifted) = lifted_slot {
            // `(v)` or, with a declared element type, `<T>::from(v)`: the slot's type.
            let elem_n = match &elem {
                Some(Ty { native, .. }) => {
                    quote!(<#native as ::core::convert::From<#native>>::from)
                }
                None => quote!(),
            };
            // The CPU's group body: the array lives in its per-thread slot, indexed in
            // place in every region that uses it.
            return (
                quote!(),
                quote!(let #name = __ctx.local_array(#lifted.fill(__th, #elem_n(#inn)), #slot);),
            );
        }
        // A length naming a const parameter (`[0.0; PER]`, `[0; PER + 1]`) is not a Rust
        // array length in generic code: natively the array is room for the IR's largest
        // local array, of which the instance's length is used. The IR takes the value.
        let per_instance = len.to_token_stream().into_iter().any(
            |t| matches!(&t, proc_macro2::TokenTree::Ident(i) if self.const_params.contains(i)),
        );
        if per_instance {
            let elem_n = match &elem {
                Some(Ty { native, .. }) => quote!(#native),
                None => quote!(_),
            };
            return (
                quote!(let #name = { let __v = #ib; __b.local_array(#name_str, #elem_b, __dc::ir::V::host((#len) as u32), __v)? };),
                quote!(
                    let mut #storage = __dc::cpu::LocalArray::<#elem_n, { __dc::ir::LOCAL_ARRAY_MAX as usize }>::new(#inn, (#len) as usize);
                    let #name = __ctx.local_array(#storage.as_mut_slice(), #slot);
                ),
            );
        }
        (
            quote!(let #name = { let __v = #ib; __b.local_array(#name_str, #elem_b, __dc::ir::V::host(#len), __v)? };),
            quote!(let mut #storage #ty_n = [#inn; #len]; let #name = __ctx.local_array(&mut #storage, #slot);),
        )
    }

    fn shared_decl(
        &mut self,
        name: &Ident,
        fname: &str,
        seg: &syn::PathSegment,
        call: &syn::ExprCall,
        span: Span,
    ) -> Pair {
        if !self.top_level {
            return self.fail(
                span,
                "shared arrays must be declared at the top level of the kernel body",
            );
        }
        if !call.args.is_empty() {
            return self.fail(call.span(), format!("`{fname}` takes no arguments; give the type and length as `{fname}::<f32, 256>()`"));
        }
        let PathArguments::AngleBracketed(args) = &seg.arguments else {
            return self.fail(
                seg.span(),
                format!(
                    "write `{}`",
                    if fname == "shared" {
                        "shared::<f32, 256>()"
                    } else {
                        "shared_dynamic::<f32>()"
                    }
                ),
            );
        };
        let args: Vec<_> = args.args.iter().collect();
        // `shared::<[[T; COLS]; ROWS]>()`: a 2-D array, stored row-major.
        if let (true, [GenericArgument::Type(Type::Array(outer))]) = (fname == "shared", &args[..])
        {
            let Type::Array(inner) = &*outer.elem else {
                return self.fail(outer.span(), "write `shared::<[[T; COLS]; ROWS]>()` for a 2-D array, or `shared::<T, LEN>()`");
            };
            let Some(Ty {
                ir: t,
                native: elem_id,
                ..
            }) = self.scalar_ty(&inner.elem, "a shared array")
            else {
                return (quote!(), quote!());
            };
            let (rows, cols) = (&outer.len, &inner.len);
            let name_str = name.to_string();
            let slot = self.shared_slots;
            self.shared_slots += 1;
            self.bind(&name_str, Binding::Shared);
            self.row_len.insert(name_str.clone(), quote!(#cols));
            return (
                quote!(let #name = __b.shared(#name_str, #t, __dc::ir::V::host(((#rows) as u32) * ((#cols) as u32)))?;),
                quote!(let #name = __ctx.shared::<#elem_id>(#slot);),
            );
        }
        let expected = if fname == "shared" { 2 } else { 1 };
        if args.len() != expected {
            return self.fail(
                seg.span(),
                if fname == "shared" {
                    "write `shared::<T, LEN>()`: an element type and a constant length"
                } else {
                    "write `shared_dynamic::<T>()`: the length is given at launch"
                },
            );
        }
        let GenericArgument::Type(elem_ty) = args[0] else {
            return self.fail(
                args[0].span(),
                "the first argument must be the element type",
            );
        };
        let Some(Ty {
            ir: t,
            native: elem_id,
            ..
        }) = self.scalar_ty(elem_ty, "a shared array")
        else {
            return (quote!(), quote!());
        };
        let name_str = name.to_string();
        let slot = self.shared_slots;
        self.shared_slots += 1;
        self.bind(&name_str, Binding::Shared);
        let native = quote!(let #name = __ctx.shared::<#elem_id>(#slot););
        if fname == "shared_dynamic" {
            return (
                quote!(let #name = __b.shared_dynamic(#name_str, #t)?;),
                native,
            );
        }
        let len = match args[1] {
            GenericArgument::Const(e) => quote!(#e),
            GenericArgument::Type(Type::Path(p)) => quote!(#p), // a const's name parses as a type
            other => return self.fail(other.span(), "the length must be a constant expression"),
        };
        (
            quote!(let #name = __b.shared(#name_str, #t, __dc::ir::V::host(#len))?;),
            native,
        )
    }

    fn expr_stmt(&mut self, e: &Expr) -> Pair {
        let was_top = std::mem::replace(&mut self.top_level, false);
        let r = self.expr_stmt_inner(e);
        self.top_level = was_top;
        r
    }

    fn expr_stmt_inner(&mut self, e: &Expr) -> Pair {
        match e {
            Expr::Assign(a) => self.assign(&a.left, None, &a.right, a.span()),
            Expr::Binary(b) if compound_op(&b.op).is_some() => {
                self.assign(&b.left, compound_op(&b.op), &b.right, b.span())
            }
            Expr::If(i) => self.if_stmt(i),
            Expr::Match(m) => match self.desugar_match(m, false) {
                Some(Expr::Block(b)) => self.block(&b.block.stmts),
                _ => (quote!(), quote!()),
            },
            Expr::ForLoop(f) => self.for_loop(f),
            Expr::While(w) => {
                if let Some(l) = &w.label {
                    return self.fail(l.span(), "loop labels are not supported in kernels");
                }
                if let Expr::Let(l) = &*w.cond {
                    return self.fail(l.span(), "`while let` is not supported in kernels");
                }
                let (cb, cn) = self.expr(&w.cond);
                let (bb, bn) = self.loop_body(&w.body.stmts);
                let stop = poll_stop();
                (
                    quote!({ __b.begin_loop(); { let __c = #cb; __b.break_unless(__c)?; #bb } __b.end_loop()?; }),
                    quote!(while #cn { #stop #bn }),
                )
            }
            Expr::Loop(l) => {
                if let Some(l) = &l.label {
                    return self.fail(l.span(), "loop labels are not supported in kernels");
                }
                let (bb, bn) = self.loop_body(&l.body.stmts);
                let stop = poll_stop();
                (
                    quote!({ __b.begin_loop(); #bb __b.end_loop()?; }),
                    quote!(loop { #stop #bn }),
                )
            }
            Expr::Break(b) => {
                if b.label.is_some() || b.expr.is_some() {
                    return self.fail(
                        b.span(),
                        "`break` with a label or a value is not supported in kernels",
                    );
                }
                let native = if self.region == Some(0) {
                    quote!(return __dc::cpu::Flow::Break;)
                } else {
                    quote!(break;)
                };
                (quote!(__b.brk();), native)
            }
            Expr::Continue(c) => {
                if c.label.is_some() {
                    return self.fail(c.span(), "loop labels are not supported in kernels");
                }
                let native = if self.region == Some(0) {
                    quote!(return __dc::cpu::Flow::Continue;)
                } else {
                    quote!(continue;)
                };
                (quote!(__b.cont();), native)
            }
            Expr::Return(r) if self.helper.is_some() => self.fail(
                r.span(),
                "`return` is not supported in a #[kernel_fn]: end the body with its value \
                 (an `if`/`else` can choose it)",
            ),
            Expr::Return(r) => {
                if r.expr.is_some() {
                    return self.fail(r.span(), "kernels return nothing: write `return;`");
                }
                let native = if self.region.is_some() {
                    quote!(return __dc::cpu::Flow::Return;)
                } else {
                    quote!(return;)
                };
                (quote!(__b.ret();), native)
            }
            Expr::Block(b) if b.label.is_none() && b.block.stmts.iter().all(|_| true) => {
                if b.attrs.is_empty() {
                    self.block(&b.block.stmts)
                } else {
                    self.fail(
                        b.span(),
                        "attributes on blocks are not supported in kernels",
                    )
                }
            }
            Expr::Call(c) if is_call_to(c, "barrier") => {
                if !c.args.is_empty() {
                    return self.fail(c.span(), "`barrier()` takes no arguments");
                }
                self.barrier_sites += 1;
                let site = self.barrier_site();
                (quote!(__b.barrier();), quote!(__ctx.barrier(#site);))
            }
            Expr::Call(c) if mma_shape(c).is_some() => self.mma(c),
            Expr::Call(_) => {
                // Atomics and #[kernel_fn] calls; `call` rejects the rest.
                let (b, n) = self.expr(e);
                (quote!({ let _ = #b; }), quote!(#n;))
            }
            other => self.fail(
                other.span(),
                format!(
                    "this {} has no effect as a statement in a kernel (statements are `let`, \
                     assignments, if, for, while, loop, break, continue, return, barrier() \
                     and atomics)",
                    describe(other)
                ),
            ),
        }
    }

    fn assign(&mut self, left: &Expr, op: Option<(&str, &str)>, right: &Expr, span: Span) -> Pair {
        let (rb, rn) = self.expr(right);
        match left {
            Expr::Path(p) if p.path.get_ident().is_some() => {
                let name = p.path.get_ident().unwrap();
                match self.lookup(&name.to_string()) {
                    Some(Binding::Local) => {}
                    // Already reported where it was declared.
                    Some(Binding::Failed) => return (quote!(), quote!()),
                    Some(Binding::GidX) => {
                        return self.fail(name.span(), format!("cannot assign twice to immutable local `{name}`"))
                    }
                    Some(_) => {
                        return self.fail(
                            name.span(),
                            format!("`{name}` is a kernel parameter and cannot be assigned; copy it into a local (`let mut x = {name};`)"),
                        )
                    }
                    None => return self.fail(name.span(), format!("`{name}` is not a local of this kernel")),
                }
                match op {
                    None => (
                        quote!({ let __v = #rb; __b.assign(#name, __v)?; }),
                        quote!(#name = #rn;),
                    ),
                    Some((irop, nop)) => {
                        let irop = format_ident!("{irop}");
                        let nop = format_ident!("{nop}");
                        (
                            quote!({ let __v = #rb; let __cur = __b.get(#name); let __n = __b.binary(__dc::ir::BinaryOp::#irop, __cur, __v)?; __b.assign(#name, __n)?; }),
                            quote!(#name = __dc::ops::#nop(#name, #rn);),
                        )
                    }
                }
            }
            Expr::Index(ix) => {
                let Some((mem, ib, inn)) = self.element(ix, true) else {
                    return (quote!(), quote!());
                };
                match op {
                    None => (
                        quote!({ let __i = #ib; let __v = #rb; __b.store(#mem, __i, __v)?; }),
                        quote!(#mem.store(#inn, #rn);),
                    ),
                    Some((irop, nop)) => {
                        let irop = format_ident!("{irop}");
                        let nop = format_ident!("{nop}");
                        (
                            quote!({
                                let __i = #ib; let __v = #rb;
                                let __cur = __b.load(#mem, __i.clone())?;
                                let __n = __b.binary(__dc::ir::BinaryOp::#irop, __cur, __v)?;
                                __b.store(#mem, __i, __n)?;
                            }),
                            quote!({ let __i = #inn; let __v = #rn; #mem.store(__i, __dc::ops::#nop(#mem.load(__i), __v)); }),
                        )
                    }
                }
            }
            Expr::Field(f) if !matches!(&*f.base, Expr::Call(_)) => self.fail(
                f.span(),
                "a vector's lanes are not assigned one at a time in kernels: assign the whole \
                 vector (`v = Vec4::new(x, v.y, v.z, v.w)`)",
            ),
            other => self.fail(
                span.join(other.span()).unwrap_or(span),
                "only locals (`x = ..`) and array elements (`out[i] = ..`) can be assigned in kernels",
            ),
        }
    }

    fn if_stmt(&mut self, i: &syn::ExprIf) -> Pair {
        if let Expr::Let(l) = &*i.cond {
            return self.fail(l.span(), "`if let` is not supported in kernels");
        }
        let (cb, cn) = self.expr(&i.cond);
        let (tb, tn) = self.block(&i.then_branch.stmts);
        let (eb, en) = match &i.else_branch {
            None => (quote!(), quote!()),
            Some((_, e)) => match &**e {
                Expr::If(inner) => {
                    let (b, n) = self.if_stmt(inner);
                    (quote!(__b.begin_else()?; #b), quote!(else #n))
                }
                Expr::Block(b) => {
                    let (bb, bn) = self.block(&b.block.stmts);
                    (quote!(__b.begin_else()?; #bb), quote!(else #bn))
                }
                other => return self.fail(other.span(), "unsupported else branch"),
            },
        };
        (
            quote!({ let __c = #cb; __b.begin_if(__c)?; #tb #eb __b.end_if()?; }),
            quote!(if #cn #tn #en),
        )
    }

    fn for_loop(&mut self, f: &syn::ExprForLoop) -> Pair {
        if let Some(l) = &f.label {
            return self.fail(l.span(), "loop labels are not supported in kernels");
        }
        let Pat::Ident(pi) = &*f.pat else {
            return self.fail(
                f.pat.span(),
                "a kernel `for` binds one name: `for i in a..b`",
            );
        };
        if pi.mutability.is_some() {
            return self.fail(pi.span(), "a kernel loop variable cannot be `mut`");
        }
        let var = &pi.ident;
        let var_str = var.to_string();
        let (range, step) = match for_range(&f.expr) {
            Ok(parts) => parts,
            Err(other) => return self.fail(
                other.span(),
                "`for` loops in kernels iterate over `a..b` or `(a..b).step_by(s)`, not iterators",
            ),
        };
        let (Some(start), Some(end), RangeLimits::HalfOpen(_)) =
            (&range.start, &range.end, &range.limits)
        else {
            return self.fail(range.span(), "use a half-open range with both ends, `a..b`");
        };
        let (sb, sn) = self.expr(start);
        let (eb, en) = self.expr(end);
        let (stb, stn) = match step {
            Some(s) => {
                let (b, n) = self.step_arg(s);
                (quote!(Some(#b)), Some(n))
            }
            None => (quote!(None), None),
        };
        self.scopes.push(HashMap::new());
        self.bind(&var_str, Binding::Local);
        let (bb, bn) = self.loop_body(&f.body.stmts);
        self.scopes.pop();
        let bn = poll_stop_in_for(&f.body.stmts, bn);
        let native = match stn {
            None => quote!(for #var in (#sn)..(#en) #bn),
            Some(stn) => quote!(for #var in __dc::ops::step_range(#sn, #en, #stn) #bn),
        };
        (
            quote!({
                let __s = #sb; let __e = #eb; let __st = #stb;
                let #var = __b.begin_for(#var_str, __s, __e, __st)?;
                #bb
                __b.end_for()?;
            }),
            native,
        )
    }

    /// The argument of `step_by`. Rust's `step_by` takes a `usize`; `s as usize` is the
    /// range's type to the builder (usize is no kernel type) and stays a usize natively.
    fn step_arg(&mut self, s: &Expr) -> Pair {
        match usize_step(s) {
            Some(x) => {
                let (b, n) = self.expr(x);
                (b, quote!(((#n) as usize)))
            }
            None => self.expr(s),
        }
    }

    // ---------------------------------------------------------------- expressions

    /// Records that `mem` is indexed by `index`, for bounds-check elimination.
    fn note_index(&mut self, mem: &Ident, index: &Expr) {
        if let Expr::Path(p) = index {
            if let Some(id) = p.path.get_ident() {
                let is_buffer = matches!(
                    self.lookup(&mem.to_string()),
                    Some(Binding::Buffer | Binding::ReadOnlyBuffer)
                );
                if is_buffer && self.lookup(&id.to_string()) == Some(Binding::GidX) {
                    self.gid_indexed.insert(mem.to_string());
                }
            }
        }
    }

    /// The handle of a buffer or shared array named by `e`.
    fn memory(&mut self, e: &Expr) -> Option<Ident> {
        if let Expr::Path(p) = e {
            if let Some(id) = p.path.get_ident() {
                match self.lookup(&id.to_string()) {
                    Some(b) if b.is_array() => return Some(id.clone()),
                    // Already reported where it was declared.
                    Some(Binding::Failed) => return None,
                    Some(_) => {
                        self.errors.push(err(
                            id.span(),
                            format!("`{id}` is a scalar, not a buffer or shared array"),
                        ));
                        return None;
                    }
                    None => {}
                }
            }
        }
        self.errors.push(err(
            e.span(),
            "only buffer parameters and shared arrays can be indexed in kernels",
        ));
        None
    }

    /// The array and the (flat) index of `a[i]`, or of `a[y][x]` on a 2-D shared array
    /// (row-major: `y * row_len + x`; natively an `x` past the row is out of bounds, as
    /// in Rust, not the next row's element).
    fn element(
        &mut self,
        ix: &syn::ExprIndex,
        write: bool,
    ) -> Option<(Ident, TokenStream, TokenStream)> {
        if let Expr::Index(outer) = &*ix.expr {
            let mem = self.memory(&outer.expr)?;
            let Some(row_len) = self.row_len.get(&mem.to_string()).cloned() else {
                self.errors.push(err(
                    ix.span(),
                    format!("`{mem}` has one dimension: index it as `{mem}[i]`"),
                ));
                return None;
            };
            if write {
                self.writable_memory(&outer.expr)?;
            }
            let (yb, yn) = self.expr(&outer.index);
            let (xb, xn) = self.expr(&ix.index);
            return Some((
                mem,
                quote!({
                    let __y = #yb; let __x = #xb;
                    let __y = __b.cast(__y, __dc::ir::ScalarType::U32)?;
                    let __x = __b.cast(__x, __dc::ir::ScalarType::U32)?;
                    let __row = __b.binary(__dc::ir::BinaryOp::Mul, __y, __dc::ir::V::host((#row_len) as u32))?;
                    __b.binary(__dc::ir::BinaryOp::Add, __row, __x)?
                }),
                quote!(__dc::ops::index_2d(#yn, #xn, (#row_len) as u32)),
            ));
        }
        let mem = if write {
            self.writable_memory(&ix.expr)?
        } else {
            self.memory(&ix.expr)?
        };
        if self.row_len.contains_key(&mem.to_string()) {
            self.errors.push(err(
                ix.span(),
                format!("`{mem}` has two dimensions: index it as `{mem}[row][column]`"),
            ));
            return None;
        }
        self.note_index(&mem, &ix.index);
        let (ib, inn) = self.expr(&ix.index);
        Some((mem, ib, inn))
    }

    /// Like `memory`, for a write: a read-only array is a compile error, as in Rust.
    fn writable_memory(&mut self, e: &Expr) -> Option<Ident> {
        let mem = self.memory(e)?;
        let msg = match self.lookup(&mem.to_string()) {
            Some(Binding::ReadOnlyBuffer) => format!(
                "cannot write to `{mem}`: it is a read-only buffer (`&[T]`); declare the \
                 parameter `&mut [T]`"
            ),
            Some(Binding::ReadOnlyArray) => format!(
                "cannot write to `{mem}`: it is not mutable; declare it `let mut` (a local \
                 array) or `&mut [T]` (a kernel function's parameter)"
            ),
            _ => return Some(mem),
        };
        self.errors.push(err(mem.span(), msg));
        None
    }

    fn expr(&mut self, e: &Expr) -> Pair {
        match e {
            Expr::Lit(l) => self.literal(&l.lit),
            Expr::Paren(p) => {
                let (b, n) = self.expr(&p.expr);
                (b, quote!((#n)))
            }
            Expr::Group(g) => self.expr(&g.expr),
            Expr::Path(p) => {
                if let Some(id) = p.path.get_ident() {
                    match self.lookup(&id.to_string()) {
                        Some(Binding::Local | Binding::GidX) => return (quote!(__b.get(#id)), quote!(#id)),
                        Some(Binding::Scalar) => return (quote!(#id.clone()), quote!(#id)),
                        // Already reported where it was declared (nothing is emitted: the
                        // kernel has errors).
                        Some(Binding::Failed) => return (quote!(), quote!()),
                        Some(_) => {
                            return self.fail(
                                id.span(),
                                format!("`{id}` is an array: use it as `{id}[i]`, `{id}.len()`, in an atomic or as a kernel function's argument"),
                            )
                        }
                        None => {}
                    }
                }
                // Anything else is a host value (a `const`, `f32::MAX`, ...).
                (quote!(__dc::ir::V::host(#p)), quote!(#p))
            }
            Expr::Binary(b) => self.binary(b),
            Expr::Unary(u) => self.unary(u),
            Expr::Cast(c) => {
                let Some(Ty {
                    ir: t, native: id, ..
                }) = self.scalar_ty(&c.ty, "a cast")
                else {
                    return (quote!(), quote!());
                };
                let (b, n) = self.expr(&c.expr);
                // `as` cannot name a generic type nor `f16` (nor take such a value), so
                // casts go through a trait with `as` semantics (inlined, it is the `as`).
                let native = quote!(__dc::ops::cast::<#id, _>(#n));
                (quote!({ let __v = #b; __b.cast(__v, #t)? }), native)
            }
            Expr::Index(ix) => {
                let Some((mem, ib, inn)) = self.element(ix, false) else {
                    return (quote!(), quote!());
                };
                (
                    quote!({ let __i = #ib; __b.load(#mem, __i)? }),
                    quote!(#mem.load(#inn)),
                )
            }
            Expr::MethodCall(m) => self.method(m),
            Expr::Field(f) => self.field(f),
            Expr::Call(c) => self.call(c),
            Expr::If(i) => self.if_value(i),
            Expr::Match(m) => match self.desugar_match(m, true) {
                Some(e) => self.expr(&e),
                None => (quote!(), quote!()),
            },
            Expr::Block(b) if b.label.is_none() => {
                let (sb, vb, n) = self.value_block(&b.block, b.span());
                (quote!({ #sb #vb }), n)
            }
            other => self.fail(
                other.span(),
                format!("{} is not supported in kernels", describe(other)),
            ),
        }
    }

    fn literal(&mut self, lit: &Lit) -> Pair {
        match lit {
            Lit::Int(i) => {
                let suffix = i.suffix();
                if suffix.is_empty() {
                    match i.base10_parse::<i128>() {
                        Ok(v) => (quote!(__dc::ir::V::Int(#v)), quote!(#i)),
                        Err(e) => {
                            self.errors.push(e);
                            (quote!(), quote!())
                        }
                    }
                } else if SCALARS.contains(&suffix) {
                    (quote!(__dc::ir::V::host(#i)), quote!(#i))
                } else {
                    self.fail(i.span(), format!("`{suffix}` literals are not supported in kernels; use i32, u32, i64 or u64"))
                }
            }
            Lit::Float(f) => {
                let suffix = f.suffix();
                if suffix.is_empty() {
                    match f.base10_parse::<f64>() {
                        Ok(v) => (quote!(__dc::ir::V::Float(#v)), quote!(#f)),
                        Err(e) => {
                            self.errors.push(e);
                            (quote!(), quote!())
                        }
                    }
                } else {
                    (quote!(__dc::ir::V::host(#f)), quote!(#f))
                }
            }
            Lit::Bool(b) => (quote!(__dc::ir::V::host(#b)), quote!(#b)),
            other => self.fail(
                other.span(),
                "only numeric and boolean literals are supported in kernels",
            ),
        }
    }

    fn binary(&mut self, b: &syn::ExprBinary) -> Pair {
        if compound_op(&b.op).is_some() {
            return self.fail(
                b.span(),
                "compound assignment is a statement in kernels, not a value",
            );
        }
        let (lb, ln) = self.expr(&b.left);
        let short = matches!(b.op, BinOp::And(_) | BinOp::Or(_));
        if short {
            self.short_circuit += 1;
        }
        let (rb, rn) = self.expr(&b.right);
        if short {
            self.short_circuit -= 1;
        }
        let Some((ir, native)) = binary_op(&b.op) else {
            return self.fail(b.op.span(), "unsupported operator in kernels");
        };
        let ir = format_ident!("{ir}");
        let op = &b.op;
        let n = match native {
            Some(f) => {
                let f = format_ident!("{f}");
                quote!(__dc::ops::#f(#ln, #rn))
            }
            None => quote!((#ln #op #rn)),
        };
        (
            quote!({ let __l = #lb; let __r = #rb; __b.binary(__dc::ir::BinaryOp::#ir, __l, __r)? }),
            n,
        )
    }

    fn unary(&mut self, u: &syn::ExprUnary) -> Pair {
        let (b, n) = self.expr(&u.expr);
        match u.op {
            UnOp::Neg(_) => {
                // `-literal` stays a literal natively so `-2147483648i32` is accepted.
                let native = if matches!(&*u.expr, Expr::Lit(_)) {
                    quote!((-#n))
                } else {
                    quote!(__dc::ops::neg(#n))
                };
                (
                    quote!({ let __v = #b; __b.unary(__dc::ir::UnaryOp::Neg, __v)? }),
                    native,
                )
            }
            UnOp::Not(_) => (
                quote!({ let __v = #b; __b.unary(__dc::ir::UnaryOp::Not, __v)? }),
                quote!((!#n)),
            ),
            _ => self.fail(u.span(), "dereferencing is not supported in kernels"),
        }
    }

    fn method(&mut self, m: &syn::ExprMethodCall) -> Pair {
        let name = m.method.to_string();
        if m.turbofish.is_some() {
            return self.fail(
                m.span(),
                "turbofish method calls are not supported in kernels",
            );
        }
        if name == "len" && m.args.is_empty() {
            let Some(mem) = self.memory(&m.receiver) else {
                return (quote!(), quote!());
            };
            return (quote!(__b.len(#mem)), quote!(#mem.len()));
        }
        // `wrapping_*` are the IR's own integer `+ - *` (which wrap).
        let wrapping = match name.as_str() {
            "wrapping_add" => Some(("Add", "add")),
            "wrapping_sub" => Some(("Sub", "sub")),
            "wrapping_mul" => Some(("Mul", "mul")),
            _ => None,
        };
        if name == "powi" {
            if m.args.len() != 1 {
                return self.fail(m.span(), "`powi` takes 1 argument (an i32 exponent)");
            }
            let (xb, xn) = self.expr(&m.receiver);
            let (nb, nn) = self.expr(&m.args[0]);
            return (
                quote!({ let __x = #xb; let __n = #nb; __b.powi(__x, __n)? }),
                quote!(__dc::ops::powi(#xn, #nn)),
            );
        }
        if let Some((ir, native)) = wrapping {
            if m.args.len() != 1 {
                return self.fail(m.span(), format!("`{name}` takes 1 argument"));
            }
            let (lb, ln) = self.expr(&m.receiver);
            let (rb, rn) = self.expr(&m.args[0]);
            let (ir, native) = (format_ident!("{ir}"), format_ident!("{native}"));
            return (
                quote!({ let __l = #lb; let __r = #rb; __b.binary(__dc::ir::BinaryOp::#ir, __l, __r)? }),
                quote!(__dc::ops::#native(#ln, #rn)),
            );
        }
        let Some((_, ir, native, arity)) = math_methods().find(|(n, ..)| *n == name) else {
            let list: Vec<_> = math_methods()
                .map(|m| m.0)
                .chain(["powi", "wrapping_add", "wrapping_sub", "wrapping_mul"])
                .collect();
            return self.fail(
                m.method.span(),
                format!(
                    "method `{name}` is not supported in kernels; supported: len, {}",
                    list.join(", ")
                ),
            );
        };
        if m.args.len() + 1 != arity {
            return self.fail(
                m.span(),
                format!("`{name}` takes {} argument(s)", arity - 1),
            );
        }
        let (bs, ns, tmps) = self.operands(std::iter::once(&*m.receiver).chain(m.args.iter()));
        let ir = format_ident!("{ir}");
        let native = format_ident!("{native}");
        (
            quote!({ #(let #tmps = #bs;)* __b.math(__dc::ir::MathFn::#ir, vec![#(#tmps),*])? }),
            quote!(__dc::ops::#native(#(#ns),*)),
        )
    }

    /// `global_id().x` and the other coordinates, or a vector's lane (`v.x` .. `v.w`).
    fn field(&mut self, f: &syn::ExprField) -> Pair {
        let builtin = match &*f.base {
            Expr::Call(c) if c.args.is_empty() => builtins().find(|(n, _)| is_call_to(c, n)),
            _ => None,
        };
        let Some((native, ir)) = builtin else {
            let lane = match &f.member {
                syn::Member::Named(id) => ["x", "y", "z", "w"]
                    .iter()
                    .position(|l| id == l)
                    .map(|i| (i as u8, id.clone())),
                syn::Member::Unnamed(_) => None,
            };
            let Some((lane, id)) = lane else {
                return self.fail(
                    f.member.span(),
                    "fields are a vector's lanes (`.x`, `.y`, `.z`, `.w`) and the builtins' \
                     coordinates (`global_id().x`)",
                );
            };
            let (b, n) = self.expr(&f.base);
            return (
                quote!({ let __v = #b; __b.lane(__v, #lane)? }),
                quote!((#n).#id),
            );
        };
        let axis = match &f.member {
            syn::Member::Named(id) if id == "x" || id == "y" || id == "z" => id.clone(),
            other => return self.fail(other.span(), "builtin coordinates are `.x`, `.y` or `.z`"),
        };
        let ir_axis = format_ident!("{}", axis.to_string().to_uppercase());
        let ir = format_ident!("{ir}");
        let native = format_ident!("{native}");
        (
            quote!(__b.builtin(__dc::ir::Builtin::#ir, __dc::ir::Axis::#ir_axis)),
            quote!(__ctx.#native.#axis),
        )
    }

    fn call(&mut self, c: &syn::ExprCall) -> Pair {
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
        let arity = if op == "CompareExchange" { 3 } else { 2 };
        if c.args.len() != arity {
            return self.fail(
                c.span(),
                format!(
                    "`{fname}` takes {arity} arguments: `{fname}(&array[index], {})`",
                    if arity == 3 { "expected, new" } else { "value" }
                ),
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
    fn mma(&mut self, c: &syn::ExprCall) -> Pair {
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
    fn operands<'e>(
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
    fn barrier_site(&self) -> u32 {
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
    fn vector_call(&mut self, c: &syn::ExprCall, vec: &Ident, f: &Ident) -> Pair {
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
    fn type_function(&mut self, c: &syn::ExprCall) -> Option<Pair> {
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
    fn helper_call(&mut self, c: &syn::ExprCall) -> Pair {
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

    /// `match` on an integer as the equivalent `if` chain, compiled by both halves (so the
    /// CPU body and the IR agree by construction): `{ let dc_match_N = scrutinee; if .. }`.
    /// Patterns: integer literals and constants, ranges (`a..b`, `a..=b`), `|`, `_`, and
    /// guards. A `match` used as a value needs a final `_` arm (Rust would demand one for
    /// integers too).
    fn desugar_match(&mut self, m: &syn::ExprMatch, value: bool) -> Option<Expr> {
        let var = format_ident!("dc_match_{}", self.matches);
        self.matches += 1;
        let scrutinee = &m.expr;
        let mut chain: Option<Expr> = None;
        for (k, arm) in m.arms.iter().enumerate().rev() {
            let body = &arm.body;
            let block: syn::Block = match &**body {
                Expr::Block(b) if b.label.is_none() => b.block.clone(),
                other if value => syn::parse_quote!({ #other }),
                other => syn::parse_quote!({ #other; }),
            };
            let wild = matches!(arm.pat, Pat::Wild(_)) && arm.guard.is_none();
            if wild {
                if k + 1 != m.arms.len() {
                    self.fail(
                        arm.pat.span(),
                        "in a kernel `match`, `_` must be the last arm",
                    );
                    return None;
                }
                chain = Some(Expr::Block(syn::ExprBlock {
                    attrs: Vec::new(),
                    label: None,
                    block,
                }));
                continue;
            }
            let mut cond = self.pattern_cond(&arm.pat, &var)?;
            if let Some((_, guard)) = &arm.guard {
                cond = syn::parse_quote!((#cond) && (#guard));
            }
            let else_branch = chain
                .take()
                .map(|e| (syn::token::Else::default(), Box::new(e)));
            chain = Some(Expr::If(syn::ExprIf {
                attrs: Vec::new(),
                if_token: Default::default(),
                cond: Box::new(cond),
                then_branch: block,
                else_branch,
            }));
        }
        let Some(chain) = chain else {
            self.fail(m.span(), "a kernel `match` needs at least one arm");
            return None;
        };
        if value
            && m.arms
                .last()
                .is_none_or(|a| !matches!(a.pat, Pat::Wild(_)) || a.guard.is_some())
        {
            self.fail(
                m.span(),
                "a `match` used as a value in a kernel needs a final `_ =>` arm",
            );
            return None;
        }
        Some(syn::parse_quote!({ let #var = #scrutinee; #chain }))
    }

    /// The condition under which `var` matches `pat`.
    fn pattern_cond(&mut self, pat: &Pat, var: &Ident) -> Option<Expr> {
        match pat {
            Pat::Lit(l) => Some(syn::parse_quote!(#var == #l)),
            Pat::Path(p) => Some(syn::parse_quote!(#var == #p)),
            Pat::Wild(_) => Some(syn::parse_quote!(true)),
            Pat::Paren(p) => self.pattern_cond(&p.pat, var),
            Pat::Range(r) => {
                let lo = r
                    .start
                    .as_ref()
                    .map(|a| -> Expr { syn::parse_quote!(#var >= #a) });
                let hi = r.end.as_ref().map(|b| -> Expr {
                    match r.limits {
                        syn::RangeLimits::Closed(_) => syn::parse_quote!(#var <= #b),
                        syn::RangeLimits::HalfOpen(_) => syn::parse_quote!(#var < #b),
                    }
                });
                match (lo, hi) {
                    (Some(l), Some(h)) => Some(syn::parse_quote!((#l) && (#h))),
                    (Some(c), None) | (None, Some(c)) => Some(c),
                    (None, None) => Some(syn::parse_quote!(true)),
                }
            }
            Pat::Or(o) => {
                let mut conds = Vec::new();
                for case in &o.cases {
                    conds.push(self.pattern_cond(case, var)?);
                }
                Some(syn::parse_quote!(#((#conds))||*))
            }
            // `-1` and other literal expressions syn keeps verbatim.
            Pat::Verbatim(ts) => match syn::parse2::<Expr>(ts.clone()) {
                Ok(e) => Some(syn::parse_quote!(#var == (#e))),
                Err(_) => self.unsupported_pattern(pat),
            },
            _ => self.unsupported_pattern(pat),
        }
    }

    fn unsupported_pattern(&mut self, pat: &Pat) -> Option<Expr> {
        self.fail(
            pat.span(),
            "kernel `match` patterns are integer literals or constants, ranges (`a..b`, `a..=b`), `|` and `_`",
        );
        None
    }

    fn if_value(&mut self, i: &syn::ExprIf) -> Pair {
        if let Expr::Let(l) = &*i.cond {
            return self.fail(l.span(), "`if let` is not supported in kernels");
        }
        let Some((_, else_expr)) = &i.else_branch else {
            return self.fail(i.span(), "an `if` used as a value needs an `else`");
        };
        let (cb, cn) = self.expr(&i.cond);
        let (tsb, tvb, tn) = self.value_block(&i.then_branch, i.then_branch.span());
        let (eb, en) = match &**else_expr {
            Expr::Block(b) => {
                let (sb, vb, n) = self.value_block(&b.block, b.span());
                (quote!(#sb let __v = #vb; __b.set_value(__slot, __v)?;), n)
            }
            Expr::If(inner) => {
                let (vb, n) = self.if_value(inner);
                (
                    quote!(let __v = #vb; __b.set_value(__slot, __v)?;),
                    quote!({ #n }),
                )
            }
            other => return self.fail(other.span(), "unsupported else branch"),
        };
        (
            quote!({
                let __c = #cb;
                let __slot = __b.begin_if_value(__c)?;
                { #tsb let __v = #tvb; __b.set_value(__slot, __v)?; }
                __b.begin_else()?;
                { #eb }
                __b.end_if_value(__slot)?
            }),
            quote!((if #cn #tn else #en)),
        )
    }
}

fn is_global_id_x(e: &Expr) -> bool {
    match e {
        Expr::Field(f) => {
            matches!(&f.member, syn::Member::Named(id) if id == "x")
                && matches!(&*f.base, Expr::Call(c) if c.args.is_empty() && is_call_to(c, "global_id"))
        }
        Expr::Paren(p) => is_global_id_x(&p.expr),
        _ => false,
    }
}

/// `e` without the parentheses around it.
fn unparen(mut e: &Expr) -> &Expr {
    while let Expr::Paren(p) = e {
        e = &p.expr;
    }
    e
}

/// A kernel `for` loop's `a..b` or `(a..b).step_by(s)`: the range and the step; else the
/// expression that is neither.
fn for_range(e: &Expr) -> Result<(&syn::ExprRange, Option<&Expr>), &Expr> {
    match e {
        Expr::Range(r) => Ok((r, None)),
        Expr::MethodCall(m) if m.method == "step_by" && m.args.len() == 1 => {
            match unparen(&m.receiver) {
                Expr::Range(r) => Ok((r, Some(&m.args[0]))),
                other => Err(other),
            }
        }
        other => Err(other),
    }
}

fn is_call_to(c: &syn::ExprCall, name: &str) -> bool {
    matches!(&*c.func, Expr::Path(p) if p.path.is_ident(name))
}

/// `Some(<IR type>)` or `None`, as builder code.
fn optional_ir(ty: Option<&Ty>) -> TokenStream {
    match ty {
        Some(Ty { ir, .. }) => quote!(Some(__dc::ir::Type::from(#ir))),
        None => quote!(None),
    }
}

fn ty_var(param: &Ident) -> Ident {
    format_ident!("__dc_ty_{param}")
}

/// The tensor-core operation a call names, with its counts of A and B operands.
fn mma_shape(c: &syn::ExprCall) -> Option<(&'static str, (usize, usize))> {
    [("mma_m16n8k8_tf32", (4, 2)), ("mma_m16n8k16_f16", (8, 4))]
        .into_iter()
        .find(|(name, _)| is_call_to(c, name))
}

/// The `array[index]` of an element's address argument, `&array[index]` (or `&mut
/// array[index]` where `mutable`), as atomics and `mma_m16n8k8_tf32` take it.
fn element_address(arg: &Expr, mutable: bool) -> Option<&syn::ExprIndex> {
    match arg {
        Expr::Reference(r) if !mutable || r.mutability.is_some() => match &*r.expr {
            Expr::Index(ix) => Some(ix),
            _ => None,
        },
        _ => None,
    }
}

fn atomic_name(c: &syn::ExprCall) -> Option<(String, String)> {
    atomics().find(|(n, _)| is_call_to(c, n))
}

/// A binary operator of the kernel language: its IR name, and the `__dc::ops` function
/// native code calls for it (wrapping integers, the IR's division by zero), or `None`
/// where native code uses Rust's own operator (`& | ^`, comparisons, `&&` / `||`).
fn binary_op(op: &BinOp) -> Option<(&'static str, Option<&'static str>)> {
    Some(match op {
        BinOp::Add(_) => ("Add", Some("add")),
        BinOp::Sub(_) => ("Sub", Some("sub")),
        BinOp::Mul(_) => ("Mul", Some("mul")),
        BinOp::Div(_) => ("Div", Some("div")),
        BinOp::Rem(_) => ("Rem", Some("rem")),
        BinOp::Shl(_) => ("Shl", Some("shl")),
        BinOp::Shr(_) => ("Shr", Some("shr")),
        BinOp::BitAnd(_) => ("BitAnd", None),
        BinOp::BitOr(_) => ("BitOr", None),
        BinOp::BitXor(_) => ("BitXor", None),
        BinOp::Eq(_) => ("Eq", None),
        BinOp::Ne(_) => ("Ne", None),
        BinOp::Lt(_) => ("Lt", None),
        BinOp::Le(_) => ("Le", None),
        BinOp::Gt(_) => ("Gt", None),
        BinOp::Ge(_) => ("Ge", None),
        BinOp::And(_) => ("LogicalAnd", None),
        BinOp::Or(_) => ("LogicalOr", None),
        _ => return None,
    })
}

fn compound_op(op: &BinOp) -> Option<(&'static str, &'static str)> {
    Some(match op {
        BinOp::AddAssign(_) => ("Add", "add"),
        BinOp::SubAssign(_) => ("Sub", "sub"),
        BinOp::MulAssign(_) => ("Mul", "mul"),
        BinOp::DivAssign(_) => ("Div", "div"),
        BinOp::RemAssign(_) => ("Rem", "rem"),
        BinOp::ShlAssign(_) => ("Shl", "shl"),
        BinOp::ShrAssign(_) => ("Shr", "shr"),
        BinOp::BitAndAssign(_) => ("BitAnd", "bitand"),
        BinOp::BitOrAssign(_) => ("BitOr", "bitor"),
        BinOp::BitXorAssign(_) => ("BitXor", "bitxor"),
        _ => return None,
    })
}

fn describe(e: &Expr) -> &'static str {
    match e {
        Expr::Array(_) => "an array expression",
        Expr::Async(_) => "an async block",
        Expr::Await(_) => "`.await`",
        Expr::Closure(_) => "a closure",
        Expr::Match(_) => "`match`",
        Expr::Macro(_) => "a macro call",
        Expr::Reference(_) => "taking a reference",
        Expr::Range(_) => "a range outside a `for` loop",
        Expr::Repeat(_) => "an array expression",
        Expr::Struct(_) => "a struct literal",
        Expr::Try(_) => "the `?` operator",
        Expr::TryBlock(_) => "a try block",
        Expr::Tuple(_) => "a tuple",
        Expr::Unsafe(_) => "an `unsafe` block",
        Expr::Yield(_) => "`yield`",
        Expr::Let(_) => "`let` in an expression",
        Expr::Index(_) => "an index expression",
        Expr::Call(_) => "a call",
        Expr::MethodCall(_) => "a method call",
        Expr::Lit(_) => "literal",
        Expr::Path(_) => "path",
        Expr::Binary(_) => "binary expression",
        Expr::Field(_) => "field access",
        Expr::Block(_) => "a labelled block",
        _ => "construct",
    }
}

impl Tx {
    fn new(helper: Option<String>) -> Tx {
        Tx {
            errors: Vec::new(),
            scopes: vec![HashMap::new()],
            shared_slots: 0,
            matches: 0,
            barrier_sites: 0,
            short_circuit: 0,
            top_level: helper.is_none(),
            gid_indexed: Default::default(),
            local_arrays: 0,
            row_len: HashMap::new(),
            type_params: Vec::new(),
            const_params: Vec::new(),
            helper,
            helper_paths: Vec::new(),
            region: None,
            lift_array: None,
        }
    }

    /// Checks what a kernel and a helper signature have in common and records the generic
    /// type parameters (const parameters are host values to both halves).
    fn signature(&mut self, sig: &syn::Signature, what: &str) {
        for g in &sig.generics.params {
            match g {
                syn::GenericParam::Type(t) => self.type_params.push(t.ident.clone()),
                syn::GenericParam::Const(c) => self.const_params.push(c.ident.clone()),
                syn::GenericParam::Lifetime(l) => self.errors.push(err(
                    l.span(),
                    format!("a {what} cannot have lifetime parameters"),
                )),
            }
        }
        if let Some(a) = &sig.asyncness {
            self.errors
                .push(err(a.span(), format!("a {what} cannot be `async`")));
        }
        if let Some(u) = &sig.unsafety {
            self.errors
                .push(err(u.span(), format!("a {what} cannot be `unsafe`")));
        }
        if let Some(c) = &sig.constness {
            self.errors
                .push(err(c.span(), format!("a {what} cannot be `const`")));
        }
        if let Some(v) = &sig.variadic {
            self.errors
                .push(err(v.span(), format!("a {what} cannot be variadic")));
        }
    }
}

/// One parameter of a kernel or a kernel function, parsed.
struct ParamSpec<'a> {
    pat: &'a syn::PatIdent,
    /// `Some(writable)` for an array (`&[T]` / `&mut [T]`), `None` for a scalar.
    array: Option<bool>,
    /// The scalar's type, or the array's element type.
    ty: Ty,
    /// The syntax of that type (for spans and generic inference).
    ty_syntax: &'a Type,
}

impl Tx {
    /// Parses a parameter the way kernels and kernel functions share: a plain name, and a
    /// scalar type or a slice of one. `what` names the function kind in errors.
    fn param<'a>(&mut self, input: &'a FnArg, what: &str) -> Option<ParamSpec<'a>> {
        let FnArg::Typed(pt) = input else {
            self.errors
                .push(err(input.span(), format!("a {what} cannot take `self`")));
            return None;
        };
        let Pat::Ident(pi) = &*pt.pat else {
            self.errors.push(err(
                pt.pat.span(),
                format!("{what} parameters must be plain names"),
            ));
            return None;
        };
        if let Type::Reference(r) = &*pt.ty {
            let Type::Slice(slice) = &*r.elem else {
                self.errors.push(err(
                    r.span(),
                    "array parameters are slices: `&[T]` or `&mut [T]`",
                ));
                return None;
            };
            let ty = self.ty(&slice.elem, "an array element")?;
            return Some(ParamSpec {
                pat: pi,
                array: Some(r.mutability.is_some()),
                ty,
                ty_syntax: &slice.elem,
            });
        }
        let ty = if self.helper.is_some() {
            self.ty(&pt.ty, "a parameter")?
        } else {
            self.scalar_ty(&pt.ty, "a kernel's scalar parameter")?
        };
        Some(ParamSpec {
            pat: pi,
            array: None,
            ty,
            ty_syntax: &pt.ty,
        })
    }
}

/// The doc comments of `f`, which the generated module carries.
fn doc_attrs(f: &ItemFn) -> Vec<&syn::Attribute> {
    f.attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .collect()
}

/// Attributes other than doc comments are refused (they would apply to only one half).
fn check_attrs(f: &ItemFn, what: &str) -> Result<(), Vec<syn::Error>> {
    match f.attrs.iter().find(|a| !a.path().is_ident("doc")) {
        Some(a) => Err(vec![err(
            a.span(),
            format!("attributes other than doc comments are not supported on {what}s"),
        )]),
        None => Ok(()),
    }
}

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

    let name = &sig.ident;
    let name_str = name.to_string();
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
                bind_params
                    .extend(quote!(let #pname = __dc::cpu::#view::<#elem_id>::bind(__l, #index)?;));
                // A buffer or a view of one (indexed from the view's start), by reference
                // so that a `&mut Buffer` variable is reborrowed, not moved.
                if writable {
                    launch_params.push(
                        quote!(#pname: &'__dc_a mut impl ::dotcompute::KernelBufferMut<#elem_id>),
                    );
                    launch_args.push(quote!(::dotcompute::KernelBufferMut::arg_mut(#pname)));
                } else {
                    launch_params
                        .push(quote!(#pname: &'__dc_a impl ::dotcompute::KernelBuffer<#elem_id>));
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

    // The body: builder and native code from one walk.
    tx.scopes.push(HashMap::new());
    // The CPU's group body (split at barriers) walks the body again from here.
    let before_body = tx.clone();
    let mut body_b = TokenStream::new();
    let mut body_n = TokenStream::new();
    for s in &f.block.stmts {
        let (sb, sn) = tx.stmt(s);
        let line = line_of(s.span());
        body_b.extend(quote!(__b.line(#line); #sb));
        body_n.extend(sn);
    }
    if !tx.errors.is_empty() {
        return Err(tx.errors);
    }
    // Kernels with barriers run on the CPU as a group body split at the barriers where the
    // body allows it, unless a #[kernel_fn] it calls has barriers of its own (the split
    // cannot see inside it), which the helpers' constants tell at compile time.
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

    let vis = &f.vis;
    let docs = doc_attrs(f);
    let params_doc = param_docs.join("\n");
    let launch_doc = format!(
        "Runs `{name_str}` with the geometry `launch` on `queue`: a `Device` (its default \
         stream) or a `Stream`.\n\nArguments, in order:\n{params_doc}\n\n\
         Returns when the results are visible to later operations on the stream (and, \
         through the buffers' use tracking, on every stream that uses them next). Errors \
         (never panics) on launch geometry beyond the device's limits, buffers of another \
         device, empty buffers, and out-of-bounds accesses the backend detects."
    );
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
        bare,
        bare_args,
        ty_vars,
        ..
    } = &generics;
    let where_clause = &generics.where_clause;
    // The launch function's lifetime ties its arguments together (`Arg<'a>`).
    let declared = &generics.params;
    let launch_decl = quote!(<'__dc_a, #(#declared),*>);
    // A generic kernel has one definition per instantiation, made on first use; a plain
    // one keeps its `KERNEL` static.
    let (definition, def) = if sig.generics.params.is_empty() {
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
    };
    Ok(quote_spanned! {span=>
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
    })
}

/// The CPU's cooperative cancellation, polled at the top of a loop's body (native code):
/// leaves the loop once the launch has failed or run past its time limit
/// (`dotcompute_cpu::watchdog`). One relaxed load.
pub(crate) fn poll_stop() -> TokenStream {
    quote!(if __ctx.stop_requested() {
        break;
    })
}

/// A `for` loop's native body with the poll where the loop holds another loop: an
/// innermost `for` is bounded by its range and stays free of the test (an early exit
/// would keep it from vectorising).
pub(crate) fn poll_stop_in_for(stmts: &[Stmt], body: TokenStream) -> TokenStream {
    if fission::has_loop(stmts) {
        let stop = poll_stop();
        quote!({ #stop #body })
    } else {
        body
    }
}

/// The pieces of a function's generics that the generated items repeat.
struct Generics {
    /// `T: Float, const N: u32`: the declared parameters (defaults dropped).
    params: Vec<TokenStream>,
    /// `<T: Float, const N: u32>` as declared (empty without generics).
    decl: TokenStream,
    /// `::<T, N>` (empty without generics).
    turbofish: TokenStream,
    /// `T, const N: u32`: the parameters without bounds, for the instance marker.
    bare: TokenStream,
    /// The type parameters, in order.
    bare_args: Vec<Ident>,
    /// The builder's run-time variable holding each type parameter's IR type.
    ty_vars: Vec<Ident>,
    /// The declared where clause plus `T: KernelScalar` for every type parameter.
    where_clause: TokenStream,
}

impl Generics {
    fn of(sig: &syn::Signature, type_params: &[Ident]) -> Generics {
        let g = &sig.generics;
        let declared: Vec<TokenStream> = g
            .params
            .iter()
            .map(|p| match p {
                // Defaults are not allowed on functions; strip nothing else.
                syn::GenericParam::Type(t) => {
                    let mut t = t.clone();
                    t.default = None;
                    t.eq_token = None;
                    t.to_token_stream()
                }
                other => other.to_token_stream(),
            })
            .collect();
        let decl = if declared.is_empty() {
            quote!()
        } else {
            quote!(<#(#declared),*>)
        };
        let params: Vec<_> = g.params.iter().collect();
        let args: Vec<TokenStream> = params
            .iter()
            .filter_map(|p| match p {
                syn::GenericParam::Type(t) => Some(t.ident.to_token_stream()),
                syn::GenericParam::Const(c) => Some(c.ident.to_token_stream()),
                syn::GenericParam::Lifetime(_) => None,
            })
            .collect();
        let turbofish = if args.is_empty() {
            quote!()
        } else {
            quote!(::<#(#args),*>)
        };
        let bare_params = params.iter().filter_map(|p| match p {
            syn::GenericParam::Type(t) => Some(t.ident.to_token_stream()),
            syn::GenericParam::Const(c) => {
                let (id, ty) = (&c.ident, &c.ty);
                Some(quote!(const #id: #ty))
            }
            syn::GenericParam::Lifetime(_) => None,
        });
        let bare = quote!(#(#bare_params),*);
        let mut predicates: Vec<TokenStream> = g
            .where_clause
            .iter()
            .flat_map(|w| w.predicates.iter().map(|p| p.to_token_stream()))
            .collect();
        predicates.extend(
            type_params
                .iter()
                .map(|t| quote!(#t: __dc::cpu::KernelScalar)),
        );
        let where_clause = if predicates.is_empty() {
            quote!()
        } else {
            quote!(where #(#predicates),*)
        };
        Generics {
            params: declared,
            decl,
            turbofish,
            bare,
            bare_args: type_params.to_vec(),
            ty_vars: type_params.iter().map(ty_var).collect(),
            where_clause,
        }
    }
}

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
    let mut build_params = Vec::new();
    let mut native_params = Vec::new();
    let mut access_generics = Vec::new();
    let mut bind = TokenStream::new();
    // Per type parameter: the arrays and values whose type it is.
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
    let ret = match &sig.output {
        ReturnType::Default => None,
        ReturnType::Type(_, t) => tx.ty(t, "a return type"),
    };
    let (body_b, body_n, ret_b, ret_n) = match &ret {
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
    };
    if !tx.errors.is_empty() {
        return Err(tx.errors);
    }
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
    Ok(quote_spanned! {span=>
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
    })
}

/// `kernel_fn(&callee).__dc_barrier()` for each callee, spanned at the call, so that a
/// callee that is not a kernel function is reported once, where it is called.
fn barrier_calls(paths: &[syn::Path]) -> Vec<TokenStream> {
    paths
        .iter()
        .map(|p| quote_spanned!(p.span()=> __dc::kernel_fn(&#p).__dc_barrier()))
        .collect()
}
