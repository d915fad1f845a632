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
import type { TensorData } from "../tensor/storage.ts";
import { compile } from "./compile.ts";
import type { CompiledPlan } from "./plan.ts";

/** Counters for tests and tools: realizes that ran a plan, and kernels they launched. */
export const realizeStats = { realizes: 0, nodes: 0 };

function keepValue(n: Node, d: Node["realized"]): void {
  if (n.realized) return;
  n.realized = d;
  n.inputs = [];
}

/** A value to write into an existing buffer (an assign): `dest` is dense, of the node's shape and dtype. */
export interface Assign {
  readonly node: Node;
  readonly dest: TensorData;
}

/**
 * Compute `roots` on `backend` (device `device`, for its memory limit and workspace), and write
 * the values of `assigns` into their destination buffers, all in one plan. Every read of a
 * destination's old value in the plan happens before the writes (they come last).
 * @param retainAll - keep every materialized value on its node (evaluations that share work)
 * @param beforeRun - called after the plan is bound and before it runs (copy-on-write of the
 *   destinations for lazy graphs outside the plan)
 * @returns the plan that ran, or null when nothing was to be computed or written
 * @throws LoomOutOfMemoryError before running anything when the plan exceeds the memory limit
 */
export function realize(roots: readonly Node[], backend: Backend, device = "cpu", retainAll = false, assigns: readonly Assign[] = [], beforeRun?: () => void, now = false): CompiledPlan | null {
  const pending = roots.filter((r) => !r.realized);
  if (pending.length === 0 && assigns.length === 0) return null;
  const all = assigns.length ? [...pending, ...assigns.map((a) => a.node)] : pending;
  const { plan, binding } = compile(all, backend, device, retainAll, assigns.length);
  beforeRun?.();
  const { outputs, kept } = plan.run(binding.leaves, assigns.map((a) => a.dest), now);
  // queued devices (webgpu, native) submit the whole realize as one command buffer; a plan run at
  // once may throw here, before any node takes a value it did not get
  backend.flush?.();
  realizeStats.realizes++;
  realizeStats.nodes += plan.kernelCount;
  for (let i = 0; i < pending.length; i++) keepValue(pending[i]!, outputs[i]!);
  for (let i = 0; i < pending.length; i++) for (const n of binding.outputs[i]!) keepValue(n, outputs[i]!);
  kept.forEach((buf, k) => { for (const n of binding.kept[k]!) keepValue(n, buf); });
  return plan;
}

/** The plan that would compute `roots` (compiled or from the cache), without running it. */
export function planFor(roots: readonly Node[], backend: Backend, device = "cpu"): CompiledPlan {
  return compile(roots.filter((r) => !r.realized), backend, device).plan;
}
