/**
 * Realization: compute the pending graph below some nodes on a backend. Today this walks the
 * nodes in topological order and runs each op (the graph compiler issue replaces the walk with a
 * compiled, fused, memory-planned plan); every node is computed once however many users it has.
 */
import type { Backend } from "../backends/backend.ts";
import { pendingOrder, type Node } from "../graph/node.ts";

/** Counters for tests and `explain`: how many realizes and op executions happened. */
export const realizeStats = { realizes: 0, nodes: 0 };

export function realize(roots: readonly Node[], backend: Backend): void {
  const order = pendingOrder(roots);
  if (order.length === 0) return;
  realizeStats.realizes++;
  for (const n of order) {
    const ins = n.inputs.map((c) => c.realized!);
    n.realized = backend.run(n.op!, ins, n.attrs, n.shape, n.dtype);
    realizeStats.nodes++;
  }
  // Inputs are no longer needed to produce realized nodes; dropping them lets intermediates go.
  for (const n of order) n.inputs = [];
}
