//! The translator's state (`Tx`): scopes and bindings, counters that the CPU's split
//! group body must agree on, and the errors collected so far.

use super::*;

pub(crate) type Pair = (TokenStream, TokenStream);

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Binding {
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
    pub(crate) fn is_array(self) -> bool {
        matches!(
            self,
            Binding::Buffer | Binding::ReadOnlyBuffer | Binding::Shared | Binding::ReadOnlyArray
        )
    }
}

pub(crate) const SCALARS: [&str; 8] = ["bool", "i32", "u32", "i64", "u64", "f32", "f64", "f16"];

/// `x` of a `for` step written `x as usize`, which stays a `usize` in native code (the
/// translator and the lane emitter both keep the cast), or `None`.
pub(crate) fn usize_step(s: &Expr) -> Option<&Expr> {
    match s {
        Expr::Cast(c) if matches!(&*c.ty, Type::Path(p) if p.path.is_ident("usize")) => {
            Some(&c.expr)
        }
        _ => None,
    }
}

/// The kernel language's names, from the IR's tables: (name, IR variant).
pub(crate) fn builtins() -> impl Iterator<Item = (&'static str, String)> {
    Builtin::ALL
        .into_iter()
        .map(|b| (b.name(), format!("{b:?}")))
}
/// `atomic_add` and so on: (name, IR variant).
pub(crate) fn atomics() -> impl Iterator<Item = (String, String)> {
    AtomicOp::ALL
        .into_iter()
        .map(|op| (format!("atomic_{}", op.name()), format!("{op:?}")))
}
/// Subgroup functions: (name, also the native `ops` function; IR variant).
pub(crate) fn subgroup_ops() -> impl Iterator<Item = (&'static str, String)> {
    SubgroupOp::ALL
        .into_iter()
        .map(|op| (op.name(), format!("{op:?}")))
}
/// Math methods: (method name, IR variant, native `ops` function, arity with receiver).
pub(crate) fn math_methods() -> impl Iterator<Item = (&'static str, String, &'static str, usize)> {
    MathFn::ALL
        .into_iter()
        .map(|f| (f.method(), format!("{f:?}"), f.name(), f.arity()))
}

#[derive(Clone)]
pub(crate) struct Tx {
    pub(crate) errors: Vec<syn::Error>,
    pub(crate) scopes: Vec<HashMap<String, Binding>>,
    pub(crate) shared_slots: usize,
    pub(crate) barrier_sites: u32,
    /// Depth of right-hand sides of `&&` / `||` being translated.
    pub(crate) short_circuit: u32,
    /// Whether we are directly in the kernel's top-level block.
    pub(crate) top_level: bool,
    /// Arrays indexed by a `global_id().x` alias somewhere (for bounds-check elimination).
    pub(crate) gid_indexed: std::collections::BTreeSet<String>,
    /// `match` expressions desugared so far (names their scrutinee locals).
    pub(crate) matches: u32,
    /// Row lengths of the 2-D shared arrays in scope, by name.
    pub(crate) row_len: HashMap<String, TokenStream>,
    /// Local arrays declared so far (their index in `Kernel::local_arrays`).
    pub(crate) local_arrays: usize,
    /// Generic type parameters of the function being translated.
    pub(crate) type_params: Vec<Ident>,
    /// Its const parameters (a local array's length naming one is known only per
    /// instance: natively it cannot be a Rust array length).
    pub(crate) const_params: Vec<Ident>,
    /// The name of the `#[kernel_fn]` being translated; `None` in a kernel.
    pub(crate) helper: Option<String>,
    /// `#[kernel_fn]`s called (their paths), whose barriers decide whether the CPU may
    /// split the kernel at its own barriers.
    pub(crate) helper_paths: Vec<syn::Path>,
    /// While translating one region of a kernel split at its barriers (the CPU's group
    /// body, `fission.rs`): the depth of loops entered inside the region. `break` and
    /// `continue` at depth 0 leave the loop around the region, and `return` ends the
    /// thread, so they become `Flow` values returned from the region's closure.
    pub(crate) region: Option<u32>,
    /// Set by the splitter for a local array declared at a region's top level: its
    /// per-thread slot, which replaces the thread's stack storage.
    pub(crate) lift_array: Option<Ident>,
}

pub(crate) fn err(span: Span, msg: impl std::fmt::Display) -> syn::Error {
    syn::Error::new(span, msg)
}

impl Tx {
    pub(crate) fn fail(&mut self, span: Span, msg: impl std::fmt::Display) -> Pair {
        self.errors.push(err(span, msg));
        (quote!(), quote!())
    }

    pub(crate) fn lookup(&self, name: &str) -> Option<Binding> {
        self.scopes.iter().rev().find_map(|s| s.get(name).copied())
    }

    pub(crate) fn bind(&mut self, name: &str, b: Binding) {
        self.scopes.last_mut().unwrap().insert(name.to_string(), b);
    }
}

impl Tx {
    pub(crate) fn new(helper: Option<String>) -> Tx {
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
}
