//! The CPU's native code beyond one thread's body: a kernel split at its barriers into
//! a group body (`fission`), its barrier-free regions in lane form (`lanes`), and the
//! uniformity analysis both rely on (`uniform`). Their runtime halves are
//! `dotcompute_cpu::{fission, lanes}`.

use super::*;

pub(crate) mod fission;
pub(crate) mod lanes;
pub(crate) mod uniform;

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
