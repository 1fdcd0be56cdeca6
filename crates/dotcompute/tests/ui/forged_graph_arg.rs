// A `GraphArg` can only come from a graph's buffer handles or `GraphArg::scalar`: naming
// another graph's buffer, or an index the graph never registered, must not compile.
use dotcompute::GraphArg;

fn main() {
    let _forged = GraphArg::Buffer { graph: 1, index: 0 };
    let honest = GraphArg::scalar(1u32);
    let _inside = honest.0;
}
