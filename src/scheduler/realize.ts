/**
 * Realization: compute the pending graph below some nodes. The graph is compiled into a plan
 * (simplified, fused, memory-planned; cached by structure, see compile.ts) and the plan runs once
 * over the graph's leaf buffers.
 *
 * What is cached on lazy nodes afterwards (`Node.realized`, with its inputs dropped):
 * - the roots: each gets its own buffer (a view of it, or of an input, when the root is a view);
 * - values a live autograd record may still need (Node.tracked not yet released) that the plan
 *   materialized: they get their own buffers too, so a later backward does not recompute them.
 * Everything else the plan computes lives in the reused workspace and is not kept: evaluating
 * such an intermediate later recomputes it. Realize related roots together (`realizeAll`).
 */
import type { Backend } from "../backends/backend.ts";
import type { Node } from "../graph/node.ts";
import { compile } from "./compile.ts";
import type { CompiledPlan } from "./plan.ts";

/** Counters for tests and tools: realizes that ran a plan, and kernels they launched. */
export const realizeStats = { realizes: 0, nodes: 0 };

function keepValue(n: Node, d: Node["realized"]): void {
  if (n.realized) return;
  n.realized = d;
  n.inputs = [];
}

/**
 * Compute `roots` on `backend` (device `device`, for its memory limit and workspace).
 * @param retainAll - keep every materialized value on its node (evaluations that share work)
 * @returns the plan that ran, or null when everything was already realized
 * @throws LoomOutOfMemoryError before running anything when the plan exceeds the memory limit
 */
export function realize(roots: readonly Node[], backend: Backend, device = "cpu", retainAll = false): CompiledPlan | null {
  const pending = roots.filter((r) => !r.realized);
  if (pending.length === 0) return null;
  const { plan, binding } = compile(pending, backend, device, retainAll);
  const { outputs, kept } = plan.run(binding.leaves);
  // queued devices (webgpu, native) submit the whole realize as one command buffer; a plan run at
  // once may throw here, before any node takes a value it did not get
  backend.flush?.();
  realizeStats.realizes++;
  realizeStats.nodes += plan.kernelCount;
  for (let i = 0; i < pending.length; i++) keepValue(pending[i]!, outputs[i]!);
  binding.outputs.forEach((ns, i) => { for (const n of ns) keepValue(n, outputs[i]!); });
  kept.forEach((buf, k) => { for (const n of binding.kept[k]!) keepValue(n, buf); });
  return plan;
}

/** The plan that would compute `roots` (compiled or from the cache), without running it. */
export function planFor(roots: readonly Node[], backend: Backend, device = "cpu"): CompiledPlan {
  return compile(roots.filter((r) => !r.realized), backend, device).plan;
}
