//! # dotcompute-translate: the kernel translator behind `#[kernel]`
//!
//! A plain library (the proc-macro crate `dotcompute-macros` only parses and calls it), so
//! that what it produces can be tested as data: `tests/it` snapshots its output for
//! representative kernels.
//!
//! [`kernel`] turns a Rust function in the kernel subset into a module of the same name;
//! [`helper`] turns a `#[kernel_fn]` into a helper callable from kernels. Every construct
//! is translated once into a pair of token streams: IR-builder code (`B`, evaluating to a
//! `V` for expressions) and native Rust code (`N`), so the IR and the CPU body cover
//! exactly the same constructs.
//!
//! ## Contract
//!
//! *Validates* the kernel subset: every construct outside it (references, closures,
//! tuples, method calls the language lacks, `bool` buffers, mutable parameters, a
//! return value from a kernel) is a `syn::Error` at its span, collected so that one
//! compile reports every mistake once. *Trusts* `dotcompute-ir`'s builder to validate
//! types and the IR's own rules when the kernel is built at run time, and the generated
//! code's `::dotcompute::__private` paths to exist in the facade.
//!
//! ## Rooms
//!
//! | file | what |
//! |---|---|
//! | `tx.rs` | the translator's state: scopes, bindings, counters, errors |
//! | `types.rs` | kernel types as the builder and native Rust see them |
//! | `params.rs` | signatures, parameters, generic parameters, attributes |
//! | `stmt.rs` | statements: `let`, arrays, assignments, `if`, loops |
//! | `memory.rs` | buffer and array accesses |
//! | `expr.rs` | expressions, `if` values, `match` |
//! | `call.rs` | builtins, atomics, subgroup and matrix operations, helper calls |
//! | `syntax.rs` | questions asked of `syn` trees |
//! | `kernel.rs`, `helper.rs` | the module a `#[kernel]` / `#[kernel_fn]` becomes |
//! | `cpu/` | the CPU's group body split at barriers, lane form, uniformity |

use dotcompute_ir::{AtomicOp, Builtin, MathFn, SubgroupOp};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use std::collections::HashMap;
use syn::spanned::Spanned;
use syn::{
    BinOp, Expr, FnArg, GenericArgument, Ident, ItemFn, Lit, Pat, PathArguments, RangeLimits,
    ReturnType, Stmt, Type, UnOp,
};

mod call;
mod cpu;
mod expr;
mod helper;
mod kernel;
mod memory;
mod params;
mod stmt;
mod syntax;
mod tx;
mod types;

use cpu::{fission, poll_stop, poll_stop_in_for};
use helper::barrier_calls;
use params::*;
use syntax::*;
use tx::*;
use types::*;

pub use helper::helper;
pub use kernel::kernel;
